"""ridgeline plan: the enumeration, the analytical bounds (equal to the engine's scalar
figures and to what the simulator then does), the Pareto set against brute force, the price list, the
executors giving the same answer, and bad input as one line with exit 2."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline import api
from ridgeline.cli import app
from ridgeline.engine.precision import make_plan
from ridgeline.io.catalog import PROFILES_DIR
from ridgeline.io.prices import price_list, prices_for
from ridgeline.serving.arrivals import poisson
from ridgeline.serving.bounds import MATRIX_TYPES, Load, Slo, Space, activation_type, analytic_pass
from ridgeline.serving.fanout import local
from ridgeline.serving.plan import KEY, Task, pareto_set, portable, run_task, search
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import simulate_deployment

FOUR = ("h100-sxm", "h200", "a100-80gb", "mi300x")
SMALL = {
    "counts": (1, 2),
    "w_dtypes": ("fp16", "int4"),
    "kv_dtypes": ("fp16",),
    "max_batches": (64,),
    "token_budgets": (512,),
}


def devices(*names):
    return tuple(rl.load_device(n) for n in names)


def test_the_example_space_has_1800_deployments():
    """4 devices x (1 + 2 + 3 + 4 splits of 1, 2, 4, 8) x the types each computes x 3 max
    batches x 2 chunks: fp16, int8, int4 weights x fp16, int8 KV (6) everywhere, and where the
    device states an fp8 rate (H100, H200, MI300X, not the A100) fp8 weights with an fp16 or
    fp8 KV cache (8): (8 + 8 + 6 + 8) x 10 x 6 = 1,800 (1,440 before fp8)."""
    space = Space(devices(*FOUR))
    assert [s for s in space.splits if s[0] == 8] == [(8, 1, 8), (8, 2, 4), (8, 4, 2), (8, 8, 1)]
    assert [len(space.types(d)) for d in space.devices] == [8, 8, 6, 8]
    assert space.size == 1800
    frame = analytic_pass(rl.load_model("llama-3-8b"), space, Load(20, 512, 256, 10_000), Slo(0.5, 0.05))
    assert len(frame) == 1800 and not frame.duplicated(KEY).any()
    a100 = frame[frame.device == "a100-80gb"]
    assert len(a100) == 6 * 10 * 6 and set(a100.w_dtype) == {"fp16", "int8", "int4"}
    assert set(a100.kv_dtype) == {"fp16", "int8"}


def test_every_searched_type_is_one_the_device_computes():
    """Over the whole catalog: a weight or KV type of fp8 or fp4 is searched on a device only
    where its datasheet states that matrix rate, and there the plan's matrix ops run in it
    (W8A8, W4A4); the 8-bit KV is fp8 beside fp8/fp4 weights and int8 beside the others."""
    fp4 = set()
    for name in rl.list_devices():
        device = rl.load_device(name)
        pairs = Space((device,)).types(device)
        for w, kv in pairs:
            for t in {w, kv} & set(MATRIX_TYPES):
                assert device.matrix_peak[t] > 0, (name, t)
            if w in MATRIX_TYPES:
                settings = rl.Settings(w_dtype=w, a_dtype=activation_type(w), kv_dtype=kv)
                assert make_plan(settings, device).matrix_dtype == w and kv in ("fp16", "fp8")
                fp4 |= {name} if w == "fp4" else set()
        assert {w for w, _ in pairs} & set(MATRIX_TYPES) == set(MATRIX_TYPES) & set(device.matrix_peak), name
    assert {"b200", "b300", "gb200", "gb300", "rtx-pro-6000", "rtx-5090", "mi355x", "dgx-spark"} <= fp4
    assert not fp4 & {"h100-sxm", "h200", "a100-80gb", "mi300x", "apple-m4-max"}


def test_an_a100_search_considers_no_fp8_or_fp4():
    """The A100 states no fp8 or fp4 rate (the engine would run fp8 in fp16 there): its search is
    the 6 types it had, and nothing is pruned as settings for a type it cannot run."""
    space = Space(devices("a100-80gb"), counts=(1,), max_batches=(64,), token_budgets=(512,))
    assert space.types(space.devices[0]) == [
        ("fp16", "fp16"), ("fp16", "int8"), ("int8", "fp16"), ("int8", "int8"), ("int4", "fp16"), ("int4", "int8")
    ]  # fmt: skip
    frame = analytic_pass(rl.load_model("llama-3-8b"), space, Load(1, 512, 64, 10), Slo(1.0, 0.1))
    assert len(frame) == space.size == 6 and set(frame.reason) == {""}


@pytest.mark.slow
def test_plan_on_a_b200_chooses_fp4_where_only_it_keeps_up_on_one_gpu(tmp_path):
    """Llama-3-70B, 12 requests/s of 2,048-token prompts. A prompt's linear layers are
    80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672) = 68.45e9 weights, so its arithmetic
    is 2 x 68.45e9 x 2048 = 2.80e14 operations; 12 a second need 3.36e15 operations/s: 1.49 s
    a second at the B200's fp16 rate (2,250 TOPS; int8 and int4 weights compute in fp16):
    pruned as throughput on one GPU; 0.75 s at fp8 (4,500), 0.37 s at fp4 (9,000). One fp8 B200
    queues prompts near its limit and misses the TTFT for some requests; one fp4 B200 serves
    all, the most goodput there is, so every two-GPU deployment (twice the price an hour) is
    dominated. The price is a nominal $1/GPU-hour (the catalog has none for the B200): with
    one device it scales every cost alike and changes no choice."""
    out = tmp_path / "plan.json"
    args = ["plan", "llama-3-70b", "--workload", "poisson:rate=12,prompt=2048,output=64,n=200"]
    args += ["--slo", "ttft=0.5,tpot=0.05", "--devices", "b200", "--price", "b200=1", "--counts", "1,2"]
    result = CliRunner().invoke(app, [*args, "--workers", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "chosen: 1 x b200 (tp 1, pp 1), weights fp4, KV" in result.output
    data = json.loads(out.read_text())
    # 10 types (6, fp8 with an fp16 or fp8 KV, fp4 likewise) x (1 + 2 splits) x 6
    assert data["counts"]["enumerated"] == 10 * 3 * 6 == 180
    one = [r for r in data["pruned"] + data["deployments"] if r["gpus"] == 1]
    assert {r["w_dtype"] for r in one if r["reason"] == "throughput"} == {"fp16", "int8", "int4"}
    assert {r["w_dtype"] for r in one if r["reason"] == ""} == {"fp8", "fp4"}
    assert {r["reason"] for r in data["pruned"] if r["gpus"] == 2} == {"throughput", "dominated"}
    chosen = data["chosen"]
    assert (chosen["gpus"], chosen["w_dtype"], chosen["slo_attainment"]) == (1, "fp4", 1.0)
    fp8 = [r for r in data["deployments"] if r["w_dtype"] == "fp8"]
    assert max(r["slo_attainment"] for r in fp8) < 1
    assert min(r["usd_per_million_tokens"] for r in fp8) > chosen["usd_per_million_tokens"]


@pytest.mark.parametrize(
    ("tp", "pp", "w", "kv"), [(1, 1, "fp16", "fp16"), (2, 1, "int8", "int8"), (2, 2, "int4", "fp16")]
)
def test_the_vectorised_bounds_equal_the_engines_scalar_figures(tp, pp, w, kv):
    """The TTFT bound of every variant priced in one evaluation is the engine's prefill of
    one prompt, analysed alone with those settings; the memory bound is the simulator's KV
    block count."""
    model, device = rl.load_model("llama-3-8b"), rl.load_device("h100-sxm")
    frame = analytic_pass(model, Space((device,), counts=(tp * pp,)), Load(20, 512, 256, 100), Slo(0.5, 0.05))
    row = frame[(frame.tp == tp) & (frame.pp == pp) & (frame.w_dtype == w) & (frame.kv_dtype == kv)].iloc[0]
    d = rl.resolve(model, device, tp=tp, pp=pp, w_dtype=w, kv_dtype=kv, attention="flash")
    assert row.ttft_bound_s == pytest.approx(rl.analyze(d, batch=1, seq_len=512).prefill.total["time_s"], rel=1e-12)


def test_the_ttft_bound_is_the_first_requests_simulated_ttft():
    """An idle server prefills the first prompt alone: its TTFT is the bound, and no
    request's is shorter."""
    model, device = rl.load_model("llama-3-8b"), rl.load_device("a100-80gb")
    load = Load(5, 512, 64, 60)
    frame = analytic_pass(model, Space((device,), **SMALL), load, Slo(1.0, 0.1))
    for _, row in frame.iterrows():
        d = rl.resolve(model, device, tp=int(row.tp), pp=int(row.pp), w_dtype=row.w_dtype, attention="flash")
        ttft = simulate_deployment(d, poisson(5, 60, 512, 64), Scheduler(max_batch=64, token_budget=512)).requests[
            "ttft_s"
        ]
        assert ttft[0] == pytest.approx(row.ttft_bound_s, rel=1e-12) and ttft.min() >= row.ttft_bound_s * (1 - 1e-12)


