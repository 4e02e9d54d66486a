"""The prefix cache: closed-form hit counts, LRU eviction within the KV capacity, what a
hit costs, conservation, and nothing changed with the cache off."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ridgeline.api import simulate
from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.serving.arrivals import Arrivals, poisson, shared_prefix
from ridgeline.serving.prefix_cache import PrefixCache, chain_keys
from ridgeline.serving.simulator import Scheduler

MODEL, DEVICE = "llama-3.2-1b", "a6000"
BLOCK = 16  # the deployment's KV block (Settings.kv_block's default)
CACHE = Scheduler(prefix_cache=True)
runner = CliRunner()


def with_ids(time_s, prompt, output, ids, block=BLOCK) -> Arrivals:
    ids = tuple(np.asarray(i, dtype=np.int64) for i in ids)
    return Arrivals(np.asarray(time_s, dtype=float), np.asarray(prompt), np.asarray(output), "", ids, block)


@pytest.mark.parametrize("rate", [0.5, 1e6])  # requests one at a time; all at once
@pytest.mark.parametrize("system, fanout", [(1000, 8), (1024, 4), (15, 3)])
def test_hits_are_the_generators(rate, system, fanout):
    """Groups of F requests share a system prompt of S tokens: every request after the
    first of its group hits the S // 16 whole blocks of it (the block it shares with its own
    text is its own), so hits = groups x (F - 1) x (S // 16) x 16; the cache holds them all.
    At 10^6 requests/s all arrive together: followers admitted in the leader's step hit
    the blocks that step computes, as vLLM caches a block when its step is scheduled."""
    n, prompt = 48, 1500
    arrivals = shared_prefix(poisson(rate, n, prompt, 8, seed=3), system, fanout, BLOCK)
    r = simulate(MODEL, DEVICE, arrivals, Scheduler(prefix_cache=True, token_budget=8192, max_batch=64))
    hits = -(-n // fanout) * (fanout - 1) * (system // BLOCK) * BLOCK
    assert r.summary["prefix_hit_tokens"] == hits
    assert r.summary["prefix_hit_rate"] == pytest.approx(hits / (n * prompt), rel=1e-12)
    assert r.summary["computed_tokens"] == n * (prompt + 8 - 1) - hits


def test_cache_off_changes_nothing():
    """The same requests with and without block ids, the cache off: every number equal."""
    plain = poisson(20.0, 200, 700, 40, seed=2)
    ided = shared_prefix(plain, 512, 4, BLOCK)
    a, b = (simulate(MODEL, DEVICE, x, Scheduler(max_batch=32, kv_blocks=300)) for x in (plain, ided))
    for key in a.requests:
        np.testing.assert_array_equal(a.requests[key], b.requests[key], err_msg=key)
    for key in a.timeline:
        np.testing.assert_array_equal(a.timeline[key], b.timeline[key], err_msg=key)
    assert a.summary == b.summary and b.summary["prefix_hit_tokens"] == 0


def ideal_hits(arrivals: Arrivals) -> int:
    """Hits with a cache that never evicts, requests served one at a time: each prompt's
    longest run of leading units seen before, in whole 16-token KV blocks with at least one
    token left to compute (issue 57 item 2)."""
    seen, hits, unit = set(), 0, arrivals.hash_block
    for ids, prompt in zip(arrivals.hash_ids, arrivals.prompt.tolist()):
        whole = min(len(ids), prompt // unit)
        prefixes = [tuple(ids[: j + 1].tolist()) for j in range(whole)]
        found = next((j for j, p in enumerate(prefixes) if p not in seen), len(prefixes))
        hits += min(found * unit, (prompt - 1) // 16 * 16)
        seen.update(prefixes)
    return hits


def test_mooncake_blocks_one_at_a_time_hit_every_prefix_seen_before():
    """Mooncake's ids (512-token blocks, the last partial, shared by the prefixes they
    name); requests 100 s apart, a cache that holds everything: hits are the longest
    prefixes seen before, worked out independently of the cache."""
    rng = np.random.default_rng(5)
    ids, prompts, fresh = [], [], 1000
    for _ in range(40):
        prompt = int(rng.integers(200, 5000))
        blocks = -(-prompt // 512)
        keep = int(rng.integers(0, blocks + 1)) if ids else 0
        parent = ids[int(rng.integers(len(ids)))] if ids else []
        own = list(parent[: min(keep, len(parent))])
        own += list(range(fresh, fresh + blocks - len(own)))
        fresh += blocks
        ids.append(np.array(own))
        prompts.append(prompt)
    arrivals = with_ids(np.arange(40) * 100.0, prompts, [4] * 40, ids, 512)
    r = simulate(MODEL, DEVICE, arrivals, Scheduler(prefix_cache=True, token_budget=8192))
    assert r.summary["prefix_hit_tokens"] == ideal_hits(arrivals) > 0


def lru_run(kv_blocks: int):
    """A (ids 0..9), B (100..109), then C (0..7, 200, 201): 160-token prompts, 10 blocks of
    16, one at a time."""
    ids = [range(10), range(100, 110), [*range(8), 200, 201]]
    arrivals = with_ids([0.0, 10.0, 20.0], [160] * 3, [2] * 3, ids)
    return simulate(MODEL, DEVICE, arrivals, Scheduler(prefix_cache=True, kv_blocks=kv_blocks))


def test_lru_eviction_within_the_kv_capacity():
    """With 20 blocks, B's 10 prompt blocks and A's 10 cached ones fit; B's decode block
    evicts A's least recently freed (its last: a request's blocks are freed last first):
    C finds A's first 8 and hits 128 tokens. With 12 blocks, B's prompt evicts 8 of A's and
    its decode one more: A's block 0 is left, C hits 16 tokens."""
    assert list(lru_run(20).requests["prefix_hit_tokens"]) == [0, 0, 128]
    assert list(lru_run(12).requests["prefix_hit_tokens"]) == [0, 0, 16]


