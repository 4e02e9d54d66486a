"""Disaggregated prefill/decode: an instant link makes two queues in tandem; a lone request
is the colocated server's plus the transfer; the link is checked."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from ridgeline import analyze
from ridgeline.api import simulate
from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.io.resolve import resolve
from ridgeline.serving.arrivals import Arrivals, poisson
from ridgeline.serving.disagg import (
    KvLink,
    Pool,
    TransferredServer,
    decode_arrivals,
    parse_link,
    simulate_disaggregated,
)
from ridgeline.serving.simulator import Scheduler

MODEL, DEVICE = "llama-3.2-1b", "a6000"
SCHED = Scheduler(max_batch=16, token_budget=512, kv_blocks=120)
INSTANT = KvLink(math.inf, 0.0)
runner = CliRunner()


@pytest.fixture
def d(llama_1b):
    return llama_1b


def test_instant_link_is_two_queues_in_tandem(mixed_trace, d):
    """With infinite bandwidth and no latency the decode pool's arrivals are exactly the
    prefill pool's completions, and every request's times are those of the two stages run
    one after the other, each alone: the prefill stage (one output token each) on the
    plain simulator, the decode stage fed its completions."""
    arrivals = mixed_trace(200, 30.0, 1)
    r = simulate_disaggregated(Pool(d, 1, SCHED), Pool(d, 1, SCHED), arrivals, link=INSTANT)
    stage1 = simulate(d, None, Arrivals(arrivals.time_s, arrivals.prompt, np.ones_like(arrivals.output)), SCHED)
    done = stage1.requests["finish_s"]
    assert np.array_equal(r.requests["ttft_s"], stage1.requests["ttft_s"])
    assert np.array_equal(r.requests["queue_s"], stage1.requests["queue_s"])
    later, ids = decode_arrivals(arrivals, done)
    assert np.array_equal(later.time_s, np.sort(done[arrivals.output >= 2], kind="stable"))
    assert np.all(r.requests["transfer_s"][ids] == 0.0)
    how = {"speculation": None, "route": "round-robin", "seed": 0, "progress": None}
    [stage2] = Pool(d, 1, SCHED).serve(later, how, TransferredServer)
    assert np.array_equal(r.requests["finish_s"][ids], stage2.server.finish)
    assert np.array_equal(r.requests["decode_queue_s"][ids], stage2.server.admitted - later.time_s)
    one = arrivals.output == 1  # never leave the prefill pool
    assert np.array_equal(r.requests["finish_s"][one], done[one])
    assert r.summary["pools"]["decode"]["requests"] == int((~one).sum())
    assert r.summary["decode_queue_s"]["p99"] > 0  # queueing at the decode pool too
    assert r.summary["queue_s"]["p99"] > 0


@pytest.mark.parametrize("link", [INSTANT, KvLink(), KvLink(25.0, 40.0)])
def test_a_lone_request_is_the_colocated_one_plus_the_transfer(d, link):
    """One request: TTFT is analyze's prefill; then its KV crosses the link, latency +
    bytes x 8 / bandwidth, the bytes 2 x 16 layers x 8 KV heads x 64 x 2 bytes = 32,768 a
    token (Llama 3.2 1B, bf16); then its N - 1 decode steps are analyze's TPOT each."""
    prompt, n = 1000, 30
    a = analyze(MODEL, DEVICE, batch=1, seq_len=prompt, generate=n, attention="flash").generation
    r = simulate_disaggregated(Pool(d), Pool(d), poisson(1.0, 1, prompt, n), link=link)
    sent = link.latency_us * 1e-6 + prompt * 32768 * 8 / (link.gbps * 1e9)
    assert r.requests["ttft_s"][0] == pytest.approx(a["ttft_s"], rel=1e-12)
    assert r.requests["transfer_s"][0] == pytest.approx(sent, rel=1e-12, abs=1e-15)
    assert r.requests["latency_s"][0] == pytest.approx(a["ttft_s"] + sent + (n - 1) * a["tpot_s"], rel=1e-9)
    assert r.summary["kv_transferred_bytes"] == prompt * 32768


def test_the_default_link_is_a_400_gbps_nic():
    assert (KvLink().gbps, KvLink().latency_us) == (400.0, 14.0)  # NCCL master's network hop (issue 57 item 4)
    assert parse_link("400,9.6") == KvLink(400.0, 9.6)
    assert parse_link("inf,0") == INSTANT