def test_memory_prunes_what_the_simulator_would_refuse():
    """Llama-2-70B's fp16 weights (138 GB) exceed one 80 GB A100; int4 (35 GB) fit."""
    frame = analytic_pass(
        rl.load_model("llama-2-70b"),
        Space(devices("a100-80gb"), counts=(1,), kv_dtypes=("fp16",), max_batches=(64,), token_budgets=(512,)),
        Load(1, 512, 64, 10),
        Slo(10.0, 1.0),
    )
    assert dict(zip(frame.w_dtype, frame.reason)) == {"fp16": "memory", "int8": "", "int4": ""}
    d = rl.resolve("llama-2-70b", "a100-80gb", attention="flash")
    with pytest.raises(rl.RidgelineError, match="no room for a KV cache"):
        simulate_deployment(d, poisson(1, 10, 512, 64), Scheduler(max_batch=64, token_budget=512))


def test_a_split_that_does_not_divide_the_heads_is_pruned_with_the_reason():
    """Qwen2-0.5B has 14 attention heads: tp 4 and 8 do not divide them."""
    frame = analytic_pass(
        rl.load_model("qwen2-0.5b"), Space(devices("a100-80gb"), counts=(4,)), Load(1, 64, 8, 10), Slo(1.0)
    )
    pruned = frame[frame.tp == 4]
    assert set(pruned.reason) == {"settings"} and set(pruned.why) == {"tp=4 does not divide 14 attention heads"}
    assert set(frame[frame.tp == 1].reason) == {""}


