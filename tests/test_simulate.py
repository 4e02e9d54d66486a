"""The serving simulator: queueing theory, the engine's single-request numbers, invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ridgeline import analyze
from ridgeline.api import simulate
from ridgeline.errors import RidgelineError
from ridgeline.io.profile import calibrated_ceilings, load_profile, profile_path
from ridgeline.io.resolve import load_device
from ridgeline.serving.arrivals import Arrivals, poisson
from ridgeline.serving.scheduler import BATCH_ATTENTION
from ridgeline.serving.simulator import Scheduler, goodput, max_rate, meets

MODEL, DEVICE = "llama-3.2-1b", "a6000"
SIM = {"attention": "flash"}  # analyze with what the simulator's vllm-v1 policy runs (issue 26, 5a)


@pytest.mark.parametrize(
    "model, device, options",
    [
        # eager named: analyze's default; the simulator's is its policy's, flash (issue 26, 5a)
        ("llama-3-8b", "h100-sxm", {"attention": "eager"}),
        ("llama-3-8b", "h100-sxm", {"attention": "flash", "w_dtype": "int4", "tp": 2}),
        ("mistral-7b-v0.1", "a6000", {"attention": "paged"}),  # sliding window 4096
        ("qwen2-0.5b", "a6000", {"attention": "flash-decoding"}),
        ("deepseek-v2-lite", "h100-sxm", {"attention": "flash"}),  # MLA: absorbed decode
    ],
)
def test_single_request_is_analyze(model, device, options):
    """One request alone: TTFT is analyze's prefill, latency its TTFT + (N - 1) x TPOT."""
    prompt, n = 5000, 40
    a = analyze(model, device, batch=1, seq_len=prompt, generate=n, **options).generation
    r = simulate(model, device, poisson(1.0, 1, prompt, n), Scheduler(token_budget=8192), **options)
    assert r.requests["queue_s"][0] == 0.0
    assert r.requests["ttft_s"][0] == pytest.approx(a["ttft_s"], rel=1e-9)
    assert r.requests["latency_s"][0] == pytest.approx(a["ttft_s"] + (n - 1) * a["tpot_s"], rel=1e-9)
    assert r.requests["tpot_s"][0] == pytest.approx(a["tpot_s"], rel=1e-9)


def test_single_request_calibrated():
    """The same with the committed CPU profile's calibrated ceilings."""
    device = load_device("a6000")  # the CPU profile's ceilings on any spec: only the roofs matter
    roofs = calibrated_ceilings(load_profile(profile_path("cpu-amd-epyc-1t")), device)
    a = analyze(
        "qwen2-0.5b", device, batch=1, seq_len=100, generate=20, dtype="bf16", attention="flash", ceilings=roofs
    ).generation
    r = simulate("qwen2-0.5b", device, poisson(1.0, 1, 100, 20), dtype="bf16", attention="flash", ceilings=roofs)
    assert r.meta["mode"] == "calibrated"
    assert r.requests["latency_s"][0] == pytest.approx(a["total_s"], rel=1e-9)


@pytest.mark.slow
def test_md1_mean_wait_matches_pollaczek_khinchine():
    """One request in service at a time (max batch 1), each a 256-token prompt and one
    output token (constant service D = the prefill), Poisson arrivals at rho = 0.5:
    M/D/1 mean wait Wq = lambda D^2 / (2 (1 - rho)) = rho D / (2 (1 - rho)) = D / 2
    (Pollaczek-Khinchine). Over 1e5 requests the sample mean's standard error is ~1 %."""
    d = analyze(MODEL, DEVICE, batch=1, seq_len=256, generate=1, **SIM).generation["ttft_s"]
    rho = 0.5
    lam = rho / d
    r = simulate(MODEL, DEVICE, poisson(lam, 100_000, 256, 1, seed=0), Scheduler(max_batch=1))
    assert np.all(r.requests["latency_s"] - r.requests["queue_s"] == pytest.approx(d, rel=1e-9))
    assert r.requests["queue_s"].mean() == pytest.approx(lam * d**2 / (2 * (1 - rho)), rel=0.02)


