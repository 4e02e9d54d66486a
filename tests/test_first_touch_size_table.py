"""A CPU's first touch of fresh pages, and the element-wise size table (no torch)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

from kernels.bench.cases import (
    SIZE_GRID_KINDS,
    SIZE_GRID_MAX_BYTES,
    SIZE_GRID_NORM_WIDTHS,
    SIZE_GRID_SOFTMAX_WIDTHS,
    SIZE_GRID_WIDTH,
    Options,
    _stage_cases,
    build_op,
    case_dimensions,
    check_disjoint,
    size_grid_cases,
    suite_cases,
)
from kernels.calibrate.fit import FLOOR, fit_key, fit_profile_terms, roof_seconds
from ridgeline.engine.grid import describe, outside_range, outside_spans
from ridgeline.engine.roofline import (
    MMAP_THRESHOLD,
    Ceilings,
    Curve,
    across_widths,
    evaluate,
    roofline_time,
    time_op,
    width_curves,
    width_key,
)
from ridgeline.errors import InvalidSpecError
from ridgeline.io.profile import calibrated_ceilings

MIB = 2**20
CEIL = Ceilings(
    "calibrated",
    20e9,
    MappingProxyType({"fp32": 0.2e12, "bf16": 1e12}),
    MappingProxyType({"fp32": 0.2e12}),
    device="test",
)
TOUCH = replace(CEIL, first_touch_rate=4e9)
WIDTHS = {**SIZE_GRID_WIDTH, **SIZE_GRID_KINDS}  # each kernel's first series (norms: more widths too)


def _add(tokens: int, hidden: int = 2048, dtype: str = "fp32"):
    return build_op(
        {"builder": "size_grid", "kernel": "residual_add", "tokens": tokens, "width": hidden, "dtype": dtype}
    )


def test_first_touch_prices_outputs_from_the_mmap_threshold_only():
    big, small = _add(8192), _add(2048)  # 64 MiB and 16 MiB fp32 outputs
    assert big.act_write_bytes == 64 * MIB and small.act_write_bytes == 16 * MIB
    assert time_op(big, TOUCH)["first_touch_s"] == pytest.approx(64 * MIB / 4e9)
    assert time_op(small, TOUCH)["first_touch_s"] == 0.0
    # the bound is untouched: the term adds to it
    assert time_op(big, TOUCH)["time_s"] == pytest.approx(time_op(big, CEIL)["time_s"] + 64 * MIB / 4e9)
    # no rate (a datasheet, a GPU): no term
    assert time_op(big, CEIL)["first_touch_s"] == 0.0
    # exactly at the threshold counts (glibc maps requests >= its threshold)
    at = replace(big, act_write_bytes=float(MMAP_THRESHOLD), alloc_bytes=None)
    assert time_op(at, TOUCH)["first_touch_s"] == pytest.approx(MMAP_THRESHOLD / 4e9)


def test_eager_silu_mul_touches_two_fresh_tensors_and_sdpa_math_each_pass():
    silu = build_op({"builder": "size_grid", "kernel": "silu_mul", "tokens": 2048, "width": 8192, "dtype": "bf16"})
    out = 2048 * 8192 * 2  # 32 MiB: the output and silu's temporary
    assert silu.allocations == (out, out) and silu.act_write_bytes == out
    assert time_op(silu, TOUCH)["first_touch_s"] == pytest.approx(2 * out / 4e9)
    math = build_op(
        {"builder": "sdpa_math", "model": "llama-2-7b", "stage": "prefill", "batch": 1, "length": 1536, "dtype": "bf16"}
    )
    scores = 32 * 1536 * 1536 * 4  # fp32 scores, 288 MiB: q.K^T, softmax, mask
    assert sorted(math.allocations)[-3:] == [scores] * 3
    big = sum(a for a in math.allocations if a >= MMAP_THRESHOLD)
    assert time_op(math, TOUCH)["first_touch_s"] == pytest.approx(big / 4e9)


def test_first_touch_broadcasts_over_workload_arrays():
    from ridgeline.engine import ops as O

    ops = [O.residual_add("attn_add", np.array([1024, 8192, 16384]), 2048, ab=4.0, count=1, dtype="fp32", inputs=())]
    table = evaluate(ops, TOUCH)
    assert np.ravel(table["first_touch_s"]) == pytest.approx([0.0, 64 * MIB / 4e9, 128 * MIB / 4e9])


def test_fit_subtracts_the_first_touch_before_fitting_the_class():
    ops = [_add(t) for t in (64, 256, 1024, 4096, 8192, 16384)]
    compute, vector, memory = roof_seconds(ops, TOUCH)
    touch = np.ravel(evaluate(ops, TOUCH)["first_touch_s"])
    assert touch[-3:].all() and not touch[:3].any()  # 32, 64 and 128 MiB outputs
    truth = np.maximum(compute, memory / 0.5) + 2e-6
    fit = fit_profile_terms([{"measured_s": t} for t in truth + touch], ops, TOUCH, pooled=False)
    terms = fit.efficiency["elementwise:attn_add@fp32"]
    assert terms["memory"] == pytest.approx(0.5, rel=0.03)
    assert fit.report["elementwise:attn_add@fp32"]["median_abs_error"] < 0.02
    # a measurement below its own first touch (noise) keeps a floor, never a negative time
    assert FLOOR > 0


def _grid_rows(kernel: str, dtype: str, curve):
    cases = [c for c in size_grid_cases([dtype]) if c.kernel == kernel and c.recipe["width"] == WIDTHS[kernel]]
    ops = [c.op for c in cases]
    compute, vector, memory = roof_seconds(ops, CEIL)
    bound = roofline_time(compute + vector, memory)
    truth = bound / curve(np.array([op.bytes for op in ops], dtype=float)) + 1.5e-6
    return cases, ops, [{"measured_s": t, "recipe": dict(c.recipe)} for c, t in zip(cases, truth)], truth


def size_ceilings(fit):
    """The ceilings of a CPU profile holding ``fit``'s size tables and overheads on 20 GB/s
    roofs (an A6000's datasheet, with an fp32 vector roof), as calibrate writes it."""
    from ridgeline.io.resolve import load_device

    profile = {
        "bandwidth_gb_s": 20.0,
        "matrix_peak_tops": {"fp32": 0.2, "bf16": 1.0},
        "timing": "cpu",
        "size_curves": fit.size_curves,
        "overhead_us": {k: v * 1e6 for k, v in fit.overhead_s.items()},
    }
    device = replace(load_device("a6000"), vector_peak=MappingProxyType({"fp32": 0.2e12}))
    return calibrated_ceilings(profile, device)


def test_size_table_follows_a_non_monotone_curve_and_the_engine_reads_it_back():
    # a rate that rises out of the call overhead, dips past the caches and recovers
    curve = lambda b: 0.2 + 0.6 * np.exp(-(((np.log(b) - np.log(4 * MIB)) / 2) ** 2))  # noqa: E731
    cases, ops, rows, truth = _grid_rows("rmsnorm", "bf16", curve)
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    key = fit_key(ops[0])
    assert key == "norm:attn_norm@bf16" and key in fit.size_curves and key not in fit.efficiency
    entry = fit.size_curves[key]
    assert entry["bytes"] == sorted({float(op.bytes) for op in ops})
    ceilings = size_ceilings(fit)
    predicted = np.array([float(time_op(op, ceilings)["time_s"]) for op in ops])
    assert np.max(np.abs(predicted / truth - 1)) < 0.05
    # a model case between the grid's sizes is read from the curve, interpolated in log bytes
    model_op = build_op(
        {
            "builder": "engine",
            "model": "llama-3-8b",
            "stage": "prefill",
            "batch": 1,
            "length": 320,
            "dtype": "bf16",
            "op": "attn_norm",
        }
    )
    expected = Curve(tuple(entry["bytes"]), tuple(entry["fraction"])).at(model_op.bytes)
    assert ceilings.row_fraction(model_op) == pytest.approx(expected)


def test_size_table_needs_the_grid_and_leaves_old_profiles_as_they_were():
    # the model cases alone (a profile measured before the grid) keep the class's terms
    ops = [
        build_op(
            {
                "builder": "engine",
                "model": m,
                "stage": "decode",
                "batch": b,
                "length": 512,
                "dtype": "bf16",
                "op": "attn_norm",
            }
        )
        for m in ("qwen2-0.5b", "llama-3.2-1b", "qwen2-7b")
        for b in (2, 4, 8, 16, 32)
    ]
    compute, vector, memory = roof_seconds(ops, CEIL)
    rows = [{"measured_s": t, "recipe": {"builder": "engine"}} for t in memory / 0.3 + 2e-6]
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    assert not fit.size_curves and "norm:attn_norm@bf16" in fit.efficiency


def test_size_table_may_reach_the_write_free_cap_and_no_further():
    curve = lambda b: np.full_like(b, 1.4)  # noqa: E731  reads at the roof, writes cache-hot
    cases, ops, rows, truth = _grid_rows("residual_add", "fp32", curve)
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    entry = fit.size_curves["elementwise:attn_add@fp32"]
    assert entry["cap"] == 1.5 and max(entry["fraction"]) == pytest.approx(1.4, rel=0.05)
    assert not fit.refused
    gpu = fit_profile_terms(rows, ops, CEIL, cpu=False)  # a GPU writes without reading
    assert max(gpu.size_curves["elementwise:attn_add@fp32"]["fraction"]) == 1.0
    assert "elementwise:attn_add@fp32" in {r["class"] for r in gpu.refused}


def test_a_quick_calibration_measures_every_kind_a_draw_can_price():
    """A fresh draw always takes a model of another activation or norm (DRAW_KINDS); a quick
    profile without those kinds priced them by a generic class (on a 6/167 Xeon, LayerNorm 3x
    too slow, tanh-GELU 2x too fast): each kind has its quick series, in every type."""
    cases = size_grid_cases(["fp32", "bf16"], quick=True)
    for kernel in SIZE_GRID_KINDS:
        for dtype in ("fp32", "bf16"):
            sizes = sorted(c.op.bytes for c in cases if c.kernel == kernel and c.dtype == dtype)
            assert len(sizes) >= 5 and sizes[0] < 128 * 1024, (kernel, dtype)
    kinds = {"rmsnorm", "residual_add", "silu_mul", "softmax", *SIZE_GRID_KINDS}
    assert {c.kernel for c in cases} == kinds | {"rope"}  # the rotary kernel: fp32 only
    assert {c.kernel for c in cases if c.dtype == "bf16"} == kinds


def test_size_grid_spans_the_call_overhead_to_past_the_mmap_threshold_and_is_held_out():
    cases = size_grid_cases(["fp32", "bf16"])
    for kernel in ("rmsnorm", "residual_add", "silu_mul", "softmax"):
        for dtype in ("fp32", "bf16"):
            sizes = sorted(c.op.bytes for c in cases if c.kernel == kernel and c.dtype == dtype)
            assert len(sizes) >= 12 and sizes[0] < 128 * 1024 and sizes[-1] <= SIZE_GRID_MAX_BYTES
            assert max(c.op.act_write_bytes for c in cases if c.kernel == kernel and c.dtype == dtype) >= MMAP_THRESHOLD
    assert {c.kernel for c in cases if c.dtype == "bf16"} == {
        "rmsnorm",
        "residual_add",
        "silu_mul",
        "softmax",
        *SIZE_GRID_KINDS,  # tanh-GELU x up, tanh-GELU, GELU, ReLU, LayerNorm with bias
    }  # rope: fp32 only
    # the same classes as the model cases, so one table prices both (the other kinds: as
    # the cases of the models that run them, which only validation measures)
    grid_keys = {fit_key(c.op) for c in cases}
    model_keys = {
        fit_key(c.op)
        for c in suite_cases("calibration", Options(("fp32", "bf16")))
        if c.op_class in ("elementwise", "norm", "softmax") and c.stage != "grid"
    }
    kinds = {"gelu_tanh_mul": "gemma-7b", "gelu_tanh": "gpt-j-6b", "gelu": "falcon-7b", "relu": "opt-6.7b"}
    for kernel, model in {**kinds, "layernorm": "opt-6.7b"}.items():
        for dtype in ("fp32", "bf16"):
            stage = _stage_cases(model, "decode", 3, 200, dtype, "validation", Options())
            model_keys.add(fit_key(next(c for c in stage if c.kernel == kernel).op))
    assert grid_keys <= model_keys
    assert case_dimensions(cases[0]) == {"model": set(), "batch": set(), "length": set(), "width": {2048}}
    softmax = next(c for c in cases if c.kernel == "softmax")
    assert case_dimensions(softmax)["length"] == {512}
    opts = Options(("fp32", "bf16", "fp16"))
    check_disjoint(suite_cases("calibration", opts), suite_cases("validation", opts))


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"bytes": [1, 2], "fraction": [0.5, 1.7], "cap": 1.5}, "at most 1.5"),
        ({"bytes": [1, 2], "fraction": [0.5, 1.2]}, "at most 1"),
        ({"bytes": [2, 1], "fraction": [0.5, 0.6]}, "increasing"),
        ({"bytes": [1, 2], "fraction": [0.5, 0.6], "cap": 5}, "'cap' must be a number from 1 to 3"),
    ],
)
def test_a_malformed_size_curve_is_one_clear_error(entry, message):
    from ridgeline.io.resolve import load_device

    profile = {"bandwidth_gb_s": 20.0, "size_curves": {"norm:attn_norm@bf16": entry}}
    with pytest.raises(InvalidSpecError, match=message):
        calibrated_ceilings(profile, load_device("a6000"))