def test_what_the_bounds_prune_misses_the_slo_in_simulation():
    """40 req/s of 512-token prompts keep one A100's arithmetic busy (the prompts alone need
    about a second of it per second): pruned as throughput; simulated, no deployment so
    pruned serves every request within the SLO, while tp=2 (kept) does."""
    model, device = rl.load_model("llama-3-8b"), rl.load_device("a100-80gb")
    load, slo = Load(40, 512, 128, 300), Slo(0.2, 0.012)
    frame = analytic_pass(model, Space((device,), **SMALL), load, slo)
    assert set(frame[frame.gpus == 1].reason) == {"throughput"} and set(frame[frame.tp == 2].reason) == {""}
    for _, row in frame.iterrows():
        task = Task(
            model,
            portable(device),
            rl.Settings(w_dtype=row.w_dtype, tp=int(row.tp), pp=int(row.pp), attention="flash"),
            Scheduler(max_batch=64, token_budget=512),
            load,
            slo,
        )
        assert (run_task(task)["slo_attainment"] < 1) == (row.reason != ""), row.to_dict()


def test_pareto_set_by_hand():
    """Cost [3, 1, 2, 1], goodput [5, 1, 5, 2]: position 3 (cheapest, more goodput than 1)
    and 2 (more goodput); 0 costs more for no more goodput. A cheaper point with no goodput
    (cost 0.5, goodput 0) serves nobody within the SLO: on no front."""
    assert pareto_set(np.array([3.0, 1, 2, 1]), np.array([5.0, 1, 5, 2])) == [3, 2]
    assert pareto_set(np.array([3.0, 1, 2, 1, 0.5]), np.array([5.0, 1, 5, 2, 0])) == [3, 2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=1, max_size=12))