def in_system_time_average(r) -> float:
    """Time-average number of requests in the server, from the step timeline alone:
    running + waiting at each step start, held for the step (idle gaps hold 0)."""
    line = r.timeline
    area = np.sum((line["running"] + line["waiting"]) * line["step_s"])
    return area / r.summary["duration_s"]


@pytest.mark.parametrize("attention", ["varlen", "gather"])
def test_littles_law(attention):
    """L = lambda W: the time-average number in the system (timeline) equals the arrival
    rate times the mean time in the system (per-request latencies), within 2 % (requests
    arriving mid-step are counted from the next step start)."""
    r = simulate(
        MODEL, DEVICE, poisson(30.0, 3000, 512, 64, seed=3), Scheduler(max_batch=64, batch_attention=attention)
    )
    lam = len(r.requests["arrival_s"]) / r.summary["duration_s"]
    assert r.summary["mean_running"] > 4  # a loaded server, not one request at a time
    assert in_system_time_average(r) == pytest.approx(lam * r.requests["latency_s"].mean(), rel=0.02)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(16, 600),
    batch=st.integers(1, 12),
    blocks=st.integers(40, 200),
    hit=st.sampled_from([0.0, 0.5]),
    margin=st.sampled_from([0.0, 0.15]),
    chunked=st.booleans(),
    seed=st.integers(0, 3),
    attention=st.sampled_from(BATCH_ATTENTION),
)
def test_tokens_are_conserved(budget, batch, blocks, hit, margin, chunked, seed, attention):
    """Every request gets exactly its output tokens; the model runs every prompt and
    output token once (the last output token needs no pass), minus prefix hits, plus
    whatever preemptions threw away; the cache ends empty and never overflows."""
    rng = np.random.default_rng(seed)
    n = 30
    prompt, out = rng.integers(1, 300, n), rng.integers(1, 60, n)
    if not chunked:
        budget = max(budget, int(np.max(prompt + out)))
    arrivals = Arrivals(np.sort(rng.uniform(0, 2, n)), prompt, out)
    sched = Scheduler(
        max_batch=batch,
        token_budget=budget,
        kv_blocks=blocks,
        prefix_hit=hit,
        admit_margin=margin,
        chunked_prefill=chunked,
        batch_attention=attention,
    )
    r = simulate(MODEL, DEVICE, arrivals, sched)
    s = r.summary
    assert np.all(np.isfinite(r.requests["latency_s"]))
    assert s["computed_tokens"] == int(np.sum(prompt + out - 1)) - s["prefix_hit_tokens"] + s["recomputed_tokens"]
    assert np.all(r.timeline["kv_blocks"] <= blocks)
    assert np.all(r.timeline["running"] <= batch) and np.all(r.timeline["tokens"] <= budget)
    assert np.all(r.requests["ttft_s"] <= r.requests["latency_s"])
    assert np.all(r.requests["queue_s"] <= r.requests["ttft_s"])


def test_preemption_recomputes():
    """A cache of 40 blocks x 16 tokens for 8 requests of 100 + 80 tokens: they cannot all
    stay, so the last admitted are preempted and recomputed."""
    r = simulate(MODEL, DEVICE, poisson(1000.0, 8, 100, 80), Scheduler(kv_blocks=40))
    assert r.summary["preemptions"] > 0 and r.summary["recomputed_tokens"] > 0
    assert r.summary["kv_peak_fraction"] <= 1.0