@pytest.mark.parametrize("value", [-1.0, 0, "fast", True])
def test_a_bad_first_touch_rate_is_one_clear_error(value):
    from ridgeline.io.resolve import load_device

    with pytest.raises(InvalidSpecError, match="'first_touch_gb_s' must be a positive number"):
        calibrated_ceilings({"bandwidth_gb_s": 20.0, "first_touch_gb_s": value}, load_device("a6000"))


def test_ceilings_round_trip_with_size_curves_and_first_touch_and_old_files_stay_as_they_were():
    full = replace(TOUCH, size_curves=MappingProxyType({"norm:attn_norm@bf16": Curve((1.0, 2.0), (0.5, 0.7))}))
    again = Ceilings.from_dict(full.to_dict())
    assert again.first_touch_rate == 4e9 and again.mmap_threshold == MMAP_THRESHOLD
    assert again.size_curves["norm:attn_norm@bf16"] == full.size_curves["norm:attn_norm@bf16"]
    assert "size_curves" not in CEIL.to_dict() and "first_touch_rate" not in CEIL.to_dict()


# A norm's size table per row width: measured, fitted, read back and named


def test_width_keys_keep_the_data_type_last_and_are_found_per_class():
    assert width_key("norm:attn_norm.layernorm@fp32", 4096) == "norm:attn_norm.layernorm~w4096@fp32"
    low, high = Curve((1e3, 1e6), (0.2, 0.8)), Curve((1e3, 1e6), (0.1, 0.4))
    curves = {
        "norm:attn_norm@fp32": low,
        "norm:attn_norm~w4096@fp32": high,
        "norm:attn_norm~w1024@fp32": low,
        "norm:attn_norm.layernorm~w2048@fp32": high,  # another class
        "norm:attn_norm~w2048@bf16": high,  # another type
    }
    assert width_curves(curves, "norm:attn_norm@fp32") == ((1024.0, low), (4096.0, high))
    assert width_curves(curves, "norm:attn_norm@bf16") == ((2048.0, high),)
    assert width_curves(curves, "softmax:softmax@fp32") == ()


