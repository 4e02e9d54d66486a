"""A misspelt keyword in the Python API (issue 30 item 7) is one RidgelineError line naming
the keyword, the closest valid name (difflib, as the CLI's 'Did you mean') and all of them;
never Python's bare TypeError, and never quietly ignored."""

from __future__ import annotations

import dataclasses

import pytest

import ridgeline as rl
from ridgeline import api
from ridgeline.errors import RidgelineError, UnknownKeywordError
from ridgeline.serving.arrivals import poisson
from ridgeline.serving.bounds import Load, Slo
from ridgeline.serving.simulator import Scheduler

SETTINGS = (
    "w_dtype, a_dtype, kv_dtype, group_size, attention, kv_block, tp, pp, ep, micro_batches, "
    "link_bw_gb_s, link_latency_us, zero_points, memory_utilization, execution, engine, fusion"
)
RESOLVE = f"dtype, settings, profile, transfer, ceilings, intervals, {SETTINGS}"


def test_a_misspelt_settings_field_names_the_closest_and_all():
    with pytest.raises(UnknownKeywordError) as err:
        rl.Settings(w_dtpye="int4")
    assert str(err.value) == f"unknown keyword 'w_dtpye' for Settings: did you mean 'w_dtype'? Valid names: {SETTINGS}"
    assert isinstance(err.value, rl.RidgelineError)


def test_replace_with_a_misspelt_field_is_refused_the_same_way():
    with pytest.raises(UnknownKeywordError, match=r"^unknown keyword 'tpp' for Settings: did you mean 'tp'\? "):
        dataclasses.replace(rl.Settings(), tpp=2)


def test_no_close_name_lists_the_valid_ones_only():
    with pytest.raises(UnknownKeywordError) as err:
        rl.analyze("llama-2-7b", "a6000", zzz=1)
    assert (
        str(err.value)
        == f"unknown keyword 'zzz' for analyze. Valid names: model, hardware, batch, seq_len, generate, {RESOLVE}"
    )


def test_the_closest_name_is_found_whatever_the_case():
    with pytest.raises(UnknownKeywordError, match=r"^unknown keyword 'W_DTYPE' for resolve: did you mean 'w_dtype'\?"):
        rl.resolve("llama-2-7b", "a6000", W_DTYPE="int4")


@pytest.fixture(scope="module")
def small():
    return rl.resolve("llama-3.2-1b", "a6000")