def test_chunked_prefill_splits_the_prompt():
    """A 1000-token prompt with a 256-token budget takes ceil(1000/256) = 4 steps to its
    first token; the first chunk is a fresh prefill of 256 tokens."""
    r = simulate(MODEL, DEVICE, poisson(1.0, 1, 1000, 2), Scheduler(token_budget=256))
    assert list(r.timeline["tokens"]) == [256, 256, 256, 232, 1]
    first = analyze(MODEL, DEVICE, batch=1, seq_len=256, **SIM).prefill.total["time_s"]
    assert r.timeline["step_s"][0] == pytest.approx(first, rel=1e-9)
    assert r.requests["ttft_s"][0] > analyze(MODEL, DEVICE, seq_len=1000, **SIM).prefill.total["time_s"]


def test_reproducible_under_a_seed():
    def run(seed):
        return simulate(MODEL, DEVICE, poisson(40.0, 500, 300, 50, seed=seed), Scheduler(max_batch=32))

    a, b, c = run(7), run(7), run(8)
    for key in a.requests:
        np.testing.assert_array_equal(a.requests[key], b.requests[key])
    assert not np.array_equal(a.requests["latency_s"], c.requests["latency_s"])


def test_goodput_and_rate_search():
    """The rate found meets the SLOs; a rate at most 2 % above it was tried and failed."""

    def run(rate):
        return simulate(MODEL, DEVICE, poisson(rate, 400, 512, 64, seed=1), Scheduler(max_batch=32))

    found = max_rate(run, ttft_slo=0.2, tpot_slo=None, percentile=90, start=5.0)
    best = found["max_rate"]
    assert best > 0 and meets(run(best), 0.2, None, 90)
    failed = [t["rate"] for t in found["tried"] if not t["meets"]]
    assert min(failed) <= best * 1.02 + 1e-9
    g = goodput(run(best), ttft_slo=0.2)
    assert 0.9 <= g["slo_attainment"] <= 1.0 and g["goodput_rps"] > 0


@pytest.mark.parametrize(
    "scheduler, message",
    [
        (dict(max_batch=0), "max-batch"),
        (dict(prefix_hit=1.0), "prefix-hit"),
        (dict(token_budget=10, chunked_prefill=False), "token-budget"),
        (dict(kv_blocks=2), "KV blocks"),
    ],
)
def test_bad_settings_say_what_to_change(scheduler, message):
    with pytest.raises(RidgelineError, match=message):
        simulate(MODEL, DEVICE, poisson(1.0, 3, 100, 10), Scheduler(**scheduler))


def test_kv_cache_too_small_for_the_model():
    with pytest.raises(RidgelineError, match="no room for a KV cache"):
        simulate("llama-2-70b", "a6000", poisson(1.0, 3, 100, 10))


def test_host_overhead_on_a_single_request():
    """A 100-token prompt (one step: the budget holds it) and N = 20 output tokens run in
    N steps, each with one request, so each step adds step + request overhead:
    a = 3 ms + 1 ms x 1 = 4 ms. TTFT = analyze's TTFT + a; latency = analyze's TTFT +
    (N - 1) x TPOT + N x a = ... + 20 x 4 ms = ... + 80 ms; TPOT = analyze's TPOT + a."""
    prompt, n, a = 100, 20, 0.003 + 0.001
    g = analyze(MODEL, DEVICE, batch=1, seq_len=prompt, generate=n, **SIM).generation
    s = Scheduler(step_overhead_s=0.003, request_overhead_s=0.001)
    r = simulate(MODEL, DEVICE, poisson(1.0, 1, prompt, n), s)
    assert r.requests["ttft_s"][0] == pytest.approx(g["ttft_s"] + a, rel=1e-9)
    assert r.requests["latency_s"][0] == pytest.approx(g["ttft_s"] + (n - 1) * g["tpot_s"] + 0.080, rel=1e-9)
    assert r.requests["tpot_s"][0] == pytest.approx(g["tpot_s"] + a, rel=1e-9)