def test_a_hit_skips_the_prefill_not_the_kv_read():
    """C's prefill step after a hit of 128 tokens costs what a chunk of 32 tokens over 128
    cached ones costs (the fixed-fraction model prices that, prefix_hit 0.8): dearer than a
    fresh prefill of 32 (the attention reads the 128), cheaper than one of 160."""
    cached = lru_run(20).timeline
    c_prefill = cached["step_s"][np.flatnonzero(cached["start_s"] >= 20.0)[0]]
    one = with_ids([0.0], [160], [2], [range(10)])
    alone = simulate(MODEL, DEVICE, one, Scheduler(prefix_hit=0.8)).timeline["step_s"][0]
    assert c_prefill == pytest.approx(alone, rel=1e-12)
    fresh = [simulate(MODEL, DEVICE, poisson(1.0, 1, n, 2)).timeline["step_s"][0] for n in (32, 160)]
    assert fresh[0] < c_prefill < fresh[1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    blocks=st.integers(40, 200),
    budget=st.integers(32, 600),
    batch=st.integers(1, 12),
    system=st.integers(1, 300),
    fanout=st.integers(1, 6),
    seed=st.integers(0, 3),
)
def test_tokens_are_conserved_with_the_cache(blocks, budget, batch, system, fanout, seed):
    """Preemptions, evictions and shared blocks included: every request gets its output;
    computed = sum(prompt + output - 1) - hits + recomputed; the blocks in use never pass
    the cache and it ends empty of running requests."""
    rng = np.random.default_rng(seed)
    n = 30
    prompt, out = rng.integers(1, 300, n), rng.integers(1, 60, n)
    arrivals = shared_prefix(Arrivals(np.sort(rng.uniform(0, 2, n)), prompt, out), system, fanout, BLOCK)
    r = simulate(
        MODEL, DEVICE, arrivals, Scheduler(max_batch=batch, token_budget=budget, kv_blocks=blocks, prefix_cache=True)
    )
    s = r.summary
    assert np.all(np.isfinite(r.requests["latency_s"]))
    assert s["computed_tokens"] == int(np.sum(prompt + out - 1)) - s["prefix_hit_tokens"] + s["recomputed_tokens"]
    assert np.all(r.timeline["kv_blocks"] <= blocks)
    assert 0 <= s["prefix_hit_rate"] <= 1


