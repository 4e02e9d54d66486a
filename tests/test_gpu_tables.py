"""Predicting through measured tables on a GPU grid: attention (rows x context x head_dim per
stage), the softmax on both sides of 1024 columns, and the fitted overhead's cap (no torch)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.bench import cases_gpu as G
from kernels.bench.cases import Options
from kernels.calibrate.fit import (
    OVERHEAD_GRID,
    capped_overheads,
    fit_attention_tables,
    fit_class,
    fit_profile_terms,
    roof_seconds,
)
from ridgeline.engine import ops as O
from ridgeline.engine.roofline import Ceilings, Curve, GridTable, attention_coords, roofline_time, time_op
from ridgeline.errors import InvalidSpecError
from ridgeline.io.profile import calibrated_ceilings
from ridgeline.io.resolve import load_device

PEAKS = dict(matrix_peak=MappingProxyType({"bf16": 1e15}), vector_peak=MappingProxyType({"fp32": 1e15}))
# decode table of one class: rows 1 and 4, contexts 64 and 256, head_dim 128
TABLE = {
    "axes": ["rows", "context", "head_dim"],
    "knots": [[1, 4], [64, 256], [128]],
    "fraction": [[[0.2], [0.4]], [[0.5], [1.0]]],
}


def _decode(heads=16, kv_heads=8, kv=128, name="sdpa_gqa"):
    op = O.flash_attention(1, heads, kv_heads, 1, kv, kv, 128, 128, ab=2, kvb=2, count=1, dtype="bf16", inputs=())
    return replace(op, name=name)


def test_grid_table_interpolates_in_the_log_of_each_axis():
    table = GridTable(
        ("rows", "context", "head_dim"), ((1.0, 4.0), (64.0, 256.0), (128.0,)), (((0.2,), (0.4,)), ((0.5,), (1.0,)))
    )
    assert table.at(rows=1, context=64, head_dim=128) == pytest.approx(0.2)  # a knot
    assert table.at(rows=2, context=128, head_dim=128) == pytest.approx(0.525)  # the middle
    assert table.at(rows=1, context=128, head_dim=64) == pytest.approx(0.3)  # flat in d
    assert table.at(rows=8, context=4096, head_dim=128) == pytest.approx(1.0)  # held flat
    both = table.at(rows=np.array([1, 4]), context=np.array([32, 1e5]), head_dim=128)
    assert both.tolist() == pytest.approx([0.2, 1.0])


def test_a_decode_attention_is_priced_through_its_table():
    """rows 16/8 = 2 and 128 cached tokens sit halfway (in log) between the knots: fraction
    (0.2 + 0.4 + 0.5 + 1.0) / 4 = 0.525. The op moves q 16 x 128 x 2 = 4096 B, K/V
    8 x 128 x 256 x 2 = 524288 B and writes 4096 B: 532480 B at 1 TB/s = 532.48 ns, over
    0.525 = 1014.25 ns, + 3 µs of overhead."""
    profile = {
        "bandwidth_gb_s": 1000,
        "matrix_peak_tops": {"bf16": 1000},
        "timing": "device",
        "overhead_us": {"default": 1.0, "attention:sdpa_gqa@bf16": 3.0},
        "attention_tables": {"attention:sdpa_gqa@bf16": {"decode": TABLE}},
    }
    ceilings = calibrated_ceilings(profile, load_device("h100-sxm"))
    op = _decode()
    assert op.bytes == 532480
    assert ceilings.row_fraction(op) == pytest.approx(0.525)
    assert float(time_op(op, ceilings)["time_s"]) == pytest.approx(532.48e-9 / 0.525 + 3e-6, rel=1e-3)
    # a prompt has no table here: its class terms price it (the pooled efficiency)
    prompt = replace(
        O.flash_attention(1, 16, 8, 64, 64 * 65 / 2, 64, 128, 128, ab=2, kvb=2, count=1, dtype="bf16", inputs=()),
        name="sdpa_gqa",
    )
    assert np.isnan(ceilings.attention_fraction("attention:sdpa_gqa@bf16", prompt))
    # another backend is another class: no table, no fraction from this one
    assert ceilings.row_fraction(_decode(name="sdpa_repeat_kv")) is None
    again = Ceilings.from_dict(ceilings.to_dict())
    assert again.row_fraction(op) == pytest.approx(0.525)


def test_attention_coords_of_decode_and_prompt():
    decode, rows, context, head_dim = attention_coords(_decode(heads=32, kv_heads=8, kv=4000))
    assert bool(decode) and rows == 4 and float(context) == 4000 and head_dim == 128
    qk = O.qk_matmul(3, 32, 32, 1, 777, 128, ab=2, kvb=2, count=1, dtype="bf16")
    assert [float(np.ravel(x)[0]) for x in attention_coords(qk)] == [1, 1, 777, 128]
    prompt = O.flash_attention(
        1, 28, 4, 512, 512 * 513 / 2, 512, 128, 128, ab=2, kvb=2, count=1, dtype="bf16", inputs=()
    )
    decode, rows, context, _ = attention_coords(prompt)
    assert not decode and rows == 7 and float(context) == 512


@pytest.mark.parametrize(
    "change, message",
    [
        ({"fraction": [[[0.2], [0.4]], [[0.5], [1.2]]]}, r"every 'fraction' must be in \(0, 1\]"),
        ({"fraction": [[0.2, 0.4], [0.5, 1.0]]}, r"'fraction' has shape \(2, 2\), the knots \(2, 2, 1\)"),
        ({"knots": [[4, 1], [64, 256], [128]]}, r"knots of 'rows' must be positive and increasing"),
        ({"axes": ["rows", "kv_len", "head_dim"]}, r"needs axes \['rows', 'context', 'head_dim'\]"),
    ],
)
def test_a_bad_attention_table_is_refused_with_its_place(change, message):
    profile = {"bandwidth_gb_s": 1000, "attention_tables": {"attention:sdpa_gqa@bf16": {"decode": {**TABLE, **change}}}}
    with pytest.raises(InvalidSpecError, match=message) as err:
        calibrated_ceilings(profile, load_device("h100-sxm"))
    assert "attention_tables.attention:sdpa_gqa@bf16.decode" in str(err.value)


def test_softmax_rows_past_1024_columns_use_their_own_size_curve():
    ceilings = Ceilings(
        "calibrated",
        1e12,
        **PEAKS,
        size_curves=MappingProxyType(
            {
                "softmax:softmax@bf16": Curve((1e3, 1e9), (0.1, 0.1)),
                "softmax:softmax@bf16>1024": Curve((1e3, 1e9), (0.5, 0.5)),
            }
        ),
    )
    short, long_ = (O.softmax(1, 8, 1, cols, ab=2, count=1, dtype="bf16") for cols in (1024, 1025))
    assert ceilings.row_fraction(short) == pytest.approx(0.1)
    assert ceilings.row_fraction(long_) == pytest.approx(0.5)
    both = O.softmax(1, 8, 1, np.array([512, 4096]), ab=2, count=1, dtype="bf16")
    assert np.asarray(ceilings.row_fraction(both)).tolist() == pytest.approx([0.1, 0.5])


def test_the_fitted_overhead_never_exceeds_the_smallest_kernel():
    """Long kernels alone fit a 20 µs intercept (t = m + 20 µs); one short kernel measured
    at 5 µs caps it: the fit may not charge more per call than a whole call took."""
    memory = np.array([1e-4, 2e-4, 4e-4, 8e-4, 1e-7])
    measured = np.concatenate([memory[:4] + 20e-6, [5e-6]])
    free = fit_class(np.zeros(4), memory[:4], measured[:4])
    assert free["overhead_s"] > 15e-6  # the intercept of the long ones
    capped = fit_class(np.zeros(5), memory, measured)
    assert 0 < capped["overhead_s"] <= 5e-6
    assert capped_overheads(np.array([5e-6, 1e-3])).max() <= 5e-6
    assert capped_overheads(np.array([1e-9])).tolist() == [0.0]


def _rows(cases, seed):
    """Fake measurements of ``cases``: the bare roofline time over a fraction that falls
    with fewer rows and shorter contexts, plus 4 µs."""
    from kernels.bench.suite import op_fields

    ceilings = Ceilings(
        "calibrated",
        3e12,
        MappingProxyType({"bf16": 7e14, "fp32": 5e13, "int8": 1.4e15, "fp8": 1.4e15}),
        MappingProxyType({"fp32": 6e13}),
        device="test",
    )
    ops = [c.op for c in cases]
    compute, vector, memory = roof_seconds(ops, ceilings)
    bound = roofline_time(compute + vector, memory)
    rng = np.random.default_rng(seed)
    rows = []
    for case, b in zip(cases, bound):
        c = attention_coords(case.op)
        frac = 0.3 if c is None else 0.2 + 0.6 * min(1.0, float(np.ravel(c[2])[0]) / 4096) * (0.5 + c[1] / 16)
        rows.append(
            {
                **case.to_dict(),
                **op_fields(case),
                "status": "ok",
                "noisy": False,
                "measured_s": float(b / min(frac, 1.0) * rng.uniform(0.95, 1.05) + 4e-6),
            }
        )
    return rows, ops, ceilings


@settings(max_examples=3, deadline=None)
@given(st.integers(0, 2**31))
@pytest.mark.slow
def test_a_dry_grid_fits_attention_tables_and_every_overhead_is_capped(seed):
    cases = G.gpu_cases("calibration", Options(("bf16",), G.CUDA_BACKENDS, "cpu"), True)
    rows, ops, ceilings = _rows(cases, seed)
    fit = fit_profile_terms(rows, ops, ceilings)
    for key in ("attention:sdpa_gqa@bf16", "attention:sdpa_repeat_kv@bf16", "attention:attention@bf16"):
        assert set(fit.attention_tables[key]) == {"decode", "prefill"}
    assert set(fit.attention_tables["attention:qk_matmul@bf16"]) == {"decode"}
    import yaml

    assert yaml.safe_load(yaml.safe_dump(fit.attention_tables)) == fit.attention_tables  # plain
    table = fit.attention_tables["attention:sdpa_gqa@bf16"]["decode"]
    assert table["knots"] == [[1.0, 4.0], [64.0, 128.0, 256.0], [64.0]]
    assert np.all((np.array(table["fraction"]) > 0) & (np.array(table["fraction"]) <= 1))
    # every class's overhead is at most its fastest measured case
    from kernels.calibrate.fit import _groups

    measured = np.array([r["measured_s"] for r in rows])
    for key, members in _groups(ops).items():
        assert fit.overhead_s[key] <= measured[members].min() + 1e-12, key


def test_fit_attention_tables_recovers_a_table_and_fills_a_hole():
    """A 2 x 3 x 1 decode grid measured at fractions linear in log context (rows 1: 0.1, 0.3,
    0.5 at 64, 256, 1024 tokens; rows 4: 0.2, -, 0.6) plus an overhead on the search grid:
    only the true overhead predicts the middle point from its neighbours, so it is found; the
    cell not measured takes the mean of its neighbours (0.2, 0.6 and rows 1's 0.3)."""
    oh = OVERHEAD_GRID[8]
    truth = {(1, 64): 0.1, (1, 256): 0.3, (1, 1024): 0.5, (4, 64): 0.2, (4, 1024): 0.6}
    ops = [_decode(heads=8 * rows, kv_heads=8, kv=kv) for rows, kv in truth]
    bound = np.array([op.bytes / 1e12 for op in ops])
    measured = bound / np.array(list(truth.values())) + oh
    points = {"decode": np.ones(len(ops), dtype=bool)}
    fitted = fit_attention_tables(bound, measured, ops, points)
    assert fitted["overhead_s"] == pytest.approx(oh)
    assert fitted["median_abs_error"] < 1e-9 and fitted["covered"].all()
    values = np.asarray(fitted["tables"]["decode"].values)[:, :, 0]
    assert values.ravel().tolist() == pytest.approx([0.1, 0.3, 0.5, 0.2, (0.2 + 0.6 + 0.3) / 3, 0.6])


def test_a_size_grid_alone_finds_its_overhead_between_its_knots():
    """Sizes 2^0 ... 2^9 bytes-worth at a fraction linear in log size (0.05 per doubling from
    0.05) plus a 2.7 µs overhead, and no case off the knots: with ``between`` each inner knot
    is judged from its neighbours, so only the true overhead leaves no error; without it
    every overhead reproduces the knots and the first (0) is kept."""
    from kernels.calibrate.fit import fit_row_table

    oh = OVERHEAD_GRID[16]
    sizes = 2.0 ** np.arange(10)
    fraction = 0.05 * (1 + np.arange(10))
    bound = sizes * 1e-9
    measured = bound / fraction + oh
    dims = np.stack([sizes, np.ones(10), np.ones(10)], 1)
    assert fit_row_table(bound, measured, dims, between=True)["overhead_s"] == pytest.approx(oh)
    assert fit_row_table(bound, measured, dims)["overhead_s"] == 0.0


def test_the_cap_is_a_recorded_rule_that_a_committed_h100_profile_predates():
    """The H100 profile of 2026-11-23 was fitted before the cap (its meta records no fit rules),
    and some of its overheads exceed the fastest kernel of their class; refitted from its
    own rows under the rules a calibration now records, none does."""
    import copy

    import yaml

    from kernels.bench.cases import case_from_dict
    from kernels.calibrate.calibrate import calibration_rows, fit_profile
    from kernels.calibrate.fit import FIT_RULES, fit_key, recorded_rules
    from ridgeline.io.catalog import PROFILES_DIR
    from ridgeline.io.profile import recorded_device

    path = PROFILES_DIR / "historical/cuda-nvidia-h100-80gb-hbm3-2026-11-23-eager.yaml"
    committed = yaml.safe_load(path.read_text())
    assert recorded_rules(committed) == {"overhead_cap": False, "judge_between": False, "kind_classes": False}
    rows = [r for r in calibration_rows(path) if r["op_kind"] in ("elementwise", "norm", "softmax")]
    fastest: dict[str, float] = {}
    for r in rows:
        key = fit_key(case_from_dict(r).op)
        fastest[key] = min(fastest.get(key, np.inf), float(r["measured_s"]) * 1e6)
    over = {k: committed["overhead_us"][k] for k in fastest if committed["overhead_us"][k] > fastest[k]}
    assert "elementwise:rope@fp32" in over  # 44.7 µs
    profile = copy.deepcopy(committed)
    profile["meta"]["fit"] = dict(FIT_RULES)
    fit_profile(profile, rows, recorded_device(profile))
    assert all(profile["overhead_us"][k] <= fastest[k] for k in fastest)