def test_pools_of_other_sizes_and_devices(mixed_trace, d):
    """Two prefill servers on one device, three decode servers on another: each pool's
    summary says where it ran; requests spread over all replicas."""
    h100 = resolve(MODEL, "h100-sxm", attention="flash")
    arrivals = mixed_trace(120, 40.0, 2)
    r = simulate_disaggregated(Pool(d, 2, SCHED), Pool(h100, 3, SCHED), arrivals)
    assert r.meta["disaggregated"]["prefill"] == {"hardware": "a6000", "replicas": 2}
    assert r.meta["disaggregated"]["decode"] == {"hardware": "h100-sxm", "replicas": 3}
    assert set(r.requests["prefill_replica"].tolist()) == {0, 1}
    assert set(r.requests["decode_replica"][arrivals.output >= 2].tolist()) == {0, 1, 2}
    assert np.all(r.requests["latency_s"] >= r.requests["ttft_s"])


def test_a_preempted_decode_recomputes_its_whole_context(d):
    """The decode pool's cache holds one long request at a time: the second preempted one
    recomputes prompt + emitted tokens, as on any server."""
    arrivals = Arrivals(np.array([0.0, 0.0]), np.array([400, 400]), np.array([300, 300]))
    tight = Scheduler(max_batch=16, token_budget=512, kv_blocks=60)
    r = simulate_disaggregated(Pool(d, 1, SCHED), Pool(d, 1, tight), arrivals, link=INSTANT)
    dec = r.summary["pools"]["decode"]
    assert dec["preemptions"] >= 1
    assert dec["recomputed_tokens"] > 0
    assert dec["output_tokens"] == 600


@pytest.mark.parametrize(
    "text, message",
    [
        ("400", "--kv-link takes GBPS,US (bandwidth in Gb/s, latency in microseconds), e.g. 400,14; got '400'"),
        ("fast,1", "--kv-link takes GBPS,US (bandwidth in Gb/s, latency in microseconds), e.g. 400,14; got 'fast,1'"),
        ("0,1", "--kv-link bandwidth must be a positive number of Gb/s, got 0.0"),
        ("nan,1", "--kv-link bandwidth must be a positive number of Gb/s, got nan"),
        ("400,-1", "--kv-link latency must be >= 0 microseconds, got -1.0"),
        ("400,inf", "--kv-link latency must be >= 0 microseconds, got inf"),
    ],
)
def test_bad_links_are_refused(text, message):
    with pytest.raises(RidgelineError) as err:
        parse_link(text)
    assert str(err.value) == message


def test_cli_disaggregated(d):
    """``simulate --prefill-replicas 1 --decode-replicas 2 --kv-link inf,0``: the pools'
    table; JSON with the link and both pools, the same numbers as the Python API."""
    args = ["simulate", MODEL, "-H", DEVICE, "--requests", "40", "--rate", "20"]
    args += ["--prefill-replicas", "1", "--decode-replicas", "2", "--kv-link", "inf,0"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "pools" in table.output and "KV transfer p50 0 ns" in table.output
    data = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    assert data["meta"]["disaggregated"]["kv_link"] == {"gbps": "inf", "latency_us": 0.0}
    api = simulate_disaggregated(
        Pool(d), Pool(d, 2), poisson(20.0, 40, 512, 128, seed=0), link=INSTANT, route="round-robin"
    )
    assert data["summary"]["tpot_s"] == api.summary["tpot_s"]
    assert data["summary"]["pools"]["decode"]["requests"] == 40


@pytest.mark.parametrize(
    "args, message",
    [
        (["--kv-link", "400,1"], "--kv-link need --prefill-replicas and --decode-replicas"),
        (["--prefill-replicas", "2"], "disaggregation needs both --prefill-replicas and --decode-replicas"),
        (["--prefill-replicas", "1", "--decode-replicas", "1", "--kv-link", "0,1"], "bandwidth must be a positive"),
        (["--prefill-replicas", "1", "--decode-replicas", "0"], "replicas must be a whole number from 1 to 1024"),
        (["--prefill-replicas", "1", "--decode-replicas", "1", "--replicas", "2"], "each pool has its own count"),
    ],
)
def test_cli_bad_pools_are_one_line(args, message):
    result = runner.invoke(app, ["simulate", MODEL, "-H", DEVICE, "--requests", "5", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
