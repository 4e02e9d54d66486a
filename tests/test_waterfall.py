"""The waterfall: measured minus spec split into parts that sum to the measurement
(kernels.e2e.waterfall), for hand-worked records, simulated traces, every committed
check, the CLI and the dashboard."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kernels.e2e.e2e import Case, predict
from kernels.e2e.waterfall import PARTS, e2e_waterfall, split, without_launch
from kernels.servecheck.cb_server import Served, run_waterfall
from ridgeline.cli import app
from ridgeline.engine.roofline import spec_ceilings
from ridgeline.errors import RidgelineError
from ridgeline.io.resolve import load_device, load_model
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.scheduler import Scheduler

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "reports" / "validation"
E2E_RUN = VALIDATION / "e2e-cpu-amd-epyc-1t-qwen2-0.5b-2026-11-23.json"
SERVING_RUN = VALIDATION / "serving" / "serving-cpu-amd-epyc-1t-qwen2-0.5b-1rps-2026-11-23.json"


def total(fall: dict) -> float:
    return fall["spec_s"] + sum(fall["parts"].values())


# --- the split, by hand ------------------------------------------------------------------


def test_each_part_is_the_step_between_two_predictions():
    chain = {
        "kernel_efficiency": 6.0,
        "launch_host": 7.0,
        "scheduler_batching": 8.0,
        "queueing": 9.5,
        "preemption": 9.5,
    }
    fall = split(10.0, 4.0, chain)
    assert fall["parts"] == {
        "kernel_efficiency": 2.0,
        "launch_host": 1.0,
        "scheduler_batching": 1.0,
        "queueing": 1.5,
        "preemption": 0.0,
        "remainder": 0.5,
    }
    assert fall["predicted_s"] == 9.5 and total(fall) == 10.0
    assert fall["separated"] == list(PARTS[:-1]) and fall["notes"] == {}


def test_a_part_not_separable_is_zero_with_a_note_and_stays_in_the_remainder():
    fall = split(10.0, 4.0, {"kernel_efficiency": None, "launch_host": 7.0}, {"kernel_efficiency": "why"})
    assert fall["parts"]["kernel_efficiency"] == 0.0
    assert fall["parts"]["launch_host"] == 3.0  # from spec: the missing step is not invented
    assert fall["parts"]["scheduler_batching"] == 0.0 and fall["parts"]["remainder"] == 3.0
    assert fall["notes"]["kernel_efficiency"] == "why"
    assert fall["notes"]["queueing"].startswith("not separable from this record")
    assert fall["separated"] == ["launch_host"]


@pytest.mark.parametrize(
    ("measured", "spec", "message"),
    [
        (float("nan"), 1.0, "the measured time is nan"),
        (1.0, None, "the spec prediction is None"),
        (1.0, float("inf"), "the spec prediction is inf"),
    ],
)
def test_a_missing_or_nan_time_is_refused(measured, spec, message):
    with pytest.raises(RidgelineError, match=message):
        split(measured, spec, {})


def test_an_unknown_part_is_refused():
    with pytest.raises(RidgelineError, match=r"unknown part\(s\) \['launch'\]"):
        split(1.0, 1.0, {"launch": 2.0})


times = st.floats(1e-4, 1.0)  # seconds within four orders of magnitude of each other


@settings(max_examples=200, deadline=None)
@given(measured=times, spec=times, steps=st.lists(st.one_of(st.none(), times), min_size=5, max_size=5))
def test_the_parts_always_sum_to_the_measurement(measured, spec, steps):
    fall = split(measured, spec, dict(zip(PARTS[:-1], steps)))
    assert math.isclose(total(fall), measured, rel_tol=1e-9)
    last = next((s for s in reversed(steps) if s is not None), spec)
    assert fall["parts"]["remainder"] == pytest.approx(measured - last, abs=1e-12)


def test_an_e2e_row_whose_calibrated_prediction_is_the_measurement_has_no_remainder():
    row = {
        "measured_tpot_s": 0.010,
        "predicted_spec_tpot_s": 0.004,
        "predicted_kernels_tpot_s": 0.007,
        "predicted_calibrated_tpot_s": 0.010,
    }
    fall = e2e_waterfall(row, "tpot")
    assert fall["parts"]["kernel_efficiency"] == pytest.approx(0.003, rel=1e-12)
    assert fall["parts"]["launch_host"] == pytest.approx(0.003, rel=1e-12)
    assert fall["parts"]["remainder"] == 0.0
    assert {fall["notes"][p] for p in ("scheduler_batching", "queueing", "preemption")} == {
        "a fixed batch run back to back: no scheduler, no queue, no preemption"
    }


def test_an_e2e_row_without_a_profile_or_a_split_leaves_the_gap_in_the_remainder():
    row = {"measured_ttft_s": 0.5, "predicted_spec_ttft_s": 0.2, "predicted_calibrated_ttft_s": None}
    fall = e2e_waterfall(row, "ttft")
    assert fall["parts"]["remainder"] == pytest.approx(0.3) and fall["separated"] == []
    assert fall["notes"]["kernel_efficiency"] == "no calibrated prediction (no calibrated profile of this device)"
    old = {**row, "predicted_calibrated_ttft_s": 0.4}  # recorded before the split was
    fall = e2e_waterfall(old, "ttft")
    assert fall["parts"]["kernel_efficiency"] == 0.0 and fall["parts"]["remainder"] == pytest.approx(0.3)
    assert "ridgeline e2e --repredict FILE" in fall["notes"]["kernel_efficiency"]


# --- the predictions behind the e2e parts ------------------------------------------------


def test_datasheet_roofs_as_the_profile_attribute_nothing_to_kernels_or_launch():
    config, device = load_model("qwen2-0.5b"), load_device("h100-sxm")
    roofs = spec_ceilings(device)
    case = Case(1, 128, 16)
    spec = predict(config, device, case, "bf16", roofs, "graph")
    kernels = predict(config, device, case, "bf16", without_launch(roofs), "graph")
    assert kernels["tpot_s"] == spec["tpot_s"] and kernels["ttft_s"] == spec["ttft_s"]


def test_a_fixed_cost_per_op_is_launch_and_host_not_kernel_efficiency():
    """The same roofs with 10 us fixed per op: the launch part of a decode step of
    qwen2-0.5b is 10 us times its 24 x 14 layer ops + embed, final norm and lm_head."""
    config, device = load_model("qwen2-0.5b"), load_device("h100-sxm")
    roofs = spec_ceilings(device)
    kinds = ("embed", "norm", "linear", "elementwise", "attention", "softmax")
    fixed = replace(roofs, mode="calibrated", overhead_s=dict.fromkeys(kinds, 1e-5))
    case = Case(1, 128, 16)
    spec = predict(config, device, case, "bf16", roofs, "graph")
    kernels = predict(config, device, case, "bf16", without_launch(fixed), "graph")
    calibrated = predict(config, device, case, "bf16", fixed, "graph")
    assert spec["decode_ops"] == 24 * 14 + 3
    assert kernels["tpot_s"] == pytest.approx(spec["tpot_s"], rel=1e-12)
    assert calibrated["tpot_s"] - kernels["tpot_s"] == pytest.approx(339 * 1e-5, rel=1e-9)


# --- serving: simulations that differ by one effect each ---------------------------------


def served(times_s, kv_blocks=None) -> Served:
    n = len(times_s)
    arrivals = Arrivals(np.asarray(times_s, float), np.full(n, 64), np.full(n, 8))
    sched = Scheduler(max_batch=8, token_budget=128, kv_blocks=kv_blocks)
    return Served(load_model("qwen2-0.5b"), load_device("h100-sxm"), None, arrivals, sched, "bf16", "graph")


def test_requests_that_never_meet_have_no_batching_queueing_or_preemption():
    run = served([0.0, 100.0, 200.0])
    probe = run_waterfall({"measured": {"ttft_s": [1.0] * 3, "latency_s": [2.0] * 3}}, run)
    alone = probe["latency"]["spec_s"]
    fall = run_waterfall({"measured": {"ttft_s": [1.0] * 3, "latency_s": [alone + 0.5] * 3}}, run)["latency"]
    parts = fall["parts"]
    assert parts["kernel_efficiency"] == 0.0 and "no calibrated profile" in fall["notes"]["kernel_efficiency"]
    assert parts["launch_host"] == 0.0  # no profile terms, no host seconds measured
    for part in ("scheduler_batching", "queueing", "preemption"):
        assert parts[part] == pytest.approx(0.0, abs=1e-9), part
    assert parts["remainder"] == pytest.approx(0.5, rel=1e-9)
    assert math.isclose(total(fall), alone + 0.5, rel_tol=1e-12)


def test_requests_arriving_together_batch_and_wait():
    fall = run_waterfall({"measured": {"ttft_s": [1.0] * 24, "latency_s": [2.0] * 24}}, served([0.0] * 24))
    assert fall["latency"]["parts"]["scheduler_batching"] > 0  # sharing steps is slower than alone
    assert fall["ttft"]["parts"]["queueing"] > 0  # 24 requests, 8 per step
    assert math.isclose(total(fall["ttft"]), 1.0, rel_tol=1e-12)


# --- every committed check ----------------------------------------------------------------


@pytest.fixture(scope="module")
def committed():
    from kernels.results.attribution import committed_waterfalls

    return committed_waterfalls()


def test_every_committed_check_has_waterfalls_that_sum_to_its_measurement(committed):
    e2e_rows = sum(len(json.loads(p.read_text())["rows"]) for p in VALIDATION.glob("e2e-*.json"))
    serving = len(list((VALIDATION / "serving").glob("*.json")))
    top = [e for e in committed if e["kind"] == "e2e" and not e["run"].startswith("gpu-runs/")]
    assert len(top) == 2 * e2e_rows
    assert sum(e["kind"] == "serving" for e in committed) == 2 * serving
    assert any(e["run"].startswith("gpu-runs/cuda-nvidia-h200") for e in committed)  # the H200's e2e
    for e in committed:
        assert math.isclose(total(e), e["measured_s"], rel_tol=1e-9), (e["run"], e["case"], e["metric"])
        assert set(e["parts"]) == set(PARTS)


def test_the_generated_files_are_current(committed):
    from kernels.results.attribution import WATERFALLS
    from kernels.results.generate import waterfalls_text

    assert WATERFALLS.read_text() == waterfalls_text(committed), "python -m kernels.results.generate"
    for e in json.loads(WATERFALLS.read_text())["waterfalls"]:  # rounded, still summing
        assert math.isclose(total(e), e["measured_s"], rel_tol=1e-9), (e["run"], e["case"], e["metric"])


# --- the CLI ------------------------------------------------------------------------------


def test_e2e_repredict_prints_and_writes_the_waterfall(tmp_path):
    out = tmp_path / "again.json"
    result = CliRunner().invoke(app, ["e2e", "--repredict", str(E2E_RUN), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "where the time goes, measured - spec" in result.output
    assert "waterfall qwen2-0.5b B1 P128 eager TPOT: spec" in result.output
    rows = json.loads(out.read_text())["rows"]
    for row in rows:
        for metric in ("ttft", "tpot"):
            fall = row["waterfall"][metric]
            assert math.isclose(total(fall), row[f"measured_{metric}_s"], rel_tol=1e-9)
            assert fall["spec_s"] == row[f"predicted_spec_{metric}_s"]
            assert fall["predicted_s"] == row[f"predicted_calibrated_{metric}_s"]


@pytest.mark.slow
def test_simulate_check_resimulate_writes_the_waterfall_never_over_a_committed_file(tmp_path):
    out = tmp_path / "again.json"
    result = CliRunner().invoke(app, ["simulate-check", "--resimulate", str(SERVING_RUN), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "waterfall latency: spec" in result.output
    data = json.loads(out.read_text())
    measured = json.loads(SERVING_RUN.read_text())["measured"]
    assert math.isclose(total(data["waterfall"]["latency"]), float(np.mean(measured["latency_s"])), rel_tol=1e-9)
    result = CliRunner().invoke(app, ["simulate-check", "--resimulate", str(SERVING_RUN), "-o", str(SERVING_RUN)])
    assert result.exit_code == 2
    assert "--resimulate writes a new file, never over a recorded run" in result.output


# --- the dashboard ------------------------------------------------------------------------


def test_the_waterfall_figure_steps_from_spec_to_the_measurement():
    pytest.importorskip("dash")
    from viewer import figures

    fall = split(0.010, 0.004, {"kernel_efficiency": 0.006, "launch_host": 0.009})
    fig = figures.waterfall_figure({"run": "r.json", "case": "c", "metric": "tpot", **fall})
    (trace,) = fig.data
    assert list(trace.x)[0] == "spec" and list(trace.x)[-1] == "measured"
    assert list(trace.measure) == ["absolute", *["relative"] * 6, "total"]
    assert list(trace.y) == pytest.approx([4.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 10.0])
    assert sum(trace.y[:-1]) == pytest.approx(trace.y[-1])


def test_the_validation_page_lists_every_committed_run_and_draws_the_chosen_one(committed):
    pytest.importorskip("dash")
    from viewer import callbacks, data

    options, value, style = callbacks.waterfall_choices("/validation", "?runs=all")
    keys = {o["value"] for o in options}
    assert {data.waterfall_key(e) for e in committed} <= keys and style == {"display": "block"}
    options, value, _ = callbacks.waterfall_choices("/validation", "?runs=cuda-nvidia-h200")
    assert value == options[0]["value"] and all("h200" in o["value"] for o in options)
    fig = callbacks.update_waterfall(value)
    assert fig.data[0].type == "waterfall"
    assert callbacks.waterfall_choices("/validation", "?runs=all", value)[1] == value  # kept when listed
