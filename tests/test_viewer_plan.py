"""The Serving page's Plan section (issue 29): ridgeline.api.plan over a small space, its
Pareto set and the chosen deployment, within the page's work budget."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dash")

from dash.exceptions import PreventUpdate

from ridgeline.serving.plan import pareto_set
from viewer import plan
from viewer.state import parse_query

QUERY = "?model=llama-3.2-1b&seq_len=256&generate=32&plan_devices=a100-80gb,h100-sxm&plan_requests=60&plan_rate=4"


@pytest.fixture(scope="module")
def result():
    return plan.run_plan(parse_query(QUERY))


def test_the_search_is_the_apis_over_the_chosen_space(result):
    counts = result.counts
    # 2 devices x (1 split of 1 + 2 splits of 2: tp 2 or pp 2) x 3 weight types
    assert counts["enumerated"] == 2 * 3 * 3 == 18
    assert counts["simulated"] + sum(counts["pruned"].values()) == 18
    assert set(result.frame["max_batch"]) == {256} and set(result.frame["token_budget"]) == {2048}


def test_the_figure_draws_the_pareto_set_and_the_chosen_deployment(result):
    fig = plan.plan_figure(result)
    front = next(t for t in fig.data if t.meta == "pareto")
    done = result.frame[result.frame["reason"] == ""]
    cost, good = done["usd_per_million_tokens"].to_numpy(), done["goodput_rps"].to_numpy()
    expected = done.iloc[pareto_set(cost, good)]
    assert np.allclose(front.x, expected["usd_per_million_tokens"]) and np.allclose(front.y, expected["goodput_rps"])
    assert list(front.x) == sorted(front.x)  # cheapest first, goodput rising along the front
    star = next(t for t in fig.data if t.meta == "chosen")
    chosen = result.frame.loc[result.chosen]
    assert (star.x[0], star.y[0]) == (chosen["usd_per_million_tokens"], chosen["goodput_rps"])
    assert chosen["goodput_rps"] == max(front.y)  # the front's last point: most goodput, cheapest of those
    simulated = sum(len(t.x) for t in fig.data if str(t.meta).startswith("simulated:"))
    assert simulated == result.counts["simulated"]


def test_the_callback_says_what_was_enumerated_and_chosen(result):
    error, line, fig = plan.update_plan("/serving", QUERY, None)
    assert error == ""
    assert line.startswith(f"llama-3.2-1b: 18 deployments enumerated, {18 - result.counts['simulated']} pruned")
    row = result.frame.loc[result.chosen]
    assert f"Chosen: {row['gpus']} x {row['device']} (tp {row['tp']}, pp {row['pp']})" in line
    assert any(t.meta == "chosen" for t in fig.data)


def test_past_the_budget_nothing_is_simulated(monkeypatch):
    asked = []
    real = plan.plan
    monkeypatch.setattr(
        plan, "plan", lambda m, devices, load, *a, **k: asked.append(load) or real(m, devices, load, *a, **k)
    )
    error, line, fig = plan.update_plan("/serving", QUERY + "&plan_counts=1,2,4,8&plan_requests=10000", None)
    # 2 devices x (1 + 2 + 3 + 4 splits) x 3 weight types x 10,000 requests x (1 chunk + 32 outputs)
    assert error == (
        "error: this plan could simulate 60 deployments x 10,000 requests = 19,800,000 request-steps; the "
        "dashboard serves at most 2,000,000: choose fewer devices, counts, weight types or requests, or run "
        "'ridgeline plan'; the section's defaults are drawn"
    )
    assert [load.requests for load in asked] == [200]  # only the defaults' search ran
    assert "deployments enumerated" in line and any(t.meta == "pareto" for t in fig.data)


def test_other_pages_do_not_plan():
    with pytest.raises(PreventUpdate):
        plan.update_plan("/analyze", QUERY, None)