def test_between_widths_the_fraction_is_linear_in_log_width_and_held_past_them():
    low, high = Curve((1e3, 1e6), (0.2, 0.8)), Curve((1e3, 1e6), (0.1, 0.4))
    widths = ((1024.0, low), (4096.0, high))
    # 2048 is halfway in log width: (0.8 + 0.4) / 2 at 1e6 bytes; (0.2 + 0.1) / 2 at 1e3
    assert across_widths(widths, 2048, 1e6) == pytest.approx(0.6)
    assert across_widths(widths, 2048, [1e3, 1e6]) == pytest.approx([0.15, 0.6])
    assert across_widths(widths, [512, 1024, 2048, 4096, 16384], 1e6) == pytest.approx([0.8, 0.8, 0.6, 0.4, 0.4])


def _rows(kernel: str, dtype: str, fraction):
    """Grid rows of ``kernel`` at every width, timed at ``fraction(width)`` of the bound."""
    cases = [c for c in size_grid_cases([dtype]) if c.kernel == kernel]
    ops = [c.op for c in cases]
    compute, vector, memory = roof_seconds(ops, CEIL)
    widths = np.array([c.recipe["width"] for c in cases], dtype=float)
    truth = roofline_time(compute + vector, memory) / fraction(widths) + 1.5e-6
    return ops, [{"measured_s": t, "recipe": dict(c.recipe)} for c, t in zip(cases, truth)], truth


