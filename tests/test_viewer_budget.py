"""Bounded work per URL (issue 30 item 1): every URL key has a range, every page a work
budget, and the worst URL of each page stays under it.

The work is counted, not timed: the engine and simulator calls are wrapped and their points,
analyses and request-steps added up. A 30 s alarm is a backstop only, so a hang fails
instead of holding the suite.
"""

from __future__ import annotations

import contextlib
import signal

import pytest

pytest.importorskip("dash")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:dash", "ignore::RuntimeWarning")

from dash.exceptions import PreventUpdate

from ridgeline.serving import simulator
from ridgeline.serving.intervals import LEVELS
from viewer import callbacks, data, plan, serving, state


@contextlib.contextmanager
def backstop(seconds: int = 30):
    """Fail (not hang) a call that runs past ``seconds``."""

    def fail(*_):
        raise TimeoutError(f"a page view ran past the {seconds} s backstop")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def worst_query(**extra: str) -> str:
    """Every number at the top of its range, every list at its most items (and more), the
    rates at their most: what a hostile link can ask within the ranges, and past them."""
    raw = {}
    for c in state.controls():
        if c.kind in ("int", "float"):
            raw[c.key] = str(c.maximum)
        elif c.kind == "multi":
            names = c.options or state._catalog()[c.key]
            raw[c.key] = ",".join([*names, *names])
    raw["serving_rates"] = ",".join(str(r) for r in range(1, serving.MOST_RATES + 1))
    raw.update(extra)
    return "?" + "&".join(f"{k}={v}" for k, v in raw.items())


def test_every_number_and_list_has_a_range():
    for c in state.controls():
        if c.kind in ("int", "float"):
            assert c.minimum is not None and c.maximum is not None and c.minimum <= c.default <= c.maximum, c.key
        if c.kind == "multi" and c.key not in ("sweep_dtypes", "plan_w_dtypes", "plan_kv_dtypes"):
            assert c.maximum, c.key


@pytest.mark.parametrize(
    ("raw", "key", "message"),
    [
        (
            "?batch=100000",
            "batch",
            "batch='100000' (expected a whole number from 1 to 65,536; the CLI takes more; shown: the default, 1)",
        ),
        (
            "?seq_len=nan",
            "seq_len",
            "seq_len='nan' (expected a whole number from 1 to 4,194,304; the CLI takes more; shown: the default, 512)",
        ),
        (
            "?link_bw_gb_s=inf",
            "link_bw_gb_s",
            "(expected a number from 0 to 100,000; the CLI takes more; shown: the default, 0)",
        ),
        (
            "?memory_utilization=2",
            "memory_utilization",
            "(expected a number from 0.01 to 1; the CLI takes more; shown: the default, 0.9)",
        ),
        (
            "?serving_rates=" + "1," * 150,
            "serving_rates",
            "(expected at most 200 characters; shown: the default, 1,2,4,8,16)",
        ),
        (
            "?plan_rate=1e9",
            "plan_rate",
            "(expected a number from 0.01 to 1,000; the CLI takes more; shown: the default, 4)",
        ),
        (  # the one-request denial of service
            "?serving_requests=100000000",
            "serving_requests",
            "serving_requests='100000000' (expected a whole number from 1 to 100,000; the CLI takes more; shown: the default, 300)",
        ),
    ],
)
def test_out_of_range_values_are_named_and_the_default_shown(raw, key, message):
    assert state.parse_query(raw)[key] == state.control(key).default
    assert message in callbacks.url_message(raw, None)


def test_lists_are_cut_to_their_most_items_once_each():
    names = "a6000,a6000,h100-sxm,l40s,a10,t4,v100,l4,b200,h200"
    assert state.parse_query(f"?devices={names}")["devices"] == (
        "a6000",
        "h100-sxm",
        "l40s",
        "a10",
        "t4",
        "v100",
        "l4",
        "b200",
    )
    message = callbacks.url_message(f"?devices={names}", None)
    assert "expected at most 8 catalog devices" in message
    # the message says what the page shows: the first 8, not the defaults
    assert message.endswith("; shown: the first 8, a6000, h100-sxm, l40s, a10, t4, v100, l4, b200)")
    seven = ",".join(state.DTYPES[:7])
    assert len(state.DTYPES) >= 7 and state.parse_query(f"?sweep_dtypes={seven}")["sweep_dtypes"] == state.DTYPES[:6]
    assert callbacks.url_message(f"?sweep_dtypes={seven}", None).endswith(
        f"; shown: the first 6, {', '.join(state.DTYPES[:6])})"
    )
    assert callbacks.url_message("?devices=a6000,a6000", None) == ""  # repeats are merely merged


