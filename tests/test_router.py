"""Replicas behind a router: random routing is N independent servers, the routes do what
they say, bad fleets are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from ridgeline.api import simulate
from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.serving.arrivals import Arrivals, poisson
from ridgeline.serving.router import ROUTES, affinity_route, mix, simulate_replicas
from ridgeline.serving.simulator import PERCENTILES, Scheduler

MODEL, DEVICE = "llama-3.2-1b", "a6000"
runner = CliRunner()
SCHED = Scheduler(max_batch=16, token_budget=512, kv_blocks=100)  # a small cache: preemptions happen


@pytest.fixture
def d(llama_1b):
    return llama_1b


def _alone(d, arrivals: Arrivals, ids: np.ndarray):
    sub = Arrivals(arrivals.time_s[ids], arrivals.prompt[ids], arrivals.output[ids], "share")
    return simulate(d, None, sub, SCHED)


@pytest.mark.parametrize("replicas, seed", [(2, 0), (3, 7), (4, 1)])
def test_random_routing_is_independent_runs(mixed_trace, d, replicas, seed):
    """Random routing over N replicas at rate lambda is N independent servers, each fed its
    share of the Poisson stream (a thinned Poisson stream: rate lambda / N): every request's
    times equal those of its replica's sub-trace run alone, and the overall percentiles are
    those of the pooled per-request results."""
    arrivals = mixed_trace(240, 40.0 * replicas, seed)
    fleet = simulate_replicas(d, arrivals, SCHED, replicas=replicas, route="prefix-affinity", seed=seed)
    where = fleet.requests["replica"]
    assert np.array_equal(where, affinity_route(arrivals, replicas, seed))
    pooled = {k: np.full(len(arrivals), np.nan) for k in ("ttft_s", "tpot_s", "latency_s", "queue_s")}
    for r in range(replicas):
        ids = np.flatnonzero(where == r)
        alone = _alone(d, arrivals, ids)
        for key in pooled:
            assert np.array_equal(fleet.requests[key][ids], alone.requests[key], equal_nan=True), (r, key)
            pooled[key][ids] = alone.requests[key]
        assert fleet.summary["replicas"][r]["ttft_s"] == alone.summary["ttft_s"]
        assert fleet.summary["replicas"][r]["steps"] == alone.summary["steps"]
    assert sum(x["preemptions"] for x in fleet.summary["replicas"]) > 0  # the cache was tight
    for key, values in pooled.items():
        finite = values[np.isfinite(values)]
        for q in PERCENTILES:
            assert fleet.summary[key][f"p{q}"] == float(np.percentile(finite, q))


def test_the_random_route_is_uniform_over_replicas(mixed_trace):
    """The seeded hash of the index spreads requests evenly: counts per replica within
    4 binomial standard deviations of n / N."""
    n, replicas = 40000, 5
    counts = np.bincount(affinity_route(mixed_trace(n, 1.0, 3), replicas, 11), minlength=replicas)
    sd = np.sqrt(n * (1 / replicas) * (1 - 1 / replicas))
    assert np.all(np.abs(counts - n / replicas) < 4 * sd)


def test_mix_is_splitmix64():
    """splitmix64's first output from state 0 is 0xE220A8397B1DCDAF (Vigna's reference
    generator: the state is advanced by the golden gamma, then finalised)."""
    assert int(mix(np.array([0], dtype=np.uint64), 1)[0]) == 0xE220A8397B1DCDAF


class _Traced:
    """Arrivals with Mooncake's ``hash_ids`` (what the trace readers attach)."""

    def __init__(self, hash_ids):
        self.hash_ids = hash_ids

    def __len__(self):
        return len(self.hash_ids)


def test_affinity_follows_the_first_prefix_block():
    """With ``hash_ids`` the key is the first block id: requests sharing it share a replica."""
    where = affinity_route(_Traced([[5, 1], [9], [5, 2, 3], [9, 4], [], [5]]), 3, 0)
    assert where[0] == where[2] == where[5]
    assert where[1] == where[3]
    assert where.tolist() == (mix(np.array([5, 9, 5, 9, -5, 5]), 0) % np.uint64(3)).astype(int).tolist()


def test_round_robin_cycles(mixed_trace, d):
    arrivals = mixed_trace(10, 5.0, 2)
    fleet = simulate_replicas(d, arrivals, SCHED, replicas=3, route="round-robin")
    assert fleet.requests["replica"].tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]


