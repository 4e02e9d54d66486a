"""The dashboard's Serving page: computation, figures and the thin callback."""

from __future__ import annotations

import dash
import pytest
from dash.exceptions import PreventUpdate

from ridgeline.errors import RidgelineError
from viewer import serving
from viewer.state import parse_query, to_query

QUERY = to_query(
    {
        **parse_query(""),
        "model": "llama-3.2-1b",
        "device": "a6000",
        "seq_len": 256,
        "generate": 32,
        "serving_rates": "2,8",
        "serving_requests": 60,
    }
)


def test_update_serving_draws_both_figures():
    error, line, latency, kv = serving.update_serving("/serving", QUERY, None)
    assert error == "" and "llama-3.2-1b on a6000" in line
    lines = [t for t in latency.data if not str(t.meta).startswith("band:")]
    assert {t.name for t in lines} == {"p50", "p90", "p99"} and len(lines) == 9  # 3 metrics x 3 percentiles
    assert [t.name for t in kv.data] == ["2/s", "8/s"]
    assert max(max(t.y) for t in kv.data) <= 100


def test_percentiles_rise_with_the_rate():
    runs = serving.serving_runs(parse_query(QUERY))
    (_, slow, _), (_, fast, _) = runs
    assert fast.summary["latency_s"]["p90"] >= slow.summary["latency_s"]["p90"]
    assert fast.summary["mean_running"] > slow.summary["mean_running"]


@pytest.mark.parametrize("rates", ["", "a,b", "-1", ",".join(["1"] * 1) + ",0"])
def test_bad_rates_are_one_line_errors(rates):
    query = to_query({**parse_query(QUERY), "serving_rates": rates})
    if rates == "":  # empty falls back to the default rates
        assert serving.update_serving("/serving", query, None)[0] == ""
        return
    assert serving.update_serving("/serving", query, None)[0].startswith("error: ")
    with pytest.raises(RidgelineError):
        serving.rates_of(rates)


def test_other_pages_do_not_simulate():
    with pytest.raises(PreventUpdate):
        serving.update_serving("/analyze", QUERY, None)


@pytest.mark.parametrize(
    "search",
    [
        "?serving_requests=100000000",
        "?seq_len=1000000000&serving_budget=1",
        "?generate=100000000&serving_requests=1000",
        "?serving_rates=1,2,3,4,5,6,7,8,9,10,11,12&serving_requests=2000",
    ],
)
def test_the_worst_urls_are_refused_before_any_work(search, monkeypatch):
    """One URL must not hold the server (issue 30): past the work budget the page says what
    the limit is, and nothing is simulated."""
    calls = []
    monkeypatch.setattr(serving, "simulate_serving", lambda *a, **k: calls.append(a))
    error, *rest = serving.update_serving("/serving", search, None)
    assert error.startswith("error: this view asks ") and "the dashboard serves at most 2,000,000" in error
    assert calls == [] and all(r is dash.no_update for r in rest)


def test_the_default_view_is_within_the_budget():
    """5 rates x 300 requests x (1 prompt chunk of 512 tokens in a 2048 budget + 128 outputs)."""
    from viewer.state import defaults

    assert serving.request_steps(defaults(), 5) == 5 * 300 * (1 + 128) == 193_500