def test_pareto_set_is_exactly_the_undominated(points):
    cost, good = (np.array(v, dtype=float) for v in zip(*points))
    front = set(pareto_set(cost, good))

    def dominated(i):
        return any(
            cost[j] <= cost[i] and good[j] >= good[i] and (cost[j] < cost[i] or good[j] > good[i])
            for j in range(len(cost))
        )

    undominated = {i for i in range(len(cost)) if not dominated(i) and good[i] > 0}  # no goodput: on no front
    # among exact ties one representative is kept
    assert front <= undominated and {(cost[i], good[i]) for i in front} == {(cost[i], good[i]) for i in undominated}


def _small_search(run_many, **space):
    model = rl.load_model("llama-3.2-1b")
    sizes = {**SMALL, **space}
    return search(
        model,
        Space(devices("h100-sxm", "a100-80gb"), **sizes),
        Load(30, 256, 32, 120),
        Slo(0.05, 0.01),
        {"h100-sxm": 3.9, "a100-80gb": 2.3},
        run_many,
    )


def test_the_search_pareto_set_equals_simulating_every_survivor():
    """Skipping dominated price levels changes nothing in the Pareto set: simulate every
    survivor and take the front by brute force."""
    with local(1) as run_many:
        result = _small_search(run_many)
    frame = result.frame
    assert result.counts["pruned"].get("dominated", 0) > 0
    every = analytic_pass(
        rl.load_model("llama-3.2-1b"),
        Space(devices("h100-sxm", "a100-80gb"), **SMALL),
        Load(30, 256, 32, 120),
        Slo(0.05, 0.01),
    )
    kept = every[every.reason == ""]
    with local(1) as run_many:
        found = run_many(run_task, [_task_of(row) for _, row in kept.iterrows()])
    price = kept.device.map({"h100-sxm": 3.9, "a100-80gb": 2.3}) * kept.gpus
    cost = (price * np.array([f["duration_s"] for f in found]) / 3600 / (120 * 32 / 1e6)).to_numpy()
    offered = result.meta["offered_rate"]
    good = offered * np.array([f["slo_attainment"] for f in found])
    brute = kept.iloc[pareto_set(cost, good)][KEY].to_dict("records")
    assert frame.loc[result.pareto, KEY].to_dict("records") == brute
    assert result.chosen == result.pareto[-1]


