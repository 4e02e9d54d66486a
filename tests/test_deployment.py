"""Deployment settings: quantisation, attention kernels, MoE, MLA, parallelism, speculation.

Hand-worked goldens cite the config they come from (models/catalog/*.json)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ridgeline as rl
from ridgeline.api import max_batch, speculative
from ridgeline.engine.layers import Plan, attended_pairs, expected_experts, pipeline_factors
from ridgeline.engine.memory import active_parameters, kv_bytes_per_token, weight_bytes
from ridgeline.engine.speculative import expected_tokens
from ridgeline.errors import InvalidWorkloadError, UnsupportedDtypeError

ONE_BYTE = Plan(1, 1, 1, "fp16", "fp16")
FP16 = Plan(2, 2, 2, "fp16", "fp16")


def rows(analysis, stage="decode"):
    return {r["name"]: r for r in getattr(analysis, stage).records()}


# --- quantisation ---------------------------------------------------------------------


def test_w4a16_group_scales_and_dequant():
    """q_proj of Llama-2-7B (4096 x 4096) in int4 with groups of 128: half a byte per weight
    plus an fp16 scale and zero point per 128 weights; 2 dequant ops per weight."""
    a = rl.analyze("llama-2-7b", "a6000", w_dtype="int4", group_size=128)
    q = rows(a)["q_proj"]
    assert q["weight_bytes"] == 4096 * 4096 / 2 + 4096 * 4096 / 128 * 4
    assert q["vector_flops"] == 2 * 4096 * 4096
    assert q["dtype"] == "fp16"  # weight-only: matrix work at the fp16 roof
    per_channel = rows(rl.analyze("llama-2-7b", "a6000", w_dtype="int4"))["q_proj"]
    assert per_channel["weight_bytes"] == 4096 * 4096 / 2 + 4096 * 4
    assert rows(a)["lm_head"]["weight_bytes"] == 32000 * 4096 * 2  # lm_head stays 16-bit


@pytest.mark.parametrize(
    "device,w,a,expected",
    [
        ("a6000", "int4", "fp16", "fp16"),  # weight-only: converted up
        ("a6000", "int8", "int8", "int8"),  # W8A8 on int8 tensor cores
        ("a6000", "int4", "int4", "int4"),  # Ampere has int4 units
        ("h100-sxm", "int4", "int4", "int8"),  # Hopper has none: next integer type up
        ("h100-sxm", "fp8_e4m3", "fp8_e4m3", "fp8"),
        ("a100-80gb", "fp8_e4m3", "fp8_e4m3", "fp16"),  # no fp8 units on Ampere
        ("v100", "int8", "int8", "fp16"),  # no int8 tensor cores on Volta
    ],
)
def test_compute_type_follows_the_hardware(device, w, a, expected):
    assert rl.analyze("llama-2-7b", device, w_dtype=w, a_dtype=a).plan.matrix_dtype == expected


def test_float_type_without_units_is_an_error():
    with pytest.raises(UnsupportedDtypeError, match="v100 has no matrix units for bf16"):
        rl.analyze("llama-2-7b", "v100", dtype="bf16")


def test_w8a8_runs_at_the_int8_roof():
    a = rl.analyze("llama-2-13b", "a6000", batch=1, seq_len=2048, w_dtype="int8", a_dtype="int8")
    q = rows(a, "prefill")["q_proj"]
    assert q["bound"] == "compute" and q["perf"] == 310e12


def decode_linear_time(batch: int, w: str) -> float:
    a = rl.analyze("llama-2-13b", "a6000", batch=batch, seq_len=1024, w_dtype=w)
    return sum(r["time_s"] * r["count"] for r in a.decode.records() if r["kind"] == "linear")


def test_paper_decode_gains_from_weight_bits_shrink_with_batch():
    """Seed paper, Fig. 7 (LLaMA-2-13B, A6000, seq 1024): at batch 1 decode is memory-bound
    and int4 weights cut the linear layers' time about 4x; as the batch grows the layers
    become compute-bound and the gain stops: at batch 128 int8 and int4 take the same
    time (both at the fp16 roof, int4 paying its dequantisation)."""
    speedups = [decode_linear_time(b, "fp16") / decode_linear_time(b, "int4") for b in (1, 4, 16, 64)]
    assert speedups[0] > 3.5
    assert all(x > y for x, y in zip(speedups, speedups[1:]))
    assert decode_linear_time(128, "int4") >= decode_linear_time(128, "int8")
    step = [
        rl.analyze("llama-2-13b", "a6000", batch=b, seq_len=1024, w_dtype=w).decode.total["time_s"]
        for b in (1, 64)
        for w in ("fp16", "int4")
    ]
    assert step[0] / step[1] > 3 and step[2] / step[3] < 1.35


def test_paper_prefill_gains_little_from_weight_only_quantisation():
    """Seed paper: at long sequences prefill is compute-bound, so W4A16 barely helps."""
    fp16 = rl.analyze("llama-2-13b", "a6000", seq_len=4096).prefill.total["time_s"]
    int4 = rl.analyze("llama-2-13b", "a6000", seq_len=4096, w_dtype="int4").prefill.total["time_s"]
    assert 0.97 < int4 / fp16 < 1.05


def test_kv_bits_change_only_kv_terms():
    base = rl.analyze("llama-3-8b", "h100-sxm", batch=4, seq_len=2048)
    kv8 = rl.analyze("llama-3-8b", "h100-sxm", batch=4, seq_len=2048, kv_dtype="int8")
    for a, b in zip(base.decode.records(), kv8.decode.records()):
        assert a["weight_bytes"] == b["weight_bytes"] and a["act_read_bytes"] == b["act_read_bytes"]
        assert b["kv_read_bytes"] == a["kv_read_bytes"] / 2
    assert kv8.memory["kv_cache_bytes"] == base.memory["kv_cache_bytes"] / 2


# --- attention ------------------------------------------------------------------------


def test_flash_prefill_has_no_score_matrix_and_skips_masked_half():
    eager = rows(rl.analyze("llama-2-7b", "a6000", seq_len=2048, attention="eager"), "prefill")
    flash = rows(rl.analyze("llama-2-7b", "a6000", seq_len=2048, attention="flash"), "prefill")
    assert "softmax" not in flash and "qk_matmul" not in flash
    pairs = 2048 * 2049 / 2  # causal: query i sees i keys
    assert flash["attention"]["flops"] == 2 * 32 * pairs * (128 + 128)
    assert flash["attention"]["vector_flops"] == 5 * 32 * pairs
    assert flash["attention"]["act_write_bytes"] == 2048 * 4096 * 2  # output only
    # K/V re-read once per 128-row query tile (A6000: 128 KiB on chip, d = 128)
    assert flash["attention"]["kv_read_bytes"] == 32 * pairs / 128 * 256 * 2
    eager_bytes = sum(eager[n]["bytes"] for n in ("qk_matmul", "softmax", "sv_matmul"))
    assert flash["attention"]["bytes"] < eager_bytes / 3


def test_flash_decoding_adds_a_reduction_and_paged_counts_blocks():
    fd = rows(rl.analyze("llama-2-7b", "a6000", seq_len=1000, attention="flash-decoding"))
    splits = math.ceil(84 / 32)  # 84 SMs over batch 1 x 32 heads
    assert fd["attn_combine"]["act_read_bytes"] == 32 * splits * 130 * 4
    paged = rl.analyze("llama-2-7b", "a6000", seq_len=1000, generate=1, attention="paged", kv_block=16)
    assert paged.memory["kv_cache_bytes"] == 1008 * 512 * 1024  # 63 blocks of 16 tokens
    assert rows(paged)["attention"]["kv_read_bytes"] == 1001 * 32 * 256 * 2


def test_sliding_window_caps_kv():
    """Mistral-7B-v0.1: sliding_window 4096."""
    a = rl.analyze("mistral-7b-v0.1", "a6000", seq_len=8000, generate=100, attention="flash")
    assert a.memory["kv_cache_bytes"] == 4096 * 2 * 32 * 8 * 128 * 2
    assert rows(a)["attention"]["kv_read_bytes"] == 4096 * 8 * 256 * 2
    m = rl.load_model("mistral-7b-v0.1")
    assert attended_pairs(m, 8000, 8000, causal=True) == 4096 * 4097 / 2 + (8000 - 4096) * 4096


def test_causal_flash_in_key_blocks():
    """A kernel that takes keys in blocks of 512 computes S^2 pairs up to S = 512; at S = 1300
    (n = 3 blocks): rows 0-511 compute 512 keys, rows 512-1023 compute 1024, rows 1024-1299
    all 1300: 512 x 512 + 512 x 1024 + 276 x 1300 = 262,144 + 524,288 + 358,800 = 1,145,232."""
    m = rl.load_model("llama-3-8b")
    assert attended_pairs(m, 320, 320, causal=True, key_block=512) == 320 * 320
    assert attended_pairs(m, 1300, 1300, causal=True, key_block=512) == 1_145_232
    assert attended_pairs(m, 1300, 1300, causal=True) == 1300 * 1301 / 2  # exact causal
    # the host CPU's plan has PyTorch's CPU key block; a GPU's counts exactly causal
    host = rl.analyze("llama-3-8b", "host", seq_len=320, generate=1, attention="flash", dtype="fp32")
    gpu = rl.analyze("llama-3-8b", "a6000", seq_len=320, generate=1, attention="flash", dtype="bf16")
    flops = [rows(a, "prefill")["attention"]["flops"] for a in (host, gpu)]
    assert flops == [2 * 32 * 320 * 320 * 256, 2 * 32 * 320 * 321 / 2 * 256]


# --- mixture of experts and latent attention ------------------------------------------


def test_mixtral_weights_and_active_parameters():
    """Mixtral-8x7B: h 4096, 8 experts of 3 x 4096 x 14336, top-2, GQA 32/8, vocab 32000."""
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    expert = 3 * 4096 * 14336
    fixed = attention + 4096 * 8 + 2 * 4096  # router and norms
    embeddings = 2 * 32000 * 4096 + 4096
    m = rl.load_model("mixtral-8x7b")
    assert weight_bytes(m, ONE_BYTE) == 32 * (fixed + 8 * expert) + embeddings  # 46.7B
    assert active_parameters(m) == 32 * (fixed + 2 * expert) + embeddings  # 12.9B
    assert round(active_parameters(m) / 1e9, 1) == 12.9


def test_moe_decode_reads_expected_distinct_experts():
    """Uniform routing: E (1 - (1 - k/E)^b) experts hit by b tokens."""
    assert expected_experts(8, 2, 1) == 2
    assert expected_experts(8, 2, 2) == pytest.approx(3.5)
    for batch in (1, 2, 16):
        a = rl.analyze("mixtral-8x7b", "h100-sxm", batch=batch, seq_len=512)
        up = rows(a)["up_proj"]
        assert up["weight_bytes"] == pytest.approx(expected_experts(8, 2, batch) * 4096 * 14336 * 2)
        assert up["flops"] == 2 * batch * 2 * 4096 * 14336


def test_deepseek_mla_kv_bytes_per_token():
    """DeepSeek-V2-Lite: 27 layers x (kv_lora_rank 512 + rope 64) x 2 bytes; V3: 61 layers."""
    assert kv_bytes_per_token(rl.load_model("deepseek-v2-lite"), FP16) == 27 * 576 * 2
    assert kv_bytes_per_token(rl.load_model("deepseek-v3"), FP16) == 61 * 576 * 2
    a = rl.analyze("deepseek-v2-lite", "h100-sxm", batch=1, seq_len=1023, attention="eager")
    assert rows(a)["qk_matmul"]["kv_read_bytes"] == 1024 * 576 * 2  # one latent, all heads
    assert round(weight_bytes(rl.load_model("deepseek-v3"), ONE_BYTE) / 1e9) == 671


# --- parallelism ----------------------------------------------------------------------


def test_pipeline_decode_is_staggered_and_prefill_fills_and_drains():
    """Issue 26, item 2: Llama-2-70B bf16 on H100 SXM, batch 16, pp 4, 4 micro-batches of 4.
    One stage-step (20 layers, a micro-batch of 4, 512 cached) is 10.80 ms by hand, + 0.47 ms
    for eager attention's copies and score passes (issue 26 item 3: 20 layers x [K/V cache 4 x
    8 x 513 x 128 x 2 B x 2 read and 8 times that written, 1.513 GB; 4 x 64 x 513 scores x
    24.03 B more, 63 MB] / 3.35 TB/s): 11.27 ms. Staggered decode rounds take max(m, pp) = 4
    stage-steps: 4 x 11.27 = 45.1 ms (item 2 found 7 x 10.80 = 75.6 ms: (m + pp - 1) = 7
    stage-steps every step). One micro-batch of 16 crosses the 4 stages in turn: 4 x 13.80 ms
    of layers + 0.16 ms of ends (lm_head on the last stage, the sends) = 55.36 ms (issue 57
    item 5; before, 4 x the heaviest stage, 55.84 ms), so micro-batching helps decode.
    Prefill keeps its fill and drain: (4 + 4 - 1) = 7 stage-steps, bubble 3/7."""
    how = {"dtype": "bf16", "batch": 16, "seq_len": 512, "generate": 128, "pp": 4, "attention": "eager"}
    four = rl.analyze("llama-2-70b", "h100-sxm", micro_batches=4, **how)
    one = rl.analyze("llama-2-70b", "h100-sxm", micro_batches=1, **how)
    assert four.decode.total["time_s"] == pytest.approx(4 * 11.27e-3, rel=1e-3)  # 45.1 ms
    assert one.decode.total["time_s"] == pytest.approx(55.36e-3, rel=1e-3)
    assert four.decode.total["time_s"] < one.decode.total["time_s"]
    assert pipeline_factors(four.plan, "prefill") == (7.0, 4.0)
    assert pipeline_factors(four.plan, "decode") == (4.0, 4.0)
    assert four.to_dict()["pipeline"]["decode_bubble_fraction"] == 0.0
    assert one.to_dict()["pipeline"]["decode_bubble_fraction"] == pytest.approx(3 / 4)
    two = rl.analyze("llama-2-70b", "h100-sxm", micro_batches=2, **how).plan
    assert pipeline_factors(two, "decode") == (4.0, 2.0)  # m < pp: two stage-steps idle
    eight = rl.analyze("llama-2-70b", "h100-sxm", micro_batches=8, **how).plan
    assert pipeline_factors(eight, "decode") == (8.0, 8.0)  # m > pp: no stage idles


def test_tp2_all_reduce_bytes_for_llama2_70b():
    """Each layer all-reduces the hidden state twice; ring with n = 2 sends 2(n-1)/n = 1
    message: 8192 x 2 bytes per token per all-reduce."""
    a = rl.analyze("llama-2-70b", "h100-sxm", batch=1, seq_len=1024, tp=2)
    dec, pre = rows(a), rows(a, "prefill")
    assert dec["attn_allreduce"]["comm_bytes"] + dec["mlp_allreduce"]["comm_bytes"] == 2 * 8192 * 2
    assert pre["attn_allreduce"]["comm_bytes"] == 1024 * 8192 * 2
    assert dec["q_proj"]["weight_bytes"] == 8192 * 4096 * 2  # half the heads per device
    assert dec["k_proj"]["weight_bytes"] == 8192 * 4 * 128 * 2  # 8 KV heads -> 4 per device
    four = rows(rl.analyze("llama-2-70b", "h100-sxm", tp=4))
    assert four["attn_allreduce"]["comm_bytes"] == 2 * 3 / 4 * 8192 * 2


def test_link_override_and_bound():
    a = rl.analyze("llama-2-70b", "h100-sxm", batch=1, seq_len=1024, tp=2, link_bw_gb_s=1.0, link_latency_us=5.0)
    r = rows(a)["attn_allreduce"]
    assert r["time_s"] == pytest.approx(16384 / 1e9 + 2 * 5e-6)
    assert r["bound"] == "network"


def test_pipeline_and_expert_parallel():
    a = rl.analyze("llama-2-70b", "a6000", batch=8, seq_len=512, pp=4, micro_batches=4)
    assert a.to_dict()["pipeline"]["bubble_fraction"] == pytest.approx(3 / 7)
    assert rows(a)["q_proj"]["count"] == 20
    single = rl.analyze("llama-2-70b", "a6000", batch=8, seq_len=512)
    assert a.memory["weights_bytes"] < single.memory["weights_bytes"] / 3.5
    e = rows(rl.analyze("mixtral-8x7b", "h100-sxm", batch=4, seq_len=512, ep=4))
    assert e["ep_dispatch"]["comm_bytes"] == 4 * 2 * 4096 * 2 * 3 / 4
    with pytest.raises(InvalidWorkloadError, match="does not split into 3 micro-batches"):
        rl.analyze("llama-2-70b", "a6000", batch=8, pp=2, micro_batches=3)


# --- speculative decoding and serving --------------------------------------------------


def test_expected_tokens():
    assert expected_tokens(4, 0.8) == pytest.approx((1 - 0.8**5) / 0.2)  # 3.3616
    assert expected_tokens(4, 1.0) == 5 and expected_tokens(0, 0.3) == 1


def test_speculative_speedup_and_break_even():
    s = speculative("llama-2-70b", "h100-sxm", "llama-2-7b", seq_len=1024, draft_tokens=4, acceptance=0.8)
    assert s["speedup"] == pytest.approx(
        s["expected_tokens_per_step"] * s["target_step_s"] / (4 * s["draft_step_s"] + s["verify_s"])
    )
    assert s["speedup"] > 1
    even = s["break_even_acceptance"]
    at_even = speculative("llama-2-70b", "h100-sxm", "llama-2-7b", seq_len=1024, draft_tokens=4, acceptance=even)
    assert at_even["speedup"] == pytest.approx(1.0, rel=1e-6)


def test_max_batch_is_the_fitting_boundary():
    top = max_batch("llama-2-7b", "a6000", 1024, 128)
    fits = [
        rl.analyze("llama-2-7b", "a6000", batch=b, seq_len=1024, generate=128).memory["fits"] for b in (top, top + 1)
    ]
    assert fits == [True, False]


# --- invariants -----------------------------------------------------------------------

MODELS = st.sampled_from(["llama-2-7b", "llama-3-8b", "falcon-7b", "mixtral-8x7b", "qwen2-7b"])


@settings(max_examples=30, deadline=None)
@given(
    MODELS,
    st.sampled_from(["int8", "int4", "int2", "int1", "fp8_e4m3"]),
    st.sampled_from([0, 32, 64, 128]),
    st.integers(1, 64),
    st.integers(1, 4096),
)
def test_quantising_never_increases_bytes(model, w, group, batch, length):
    base = rl.analyze(model, "h100-sxm", batch=batch, seq_len=length)
    quant = rl.analyze(model, "h100-sxm", batch=batch, seq_len=length, w_dtype=w, group_size=group)
    for stage in ("prefill", "decode"):
        assert getattr(quant, stage).total["bytes"] <= getattr(base, stage).total["bytes"]
    assert quant.memory["weights_bytes"] <= base.memory["weights_bytes"]


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["llama-2-70b", "llama-3-8b", "mixtral-8x7b"]), st.sampled_from([2, 4, 8]))
def test_tp_never_increases_per_device_weights(model, tp):
    one = rl.analyze(model, "h100-sxm").memory["weights_bytes"]
    split = rl.analyze(model, "h100-sxm", tp=tp)
    assert split.memory["weights_bytes"] <= one
    assert all(
        r["weight_bytes"] <= o["weight_bytes"]
        for r, o in zip(split.decode.records(), rl.analyze(model, "h100-sxm").decode.records())
        if r["name"] == o["name"]
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 32), st.integers(1, 8192), st.floats(0, 1))
def test_speculation_with_no_draft_tokens_changes_nothing(batch, length, acceptance):
    s = speculative(
        "llama-2-13b", "a6000", "llama-2-7b", batch=batch, seq_len=length, draft_tokens=0, acceptance=acceptance
    )
    assert s["speedup"] == pytest.approx(1.0, rel=1e-12)
    assert s["tpot_s"] == pytest.approx(s["target_step_s"], rel=1e-12)


def test_decode_sum_with_window_and_flash_equals_the_loop():
    from ridgeline.engine.analyze import stage_totals
    from ridgeline.engine.layers import stage_ops
    from ridgeline.engine.precision import make_plan
    from ridgeline.engine.roofline import spec_ceilings

    m, d = rl.load_model("mistral-7b-v0.1"), rl.load_device("a6000")
    s = rl.Settings(attention="flash")
    a = rl.analyze(m, d, batch=8, seq_len=4000, generate=300, settings=s)
    p = make_plan(s, d, m.head_dim)
    loop = sum(
        stage_totals(stage_ops(m, "decode", 8, c, p), spec_ceilings(d), p, "decode")[0]["time_s"]
        for c in range(4000, 4299)
    )
    assert a.generation["tpot_s"] * 299 == pytest.approx(loop, rel=1e-9)