def test_least_outstanding_fills_the_idle_replica(d):
    """Three long requests at once on two replicas: the first two go to replicas 0 and 1 (ties
    go to the lowest index), the third to whichever has fewer outstanding, a tie again: 0.
    A fourth arriving after replica 1's request finished but not replica 0's two goes to 1."""
    prompt = np.array([100, 100, 100, 100])
    output = np.array([400, 50, 400, 10])
    t = np.array([0.0, 0.0, 0.0, 0.0])
    first = simulate_replicas(d, Arrivals(t, prompt, output), SCHED, replicas=2, route="least-outstanding")
    assert first.requests["replica"].tolist()[:3] == [0, 1, 0]
    done_1 = first.requests["finish_s"][1]
    late = Arrivals(np.array([0.0, 0.0, 0.0, done_1 * 1.01]), prompt, output)
    fleet = simulate_replicas(d, late, SCHED, replicas=2, route="least-outstanding")
    assert fleet.requests["replica"].tolist() == [0, 1, 0, 1]
    assert fleet.requests["queue_s"][3] == 0.0


def test_least_outstanding_beats_round_robin_on_mixed_lengths(d):
    """Alternating long and short requests at two replicas: round-robin sends every long
    one to replica 0; least-outstanding balances them, so its p99 latency is lower."""
    n = 200
    arrivals = Arrivals(np.arange(n) * 0.02, np.full(n, 200), np.where(np.arange(n) % 2 == 0, 300, 5))
    rr = simulate_replicas(d, arrivals, SCHED, replicas=2, route="round-robin")
    lor = simulate_replicas(d, arrivals, SCHED, replicas=2, route="least-outstanding")
    assert lor.summary["latency_s"]["p99"] < rr.summary["latency_s"]["p99"]


def test_one_replica_is_the_single_server(mixed_trace, d):
    arrivals = mixed_trace(120, 20.0, 5)
    for route in ROUTES:
        fleet = simulate_replicas(d, arrivals, SCHED, replicas=1, route=route)
        alone = simulate(d, None, arrivals, SCHED)
        for key in ("ttft_s", "tpot_s", "latency_s"):
            assert np.array_equal(fleet.requests[key], alone.requests[key], equal_nan=True)
        assert {k: v for k, v in fleet.summary.items() if k not in ("route", "replicas")} == alone.summary


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"replicas": 0}, "replicas must be a whole number from 1 to 1024, got 0"),
        ({"replicas": 2.5}, "replicas must be a whole number from 1 to 1024, got 2.5"),
        ({"route": "random"}, "unknown route 'random'; known: round-robin, least-outstanding, prefix-affinity"),
    ],
)
def test_bad_fleets_are_refused(mixed_trace, d, keywords, message):
    with pytest.raises(RidgelineError) as err:
        simulate_replicas(d, mixed_trace(5, 1.0, 0), SCHED, **keywords)
    assert str(err.value) == message


def test_cli_replicas_table_and_json(d):
    """``simulate --replicas 3``: the per-replica table, and in JSON every request's replica
    and the summary of each; the same numbers as the Python API."""
    args = ["simulate", MODEL, "-H", DEVICE, "--requests", "60", "--rate", "30", "--replicas", "3"]
    table = runner.invoke(app, [*args, "--route", "least-outstanding"])
    assert table.exit_code == 0, table.output
    assert "replicas (least-outstanding)" in table.output and "preemptions" in table.output
    out = runner.invoke(app, [*args, "-f", "json"])
    data = json.loads(out.stdout)
    api = simulate_replicas(d, poisson(30.0, 60, 512, 128, seed=0), Scheduler(), replicas=3)
    assert data["requests"]["replica"] == api.requests["replica"].tolist() == [i % 3 for i in range(60)]
    assert [x["requests"] for x in data["summary"]["replicas"]] == [20, 20, 20]
    assert data["summary"]["latency_s"] == api.summary["latency_s"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--replicas", "0"], "replicas must be a whole number from 1 to 1024, got 0"),
        (["--replicas", "2", "--route", "random"], "unknown route 'random'; known: round-robin"),
    ],
)
def test_cli_bad_fleets_are_one_line(args, message):
    result = runner.invoke(app, ["simulate", MODEL, "-H", DEVICE, "--requests", "5", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