def test_host_overhead_scales_with_requests_in_the_step():
    """Two requests arriving together share every step: each step costs what it did
    without overhead plus 3 ms + 2 x 1 ms, so the total simulated time grows by 5 ms a
    step (the schedule itself does not change with the overhead)."""
    both = Arrivals(np.zeros(2), np.array([64, 64]), np.array([8, 8]), "two")
    plain = simulate(MODEL, DEVICE, both, Scheduler())
    more = simulate(MODEL, DEVICE, both, Scheduler(step_overhead_s=0.003, request_overhead_s=0.001))
    assert plain.summary["steps"] == more.summary["steps"] == 8
    np.testing.assert_allclose(more.timeline["step_s"] - plain.timeline["step_s"], 0.005, rtol=1e-9)


@pytest.mark.parametrize("field, value", [("step_overhead_s", -1e-3), ("request_overhead_s", float("nan"))])
def test_host_overhead_must_be_seconds(field, value):
    with pytest.raises(RidgelineError, match=field[:-2].replace("_", "-") + " must be >= 0 seconds"):
        Scheduler(**{field: value})


def test_masked_attention_one_sequence_is_varlen_and_more_with_several():
    """One attention over the whole step (transformers' sdpa path): with one sequence it is
    that sequence's own pass (a chunk of 32 over 100 cached: the same T x keys pairs,
    32 x 132); with 8 chunks of 32 over 100 cached each every query meets all 8 x 132
    keys, 8 times the pairs of the per-sequence kernels, so the step costs more (8 decodes
    read the same keys once either way: memory-bound on an A6000, no cheaper)."""
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.step_cost import build_step_cost, masked_step_time, step_time

    d = resolve("qwen2-0.5b", "a6000", dtype="bf16", attention="flash")
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16)
    assert masked_step_time(cost, 0, 32, 1, 132.0) == pytest.approx(step_time(cost, [], [(32, 100)], 0, 0.0), rel=1e-12)
    assert masked_step_time(cost, 0, 256, 8, 8 * 132.0) > step_time(cost, [], [(32, 100)] * 8, 0, 0.0)
    assert masked_step_time(cost, 0, 8, 8, 808.0) >= step_time(cost, [], [], 8, 800.0)
    with pytest.raises(RidgelineError, match="batch-attention must be one of"):
        Scheduler(batch_attention="dense")


def test_masked_attention_serves_the_same_schedule():
    """The attention policy changes step costs, not the tokens served: every request gets
    its tokens and the steps are as many (the trace is far below saturation)."""
    trace = poisson(0.5, 20, 64, 16, seed=3)
    a = simulate("qwen2-0.5b", "a6000", trace, Scheduler(max_batch=16, token_budget=256))
    b = simulate("qwen2-0.5b", "a6000", trace, Scheduler(max_batch=16, token_budget=256, batch_attention="masked"))
    assert a.summary["computed_tokens"] == b.summary["computed_tokens"]
    assert np.all(b.timeline["step_s"] >= a.timeline["step_s"] * (1 - 1e-12))


# --- transformers' sdpa step (batch_attention "gather") ------------------------------------


def _qwen_flash():
    from ridgeline.io.resolve import resolve

    return resolve("qwen2-0.5b", "a6000", dtype="bf16", attention="flash")


