"""A norm's size table per row width (no torch): measured, fitted, read back and named."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

from kernels.bench.cases import SIZE_GRID_NORM_WIDTHS, SIZE_GRID_WIDTH, build_op, size_grid_cases
from kernels.calibrate.fit import fit_key, fit_profile_terms, roof_seconds
from ridgeline.engine.grid import describe, outside_range, outside_spans
from ridgeline.engine.roofline import (
    Ceilings,
    Curve,
    across_widths,
    roofline_time,
    time_op,
    width_curves,
    width_key,
)
from ridgeline.io.profile import calibrated_ceilings

CEIL = Ceilings(
    "calibrated",
    20e9,
    MappingProxyType({"fp32": 0.2e12, "bf16": 1e12}),
    MappingProxyType({"fp32": 0.2e12}),
    device="test",
)


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
        # the others keep their one width
        assert {c.recipe["width"] for c in cases if c.kernel == "softmax"} == {512}