def test_a_norm_measured_at_several_widths_gets_a_table_per_width_and_reads_between_them():
    # rows of 3584 and wider reach 0.4 of the bound, 2048 and narrower 0.6 (as a Zen 5's fp32 LayerNorm)
    fraction = lambda w: np.where(w < 3000, 0.6, 0.4)  # noqa: E731
    ops, rows, truth = _rows("layernorm", "fp32", fraction)
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    key = fit_key(ops[0])
    widths = (SIZE_GRID_WIDTH["rmsnorm"], *SIZE_GRID_NORM_WIDTHS)
    assert key == "norm:attn_norm.layernorm@fp32"
    assert {width_key(key, w) for w in widths} | {key} <= set(fit.size_curves)
    at_3584 = fit.size_curves[width_key(key, 3584)]
    big = [f for b, f in zip(at_3584["bytes"], at_3584["fraction"]) if b > 2**20]  # past the overhead
    assert big == pytest.approx([0.4] * len(big), abs=0.01) and len(big) >= 6
    ceilings = size_ceilings(fit)
    predicted = np.array([float(time_op(op, ceilings)["time_s"]) for op in ops])
    assert np.max(np.abs(predicted / truth - 1)) < 0.03  # each width its own table
    # GPT-J's hidden 4096 at 272 tokens: between the 3584 and 8192 tables, not the 2048 one's 0.6
    gptj = build_op({"builder": "size_grid", "kernel": "layernorm", "tokens": 272, "width": 4096, "dtype": "fp32"})
    assert ceilings.row_fraction(gptj) == pytest.approx(0.4, abs=0.01)
    # hidden 2709 (sqrt(2048 x 3584)): halfway in log width
    mid = build_op({"builder": "size_grid", "kernel": "layernorm", "tokens": 272, "width": 2709, "dtype": "fp32"})
    assert ceilings.row_fraction(mid) == pytest.approx(0.5, abs=0.01)
    # a width past the measured ones is held at the outermost and named as extrapolated
    wide = build_op({"builder": "size_grid", "kernel": "layernorm", "tokens": 4, "width": 16384, "dtype": "fp32"})
    assert ceilings.row_fraction(wide) == pytest.approx(0.4, abs=0.01)
    (span,) = [s for s in outside_spans(wide, ceilings) if s.dimension == "width"]
    assert describe("width", outside_range(span), (span.low, span.high)) == "width 16384 (measured 896–8192)"
    assert not [s for s in outside_spans(gptj, ceilings) if s.dimension == "width"]


