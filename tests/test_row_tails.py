"""A CPU softmax's vector tail: measured per row at every remainder of its columns (no torch)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_first_touch_size_table import CEIL

import ridgeline as rl
from kernels.bench.cases import SOFTMAX_TAIL_ROWS, SOFTMAX_TAIL_WIDTH, Options, build_op, suite_cases
from kernels.calibrate.fit import fit_key, fit_profile_terms, fit_row_tails, is_tail_case
from ridgeline.engine.analyze import decode_total, stage_totals
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.precision import make_plan
from ridgeline.engine.roofline import ROW_TAIL_PERIOD, Ceilings, spec_ceilings, time_op
from ridgeline.errors import InvalidSpecError
from ridgeline.io.profile import calibrated_ceilings

NS = 1e-9
# 8 ns per key past a whole 16, 40 ns more past a whole 32 (the shape a bf16 row takes on an
# AVX-512 Xeon: reports/profiles/cpu-intel-r-xeon-r-processor-f6m167-1t.yaml, row_tail_ns)
TABLE = tuple((8.0 * (r % 16) + 40.0 * (r >= 16)) * NS for r in range(ROW_TAIL_PERIOD))
BF16 = "softmax:softmax@bf16"
TAILS = replace(CEIL, row_tails=MappingProxyType({BF16: TABLE}))


def _softmax(rows: int, cols: int, dtype: str = "bf16"):
    return build_op({"builder": "size_grid", "kernel": "softmax", "tokens": rows, "width": cols, "dtype": dtype})


def test_the_tail_is_rows_times_the_seconds_of_the_columns_remainder():
    op = _softmax(10, 145)  # 145 = 4 x 32 + 17: 8 ns x 1 + 40 ns per row
    assert time_op(op, TAILS)["tail_s"] == pytest.approx(10 * 48 * NS)
    assert time_op(op, TAILS)["time_s"] == pytest.approx(time_op(op, CEIL)["time_s"] + 10 * 48 * NS)
    assert time_op(_softmax(10, 160), TAILS)["tail_s"] == 0.0  # whole vectors
    assert time_op(_softmax(10, 145, "fp32"), TAILS)["tail_s"] == 0.0  # a class with no tails measured
    assert time_op(op, CEIL)["tail_s"] == 0.0  # no tails (a GPU, a datasheet)


def test_ceilings_round_trip_with_row_tails_and_old_files_have_none():
    again = Ceilings.from_dict(TAILS.to_dict())
    assert again.row_tails[BF16] == pytest.approx(TABLE)
    assert "row_tails" not in CEIL.to_dict() and Ceilings.from_dict(CEIL.to_dict()).row_tails == {}


def test_a_profile_reads_ns_per_row_and_refuses_a_wrong_table():
    device = rl.load_device("a6000")
    ns = [round(v / NS, 3) for v in TABLE]
    read = calibrated_ceilings({"bandwidth_gb_s": 20.0, "timing": "cpu", "row_tail_ns": {BF16: ns}}, device)
    assert read.row_tails[BF16] == pytest.approx(TABLE)
    for bad in (ns[:-1], [-1.0] + ns[1:], ["x"] + ns[1:], [float("nan")] + ns[1:], "fast"):
        with pytest.raises(InvalidSpecError, match=r"row_tail_ns\.softmax:softmax@bf16: needs 32 numbers >= 0"):
            calibrated_ceilings({"bandwidth_gb_s": 20.0, "timing": "cpu", "row_tail_ns": {BF16: bad}}, device)


def _tail_series(per_key_s: float, rows: int = SOFTMAX_TAIL_ROWS):
    ops = [_softmax(rows, SOFTMAX_TAIL_WIDTH + r) for r in range(ROW_TAIL_PERIOD)]
    measured = np.array([rows * (per_key_s * op.dims["cols"] + TABLE[op.dims["cols"] % 32]) for op in ops])
    return ops, measured


def test_the_fit_takes_each_rows_time_past_the_whole_vector_rows_scaled_to_its_keys():
    ops, measured = _tail_series(0.6 * NS)
    assert fit_key(ops[0]) == BF16
    assert fit_row_tails(ops, measured)[BF16] == pytest.approx(TABLE, abs=1e-15)
    # a width missing, or a series not starting at a whole period: no table, not a guess
    assert fit_row_tails(ops[:-1], measured[:-1]) == {}
    assert fit_row_tails(ops[1:], measured[1:]) == {}
    # a row faster than the whole-vector row scaled is no negative tail
    assert min(fit_row_tails(ops, measured * np.r_[1.0, [0.5] * 31])[BF16]) == 0.0


def test_the_tail_series_is_no_class_and_comes_off_the_other_cases_before_theirs_is_fitted():
    ops, measured = _tail_series(0.6 * NS)
    rows = [{"measured_s": m, "recipe": {"series": "tail"}} for m in measured]
    assert all(map(is_tail_case, rows))
    model = _softmax(96, 145)
    truth = float(time_op(model, CEIL)["time_s"]) / 0.5 + 96 * TABLE[17]  # at half the bound, plus its tail
    fit = fit_profile_terms(rows + [{"measured_s": truth, "recipe": {}}], ops + [model], CEIL, cpu=True)
    assert fit.row_tails[BF16] == pytest.approx(TABLE, abs=1e-15)
    assert fit.report[BF16]["cases"] == 1  # the model case alone
    priced = replace(
        CEIL,
        efficiency=MappingProxyType({k: MappingProxyType(v) for k, v in fit.efficiency.items()}),
        overhead_s=MappingProxyType(fit.overhead_s),
        row_tails=MappingProxyType(fit.row_tails),
    )
    assert float(time_op(model, priced)["time_s"]) == pytest.approx(truth, rel=0.03)


def test_a_cpu_calibration_measures_every_remainder_and_a_gpu_none():
    for quick in (True, False):
        cpu = [
            c
            for c in suite_cases("calibration", Options(dtypes=("fp32", "bf16")), quick)
            if c.name.startswith("stail/")
        ]
        assert len(cpu) == 2 * ROW_TAIL_PERIOD
        assert sorted({c.op.dims["cols"] % ROW_TAIL_PERIOD for c in cpu}) == list(range(ROW_TAIL_PERIOD))
    gpu = suite_cases("calibration", Options(dtypes=("bf16",), device="cuda", sdpa_backends=("flash",)), True)
    assert not [c for c in gpu if c.name.startswith("stail/")]


@example("phi-3-mini", 1, 1849, 200)  # across the window
@example("phi-3-mini", 3, 2100, 50)  # past it
@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["llama-2-7b", "opt-6.7b", "phi-3-mini"]),
    st.integers(1, 64),
    st.integers(1, 3000),
    st.integers(2, 200),
)
@pytest.mark.slow
def test_the_closed_form_decode_sum_counts_each_steps_remainder(model, batch, prompt, generate):
    # phi-3-mini's window of 2047 keys: steps past it read a fixed number of keys
    cfg, dev = rl.load_model(model), rl.load_device("a6000")
    p = make_plan(rl.Settings(attention="eager"), dev)
    softmax = next(op for op in stage_ops(cfg, "decode", batch, prompt, p) if op.kind == "softmax")
    roofs = replace(spec_ceilings(dev), row_tails=MappingProxyType({spec_ceilings(dev).keys(softmax)[0]: TABLE}))
    steps = range(prompt, prompt + generate - 1)
    loop = sum(stage_totals(stage_ops(cfg, "decode", batch, s, p), roofs)[0]["time_s"] for s in steps)
    last = np.asarray(prompt + generate - 2)
    closed = decode_total(cfg, batch, np.asarray(prompt), last, p, roofs)  # split at the window
    assert float(closed) == pytest.approx(loop, rel=1e-9, abs=1e-15)
    plain = decode_total(cfg, batch, np.asarray(prompt), last, p, spec_ceilings(dev))
    assert float(closed) >= float(plain)
