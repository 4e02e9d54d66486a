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


# --- issue 58: the form offers the CLI's types, fp8 and fp4 where a device has the rate -------


def test_the_form_offers_fp8_and_fp4_only_with_a_device_that_has_the_rate():
    from ridgeline.io.resolve import catalog_device
    from ridgeline.serving.bounds import KV_DTYPES, W_DTYPES

    assert plan.plan_types(["a100-80gb"]) == (["fp16", "int8", "int4"], ["fp16", "int8"])  # no fp8 rate
    assert plan.plan_types(["a100-80gb", "h100-sxm"]) == (["fp16", "int8", "int4", "fp8"], ["fp16", "int8", "fp8"])
    assert plan.plan_types(["b200"]) == (list(W_DTYPES), list(KV_DTYPES))  # fp8 and fp4 rates: all the CLI's
    for name in ("a100-80gb", "h100-sxm", "h200", "b200"):  # as each datasheet states its rates
        rates = catalog_device(name).matrix_peak
        w_dtypes, kv_dtypes = plan.plan_types([name])
        assert ("fp8" in w_dtypes) == ("fp8" in kv_dtypes) == ("fp8" in rates)
        assert ("fp4" in w_dtypes) == ("fp4" in rates) and "fp4" not in kv_dtypes
    # the menus follow the devices menu; an emptied one offers the default devices' types
    assert plan.plan_type_options(["h200"]) == plan.plan_types(["h200"])
    assert plan.plan_type_options([]) == plan.plan_types(["a100-80gb", "h100-sxm"])


def test_the_serving_page_is_built_with_its_devices_types():
    from viewer.callbacks import show_page
    from viewer.layout import plan_options

    view = parse_query("?plan_devices=a100-80gb&plan_w_dtypes=fp16,int4")
    assert plan_options(view)["plan_w_dtypes"] == ["fp16", "int8", "int4"]
    text = str(show_page("/serving", "?plan_devices=h100-sxm&plan_kv_dtypes=fp16,fp8"))
    assert "'fp8'" in text and "plan_kv_dtypes" in text


def test_fp8_is_searched_as_the_cli_searches_it():
    """fp8 weights and KV chosen with an A100 and an H100: the H100's fp8 deployments are
    searched, none on the A100 (no fp8 rate), the same frame as ``ridgeline.api.plan``'s."""
    from ridgeline.api import plan as api_plan
    from ridgeline.serving.bounds import Load, Slo

    query = QUERY + "&plan_counts=1&plan_w_dtypes=fp16,fp8&plan_kv_dtypes=fp16,fp8"
    view = parse_query(query)
    assert view["plan_w_dtypes"] == ("fp16", "fp8") and view["plan_kv_dtypes"] == ("fp16", "fp8")
    result = plan.run_plan(view)
    frame = result.frame
    assert set(frame.loc[frame["device"] == "a100-80gb", "w_dtype"]) == {"fp16"}
    assert set(frame.loc[frame["device"] == "a100-80gb", "kv_dtype"]) == {"fp16"}
    h100 = frame[frame["device"] == "h100-sxm"]
    assert set(zip(h100["w_dtype"], h100["kv_dtype"])) == {(w, kv) for w in ("fp16", "fp8") for kv in ("fp16", "fp8")}
    cli = api_plan(
        "llama-3.2-1b",
        ["a100-80gb", "h100-sxm"],
        Load(rate=4.0, prompt=256, output=32, requests=60),
        Slo(ttft_s=0.5, tpot_s=0.05),
        executor="local",
        workers=1,
        **plan.plan_space(view),
    )
    assert cli.frame.equals(frame) and cli.chosen == result.chosen
    assert plan.update_plan("/serving", query, None)[0] == ""