@pytest.fixture
def counted(monkeypatch):
    """Wrap the engine's and the simulator's entry points; returns the running counts."""
    work = {"analyses": 0, "sweep_points": 0, "request_steps": 0}
    analyze, sweep, run = data.rl.analyze, data.rl.sweep, simulator._run

    def count_analyze(*a, **k):
        work["analyses"] += 1
        return analyze(*a, **k)

    def count_sweep(d, batch, seq_len, **k):
        work["sweep_points"] += len(batch) * len(seq_len)
        return sweep(d, batch=batch, seq_len=seq_len, **k)

    def count_run(server, arrivals, progress):
        chunks = -(-arrivals.prompt // server.s.token_budget)
        work["request_steps"] += int((chunks + arrivals.output).sum())
        return run(server, arrivals, progress)

    monkeypatch.setattr(data.rl, "analyze", count_analyze)
    monkeypatch.setattr(data.rl, "sweep", count_sweep)
    monkeypatch.setattr(simulator, "_run", count_run)
    return work


def call(update, page: str, query: str):
    with backstop():
        try:
            return update(f"/{page}", query, None)
        except PreventUpdate:
            return None


@pytest.mark.parametrize("sweep_x", ["batch", "seq_len"])
@pytest.mark.parametrize(
    "extra", [{}, {"tp": "1", "pp": "1", "ep": "1", "micro_batches": "1", "memory_utilization": "0.9"}]
)
def test_the_worst_urls_of_the_engine_pages(counted, sweep_x, extra):
    """Analyze and Layer: one analysis; Sweep: at most MOST_SWEEP_POINTS points; Compare: at
    most MOST_COMPARE_DEVICES analyses. ``extra`` makes the worst URL one that can run."""
    query = worst_query(sweep_x=sweep_x, **extra)
    call(callbacks.update_analyze, "analyze", query)
    assert counted["analyses"] <= 1
    call(lambda p, q, u: callbacks.update_layer(p, q, None, u), "layer", query)
    assert counted["analyses"] <= 2
    counted["analyses"] = 0
    call(callbacks.update_sweep, "sweep", query)
    assert counted["sweep_points"] <= data.MOST_SWEEP_POINTS
    call(callbacks.update_compare, "compare", query)
    assert counted["analyses"] <= data.MOST_COMPARE_DEVICES


def test_a_runnable_sweep_of_every_line_stays_in_budget(counted):
    """Six weight types over prompt length with a bisection each: the most the page draws."""
    query = "?sweep_x=seq_len&batch=64&sweep_dtypes=fp32,bf16,fp16,int8,int4,fp8"
    error, figure = call(callbacks.update_sweep, "sweep", query)
    assert error == "" and figure is not None
    assert 6 * len(data.SWEEP_SEQ_LENS) < counted["sweep_points"] <= data.MOST_SWEEP_POINTS


def test_lists_passed_directly_are_refused_past_the_budget():
    s = state.defaults()
    with pytest.raises(data.RidgelineError, match="the dashboard draws at most 8: choose fewer, or run 'ridgeline"):
        data.compare_frame(s, devices=["a6000"] * 9)
    with pytest.raises(data.RidgelineError, match="at most 6"):
        data.sweep_frame(s, w_dtypes=["fp16"] * 7)


@pytest.mark.parametrize("extra", [{}, {"serving_rates": "1", "seq_len": "512", "generate": "128"}])
@pytest.mark.slow
def test_the_worst_serving_and_plan_urls_stay_in_budget(counted, extra):
    """The Serving page and its Plan: request-steps (requests x (prompt chunks + outputs),
    every simulation run) at most MOST_REQUEST_STEPS each, whatever the URL asks."""
    query = worst_query(**extra)
    error, *_ = call(serving.update_serving, "serving", query)
    assert error.startswith("error: ") and "drawn" in error
    assert counted["request_steps"] <= serving.MOST_REQUEST_STEPS
    counted["request_steps"] = 0
    error, *_ = call(plan.update_plan, "serving", query)
    assert "the dashboard serves at most 2,000,000" in error or error.startswith("error: ")
    assert counted["request_steps"] <= serving.MOST_REQUEST_STEPS


def test_the_budget_bounds_the_simulated_work(counted):
    """The count the page checks is what the simulator does: 2 rates x 60 requests x (one
    256-token chunk + 32 outputs), each rate run once and once more per interval level."""
    query = "?model=llama-3.2-1b&seq_len=256&generate=32&serving_rates=2,8&serving_requests=60"
    error, *_ = call(serving.update_serving, "serving", query)
    assert error == ""
    assert counted["request_steps"] == serving.request_steps(state.parse_query(query), 2) == 2 * 60 * 33
    # then the bands: the spec roofline has pooled residuals, so intervals: each rate once
    # more per interval level (its first run comes back kept); the view's whole work, both
    # callbacks', is what the budget counts
    with backstop():
        serving.update_serving_bands(None, "/serving", query, None)
    runs = 2 * (1 + len(LEVELS))
    assert counted["request_steps"] == serving.request_steps(state.parse_query(query), runs) == runs * 60 * 33
