"""The dashboard's Serving page: computation, figures and the thin callback."""

from __future__ import annotations

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
    names = {t.name for t in latency.data}
    assert names == {"p50", "p90", "p99"} and len(latency.data) == 9  # 3 metrics x 3 percentiles
    assert [t.name for t in kv.data] == ["2/s", "8/s"]
    assert max(max(t.y) for t in kv.data) <= 100


def test_percentiles_rise_with_the_rate():
    runs = serving.serving_runs(parse_query(QUERY))
    (_, slow), (_, fast) = runs
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
