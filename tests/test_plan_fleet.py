"""ridgeline plan's fleet dimensions (replicas, prefill/decode pools, drafts), --profile and
--rate-search: the enumeration, the bounds' soundness against the simulator, the exact
Pareto set by brute force, the executors agreeing, and bad input as one line with exit 2."""

from __future__ import annotations

import numpy as np
import pytest

import ridgeline as rl
from ridgeline import api
from ridgeline.io.catalog import PROFILES_DIR
from ridgeline.serving.bounds import FLEET, Draft, Load, Slo, Space, analytic_pass
from ridgeline.serving.fanout import local
from ridgeline.serving.plan import KEY, Server, make_task, pareto_set, portable, run_task, search
from ridgeline.serving.scheduler import Scheduler

FLEET_KEY = [*KEY, *FLEET]
PROFILE = str(PROFILES_DIR / "cuda-nvidia-h100-80gb-hbm3.yaml")


def devices(*names):
    return tuple(rl.load_device(n) for n in names)


def test_the_count_is_split_over_replicas_and_pools_where_they_divide_it():
    """4 devices as 1 server (3 splits), 2 replicas of 2 (2 splits), 1 + 1 pooled servers of
    2 (2 splits); 2 devices likewise: 2 + 1 + 1 shapes. Pools pair every prefill device
    with every decode device."""
    space = Space(devices("h100-sxm", "a100-80gb"), counts=(2, 4), replicas=(1, 2), pools=((1, 1),))
    assert [s for s in space.shapes if s[0] == 4] == [
        (4, 1, 0, 0, 1, 4),
        (4, 1, 0, 0, 2, 2),
        (4, 1, 0, 0, 4, 1),
        (4, 2, 0, 0, 1, 2),
        (4, 2, 0, 0, 2, 1),
        (4, 1, 1, 1, 1, 2),
        (4, 1, 1, 1, 2, 1),
    ]
    # 8 unpooled shapes (count 2: tp 1, 2, 2 replicas; 4: three splits, 2 replicas of two splits) on
    # each device, 3 pooled ones on each pair; types: 8 on the H100 (it computes fp8), 6 on the A100,
    # a pool those both compute; x 3 max batches x 2 chunks
    assert space.size == (8 * (8 + 6) + 3 * (8 + 6 + 6 + 6)) * 6
    frame = analytic_pass(rl.load_model("llama-3-8b"), space, Load(20, 512, 256, 100), Slo(0.5, 0.05))
    assert len(frame) == space.size and not frame.duplicated(FLEET_KEY).any()
    assert not Space(devices("h100-sxm")).fleet and "replicas" not in analytic_pass(
        rl.load_model("llama-3-8b"), Space(devices("h100-sxm"), counts=(1,)), Load(20, 512, 256, 100), Slo(0.5)
    )


def test_a_replica_is_bounded_as_one_server_at_the_rate_over_r():
    """R replicas at rate λ: the reasons and TTFT of one server at λ / R, R times its tokens/s."""
    model, device = rl.load_model("llama-3-8b"), devices("a100-80gb")
    load, slo = Load(40, 512, 128, 300), Slo(0.2, 0.012)
    fleet = analytic_pass(model, Space(device, counts=(2,), replicas=(2,)), load, slo)
    alone = analytic_pass(model, Space(device, counts=(1,)), Load(20, 512, 128, 300), slo)
    assert list(fleet.reason) == list(alone.reason) and list(fleet.ttft_bound_s) == list(alone.ttft_bound_s)
    assert np.allclose(fleet.decode_tokens_per_s_bound, 2 * alone.decode_tokens_per_s_bound, rtol=1e-12)


LOAD, SLO = Load(40, 512, 128, 300), Slo(0.2, 0.012)
SMALL = {"counts": (1, 2), "w_dtypes": ("fp16", "int4"), "kv_dtypes": ("fp16",), "max_batches": (64,)}


def _fleet_space():
    draft = Draft(rl.load_model("llama-3.2-1b"), 3, 0.8)
    return Space(devices("a100-80gb"), **SMALL, token_budgets=(512,), replicas=(1, 2), pools=((1, 1),), drafts=(draft,))


@pytest.mark.slow
def test_what_the_bounds_prune_of_a_fleet_misses_the_slo_in_simulation():
    """40 req/s of 512-token prompts: one A100 is pruned (its prompts and decodes need more
    than a second of arithmetic a second), with or without a draft; simulated, none so pruned
    serves every request within the SLO. Replicas and pools of two are kept."""
    model, space = rl.load_model("llama-3-8b"), _fleet_space()
    frame = analytic_pass(model, space, LOAD, SLO)
    assert set(frame[frame.gpus == 1].reason) == {"throughput"}
    assert set(frame[(frame.replicas == 2) | (frame.decode_servers == 1)].reason) == {""}
    server = {"a100-80gb": Server(portable(space.devices[0]))}
    pruned = frame[frame.reason != ""]
    assert (pruned.draft != "").any() and len(pruned) == 8
    for _, row in pruned.iterrows():
        assert run_task(make_task(row, model, server, space, LOAD, SLO))["slo_attainment"] < 1, row.to_dict()


def _small_search(run_many):
    return search(
        rl.load_model("llama-3.2-1b"),
        _small_space(),
        Load(30, 256, 32, 120),
        Slo(0.05, 0.01),
        {"h100-sxm": 3.9, "a100-80gb": 2.3},
        run_many,
    )