def test_gather_ops_bytes_by_hand():
    """Qwen2-0.5B (24 layers, 14 query heads, 2 K/V heads, head_dim 64), bf16, a step of
    T = 40 query tokens over K = 1000 keys. One K (or V) row is 2 x 64 x 2 B = 256 B.
    kv_write: 40 rows read and written, 10 240 B each way; kv_gather: 1000 rows, 256 000 B
    each way; kv_repeat: 256 000 B read, 1000 x 14 x 64 x 2 = 1 792 000 B written; each of
    the three is two kernels (K, V) per layer: 48. Attention with the heads repeated:
    2 x 14 x 40 x 1000 x (64 + 64) = 143 360 000 flops, K/V read per query head
    14 x 1000 x 128 x 2 = 3 584 000 B, the query 40 x 14 x 64 x 2 = 71 680 B plus the mask
    40 x 1000 x 2 = 80 000 B, the output 71 680 B, 24 kernels; its tiles hold T = 40 rows.
    For a lone query token the query heads fold onto the 2 K/V heads: 512 000 B of K/V."""
    from ridgeline.engine.roofline import tile_rows
    from ridgeline.serving.transformers_sdpa import GATHER_OPS, gather_ops

    d = _qwen_flash()
    write, gather, repeat, attn, last, folded = gather_ops(d.model, d.plan, 40, 1000)
    assert tuple(op.name for op in (write, gather, repeat, attn, last, folded)) == GATHER_OPS
    assert last.flops == last.act_read_bytes == 0  # a GPU: one block of all T rows
    assert (write.act_read_bytes, write.kv_write_bytes) == (10_240, 10_240)
    assert (gather.kv_read_bytes, gather.act_write_bytes) == (256_000, 256_000)
    assert (repeat.act_read_bytes, repeat.act_write_bytes) == (256_000, 1_792_000)
    assert write.count == gather.count == repeat.count == 48 and attn.count == 24
    assert write.flops == gather.flops == repeat.flops == 0
    assert attn.flops == 143_360_000 and attn.kv_read_bytes == 3_584_000
    assert (attn.act_read_bytes, attn.act_write_bytes) == (151_680, 71_680)
    assert tile_rows(attn) == 40 and tile_rows(folded) == 40 * 7
    assert folded.kv_read_bytes == 512_000 and folded.flops == attn.flops


def test_gather_cpu_query_blocks_by_hand():
    """On a CPU, PyTorch's flash kernel takes the query in blocks of 32 rows below 192 query
    rows, 64 below 768, else 256 (FlashAttentionKernel.cpp). Qwen2-0.5B, bf16, T = 75 over
    K = 496: two full blocks of 32 rows and one of 11. Full blocks: 2 x 2 x 14 x 32 x 496 x
    128 = 113 770 496 flops, K/V read per block and head 2 x 14 x 496 x 128 x 2 = 3 555 328 B,
    query 2 x 32 x 14 x 64 x 2 = 114 688 B plus their mask rows 64 x 496 x 2 = 63 488 B; the
    partial block: 2 x 14 x 11 x 496 x 128 = 19 554 304 flops, 1 777 664 B of K/V, query
    19 712 B + mask 10 912 B, with tiles of 11 rows. Together every pair once: T x K x 14 x
    256 flops. At T = 64: two full blocks, no partial one; at T = 200: three blocks of 64 and
    one of 8."""
    from ridgeline.engine.roofline import tile_rows
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.transformers_sdpa import gather_ops, query_blocks

    # a catalog CPU with bf16 units (the detected host may have none: then bf16 is refused)
    d = resolve("qwen2-0.5b", "epyc-9654", dtype="bf16", attention="flash")
    assert d.plan.key_block == 512  # the CPU flash kernel
    _, _, _, full, last, _ = gather_ops(d.model, d.plan, 75, 496)
    assert (full.flops, full.kv_read_bytes, full.act_read_bytes) == (113_770_496, 3_555_328, 114_688 + 63_488)
    assert (last.flops, last.kv_read_bytes, last.act_read_bytes) == (19_554_304, 1_777_664, 19_712 + 10_912)
    assert full.flops + last.flops == 75 * 496 * 14 * 256
    assert (tile_rows(full), tile_rows(last)) == (32, 11)
    blocks = query_blocks(d.plan, np.array([1, 31, 32, 64, 75, 191, 200, 768, 800]))
    assert [b.tolist() for b in blocks] == [
        [0, 0, 1, 2, 2, 5, 3, 3, 3],
        [32, 32, 32, 32, 32, 32, 64, 256, 256],
        [1, 31, 0, 0, 11, 31, 8, 0, 32],
    ]