def test_one_width_keeps_one_table_as_profiles_measured_before_widths():
    fraction = lambda w: np.full_like(w, 0.5)  # noqa: E731
    ops, rows, _ = _rows("rmsnorm", "bf16", fraction)
    base = [i for i, r in enumerate(rows) if r["recipe"]["width"] == SIZE_GRID_WIDTH["rmsnorm"]]
    fit = fit_profile_terms([rows[i] for i in base], [ops[i] for i in base], CEIL, cpu=True)
    assert list(fit.size_curves) == ["norm:attn_norm@bf16"]


def test_every_norm_kind_is_measured_at_every_width_in_full_and_quick_calibrations():
    for quick in (False, True):
        cases = size_grid_cases(["fp32", "bf16"], quick=quick)
        for kernel in ("rmsnorm", "layernorm"):
            for dtype in ("fp32", "bf16"):
                widths = {c.recipe["width"] for c in cases if c.kernel == kernel and c.dtype == dtype}
                assert widths == {896, 2048, 3584, 8192}, (kernel, dtype, quick)
        # a CPU's softmax at its key counts too, a GPU's at its one width; the others keep theirs
        assert {c.recipe["width"] for c in cases if c.kernel == "softmax"} == {64, 192, 512, 2048}
        gpu = size_grid_cases(["fp32", "bf16"], quick=quick, device="cuda")
        assert {c.recipe["width"] for c in gpu if c.kernel == "softmax"} == {512}
        assert {c.recipe["width"] for c in cases if c.kernel == "silu_mul"} == {8192}
        assert len(cases) - len(gpu) == sum(c.kernel == "softmax" and c.recipe["width"] != 512 for c in cases)