def test_every_deployment_on_the_brute_force_front_is_reported_or_marked():
    """Issue 57 item 3: simulate every deployment the simulator accepts (the bounds' choices
    ignored) and take the Pareto set by brute force: each member is on plan's front or is
    pruned by a steady-state bound and marked may_be_on_front. 40 req/s of 512-token prompts
    overload one A100 (pruned as throughput) yet about a quarter of its requests meet the
    SLO, at a lower cost than tp=2 (which meets it for all): on the full front, and marked."""
    model, prices = rl.load_model("llama-3-8b"), {"a100-80gb": 2.3}
    space, load, slo = Space(devices("a100-80gb"), **SMALL), Load(40, 512, 128, 300), Slo(0.5, 0.05)
    with local(1) as run_many:
        result = search(model, space, load, slo, prices, run_many)
    frame = result.frame
    runnable = frame[~frame.reason.isin(["settings", "memory"])]
    tasks = [
        Task(
            model,
            portable(space.devices[0]),
            rl.Settings(w_dtype=row.w_dtype, kv_dtype=row.kv_dtype, tp=int(row.tp), pp=int(row.pp), attention="flash"),
            Scheduler(max_batch=int(row.max_batch), token_budget=int(row.token_budget)),
            load,
            slo,
        )
        for _, row in runnable.iterrows()
    ]
    with local(1) as run_many:
        found = run_many(run_task, tasks)
    cost = (runnable.gpus * 2.3 * np.array([f["duration_s"] for f in found]) / 3600 / (300 * 128 / 1e6)).to_numpy()
    good = result.meta["offered_rate"] * np.array([f["slo_attainment"] for f in found])
    brute = [runnable.index[i] for i in pareto_set(cost, good)]
    assert all(i in result.pareto or frame.at[i, "may_be_on_front"] for i in brute)
    marked = [i for i in brute if frame.at[i, "may_be_on_front"]]
    assert marked and set(frame.loc[marked, "reason"]) == {"throughput"} and set(frame.loc[marked, "gpus"]) == {1}
    assert not frame.loc[frame.reason.isin(["", "settings", "memory", "ttft", "dominated"]), "may_be_on_front"].any()
    assert result.counts["may_be_on_front"] == int(frame["may_be_on_front"].sum())


def _task_of(row):
    return Task(
        rl.load_model("llama-3.2-1b"),
        portable(rl.load_device(row.device)),
        rl.Settings(w_dtype=row.w_dtype, kv_dtype=row.kv_dtype, tp=int(row.tp), pp=int(row.pp), attention="flash"),
        Scheduler(max_batch=int(row.max_batch), token_budget=int(row.token_budget)),
        Load(30, 256, 32, 120),
        Slo(0.05, 0.01),
    )


def _plan(executor="local", workers=1, **more):
    return api.plan(
        "llama-3.2-1b",
        ["h100-sxm", "a100-80gb"],
        Load(30, 256, 32, 120),
        Slo(0.05, 0.01),
        executor=executor,
        workers=workers,
        **SMALL,
        **more,
    ).to_dict()


# the fleet dimensions: replicas, pools (each pool's device either) and a draft
FLEET = {"replicas": (1, 2), "pools": ((1, 1),), "drafts": [("qwen2-0.5b", 2, 0.9)]}


@pytest.fixture(scope="module")
def one_worker():
    return _plan()


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "fleet"])
def answer(request):
    """One worker's answer, without and with the fleet dimensions."""
    more = FLEET if request.param else {}
    return _plan(**more), more


@pytest.mark.slow
def test_two_local_workers_give_the_same_answer(answer):
    one, more = answer
    assert _plan(workers=2, **more) == {**one, "meta": {**one["meta"], "workers": 2}}


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="ray is not installed: pip install 'ridgeline[cluster]'"
)
@pytest.mark.slow
def test_a_local_ray_cluster_gives_the_same_answer(answer):
    """ray.init(num_cpus=2) on this machine, the tasks fanned out to it."""
    one, more = answer
    got = _plan("ray", 2, **more)
    assert got == {**one, "meta": {**one["meta"], "workers": 2, "executor": "ray"}}
    assert not more or one["meta"]["fleet"]["route"] == "least-outstanding"


def test_the_json_counts_add_up_and_costs_follow_the_prices(one_worker):
    out = one_worker
    counts = out["counts"]
    assert counts["enumerated"] == 2 * 3 * 2 == counts["simulated"] + sum(counts["pruned"].values())
    assert (
        len(out["deployments"]) == counts["simulated"]
        and len(out["pruned"]) == counts["enumerated"] - counts["simulated"]
    )
    arrivals = poisson(30, 120, 256, 32)
    offered = 119 / (arrivals.time_s[-1] - arrivals.time_s[0])
    for row in out["deployments"]:
        price = {"h100-sxm": 3.90, "a100-80gb": 2.30}[row["device"]] * row["gpus"]
        assert row["usd_per_million_tokens"] == pytest.approx(
            price * row["duration_s"] / 3600 / (120 * 32 / 1e6), rel=1e-12
        )
        assert row["goodput_rps"] == pytest.approx(offered * row["slo_attainment"], rel=1e-12)
    assert out["meta"]["task_bytes"] > 0 and out["meta"]["result_bytes"] > 0
    assert [r["usd_per_million_tokens"] for r in out["deployments"]] == sorted(
        r["usd_per_million_tokens"] for r in out["deployments"]
    )