def test_gather_lone_decode_by_hand():
    """One sequence decoding over 1000 cached tokens on an A6000 datasheet roofline
    (768 GB/s, no per-kernel overhead), K = 1001 keys: transformers' step is the masked
    step (the engine's decode attention, memory-bound) plus the new token's K/V written
    (48 kernels x 512 B), the 1001 keys read back (48 x 512 x 1001 B) and the mask
    (24 x 2 x 1001 B): (24 576 + 24 600 576 + 48 048) B / 768 GB/s = 32.1 us."""
    from ridgeline.serving.step_cost import build_step_cost, gather_step_time, masked_step_time

    d = _qwen_flash()
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16, "gather")
    extra = gather_step_time(cost, 0, 1, 1, 1001.0, True) - masked_step_time(cost, 0, 1, 1, 1001.0)
    assert extra == pytest.approx((48 * 512 + 48 * 512 * 1001 + 24 * 2 * 1001) / 768e9, rel=1e-9)
    # a step with no cache to read (fresh prompts only) gathers nothing: 48 x 512 x K B less
    with_read = gather_step_time(cost, 64, 0, 2, 64.0, True)
    assert with_read - gather_step_time(cost, 64, 0, 2, 64.0, False) == pytest.approx(48 * 512 * 64 / 768e9, rel=1e-9)


@pytest.mark.parametrize(
    "tokens, keys, reads",
    [(1, 300.0, True), (7, 820.0, True), (155, 786.0, True), (96, 96.0, False), (256, 2900.0, True)],
)
def test_gather_table_is_the_engine_on_its_ops(tokens, keys, reads):
    """The tabulated step (affine in the keys at each T) equals the engine evaluating
    gather_ops at the step's own T and K, here on the committed CPU profile (per-kernel
    overheads, tile fill by rows)."""
    from ridgeline.engine.roofline import evaluate
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.step_cost import _token_part, build_step_cost, gather_step_time
    from ridgeline.serving.transformers_sdpa import gather_ops

    roofs = calibrated_ceilings(load_profile(profile_path("cpu-amd-epyc-1t")), load_device("a6000"))
    d = resolve("qwen2-0.5b", "a6000", dtype="bf16", attention="flash", ceilings=roofs)
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16, "gather")
    t = evaluate(gather_ops(d.model, d.plan, tokens, keys), d.ceilings)
    on = np.array([True, reads, tokens > 1, tokens > 1, tokens > 1, tokens == 1])
    direct = float(np.sum((t["count"] * t["time_s"]).ravel()[on]))
    direct -= float(np.ravel(t["count"] * t["overhead_s"])[4]) * on[4]  # the partial block: one call with the full ones
    fresh = tokens if not reads else 0
    got = gather_step_time(cost, fresh, tokens - fresh, 3, keys, reads) - _token_part(cost, fresh, tokens - fresh, 3)
    assert got == pytest.approx(direct, rel=1e-9)


def test_gather_costs_more_than_masked_and_serves_the_same_tokens():
    """Repeating the K/V heads and copying the cache only add work: every step of a run
    costs at least its masked price, and the tokens served are the same."""
    trace = poisson(0.5, 20, 64, 16, seed=3)
    sched = dict(max_batch=16, token_budget=256)
    masked = simulate("qwen2-0.5b", "a6000", trace, Scheduler(**sched, batch_attention="masked"), attention="flash")
    gather = simulate("qwen2-0.5b", "a6000", trace, Scheduler(**sched, batch_attention="gather"), attention="flash")
    assert gather.summary["computed_tokens"] == masked.summary["computed_tokens"]
    assert np.all(gather.timeline["step_s"] > masked.timeline["step_s"])


def test_gather_refuses_latent_attention():
    with pytest.raises(RidgelineError, match="latent attention"):
        simulate("deepseek-v2-lite", "h100-sxm", poisson(1.0, 2, 64, 4), Scheduler(batch_attention="gather"))


