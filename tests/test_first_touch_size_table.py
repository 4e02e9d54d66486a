"""A CPU's first touch of fresh pages, and the element-wise size table (no torch)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

from kernels.bench.cases import (
    SIZE_GRID_KINDS,
    SIZE_GRID_MAX_BYTES,
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
from ridgeline.engine.roofline import MMAP_THRESHOLD, Ceilings, Curve, evaluate, roofline_time, time_op
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


def test_size_table_follows_a_non_monotone_curve_and_the_engine_reads_it_back():
    # a rate that rises out of the call overhead, dips past the caches and recovers
    curve = lambda b: 0.2 + 0.6 * np.exp(-(((np.log(b) - np.log(4 * MIB)) / 2) ** 2))  # noqa: E731
    cases, ops, rows, truth = _grid_rows("rmsnorm", "bf16", curve)
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    key = fit_key(ops[0])
    assert key == "norm:attn_norm@bf16" and key in fit.size_curves and key not in fit.efficiency
    entry = fit.size_curves[key]
    assert entry["bytes"] == sorted({float(op.bytes) for op in ops})
    profile = {
        "bandwidth_gb_s": 20.0,
        "matrix_peak_tops": {"fp32": 0.2, "bf16": 1.0},
        "timing": "cpu",
        "size_curves": fit.size_curves,
        "overhead_us": {k: v * 1e6 for k, v in fit.overhead_s.items()},
    }
    from ridgeline.io.resolve import load_device

    device = replace(load_device("a6000"), vector_peak=MappingProxyType({"fp32": 0.2e12}))
    ceilings = calibrated_ceilings(profile, device)
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
