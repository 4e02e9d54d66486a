"""The step breakdown of a transformers replay and the host terms fitted to it: pure
functions of recorded steps (no torch, no transformers)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kernels.cb_server import ServerSettings, breakdown, fit_overhead, overhead_from, predicted_steps, step_mix
from ridgeline.errors import RidgelineError


def steps_of(other: list[float], query: list[list[int]], past: list[list[int]]) -> dict[str, list]:
    """Recorded steps with a 10 ms forward each and ``other`` seconds beside it."""
    n = len(other)
    return {"prepare_s": [o / 2 for o in other], "forward_s": [0.010] * n, "attention_s": [0.001] * n,
            "sample_s": [o / 4 for o in other], "update_s": [o / 4 for o in other],
            "step_s": [0.010 + o for o in other], "query": query, "past": past}


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
    from ridgeline.resolve import resolve
    from ridgeline.simulate import build_step_cost, step_time

    d = resolve("qwen2-0.5b", "a6000", dtype="bf16")
    server = ServerSettings()
    s = steps_of([0.001, 0.001], [[1, 1], [30, 1]], [[12, 40], [0, 41]])
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16)
    expected = [step_time(cost, [], [], 2, 52.0), step_time(cost, [30], [], 1, 41.0)]
    np.testing.assert_allclose(predicted_steps(d, s, server), expected, rtol=1e-12)


def test_overhead_from_a_file_without_steps(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"measured": {}}))
    with pytest.raises(RidgelineError, match="no recorded steps"):
        overhead_from(old)
    with pytest.raises(RidgelineError, match="no serving run at"):
        overhead_from(tmp_path / "missing.json")
