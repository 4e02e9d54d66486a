"""The step breakdown of a transformers replay and the host terms fitted to it: pure
functions of recorded steps (no torch, no transformers)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernels.servecheck.cb_server import (
    ServerSettings,
    breakdown,
    fit_overhead,
    overhead_from,
    predicted_steps,
    step_mix,
)
from ridgeline.errors import RidgelineError


def steps_of(other: list[float], query: list[list[int]], past: list[list[int]]) -> dict[str, list]:
    """Recorded steps with a 10 ms forward each and ``other`` seconds beside it."""
    n = len(other)
    return {
        "prepare_s": [o / 2 for o in other],
        "forward_s": [0.010] * n,
        "attention_s": [0.001] * n,
        "sample_s": [o / 4 for o in other],
        "update_s": [o / 4 for o in other],
        "step_s": [0.010 + o for o in other],
        "query": query,
        "past": past,
    }


def test_fit_recovers_fixed_and_per_request_terms():
    """other = 2 ms + 0.5 ms x requests, exactly: the fit returns 2 ms and 0.5 ms."""
    query = [[1] * r for r in (1, 2, 3, 5, 8)]
    past = [[40] * r for r in (1, 2, 3, 5, 8)]
    other = [0.002 + 0.0005 * len(q) for q in query]
    terms = fit_overhead([steps_of(other, query, past)])
    assert terms["step_overhead_s"] == pytest.approx(0.002, rel=1e-9)
    assert terms["request_overhead_s"] == pytest.approx(0.0005, rel=1e-9)
    assert terms["steps"] == 5 and terms["rms_residual_s"] == pytest.approx(0.0, abs=1e-12)


def test_fit_drops_a_negative_slope():
    """More requests, less host work: no per-request term, the fixed term is the mean
    of 3, 2 and 1 ms = 2 ms."""
    query, past = [[1], [1, 1], [1, 1, 1]], [[9], [9, 9], [9, 9, 9]]
    terms = fit_overhead([steps_of([0.003, 0.002, 0.001], query, past)])
    assert terms["request_overhead_s"] == 0.0
    assert terms["step_overhead_s"] == pytest.approx(0.002, rel=1e-9)


def test_fit_needs_steps():
    with pytest.raises(RidgelineError, match="too few"):
        fit_overhead([steps_of([0.001], [[1]], [[3]])])


def test_breakdown_and_mix():
    """forward + other = step; tokens and requests per step; a step that only decodes."""
    s = steps_of([0.002, 0.004], [[1, 1], [30, 1]], [[12, 40], [0, 41]])
    b = breakdown(s)
    np.testing.assert_allclose(b["forward_s"] + b["other_s"], b["step_s"], rtol=1e-12)
    assert b["tokens"].tolist() == [2, 31] and b["requests"].tolist() == [2, 2]
    assert b["decode_only"].tolist() == [True, False]
    # a fresh chunk, a chunk over a cache, two decodes over 40 + 41 cached tokens
    assert step_mix([30, 16, 1, 1], [0, 64, 40, 41]) == ([30], [(16, 64)], 2, 81.0)


def test_predicted_steps_are_the_simulators_step_time():
    """The engine's seconds for a recorded mix are simulate.step_time's for that mix."""
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.step_cost import build_step_cost, step_time

    d = resolve("qwen2-0.5b", "a6000", dtype="bf16")
    server = ServerSettings()
    s = steps_of([0.001, 0.001], [[1, 1], [30, 1]], [[12, 40], [0, 41]])
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16)
    expected = [step_time(cost, [], [], 2, 52.0), step_time(cost, [30], [], 1, 41.0)]
    np.testing.assert_allclose(predicted_steps(d, s, server), expected, rtol=1e-12)
    # without attention: 2 decodes cost their token ops and lm_head alone
    bare = step_time(cost, [], [], 2, 0.0) - step_time(cost, [], [], 0, 0.0)
    assert predicted_steps(d, s, server, "none")[0] == pytest.approx(cost.token_s[2] + cost.head_s[2], rel=1e-12)
    assert bare > 0


def test_overhead_from_a_file_without_steps(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"measured": {}}))
    with pytest.raises(RidgelineError, match="no recorded steps"):
        overhead_from(old)
    with pytest.raises(RidgelineError, match="no serving run at"):
        overhead_from(tmp_path / "missing.json")


SERVING = Path(__file__).resolve().parent.parent / "reports" / "validation" / "serving"
CALIBRATION = SERVING / "serving-cpu-amd-epyc-1t-qwen2-0.5b-2rps-seed7-2026-11-23.json"
SCORED = [SERVING / f"serving-cpu-amd-epyc-1t-qwen2-0.5b-{r}-2026-11-23.json" for r in ("1rps", "0.5rps")]


@pytest.mark.parametrize("path", [CALIBRATION, *SCORED], ids=lambda p: p.name)
def test_recorded_steps_add_up(path):
    """Every replay's recorded steps: the phases add up to the step (prepare + forward +
    sample + update, and forward + other); the steps' CPU seconds are at most the replay's
    (which also counts the polls between steps); every request's prompt and its output
    tokens after the first went through the model once: sum of query tokens =
    sum(prompt) + sum(output - 1)."""
    data = json.loads(path.read_text())
    trace = data["trace"]
    computed = sum(trace["prompt_tokens"]) + sum(n - 1 for n in trace["output_tokens"])
    assert len(data["measured_steps"]) == data["repeats"]
    for steps, run in zip(data["measured_steps"], data["measured_runs"]):
        parts = sum(np.asarray(steps[k]) for k in ("prepare_s", "forward_s", "sample_s", "update_s"))
        np.testing.assert_allclose(parts, steps["step_s"], rtol=1e-9, atol=1e-12)
        b = breakdown(steps)
        np.testing.assert_allclose(b["forward_s"] + b["other_s"], b["step_s"], rtol=1e-12)
        assert np.all(b["attention_s"] <= b["forward_s"]) and np.all(b["other_s"] > 0)
        assert sum(steps["step_s"]) <= run["cpu_s"] * (1 + 1e-12)
        assert int(b["tokens"].sum()) == computed
        assert max(b["tokens"]) <= data["server"]["max_batch_tokens"]
        assert max(b["requests"]) <= data["server"]["max_requests_per_batch"]


@pytest.mark.parametrize("path", SCORED, ids=lambda p: p.name)
def test_scored_runs_used_the_terms_of_the_calibration_trace(path):
    """The host terms a scored run simulated with are the fit to the calibration run (a
    different seed, rate and lengths), recomputed from that file alone."""
    recorded = json.loads(path.read_text())["overhead"]
    again = overhead_from(CALIBRATION)
    for key in ("step_overhead_s", "request_overhead_s", "steps"):
        assert recorded[key] == pytest.approx(again[key], rel=1e-12)
    assert Path(recorded["from"]).name == CALIBRATION.name


def test_fit_overhead_command_prints_the_options():
    """`simulate-check --fit-overhead` reads the committed calibration run and prints the
    simulate options it fits (the same numbers overhead_from returns); a file without
    steps and a missing file are one-line errors."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    runner = CliRunner()
    terms = overhead_from(CALIBRATION)
    result = runner.invoke(app, ["simulate-check", "--fit-overhead", str(CALIBRATION)])
    assert result.exit_code == 0
    assert result.output.startswith(
        f"--step-overhead {terms['step_overhead_s']:.6f} --request-overhead {terms['request_overhead_s']:.6f}"
    )
    wall = SERVING / "serving-cpu-amd-epyc-1t-qwen2-0.5b-2rps-wall-2026-11-23.json"
    for path, message in ((wall, "has no recorded steps"), (SERVING / "missing.json", "no serving run at")):
        result = runner.invoke(app, ["simulate-check", "--fit-overhead", str(path)])
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_predicted_gather_steps_know_which_steps_read_the_cache():
    """gather prices a recorded mix with simulate.gather_step_time: T tokens over every
    sequence's keys; a step of fresh prompts only reads no cache back."""
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.step_cost import build_step_cost, gather_step_time

    d = resolve("qwen2-0.5b", "a6000", dtype="bf16")
    s = steps_of([0.001] * 3, [[1, 1], [30, 1], [20, 12]], [[12, 40], [0, 41], [0, 0]])
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16, "gather")
    # (fresh, cached, sequences, keys, reads): 2 decodes over 13 + 41 keys; a fresh 30
    # and a decode over 30 + 42 keys; two fresh prompts over their own 32 keys
    expected = [
        gather_step_time(cost, 0, 2, 2, 54.0, True),
        gather_step_time(cost, 30, 1, 2, 72.0, True),
        gather_step_time(cost, 32, 0, 2, 32.0, False),
    ]
    np.testing.assert_allclose(predicted_steps(d, s, ServerSettings(), "gather"), expected, rtol=1e-12)