def test_a_softmax_measured_at_several_key_counts_gets_a_table_per_count_and_reads_between_them():
    # rows of 64 and 192 keys reach 0.5 of the bound, 512 and 2048 0.8 (as a Zen 5's bf16 softmax,
    # whose short rows are slower per byte)
    fraction = lambda w: np.where(w < 500, 0.5, 0.8)  # noqa: E731
    ops, rows, truth = _rows("softmax", "bf16", fraction)
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    key = fit_key(ops[0])
    assert key == "softmax:softmax@bf16"
    assert {width_key(key, w) for w in (512, *SIZE_GRID_SOFTMAX_WIDTHS)} | {key} <= set(fit.size_curves)
    ceilings = size_ceilings(fit)
    predicted = np.array([float(time_op(op, ceilings)["time_s"]) for op in ops])
    assert np.max(np.abs(predicted / truth - 1)) < 0.03  # each key count its own table

    def softmax(keys: int, rows: int = 4096):
        return build_op({"builder": "size_grid", "kernel": "softmax", "tokens": rows, "width": keys, "dtype": "bf16"})

    # a prompt of 160 keys lies between the 64 and 192 tables, 1024 between 512 and 2048
    assert ceilings.row_fraction(softmax(160)) == pytest.approx(0.5, abs=0.01)
    assert ceilings.row_fraction(softmax(1024)) == pytest.approx(0.8, abs=0.01)
    # 320 keys: ln(320 / 192) / ln(512 / 192) = 0.521 of the way from 0.5 to 0.8
    assert ceilings.row_fraction(softmax(320)) == pytest.approx(0.5 + 0.521 * 0.3, abs=0.01)
    # past the longest measured row: held, and named
    (span,) = [s for s in outside_spans(softmax(4096, 64), ceilings) if s.dimension == "keys"]
    assert describe("keys", outside_range(span), (span.low, span.high)) == "keys 4096 (measured 64–2048)"


def test_the_calibration_manual_quotes_the_widths_the_code_measures():
    """docs/calibration.md names the norm widths and the softmax key counts: the code's own."""
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text().split())
    norms = sorted((SIZE_GRID_WIDTH["rmsnorm"], *SIZE_GRID_NORM_WIDTHS))
    keys = sorted((SIZE_GRID_WIDTH["softmax"], *SIZE_GRID_SOFTMAX_WIDTHS))
    assert norms == [896, 2048, 3584, 8192] and keys == [64, 192, 512, 2048]
    assert f"norms are measured at {', '.join(map(str, norms))}" in text
    assert f"a CPU softmax at {', '.join(map(str, keys))} keys" in text