def test_the_price_list_is_one_dated_cited_list_covering_the_four_devices():
    raw = price_list()
    assert raw["url"] == "https://www.crusoe.ai/cloud/pricing" and raw["read"] == "2026-09-20"
    assert {k: p.usd_per_gpu_hour for k, p in prices_for(list(FOUR)).items()} == {
        "h100-sxm": 3.90,
        "h200": 4.29,
        "a100-80gb": 2.30,
        "mi300x": 3.45,
    }
    assert prices_for(["h200"], {"h200": 3.0})["h200"].source == "--price"


runner = CliRunner()
PLAN = [
    "plan",
    "llama-3.2-1b",
    "--workload",
    "poisson:rate=5,prompt=128,output=16,n=20",
    "--devices",
    "h100-sxm",
    "--counts",
    "1",
    "--workers",
    "1",
]


def test_the_cli_prints_counts_pareto_and_the_chosen_deployment(tmp_path):
    result = runner.invoke(app, [*PLAN, "-o", str(tmp_path / "plan.json")])
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "plan.json").read_text())
    first = next(line for line in result.output.splitlines() if line.startswith("llama-3.2-1b:"))
    counts = out["counts"]
    assert first.startswith(
        # the H100 computes fp8: 8 weight x KV types (6, fp8 weights with an fp16 or fp8 KV) x 6
        f"llama-3.2-1b: 48 deployments enumerated; 0 pruned by the bounds (none); {counts['pruned'].get('dominated', 0)} dominated"
    )
    assert "Pareto set" in result.output and "chosen: 1 x h100-sxm" in result.output
    assert "https://www.crusoe.ai/cloud/pricing, read 2026-09-20" in result.output


@pytest.mark.slow
def test_the_cli_searches_fleets_and_names_them():
    args = [*PLAN, "--replicas", "1,2", "--pools", "1:1", "--drafts", "qwen2-0.5b:2:0.9"]
    args[args.index("--counts") + 1] = "1,2"
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    first = next(line for line in result.output.splitlines() if line.startswith("llama-3.2-1b:"))
    # 1 device: count 1 as one server; 2 as 2 splits, 2 replicas or 1 + 1 pooled: 5 shapes x 2 drafts x
    # 8 types (the H100 computes fp8) x 6
    assert first.startswith("llama-3.2-1b: 480 deployments enumerated")
    assert "fleet" in result.output and "chosen: " in result.output