# every public entry point that takes settings keywords: (call, the whole message)
ENTRY_POINTS = {
    "analyze": (
        lambda d: rl.analyze("llama-2-7b", "a6000", w_dtpye="int4"),
        "unknown keyword 'w_dtpye' for analyze: did you mean 'w_dtype'? "
        f"Valid names: model, hardware, batch, seq_len, generate, {RESOLVE}",
    ),
    "analyze a deployment": (
        lambda d: rl.analyze(d, w_dtpye="int4"),
        "unknown keyword 'w_dtpye' for analyze: did you mean 'w_dtype'? "
        f"Valid names: model, hardware, batch, seq_len, generate, {RESOLVE}",
    ),
    "sweep": (
        lambda d: rl.sweep("llama-2-7b", "a6000", batch=[1, 2], kv_dtpye="int8"),
        "unknown keyword 'kv_dtpye' for sweep: did you mean 'kv_dtype'? "
        f"Valid names: model, hardware, batch, seq_len, generate, bands, {RESOLVE}",
    ),
    "compare": (
        lambda d: rl.compare("llama-2-7b", ["a6000"], profle="x.yaml"),
        "unknown keyword 'profle' for compare: did you mean 'profile'? "
        "Valid names: model, devices, variants, batch, seq_len, generate, profile, transfer",
    ),
    "compare's variants": (
        lambda d: rl.compare("llama-2-7b", ["a6000"], [{"atention": "flash"}]),
        f"unknown keyword 'atention' for resolve: did you mean 'attention'? Valid names: model, hardware, {RESOLVE}",
    ),
    "frontier": (
        lambda d: rl.frontier("llama-2-7b", "a6000", tpot_sol=0.05),
        "unknown keyword 'tpot_sol' for frontier: did you mean 'tpot_slo'? "
        f"Valid names: model, hardware, seq_len, generate, batches, tpot_slo, ttft_slo, {RESOLVE}",
    ),
    "max_batch": (
        lambda d: rl.max_batch("llama-2-7b", "a6000", memory_utilisation=0.8),
        "unknown keyword 'memory_utilisation' for max_batch: did you mean 'memory_utilization'? "
        f"Valid names: model, hardware, seq_len, generate, {RESOLVE}",
    ),
    "simulate": (
        lambda d: api.simulate("llama-3.2-1b", "a6000", poisson(1.0, 2, 16, 2), w_dtpye="int4"),
        "unknown keyword 'w_dtpye' for simulate: did you mean 'w_dtype'? "
        f"Valid names: model, hardware, arrivals, scheduler, progress, {RESOLVE}",
    ),
    "simulate_serving": (
        lambda d: api.simulate_serving(d, Scheduler(), trace_windw="0,10"),
        "unknown keyword 'trace_windw' for simulate_serving: did you mean 'trace_window'? Valid names: d, "
        "scheduler, trace, trace_window, trace_log_type, prefix, time_scale, rate, requests, prompt, "
        "output_tokens, seed, search, ttft_slo, tpot_slo, percentile, progress, fleet, intervals, runs",
    ),
    "plan": (
        lambda d: api.plan("llama-3-8b", ["h100-sxm"], Load(20, 512, 256, 100), Slo(0.5, 0.05), max_batch=(64,)),
        "unknown keyword 'max_batch' for plan: did you mean 'max_batches'? Valid names: model, devices, load, "
        "slo, prices, executor, workers, address, progress, profile, transfer, rate_search, counts, w_dtypes, "
        "kv_dtypes, max_batches, token_budgets, attention, replicas, pools, drafts",
    ),
    "resolve": (
        lambda d: rl.resolve("llama-2-7b", "a6000", tp_=2),
        f"unknown keyword 'tp_' for resolve: did you mean 'tp'? Valid names: model, hardware, {RESOLVE}",
    ),
    "speculative": (
        lambda d: rl.speculative("llama-2-7b", "a6000", "llama-3.2-1b", acceptence=0.8),
        "unknown keyword 'acceptence' for speculative: did you mean 'acceptance'? Valid names: model, hardware, "
        f"draft, batch, seq_len, generate, draft_tokens, acceptance, max_k, {RESOLVE}",
    ),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_refuses_a_misspelt_keyword_in_one_line(entry, small):
    call, message = ENTRY_POINTS[entry]
    with pytest.raises(UnknownKeywordError) as err:
        call(small)
    assert str(err.value) == message
    assert "\n" not in message


def test_compare_of_deployments_refuses_keywords_it_would_ignore(small):
    with pytest.raises(rl.RidgelineError) as err:
        rl.compare([small], profile="x.yaml")
    assert str(err.value) == ("Deployments already hold their devices, settings and ceilings; pass only the workload")


def test_valid_keywords_still_work(small):
    """The check passes what each entry point takes: its own parameters and what its
    ``**how`` hands to resolve (Settings fields included)."""
    a = rl.analyze("llama-2-7b", "a6000", seq_len=128, w_dtype="int4", dtype="fp16", intervals=(None, ""))
    assert a.plan.wb == 0.5
    assert rl.max_batch(small, seq_len=128) == rl.max_batch("llama-3.2-1b", hardware="a6000", seq_len=128)
    assert rl.Settings(tp=2) == dataclasses.replace(rl.Settings(), tp=2)


# a yes/no keyword given something else (issue 59: 'bands="x"' counted as true): one line naming it
YES_OR_NO = {
    "sweep bands": lambda: rl.sweep("llama-2-7b", "a6000", bands="x"),
    "analyze transfer": lambda: rl.analyze("llama-2-7b", "a6000", transfer="x"),
    "frontier transfer": lambda: rl.frontier("llama-2-7b", "a6000", transfer=1),
    "compare transfer": lambda: rl.compare("llama-2-7b", ["a6000"], transfer="no"),
    "plan transfer": lambda: api.plan(
        "llama-3.2-1b", ["a6000"], Load(1.0, 128, 16, 8), Slo(ttft_s=1.0, tpot_s=0.1), transfer="yes"
    ),
}


@pytest.mark.parametrize("name", YES_OR_NO)
def test_a_yes_or_no_keyword_takes_only_true_or_false(name):
    keyword = name.split()[1]
    with pytest.raises(rl.RidgelineError, match=rf"^{keyword} must be True or False, got '?(x|1|no|yes)'?$"):
        YES_OR_NO[name]()


def test_numpy_booleans_count_as_yes_or_no():
    import numpy as np

    frame = rl.sweep("llama-2-7b", "a6000", bands=np.bool_(False))
    assert not any(c.endswith("_lo80") for c in frame.columns)


@pytest.mark.parametrize("given", ["x", ("only one",), 3])
def test_intervals_must_be_a_table_and_its_reason(given):
    with pytest.raises(rl.RidgelineError, match=r"^intervals must be a pair \(table or None, why\), got "):
        rl.analyze("llama-2-7b", "a6000", intervals=given)


@pytest.mark.parametrize("given", ["99", True, float("nan"), 0])
def test_the_rate_search_percentile_is_a_number_in_0_to_100(given):
    with pytest.raises(rl.RidgelineError, match=r"^the rate search's percentile must be in \(0, 100\], got "):
        api.plan("llama-3.2-1b", ["a6000"], Load(1.0, 128, 16, 8), Slo(ttft_s=1.0, tpot_s=0.1), rate_search=given)


def test_simulate_serving_refuses_a_runner_of_another_deployment():
    """``runs=`` shares one deployment's table of step costs; another's would price the wrong
    steps, so it is refused in one line."""
    d = rl.resolve("llama-3.2-1b", "h100-sxm")
    other = rl.resolve("llama-3-8b", "h100-sxm")
    sched = api.serving_scheduler(d)
    with pytest.raises(RidgelineError, match=r"^runs must be deployment_runs\(d, scheduler\) of this call's own"):
        api.simulate_serving(d, sched, rate=2, requests=4, runs=api.deployment_runs(other, sched))
    shared = api.deployment_runs(d, sched)
    first = api.simulate_serving(d, sched, rate=2, requests=4, prompt=64, output_tokens=4, runs=shared, intervals=False)
    alone = api.simulate_serving(d, sched, rate=2, requests=4, prompt=64, output_tokens=4, intervals=False)
    assert first["result"].summary == alone["result"].summary
