"""Leave-one-model-out cross-validation and the measured row tables in a profile (no torch)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.bench.cases import Options, grid_cases, suite_cases
from kernels.validate.validate import cross_validate, rich_summary, summarize
from ridgeline.engine.roofline import evaluate
from ridgeline.errors import InvalidSpecError
from ridgeline.io.profile import calibrated_ceilings
from ridgeline.io.resolve import load_device

PROFILE = {
    "meta": {"device": "test"},
    "timing": "device",
    "bandwidth_gb_s": 40.0,
    "matrix_peak_tops": {"fp32": 0.2, "bf16": 0.8, "int8": 1.6},
    "vector_peak_tops": {"fp32": 0.2, "bf16": 0.2},
    "overhead_us": {"default": 1.0},
}


def _rows(truth_profile, cases):
    """Calibration rows 'measured' as a known calibrated model predicts them."""
    ceilings = calibrated_ceilings(truth_profile, load_device("a6000"))
    times = np.ravel(evaluate([c.op for c in cases], ceilings)["time_s"])
    return [{**c.to_dict(), "measured_s": float(t), "noisy": False, "status": "ok"} for c, t in zip(cases, times)]


def test_leave_one_model_out_recovers_a_model_it_can_represent():
    # two quick calibration models and the grid, timed by a model the fit can represent
    # exactly: every class at half its roofs (efficiencies on the search grid) plus 1.63 us
    opts = Options(("fp32",), ("flash",))
    cases = [
        c
        for c in suite_cases("calibration", opts, quick=True)
        if c.stage != "grid" and c.kernel in ("linear", "rmsnorm")
    ]
    cases += grid_cases(("fp32",), quick=True)
    from kernels.calibrate.fit import EFF_GRID, OVERHEAD_GRID

    half, oh = float(EFF_GRID[58]), float(OVERHEAD_GRID[12])
    truth = {
        **PROFILE,
        "efficiency": {k: {"compute": half, "memory": half} for k in ("linear@fp32", "norm:attn_norm@fp32")},
        "overhead_us": {"default": oh * 1e6},
    }
    rows = _rows(truth, cases)
    cv = cross_validate(PROFILE, rows, load_device("a6000"))
    models = {r["recipe"].get("model") for r in rows} - {None}
    assert {r["model"] for r in cv} == models == {"qwen2-0.5b", "llama-3.2-1b"}
    assert len(cv) == sum(1 for r in rows if r["recipe"].get("model"))  # grid rows never held out
    assert np.max(np.abs([r["error_cv"] for r in cv])) < 0.02


def test_summary_puts_the_cross_validated_figure_beside_the_held_out_one():
    rows = [
        {"status": "ok", "op_class": c, "noisy": False, "error_spec": -0.5, "error_calibrated": e}
        for c, e in (("gemv", 0.1), ("gemv", -0.3), ("norm", 0.05))
    ]
    cv = [{"op_class": "gemv", "error_cv": e} for e in (0.2, -0.4, 0.1)]
    summary = summarize(rows, cv).set_index("op_class")
    assert summary.loc["gemv", "calibrated_median_abs"] == pytest.approx(0.2)
    assert summary.loc["gemv", "cv_median_abs"] == pytest.approx(0.2)  # |0.2|, |-0.4|, |0.1|
    assert summary.loc["gemv", "cv_count"] == 3 and summary.loc["norm", "cv_count"] == 0
    assert summary.loc["all", "cv_p90_abs"] == pytest.approx(0.36)  # 0.2 + 0.8 (0.4 - 0.2)
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(rich_summary(summary.reset_index(), "t"))
    text = console.export_text()
    assert "leave-one-model-out" in text and "20.0% / 36.0% (3)" in text


def test_reference_kernels_are_summarised_apart_from_the_headline():
    """SDPA's math backend is a reference kernel: the classes and 'headline' leave it out,
    'reference' has it, 'all' counts both."""
    rows = [
        {
            "status": "ok",
            "op_class": "attention",
            "noisy": False,
            "error_spec": -0.5,
            "kernel": "sdpa",
            "backend": b,
            "error_calibrated": e,
        }
        for b, e in (("flash", 0.02), ("flash", -0.04), ("math", 0.6))
    ]
    cv = [
        {"op_class": "attention", "kernel": "sdpa", "backend": b, "error_cv": e}
        for b, e in (("flash", 0.1), ("math", 0.5))
    ]
    summary = summarize(rows, cv, "cpu").set_index("op_class")
    assert summary.loc["attention", "count"] == 2 and summary.loc["headline", "count"] == 2
    assert summary.loc["attention", "calibrated_median_abs"] == pytest.approx(0.03)
    assert summary.loc["reference", "count"] == 1 and summary.loc["all", "count"] == 3
    assert summary.loc["reference", "calibrated_median_abs"] == pytest.approx(0.6)
    assert summary.loc["headline", "cv_median_abs"] == pytest.approx(0.1)
    assert summary.loc["reference", "cv_median_abs"] == pytest.approx(0.5)
    # on CUDA the int8 weight-only kernel is a reference too; on a CPU it is what runs
    int8 = [{**rows[0], "kernel": "int8_weight_only", "backend": ""}]
    assert "reference" not in summarize(int8, (), "cpu").set_index("op_class").index
    assert "reference" in summarize(int8, (), "cuda").set_index("op_class").index


@pytest.mark.parametrize(
    "curves, problem",
    [
        (
            {"linear@fp32": [{"k": 896, "n": 896, "rows": [1, 2], "fraction": [0.5, 1.2]}]},
            "every 'fraction' must be positive and at most 1",
        ),
        (
            {"linear@fp32": [{"k": 896, "n": 896, "rows": [2, 1], "fraction": [0.5, 0.6]}]},
            "'rows' must be positive and increasing",
        ),
        ({"linear@fp32": [{"k": 896, "rows": [1], "fraction": [0.5]}]}, "positive 'k' and 'n'"),
        ({"linear@fp32": {"rows": [1], "fraction": [0.5]}}, "must be a list"),
    ],
)
def test_profile_row_tables_are_checked(curves, problem):
    with pytest.raises(InvalidSpecError, match=problem):
        calibrated_ceilings({**PROFILE, "row_curves": curves}, load_device("a6000"))


def test_row_tables_round_trip_through_a_snapshot():
    from kernels.bench.cases import build_op
    from kernels.validate.replay import predict
    from ridgeline.engine.roofline import Ceilings

    curves = {
        "linear@fp32": [
            {"k": 896, "n": 4864, "rows": [1, 2, 16], "fraction": [0.4, 0.2, 0.6]},
            {"k": 2048, "n": 2048, "rows": [1, 4], "fraction": [0.5, 0.3]},
        ]
    }
    ceilings = calibrated_ceilings({**PROFILE, "row_curves": curves}, load_device("a6000"))
    again = Ceilings.from_dict(ceilings.to_dict())
    ops = [build_op({"builder": "linear", "m": m, "k": 1024, "n": 3072, "dtype": "fp32"}) for m in (1, 3, 40)]
    assert predict(ops, again)["time_s"] == pytest.approx(predict(ops, ceilings)["time_s"], rel=1e-12)
    assert again.row_curves["linear@fp32"].shapes == ((896.0, 4864.0), (2048.0, 2048.0))


def test_row_tables_broadcast_over_workload_arrays():
    import ridgeline as rl

    curves = {"linear@bf16": [{"k": 2048, "n": 2048, "rows": [1, 4, 64], "fraction": [0.5, 0.2, 0.7]}]}
    c = calibrated_ceilings({**PROFILE, "row_curves": curves}, load_device("a6000"))
    batches = np.array([1, 3, 64])
    frame = rl.sweep("llama-3.2-1b", "a6000", batches, np.array([128]), generate=4, ceilings=c)
    single = [
        rl.analyze("llama-3.2-1b", "a6000", batch=int(b), seq_len=128, generate=4, ceilings=c).generation["tpot_s"]
        for b in batches
    ]
    assert frame["tpot_s"].to_numpy() == pytest.approx(single, rel=1e-9)