def test_the_cache_itself():
    """Hash chains: a block's key depends on every block before it."""
    a, b = chain_keys(np.array([1, 2, 3]), 3), chain_keys(np.array([9, 2, 3]), 3)
    assert len(set(a) & set(b)) == 0
    cache = PrefixCache(tokens=16, blocks=1)
    assert all(cache.add(k) for k in a) and cache.match(a + b) == (3, 3)
    assert cache.drop(a) == 3 and cache.match(a) == (3, 0)
    cache.fit(1)  # the last block, freed first, goes first
    assert list(cache.free) == [a[0]] and cache.match(a) == (1, 0)


@pytest.mark.parametrize(
    "arrivals, scheduler, model, message",
    [
        (shared_prefix(poisson(1.0, 2, 100, 2), 64, 2, 8), CACHE, MODEL, "not whole KV blocks of 16"),
        (shared_prefix(poisson(1.0, 2, 100, 2), 64, 2, 16), CACHE, "mistral-7b-v0.1", "sliding window"),
    ],
)
def test_what_the_cache_needs(arrivals, scheduler, model, message):
    with pytest.raises(RidgelineError, match=message):
        simulate(model, DEVICE, arrivals, scheduler)


def test_prompts_without_ids_share_nothing():
    """Issue 57 item 7: vLLM V1 caches prefixes by default; Poisson prompts carry no block
    ids (each prompt its own tokens), so the cache on serves them exactly as the cache off."""
    arrivals = poisson(4.0, 40, 300, 8, 1)
    on, off = (simulate(MODEL, DEVICE, arrivals, Scheduler(prefix_cache=c)) for c in (True, False))
    assert on.summary["prefix_hit_tokens"] == 0
    assert on.summary == off.summary
    assert list(on.timeline["step_s"]) == list(off.timeline["step_s"])


def test_one_hit_model_at_a_time():
    with pytest.raises(RidgelineError, match="prefix-hit assumes a fixed cached fraction and prefix-cache"):
        Scheduler(prefix_cache=True, prefix_hit=0.5)


def test_cli_shared_prefix(tmp_path):
    """16 requests of 1500 tokens, 1 a second, groups of 8 sharing 1024 tokens: 2 x 7 x 1024 hits."""
    out = tmp_path / "sim.json"
    base = ["simulate", MODEL, "-H", DEVICE, "--requests", "16", "--prompt", "1500", "--output-tokens", "4"]
    shared = ["--prefix", "shared:system=1024,fanout=8"]
    result = runner.invoke(app, [*base, *shared, "--prefix-cache", "-f", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())["summary"]
    assert summary["prefix_hit_tokens"] == 2 * 7 * 1024
    assert summary["prefix_hit_rate"] == pytest.approx(2 * 7 * 1024 / (16 * 1500), rel=1e-12)
    table = runner.invoke(app, [*base, *shared, "--prefix-cache"]).output
    assert "prefix cache: 14336 prompt tokens hit (59.7% of the prefill asked for)" in table
    off = runner.invoke(app, [*base, *shared, "--no-prefix-cache"]).output
    assert "prefix cache" not in off.replace("prefix caching off; given: prefix_cache", "")
    plain = runner.invoke(app, [*base, "--prefix-cache"]).output  # Poisson prompts: no ids, no hits
    assert "prefix cache: on, no prompt tokens hit (shared blocks need ids: a trace's hash_ids or --prefix)" in plain
    for extra, message in ((["--prefix", "shared:fanout=8"], "--prefix takes shared:system=TOKENS,fanout=N"),):
        bad = runner.invoke(app, [*base, *extra])
        assert bad.exit_code == 2 and message in bad.output


def test_a_fully_cached_prompt_hits_all_but_its_last_block():
    """Issue 57 item 2: a 1024-token prompt whose two Mooncake ids (512 tokens each, 32 KV
    blocks of 16) are both cached hits 1008 tokens and computes the last 16 (vLLM hits at
    most prompt - 1 tokens, in whole blocks); before, whole 512-token units: 512 and 512."""
    arrivals = with_ids([0.0, 10.0], [1024, 1024], [2, 2], [[7, 8], [7, 8]], 512)
    r = simulate(MODEL, DEVICE, arrivals, Scheduler(prefix_cache=True, token_budget=2048))
    assert list(r.requests["prefix_hit_tokens"]) == [0, 1008]
    # the first prompt whole and its one decode token; the second's last block and its decode token
    assert r.summary["computed_tokens"] == 1024 + 1 + 16 + 1