def _small_space():
    draft = Draft(rl.load_model("qwen2-0.5b"), 2, 0.9)
    names = ("h100-sxm", "a100-80gb")
    return Space(devices(*names), **SMALL, token_budgets=(512,), replicas=(1, 2), pools=((1, 1),), drafts=(draft,))


@pytest.mark.slow
def test_the_fleet_search_pareto_set_equals_simulating_every_survivor():
    """Skipping dominated price levels leaves the Pareto set of replicas, pools (each pool's
    device either) and drafts as simulating every survivor finds it."""
    with local(1) as run_many:
        result = _small_search(run_many)
    assert result.counts["pruned"].get("dominated", 0) > 0
    space, load = _small_space(), Load(30, 256, 32, 120)
    every = analytic_pass(rl.load_model("llama-3.2-1b"), space, load, Slo(0.05, 0.01))
    kept = every[every.reason == ""]
    assert {"replicas", "pools", "drafts"} <= {
        k
        for k, rows in [
            ("replicas", kept.replicas > 1),
            ("pools", kept.decode_servers > 0),
            ("drafts", kept.draft != ""),
        ]
        if rows.any()
    }
    servers = {d.name: Server(portable(d)) for d in space.devices}
    model = rl.load_model("llama-3.2-1b")
    with local(1) as run_many:
        tasks = [make_task(row, model, servers, space, load, Slo(0.05, 0.01)) for _, row in kept.iterrows()]
        found = run_many(run_task, tasks)
    price = result.frame.loc[kept.index, "usd_per_hour"].to_numpy()
    cost = price * np.array([f["duration_s"] for f in found]) / 3600 / (120 * 32 / 1e6)
    good = result.meta["offered_rate"] * np.array([f["slo_attainment"] for f in found])
    brute = kept.iloc[pareto_set(cost, good)][FLEET_KEY].to_dict("records")
    assert result.frame.loc[result.pareto, FLEET_KEY].to_dict("records") == brute


def test_a_pool_costs_each_pools_devices_at_their_price():
    """1 prefill server on an H100 ($3.90) and 1 decode server on an A100 ($2.30), 2 devices each."""
    with local(1) as run_many:
        frame = _small_search(run_many).frame
    row = frame[(frame.device == "h100-sxm") & (frame.decode_device == "a100-80gb") & (frame.gpus == 2)].iloc[0]
    assert row.usd_per_hour == pytest.approx(3.9 + 2.3) and row.fleet == "1x1 prefill + 1x1 decode on a100-80gb"


def test_the_rate_search_is_the_simulators_on_the_same_arrivals():
    """--rate-search's figure for one server is ``simulate --search``'s: the same search,
    from the offered rate, on the same seeded arrivals."""
    one = {"counts": (1,), "w_dtypes": ("int4",), "kv_dtypes": ("fp16",), "max_batches": (64,), "token_budgets": (512,)}
    space = Space(devices("a100-80gb"), **one)
    model, load, slo = rl.load_model("llama-3.2-1b"), Load(30, 256, 32, 120), Slo(0.05, 0.01)
    frame = analytic_pass(model, space, load, slo)
    server = {"a100-80gb": Server(portable(space.devices[0]))}
    got = run_task(make_task(frame.iloc[0], model, server, space, load, slo, percentile=99.0))
    d = rl.resolve(model, "a100-80gb", w_dtype="int4", kv_dtype="fp16", attention="flash")
    out = api.simulate_serving(
        d,
        Scheduler(max_batch=64, token_budget=512),
        rate=30,
        requests=120,
        prompt=256,
        output_tokens=32,
        search=True,
        ttft_slo=0.05,
        tpot_slo=0.01,
        percentile=99.0,
        intervals=False,
    )
    assert got["max_rate_rps"] == out["search"]["max_rate"] and got["rate_runs"] == len(out["search"]["tried"])


def test_a_profile_prices_the_devices_it_was_measured_on_and_says_so():
    """The H100 profile applies to the h100-sxm; the a100 keeps its datasheet. The H100's TTFT
    bound is the resolver's calibrated prefill of one prompt."""
    out = api.plan(
        "llama-3.2-1b",
        ["h100-sxm", "a100-80gb"],
        Load(30, 256, 32, 120),
        Slo(0.05, 0.01),
        workers=1,
        profile=PROFILE,
        **SMALL,
        token_budgets=(512,),
    )
    frame = out.frame
    assert dict(zip(frame.device, frame.basis)) == {"h100-sxm": "calibrated", "a100-80gb": "spec"}
    assert out.meta["roofs"] == {"h100-sxm": "calibrated", "a100-80gb": "spec"} and PROFILE in out.meta["basis"]
    row = frame[(frame.device == "h100-sxm") & (frame.gpus == 1) & (frame.w_dtype == "fp16")].iloc[0]
    d = rl.resolve("llama-3.2-1b", "h100-sxm", w_dtype="fp16", kv_dtype="fp16", attention="flash", profile=PROFILE)
    assert row.ttft_bound_s == pytest.approx(rl.analyze(d, batch=1, seq_len=256).prefill.total["time_s"], rel=1e-12)
    assert all(r["basis"] in ("calibrated", "spec") for r in out.to_dict()["deployments"])
