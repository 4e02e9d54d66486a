"""Serving intervals (issue 27): the simulator's percentiles with the intervals the residual
table puts on every step's time, and the rate search's probability >= 0.9 answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ridgeline.api import simulate_serving
from ridgeline.engine.intervals import fit_table
from ridgeline.io.resolve import resolve
from ridgeline.report import simulation_tables, simulation_text
from ridgeline.serving import simulator
from ridgeline.serving.arrivals import poisson
from ridgeline.serving.intervals import LATENCIES
from ridgeline.serving.scheduler import Scheduler

MODEL, DEVICE = "llama-3.2-1b", "a6000"
LOAD = {"rate": 40.0, "requests": 120, "prompt": 256, "output_tokens": 32}
SEARCH = {"search": True, "tpot_slo": 0.004, "ttft_slo": 0.05}


def table(log_ratios):
    """A hand-made residual table: every residual in the pool ('*'), one group for every op."""
    n = len(log_ratios)
    return fit_table(log_ratios, [[]] * n, ["small"] * n, "hand-made residuals")


def deployment(log_ratios):
    return resolve(MODEL, DEVICE, attention="flash", intervals=(table(log_ratios), ""))


def stats(run, key):
    summary = run["result"].summary
    return summary[key].items() if isinstance(summary[key], dict) else [(None, summary[key])]


def test_zero_spread_gives_the_point():
    """Residuals all 0: every factor is exactly 1, every interval is the point itself, and
    the search's P >= 0.9 rate is its point rate."""
    run = simulate_serving(deployment(np.zeros(40)), Scheduler(), **LOAD, **SEARCH)
    bands = run["intervals"]
    assert {f for q in bands["step_factors"].values() for f in q.values()} == {1.0}
    for key in LATENCIES:
        for stat, point in stats(run, key):
            assert bands[key][stat] == {"80": [point, point], "50": [point, point]}
    for key in ("requests_per_s", "output_tokens_per_s"):
        point = run["result"].summary[key]
        assert bands[key] == {"80": [point, point], "50": [point, point]}
    assert run["search"]["max_rate_prob90"] == run["search"]["max_rate"]


@pytest.mark.slow
def test_spread_brackets_the_point_and_lowers_the_sure_rate():
    """Residuals spread evenly around 0 (log ratios -0.3 .. 0.3): lo <= point <= hi for every
    percentile, the 50 % interval inside the 80 %, and the P >= 0.9 rate at most the point's."""
    run = simulate_serving(deployment(np.linspace(-0.3, 0.3, 61)), Scheduler(), **LOAD, **SEARCH)
    bands = run["intervals"]
    assert bands["step_factors"]["10"]["decode"] < 1 < bands["step_factors"]["90"]["decode"]
    assert bands["basis"].startswith("hand-made residuals; 4 more runs")
    for key in ("ttft_s", "tpot_s", "latency_s"):
        for stat, point in stats(run, key):
            (lo80, hi80), (lo50, hi50) = bands[key][stat]["80"], bands[key][stat]["50"]
            assert lo80 <= lo50 <= point <= hi50 <= hi80, (key, stat)
            assert lo80 < hi80
    assert run["search"]["max_rate_prob90"] < run["search"]["max_rate"]


def test_a_uniform_step_scale_scales_one_request_exactly():
    """One request alone: each step's forward times c, so its TTFT and latency times c."""
    d = resolve(MODEL, DEVICE, attention="flash")
    one = poisson(1.0, 1, 300, 20)
    base = simulator.simulate_deployment(d, one, Scheduler())
    slow = simulator.simulate_deployment(d, one, Scheduler(), step_scale=(1.25, 1.25))
    for key in ("ttft_s", "tpot_s", "latency_s"):
        assert slow.requests[key][0] == pytest.approx(1.25 * base.requests[key][0], rel=1e-12)


def test_prefill_and_decode_factors_apply_to_their_steps():
    """One request, prompt in one chunk: its first step is all prompt (prefill factor), the
    rest are decodes (decode factor)."""
    d = resolve(MODEL, DEVICE, attention="flash")
    one = poisson(1.0, 1, 300, 20)
    base = simulator.simulate_deployment(d, one, Scheduler())
    mixed = simulator.simulate_deployment(d, one, Scheduler(), step_scale=(2.0, 0.5))
    assert mixed.requests["ttft_s"][0] == pytest.approx(2.0 * base.requests["ttft_s"][0], rel=1e-12)
    assert mixed.requests["tpot_s"][0] == pytest.approx(0.5 * base.requests["tpot_s"][0], rel=1e-12)


def test_no_table_says_why():
    """Ceilings without residuals: no intervals, the reason instead, and no P >= 0.9 rate."""
    d = resolve(MODEL, DEVICE, attention="flash", intervals=(None, "no measured interval: none here"))
    run = simulate_serving(d, Scheduler(), **LOAD, **SEARCH)
    assert run["intervals"] == {"none": "no measured interval: none here"}
    assert run["search"]["max_rate_prob90"] is None
    assert "intervals: none (no measured interval: none here)" in simulation_tables(run, 99)


def test_json_and_table_carry_the_intervals():
    run = simulate_serving(deployment(np.linspace(-0.2, 0.2, 41)), Scheduler(), **LOAD, **SEARCH)
    data = json.loads(simulation_text(run, "json"))
    assert data["intervals"]["ttft_s"]["p99"]["80"] == run["intervals"]["ttft_s"]["p99"]["80"]
    assert data["search"]["max_rate_prob90"] == run["search"]["max_rate_prob90"]
    lines = [line for line in simulation_tables(run, 99) if isinstance(line, str)]
    assert any(line.startswith("80 % intervals: TTFT p50 ") for line in lines)
    assert any(line.startswith("intervals: hand-made residuals; 4 more runs") for line in lines)
    assert any("with probability >= 0.9" in line for line in lines)


def test_the_50_percent_band_lies_inside_the_80_percent_band_when_a_percentile_is_not_monotone():
    # the 1 rps CPU run under the gather price: its TTFT p90 at the 25 % factor quantile was
    # above the one at 90 %, so the (10, 90) pair alone left the 50 % band sticking out of it
    from types import SimpleNamespace

    from ridgeline.serving.intervals import RATES, summary_intervals

    ttft_p90 = {10: 0.70, 25: 0.75, 75: 0.66, 90: 0.72}

    def result(q):
        latencies = {k: {"p50": 1.0, "p90": ttft_p90[q] if k == "ttft_s" else 2.0} for k in LATENCIES}
        return SimpleNamespace(summary={**latencies, **{k: 10.0 - q / 100 for k in RATES}})

    bands = summary_intervals({q: result(q) for q in ttft_p90})
    assert bands["ttft_s"]["p90"] == {"80": [0.66, 0.75], "50": [0.66, 0.75]}
    assert bands["ttft_s"]["p50"] == {"80": [1.0, 1.0], "50": [1.0, 1.0]}
    assert bands["requests_per_s"] == {"80": [9.1, 9.9], "50": [9.25, 9.75]}