def _reference_decode_time(self, n: int, cached: float) -> float:
    """``StepCost.decode_time`` as first written, on the numpy tables."""
    ca, cb, ma, mb = self.decode
    total = self.token_s[n] + self.cached_only_s[n] + self.head_s[n]
    for k in range(len(self.count)):
        over = self.overhead_s[k] if self.cached_has[k] else 0.0
        total += self.count[k] * (max(ca[k, n] + cb[k, n] * cached, ma[k, n] + mb[k, n] * cached) + over)
    return self.factor * float(total)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    batch=st.integers(1, 48),
    blocks=st.sampled_from([None, 60, 200]),
    hit=st.sampled_from([0.0, 0.5]),
    seed=st.integers(0, 3),
    model=st.sampled_from([MODEL, "mistral-7b-v0.1"]),
)
def test_the_steady_decode_path_changes_no_result(monkeypatch, batch, blocks, hit, seed, model):
    """The hot path (a decode-only step after one that admitted nobody skips the checks,
    ``decode_time`` adds Python floats, and runs of decode-only steps are computed at once:
    ``ServerState.decode_run``) gives every timeline and request time to the bit of the
    path that looks at every request each step (preemptions, prefix hits and a sliding
    window included)."""
    import ridgeline.serving.simulator as S

    rng = np.random.default_rng(seed)
    n = 60
    arrivals = Arrivals(np.sort(rng.uniform(0, 3, n)), rng.integers(1, 400, n), rng.integers(1, 90, n))
    sched = Scheduler(max_batch=batch, token_budget=512, kv_blocks=blocks, prefix_hit=hit)
    fast = simulate(model, DEVICE, arrivals, sched)
    schedule = S._Server.schedule

    def every_request(self, now):
        self.steady = False
        return schedule(self, now)

    with monkeypatch.context() as m:
        m.setattr(S._Server, "schedule", every_request)
        m.setattr(S._Server, "runs_at_once", False)
        m.setattr(S.StepCost, "decode_time", _reference_decode_time)
        slow = simulate(model, DEVICE, arrivals, sched)
    for key in fast.timeline:
        np.testing.assert_array_equal(fast.timeline[key], slow.timeline[key], err_msg=key)
    for key in fast.requests:
        np.testing.assert_array_equal(fast.requests[key], slow.requests[key], err_msg=key)


def test_pipeline_stages_keep_micro_batches_in_flight():
    """Issue 57 item 10: with pp stages a step's requests split into pp interleaved groups,
    and a step lasts the slowest group's pass through every stage. Llama-2-70B fp8 at tp 1,
    pp 2 on an H100's datasheet: 64 prompts of 256 tokens at once are compute-bound, so two
    groups of 32 take about half the one-batch pass; one request alone takes its whole pass
    (the first token of an idle server), exactly as without the split."""
    from ridgeline.io.resolve import resolve
    from ridgeline.serving import simulator
    from ridgeline.serving.scenarios import offline_arrivals
    from ridgeline.serving.step_cost import step_time

    d = resolve("llama-2-70b", "h100-sxm", dtype="fp8", pp=2, attention="flash")
    sched = Scheduler(max_batch=64, token_budget=64 * 256)
    cost = simulator.step_cost_of(d, sched)
    whole, half = step_time(cost, [256] * 64, [], 0, 0.0), step_time(cost, [256] * 32, [], 0, 0.0)
    assert half == pytest.approx(whole / 2, rel=0.02)  # compute-bound: the work halves
    at_once = offline_arrivals(np.full(64, 256), np.full(64, 2))
    run = simulator.simulate_deployment(d, at_once, sched)
    assert run.timeline["step_s"][0] == pytest.approx(half, rel=1e-9)
    alone = simulator.simulate_deployment(d, offline_arrivals(np.full(1, 256), np.full(1, 2)), sched)
    assert alone.timeline["step_s"][0] == pytest.approx(step_time(cost, [256], [], 0, 0.0), rel=1e-9)
