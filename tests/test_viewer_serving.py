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
@pytest.mark.slow
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
    ("search", "why"),
    [
        ("?serving_requests=20000&generate=1000", "this view asks "),
        ("?seq_len=2048&serving_budget=1&serving_requests=2000", "this view asks "),
        ("?serving_rates=1,2,3,4,5,6,7,8,9,10,11,12&serving_requests=2000", "this view asks "),
        ("?serving_rates=a,b", "request rates must be numbers"),
    ],
)
@pytest.mark.slow
def test_bad_input_draws_the_defaults_under_its_error(search, why, monkeypatch):
    """Issue 30 items 1 and 12: past the work budget, or with rates that are not numbers, the
    page says why and draws what the docs promise (the form's defaults on the sidebar's
    deployment), never empty axes; the refused view simulates nothing."""
    asked = []
    real = serving.simulate_serving

    def counted(d, sched, **load):
        asked.append(load["requests"])
        return real(d, sched, **load)

    monkeypatch.setattr(serving, "simulate_serving", counted)
    serving.serving_runs.cache_clear()  # views simulated before (the defaults) would not count
    serving.runs_alone.cache_clear()
    error, line, latency, kv = serving.update_serving("/serving", search + "&model=llama-3.2-1b&generate=16", None)
    assert error.startswith("error: " + why) and error.endswith("; the form's defaults are drawn")
    if why.startswith("this view"):
        assert "the dashboard serves at most 2,000,000" in error
    assert asked == [300] * 5  # the defaults: 5 rates of 300 requests, nothing of the refused view
    assert [t.name for t in kv.data] == ["1/s", "2/s", "4/s", "8/s", "16/s"]
    assert "llama-3.2-1b on a6000" in line and "at 16 requests/s" in line


def test_a_sidebar_that_cannot_run_draws_the_default_view():
    error, line, _, kv = serving.update_serving("/serving", "?model=llama-2-7b&tp=3", None)
    assert error.startswith("error: tp=3") and error.endswith("; the default view is drawn")
    assert "llama-2-7b on a6000" in line and len(kv.data) == 5


def test_the_default_view_is_within_the_budget():
    """5 rates x 300 requests x (1 prompt chunk of 512 tokens in a 2048 budget + 128 outputs)."""
    from viewer.state import defaults

    assert serving.request_steps(defaults(), 5) == 5 * 300 * (1 + 128) == 193_500


def test_the_numbers_show_before_the_bands_runs_and_are_the_same():
    """A view not simulated before: the page draws its runs first (the bands' caption says
    they are being computed), then the bands callback draws the latency figure with them;
    revisited, the page draws the bands at once and the bands callback has nothing to do."""
    query = QUERY.replace("serving_requests=60", "serving_requests=61")
    view = parse_query(query)
    assert serving.serving_runs.peek(view) is None and serving.runs_alone.peek(view) is None
    error, line, latency, kv = serving.update_serving("/serving", query, None)
    assert error == "" and not [t for t in latency.data if str(t.meta).startswith("band:")]
    (caption,) = [a.text for a in latency.layout.annotations if a.name == "interval-caption"]
    assert caption == "bands: being computed (four more runs per rate)"
    assert serving.serving_runs.peek(view) is None  # no band run yet
    banded = serving.update_serving_bands(line, "/serving", query, None)
    full = serving.serving_runs.peek(view)
    assert banded.to_dict() == serving.latency_figure(full).to_dict()
    assert [t for t in banded.data if str(t.meta).startswith("band:")]
    assert serving.summary_line(full) == line  # the same runs: seeded
    revisit = serving.update_serving("/serving", query, None)
    assert revisit[2].to_dict() == banded.to_dict() and revisit[1] == line
    with pytest.raises(PreventUpdate):
        serving.update_serving_bands(line, "/serving", query, None)