def _one_line_exit_2(args, says):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and says in result.output and "Traceback" not in result.output, result.output


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (["--devices", "h100"], "error: unknown hardware 'h100'. Did you mean: h100-pcie, h100-sxm"),
        (
            ["--devices", "l4"],
            "no price for l4 in Crusoe Cloud on-demand GPU pricing; give one with --price l4=USD_PER_GPU_HOUR",
        ),
        (["--price", "h200=3"], "--price names h200, which is not among the devices searched"),
        (["--price", "h100-sxm=-3"], "the --price of h100-sxm must be positive, got '-3'"),
        (
            ["--workload", "poisson:rate=5,prompt=128"],
            "--workload needs output, n; give poisson:rate=R,prompt=P,output=O,n=N[,seed=S]",
        ),
        (["--workload", "uniform:rate=5"], "--workload must start with 'poisson:', got 'uniform:rate=5'"),
        (["--workload", "poisson:rate=0,prompt=128,output=16,n=20"], "the workload's rate must be positive, got '0'"),
        (
            ["--workload", "poisson:rate=nan,prompt=128,output=16,n=20"],
            "the workload's rate must be a positive, finite number, got 'nan'",
        ),
        (
            ["--workload", "poisson:rate=5,prompt=1.5,output=16,n=20"],
            "the workload's prompt must be a whole number, got '1.5'",
        ),
        (
            ["--workload", "poisson:rate=5,prompt=128,output=16,n=2000000"],
            "the workload's n=2000000 is over 1,000,000 requests",
        ),
        (["--workload", "poisson:rate=5,prompt=128,output=16,n=20,burst=2"], "--workload does not take burst"),
        (["--slo", "ttft=0"], "the ttft SLO must be positive, got '0'"),
        (["--slo", "latency=1"], "--slo takes ttft and tpot (seconds), not latency"),
        (["--slo", "ttft"], "--slo takes KEY=VALUE pairs separated by commas, got 'ttft' in 'ttft'"),
        (
            ["--counts", ",".join(str(n) for n in range(1, 400))],
            "deployments, over 20,000; name fewer devices or counts",
        ),
        (["--executor", "dask"], "--executor must be one of local, ray, got 'dask'"),
        (["--address", "10.0.0.1:6379"], "--address names a Ray cluster: add --executor ray"),
        (["--workers", "0"], "--workers must be a whole number >= 1, got 0"),
        (["--top", "0"], "--top must be at least 1, got 0"),
        # the fleet dimensions, --profile
        (["--drafts", "llama-9x:4:0.7"], "unknown model 'llama-9x'"),
        (
            ["--drafts", "qwen2-0.5b:4"],
            "--drafts takes NAME:K:ACCEPTANCE items, e.g. llama-3.2-1b:4:0.7; got 'qwen2-0.5b:4'",
        ),
        (["--drafts", "qwen2-0.5b:4:nan"], "the draft qwen2-0.5b's acceptance must be between 0 and 1, got nan"),
        (["--drafts", "qwen2-0.5b:4:1.5"], "the draft qwen2-0.5b's acceptance must be between 0 and 1, got 1.5"),
        (["--drafts", "qwen2-0.5b:four:0.5"], "the draft qwen2-0.5b's k must be a whole number, got 'four'"),
        (["--replicas", "3"], "replicas 3 divide none of the counts 1; a count of devices is split evenly"),
        (["--replicas", "0"], "each of --replicas must be positive, got '0'"),
        (["--pools", "2:1"], "pools 2:1 (3 servers) divide none of the counts 1"),
        (["--pools", "2"], "--pools takes P:D items (prefill:decode servers), got '2'"),
        (["--profile", "missing.yaml"], "missing.yaml"),
        (
            ["--profile", str(PROFILES_DIR / "cuda-nvidia-h100-80gb-hbm3.yaml"), "--devices", "a100-80gb"],
            "was measured on none of a100-80gb; add its device",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(change, says):
    args = list(PLAN)
    for flag, value in zip(change[::2], change[1::2]):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    _one_line_exit_2(args, says)


def test_an_unwritable_output_is_one_line_and_nothing_is_written(tmp_path):
    (tmp_path / "file").write_text("")
    _one_line_exit_2([*PLAN, "-o", str(tmp_path / "file" / "plan.json")], "cannot write")


def test_unknown_dimension_values_are_refused_in_the_api():
    with pytest.raises(rl.RidgelineError, match="a device is named twice"):
        api.plan("llama-3.2-1b", ["h200", "h200"], Load(1, 8, 8, 10), Slo(1.0))
    with pytest.raises(rl.RidgelineError, match="the search needs an SLO"):
        Slo()
    for bad in (0, 1.5, True):
        with pytest.raises(rl.RidgelineError, match="whole number >= 1"):
            Space(devices("h200"), counts=(bad,))


def test_ray_missing_says_which_extra_installs_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(rl.RidgelineError, match=r"--executor ray needs ray: pip install 'ridgeline\[cluster\]'"):
        api.plan("llama-3.2-1b", ["h100-sxm"], Load(5, 128, 16, 20), Slo(1.0), executor="ray", workers=1, **SMALL)
