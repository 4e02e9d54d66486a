"""The model families of issue 58, from their own config.json (models/catalog/, each with its
``_source``): parameters against the published figures, KV bytes per token worked by hand,
and one decode step's bytes per op for one model of each family (fp16, flash attention)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ridgeline as rl
from ridgeline.engine.layers import Plan, layer_ops
from ridgeline.engine.memory import (
    active_parameters,
    kv_bytes_per_token,
    kv_cache_bytes,
    total_parameters,
    weight_bytes,
)
from ridgeline.errors import InvalidConfigError

FP16 = Plan(2, 2, 2, "fp16", "fp16", attention="flash")


def decode_rows(model: str, cached: int) -> dict:
    a = rl.analyze(model, "h100-sxm", batch=1, seq_len=cached, attention="flash")
    return {r["name"]: r for r in a.decode.records()}


def embedding(model: str) -> int:
    m = rl.load_model(model)
    return m.vocab_size * m.hidden_size


# (model, published total, published active, relative tolerance, where the figure comes from)
PUBLISHED = [
    # model card: "30.5B in total and 3.3B activated"; active here 3.353B, 1.6 % above the
    # card's 0.1B step (what the card leaves out of "activated" it does not say)
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02),
    # model card: "235B in total and 22B activated" (nearest billion)
    ("qwen3-235b-a22b", 235e9, 22e9, 0.01),
    ("qwen3-8b", 8.2e9, 8.2e9, 0.005),  # model card: "8.2B"
    ("qwen3-32b", 32.8e9, 32.8e9, 0.005),  # model card: "32.8B"
    # Pythia's model card table: 6,857,302,016 total (biases included; ridgeline leaves them out)
    ("pythia-6.9b", 6_857_302_016, 6_857_302_016, 0.005),
    # Meta: Maverick "17B (Activated) 400B (Total)" (nearest billion)
    ("llama-4-maverick", 400e9, 17e9, 0.011),
    # Command R's card: "a 35 billion parameter ... model"; 34.98B here (worked below)
    ("command-r", 35e9, 35e9, 0.005),
]


@pytest.mark.parametrize("name, total, active, rel", PUBLISHED)
def test_parameters_against_the_published_figures(name, total, active, rel):
    m = rl.load_model(name)
    assert total_parameters(m) == pytest.approx(total, rel=rel)
    assert active_parameters(m) == pytest.approx(active, rel=rel)


def test_parameters_where_cards_count_without_the_embedding():
    """gpt-oss's card paper (arXiv 2508.10925): 20.9B total, 3.6B active (20b); 116.8B and
    5.1B (120b); Kimi K2's card: 1T total (1.04T in its report), 32B activated. Their
    active counts leave out the embedding table (a token reads one row of it)."""
    assert total_parameters(rl.load_model("gpt-oss-20b")) == pytest.approx(20.9e9, rel=0.005)
    assert active_parameters(rl.load_model("gpt-oss-20b")) - embedding("gpt-oss-20b") == pytest.approx(3.6e9, rel=0.005)
    assert total_parameters(rl.load_model("gpt-oss-120b")) == pytest.approx(116.8e9, rel=0.005)
    assert active_parameters(rl.load_model("gpt-oss-120b")) - embedding("gpt-oss-120b") == pytest.approx(
        5.1e9, rel=0.01
    )  # 5.13B: the paper rounds to 0.1B
    assert total_parameters(rl.load_model("kimi-k2")) == pytest.approx(1.04e12, rel=0.02)  # 1.026T; "1T" rounded
    assert active_parameters(rl.load_model("kimi-k2")) - embedding("kimi-k2") == pytest.approx(32e9, rel=0.01)


def test_parameters_worked_from_the_shapes():
    """Gemma 2 report (arXiv 2408.00118): 9B has 8,324,201,984 non-embedding parameters;
    + the tied 256000 x 3584 table. OLMo 2 7B, by hand: per layer 4 x 4096^2 + 3 x 4096 x
    11008 + 4 x 4096 (two norms, q_norm and k_norm over all heads) = 202,391,552; x 32, +
    2 x 100352 x 4096 (untied) + 4096 = 7,298,617,344 (the card says "7B")."""
    assert total_parameters(rl.load_model("gemma-2-9b")) - 256000 * 3584 == 8_324_201_984
    assert total_parameters(rl.load_model("olmo-2-7b")) == 7_298_617_344
    # the cards round: StarCoder2 "15B" (15.96B here), Phi-4 "14B" (14.66B), Gemma 3 4B "4B"
    # (3.88B of text decoder; the 0.4B vision tower is left out), Llama 4 Scout "109B" with its
    # vision tower (107.8B of text decoder)
    assert total_parameters(rl.load_model("starcoder2-15b")) == pytest.approx(15.96e9, rel=0.001)
    assert total_parameters(rl.load_model("phi-4")) == pytest.approx(14.66e9, rel=0.001)
    assert total_parameters(rl.load_model("llama-4-scout")) == pytest.approx(109e9, rel=0.012)


def test_parameters_of_the_issue_58_families():
    """Each count worked from its config's shapes (biases left out, as ridgeline counts),
    then held against the published figure.

    GLM-4.5 (h 5120, 96 heads x 128, 8 KV heads, 3 dense layers 12288 wide, 89 MoE layers of
    160 experts 1536 wide, top-8, one shared; vocab 151552, untied): attention 2 x 5120 x
    12288 + 2 x 5120 x 1024 = 136,314,880 a layer, + two norms 10,240 + q/k norms 256; dense
    MLP 3 x 5120 x 12288 = 188,743,680; MoE 160 x 3 x 5120 x 1536 + 3 x 5120 x 1536 + router
    160 x 5120 = 3,799,285,760; 92 x 136,325,376 + 3 x 188,743,680 + 89 x 3,799,285,760 + 2 x
    151552 x 5120 + 5120 = 352,796,495,872. Its README (and transformers' glm4_moe.md): "355
    billion total parameters with 32 billion active": 352.8B leaves out the checkpoint's one
    MTP layer (num_nextn_predict_layers, about 4.0B, not run by the 92-layer forward), so it
    is 0.6 % under the rounded 355B. Active without the embedding and lm_head (2 x 151552 x
    5120): 92 x 136,325,376 + 3 x 188,743,680 + 89 x (9 x 3 x 5120 x 1536 + 819,200) + 5120 =
    32,079,040,512, against 32B.

    Command R (h 8192, 64 heads = 64 KV heads x 128, MLP 22528, one LayerNorm a layer,
    vocab 256000 tied): 40 x (4 x 8192^2 + 3 x 8192 x 22528 + 8192) + 256000 x 8192 + 8192 =
    34,980,831,232 (the card's 35B, above).

    Gemma 2 27B: its report's Table 2 (arXiv 2408.00118) gives 26,047,480,320 non-embedding
    parameters: 46 x (2 x 4608 x 4096 + 2 x 4608 x 2048 + 3 x 4608 x 36864 + 4 x 4608) + 4608,
    exactly; the tied table here is 256000 x 4608 (the report's 1,180,237,824 counts 256128
    rows).

    Granite 3.3 8B (h 4096, 32 heads x 128, 8 KV heads, MLP 12800, vocab 49159 tied): 40 x
    (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 12800 + 2 x 4096) + 49159 x 4096 + 4096 =
    8,170,864,640 (its card says "8B").

    Granite 3.1 3B-A800M (h 1536, 24 heads x 64, 8 KV heads, 40 experts 512 wide, top-8,
    vocab 49155 tied): a layer's attention 2 x 1536^2 + 2 x 1536 x 512 = 6,291,456, experts
    40 x 3 x 1536 x 512 = 94,371,840, router 40 x 1536, norms 2 x 1536; 32 x 100,727,808 +
    49155 x 1536 + 1536 = 3,298,793,472. Active without the embedding: 32 x (6,291,456 + 8 x
    2,359,296 + 61,440 + 3,072) + 1536 = 807,372,288. IBM's granite-3.1-language-models
    README: "3B MoE models, with ... 800M activated parameters" (to 0.1B).

    Mistral Small 3.1's text decoder (h 5120, 32 heads x 128 = 4096, 8 KV heads, MLP 32768,
    vocab 131072 untied: MistralConfig's default): 40 x (2 x 5120 x 4096 + 2 x 5120 x 1024 +
    3 x 5120 x 32768 + 2 x 5120) + 2 x 131072 x 5120 + 5120 = 23,572,403,200; the card's
    "24 billion parameters" include the Pixtral vision tower, left out here."""
    glm = rl.load_model("glm-4.5")
    assert total_parameters(glm) == 352_796_495_872
    assert total_parameters(glm) == pytest.approx(355e9, rel=0.007)
    assert active_parameters(glm) - 2 * embedding("glm-4.5") == 32_079_040_512
    assert active_parameters(glm) - 2 * embedding("glm-4.5") == pytest.approx(32e9, rel=0.005)
    assert total_parameters(rl.load_model("command-r")) == 34_980_831_232
    assert total_parameters(rl.load_model("gemma-2-27b")) - 256000 * 4608 == 26_047_480_320
    assert total_parameters(rl.load_model("granite-3.3-8b")) == 8_170_864_640
    moe = rl.load_model("granite-3.1-3b-a800m")
    assert total_parameters(moe) == 3_298_793_472
    assert active_parameters(moe) - embedding("granite-3.1-3b-a800m") == 807_372_288
    assert active_parameters(moe) - embedding("granite-3.1-3b-a800m") == pytest.approx(800e6, rel=0.01)
    assert total_parameters(rl.load_model("mistral-small-3.1")) == 23_572_403_200


# KV bytes per token in fp16: 2 (K and V) x layers x KV heads x head_dim x 2 B, or MLA's
# layers x (kv_lora_rank + qk_rope_head_dim) x 2 B
KV_PER_TOKEN = {
    "gpt-oss-20b": 2 * 24 * 8 * 64 * 2,  # 49,152
    "gpt-oss-120b": 2 * 36 * 8 * 64 * 2,  # 73,728
    "qwen3-30b-a3b": 2 * 48 * 4 * 128 * 2,  # 98,304
    "qwen3-235b-a22b": 2 * 94 * 4 * 128 * 2,  # 192,512
    "qwen3-8b": 2 * 36 * 8 * 128 * 2,  # 147,456
    "qwen3-32b": 2 * 64 * 8 * 128 * 2,  # 262,144
    "gemma-2-9b": 2 * 42 * 8 * 256 * 2,  # 344,064
    "gemma-3-4b": 2 * 34 * 4 * 256 * 2,  # 139,264
    "gemma-3-27b": 2 * 62 * 16 * 128 * 2,  # 507,904
    "llama-4-scout": 2 * 48 * 8 * 128 * 2,  # 196,608
    "llama-4-maverick": 2 * 48 * 8 * 128 * 2,  # 196,608
    "kimi-k2": 61 * (512 + 64) * 2,  # 70,272
    "olmo-2-7b": 2 * 32 * 32 * 128 * 2,  # 524,288
    "starcoder2-15b": 2 * 40 * 4 * 128 * 2,  # 81,920
    "phi-4": 2 * 40 * 10 * 128 * 2,  # 204,800
    "pythia-6.9b": 2 * 32 * 32 * 128 * 2,  # 524,288
    "glm-4.5": 2 * 92 * 8 * 128 * 2,  # 376,832
    "command-r": 2 * 40 * 64 * 128 * 2,  # 1,310,720: no GQA, 64 KV heads
    "gemma-2-27b": 2 * 46 * 16 * 128 * 2,  # 376,832
    "granite-3.3-8b": 2 * 40 * 8 * 128 * 2,  # 163,840
    "granite-3.1-3b-a800m": 2 * 32 * 8 * 64 * 2,  # 65,536
    "mistral-small-3.1": 2 * 40 * 8 * 128 * 2,  # 163,840
}


@pytest.mark.parametrize("name", sorted(KV_PER_TOKEN))
def test_kv_bytes_per_token(name):
    assert kv_bytes_per_token(rl.load_model(name), FP16) == KV_PER_TOKEN[name]


def test_the_cache_a_sliding_or_chunked_layer_keeps():
    """A layer keeps K and V of 2 x g x d x 2 B a token: 8192 B (Gemma 2 9B), 4096 B (Gemma 3
    4B, Llama 4). Gemma 2 at 8192 tokens: 21 global layers keep 8192, 21 sliding ones 4096.
    Gemma 3 4B at 32768: 5 global x 32768 + 29 sliding x 1024; 27B (8192 B a token): 10
    global (every 6th of 62) x 32768 + 52 sliding x 1024. Maverick at 16384: 36 chunked
    layers x 8192 + 12 global x 16384."""
    assert kv_cache_bytes(rl.load_model("gemma-2-9b"), 1, 8192, FP16) == 8192 * 21 * (8192 + 4096)
    assert kv_cache_bytes(rl.load_model("gemma-3-4b"), 1, 32768, FP16) == 4096 * (5 * 32768 + 29 * 1024)
    assert kv_cache_bytes(rl.load_model("gemma-3-27b"), 1, 32768, FP16) == 8192 * (10 * 32768 + 52 * 1024)
    assert kv_cache_bytes(rl.load_model("llama-4-maverick"), 1, 16384, FP16) == 4096 * (36 * 8192 + 12 * 16384)


def test_gpt_oss_decode_step():
    """gpt-oss-20b, 1000 cached (1001 attended): h 2880, 64 heads x 64, 8 KV heads, top-4 of
    32 experts 2880 wide, vocab 201088, alternating 128-token sliding and global layers."""
    r = decode_rows("gpt-oss-20b", 1000)
    assert r["sliding/attention"]["kv_read_bytes"] == 8 * 128 * (64 + 64) * 2  # the window: 128 keys
    assert r["global/attention"]["kv_read_bytes"] == 8 * 1001 * (64 + 64) * 2
    assert r["sliding/q_proj"]["weight_bytes"] == 2880 * 64 * 64 * 2
    # one token hits 4 experts, stored MXFP4: 0.5 B a weight + a 1-byte scale per 32
    assert r["global/up_proj"]["weight_bytes"] == 4 * 2880 * 2880 * (0.5 + 1 / 32)
    assert r["global/up_proj"]["dtype"] == "fp16"  # converted up in the kernel: fp16 activations
    assert r["global/router"]["weight_bytes"] == 2880 * 32 * 2
    assert r["lm_head"]["weight_bytes"] == 201088 * 2880 * 2
    assert r["sliding/attention"]["count"] == r["global/attention"]["count"] == 12


def test_gpt_oss_weights_against_the_published_checkpoint_sizes():
    """gpt-oss's config stores its routed experts in MXFP4 (quantization_config: quant_method
    mxfp4, attention, router, embeddings and lm_head in modules_to_not_convert): 32 fp4
    values share one 8-bit scale, 0.5 + 1/32 B a weight; the rest stays at the settings'
    fp16 (2 B). A layer holds E x 3 x 2880^2 expert weights (gate, up, down), attention
    2880 x 4096 x 2 + 2880 x 512 x 2 = 26,542,080, a router 2880 x E, norms 2 x 2880 and 64
    sinks; the untied table and lm_head 2 x 201088 x 2880 = 1,158,266,880, a final norm 2880.

    120b (36 layers, 128 experts): experts 36 x 128 x 24,883,200 = 114,661,785,600 x 0.53125
    = 60,914,073,600 B; the rest 36 x (26,542,080 + 368,640 + 5,824) + 1,158,266,880 + 2880 =
    2,127,265,344 x 2 = 4,254,530,688 B; 65,168,604,288 B = 60.69 GiB. 20b (24 layers, 32
    experts): 19,110,297,600 x 0.53125 = 10,152,345,600 B + (24 x (26,542,080 + 92,160 +
    5,824) + 1,158,266,880 + 2880) x 2 = 3,595,262,592 B; 13,747,608,192 B = 12.80 GiB.
    The card (arXiv 2508.10925, Table 1) gives checkpoints of 60.8 GiB and 12.8 GiB (its
    biases, left out here, add about 0.07 GiB to the 120b)."""
    big = rl.analyze("gpt-oss-120b", "h100-sxm")
    assert weight_bytes(big.model, big.plan) == 65_168_604_288
    assert weight_bytes(big.model, big.plan) / 2**30 == pytest.approx(60.8, rel=0.005)
    small = rl.analyze("gpt-oss-20b", "h100-sxm")
    assert weight_bytes(small.model, small.plan) == 13_747_608_192
    assert weight_bytes(small.model, small.plan) / 2**30 == pytest.approx(12.8, rel=0.005)


def test_settings_of_four_bits_or_fewer_price_the_experts_too():
    """int4 weights (a 2 B scale and a 2 B zero point per 128-weight group: 0.5 + 4/128 B a
    weight) price every linear layer, the experts included; fp8 weights keep the checkpoint's
    MXFP4 experts (narrower) and price attention at 1 B a weight plus a 2 B scale a row."""
    int4 = decode_rows_with("gpt-oss-20b", w_dtype="int4", group_size=128)
    assert int4["global/up_proj"]["weight_bytes"] == 4 * 2880 * 2880 * (0.5 + 4 / 128)
    fp8 = decode_rows_with("gpt-oss-20b", w_dtype="fp8")
    assert fp8["global/up_proj"]["weight_bytes"] == 4 * 2880 * 2880 * (0.5 + 1 / 32)
    assert fp8["global/q_proj"]["weight_bytes"] == 2880 * 4096 * 1 + 4096 * 2
    assert rl.load_model("deepseek-v3").expert_format == ""  # its fp8 checkpoint: the settings' type


def decode_rows_with(model: str, **settings) -> dict:
    a = rl.analyze(model, "h100-sxm", batch=1, seq_len=1000, attention="flash", **settings)
    return {r["name"]: r for r in a.decode.records()}


def test_gemma2_decode_step():
    """Gemma 2 9B, 5000 cached: a sliding layer reads its 4096-token window, a global one
    5001 positions (8 KV heads x 2 x 256 x 2 B each); a norm after attention and after the
    MLP; the logits soft-capped (one read, one write of 256000 fp16 values)."""
    r = decode_rows("gemma-2-9b", 5000)
    assert r["sliding/attention"]["kv_read_bytes"] == 8 * 4096 * 512 * 2
    assert r["global/attention"]["kv_read_bytes"] == 8 * 5001 * 512 * 2
    assert r["global/post_attn_norm"]["weight_bytes"] == 3584 * 2
    assert r["logit_softcap"]["act_read_bytes"] == r["logit_softcap"]["act_write_bytes"] == 256000 * 2
    assert r["sliding/up_proj"]["weight_bytes"] == 3584 * 14336 * 2


def test_gemma3_decode_step():
    """Gemma 3 4B (text_config), 2000 cached: 29 sliding layers read 1024 positions, 5 global
    ones 2001 (4 KV heads x 2 x 256 x 2 B); q_norm over 8 heads of 256."""
    r = decode_rows("gemma-3-4b", 2000)
    assert r["sliding/attention"]["kv_read_bytes"] == 4 * 1024 * 512 * 2
    assert r["global/attention"]["kv_read_bytes"] == 4 * 2001 * 512 * 2
    assert (r["sliding/attention"]["count"], r["global/attention"]["count"]) == (29, 5)
    assert r["global/q_norm"]["weight_bytes"] == 256 * 2


def test_llama4_decode_step():
    """Llama 4 Maverick, 10000 cached, under flash: a chunked layer reads the positions of its
    own chunk of 8192, (10001 - 1) mod 8192 + 1 = 1809 (vLLM's chunked local attention), NoPE
    layers global with no rotary; dense layers 16384 wide, MoE
    layers one routed expert and one shared, each 8192 wide."""
    r = decode_rows("llama-4-maverick", 10000)
    assert r["chunked-dense/attention"]["kv_read_bytes"] == 8 * 1809 * 256 * 2
    assert r["global-nope-moe/attention"]["kv_read_bytes"] == 8 * 10001 * 256 * 2
    assert "global-nope-moe/rope" not in r and "chunked-moe/rope" in r
    assert r["chunked-dense/up_proj"]["weight_bytes"] == 5120 * 16384 * 2
    assert r["chunked-moe/up_proj"]["weight_bytes"] == 5120 * 8192 * 2
    assert r["chunked-moe/shared_up_proj"]["weight_bytes"] == 5120 * 8192 * 2
    counts = {k: r[f"{k}/attention"]["count"] for k in ("chunked-dense", "chunked-moe", "global-nope-moe")}
    assert counts == {"chunked-dense": 24, "chunked-moe": 12, "global-nope-moe": 12}


def test_uniform_families_decode_step():
    """Reader-only families, 1000 cached (1001 attended): Qwen3-30B-A3B (top-8 of 128
    experts 768 wide, q/k norm, 4 KV heads of 128), Kimi K2 (MLA: the 512 + 64 latent row,
    top-8 of 384 experts 2048 wide, one shared, one dense first layer), Pythia (parallel
    attention and MLP each off its own LayerNorm, GELU without a gate), StarCoder2 (a
    4096 window on every layer)."""
    q = decode_rows("qwen3-30b-a3b", 1000)
    assert q["attention"]["kv_read_bytes"] == 4 * 1001 * 256 * 2
    assert q["up_proj"]["weight_bytes"] == 8 * 2048 * 768 * 2
    assert q["router"]["weight_bytes"] == 2048 * 128 * 2
    assert q["k_norm"]["weight_bytes"] == 128 * 2
    k = decode_rows("kimi-k2", 1000)
    assert k["attention"]["kv_read_bytes"] == 1001 * 576 * 2
    assert k["up_proj"]["weight_bytes"] == pytest.approx(8 * 7168 * 2048 * 2)  # 384 (1 - (1 - 8/384)) = 8 hit
    assert (k["up_proj"]["count"], k["dense_up_proj"]["count"]) == (60, 1)
    p = decode_rows("pythia-6.9b", 1000)
    assert "gate_proj" not in p and p["up_proj"]["weight_bytes"] == 4096 * 16384 * 2
    assert p["mlp_norm"]["count"] == 32 and p["attention"]["kv_read_bytes"] == 32 * 1001 * 256 * 2
    s = decode_rows("starcoder2-15b", 5000)
    assert s["attention"]["kv_read_bytes"] == 4 * 4096 * 256 * 2


def test_glm45_decode_step():
    """GLM-4.5, 1000 cached (1001 attended): 8 KV heads x 128; q is 96 x 128 = 12288 wide
    (more than h 5120); q/k norms of 128; three dense layers 12288 wide, then 89 MoE layers:
    top-8 of 160 experts 1536 wide, one shared expert as wide, a 160-way router."""
    r = decode_rows("glm-4.5", 1000)
    assert r["attention"]["kv_read_bytes"] == 8 * 1001 * (128 + 128) * 2
    assert r["q_proj"]["weight_bytes"] == 5120 * 12288 * 2
    assert r["q_norm"]["weight_bytes"] == 128 * 2
    assert r["up_proj"]["weight_bytes"] == pytest.approx(8 * 5120 * 1536 * 2)  # 160 (1 - (1 - 8/160)) = 8 hit
    assert r["shared_up_proj"]["weight_bytes"] == 5120 * 1536 * 2
    assert r["router"]["weight_bytes"] == 5120 * 160 * 2
    assert (r["up_proj"]["count"], r["dense_up_proj"]["count"]) == (89, 3)
    assert r["dense_up_proj"]["weight_bytes"] == 5120 * 12288 * 2
    assert r["lm_head"]["weight_bytes"] == 151552 * 5120 * 2


def test_command_r_decode_step():
    """Command R, 1000 cached: 64 KV heads x 128 (no grouping); attention and MLP in
    parallel off one LayerNorm (no mlp_norm); the tied table still read whole as lm_head."""
    r = decode_rows("command-r", 1000)
    assert r["attention"]["kv_read_bytes"] == 64 * 1001 * (128 + 128) * 2
    assert "mlp_norm" not in r and r["attn_norm"]["count"] == 40
    assert r["k_proj"]["weight_bytes"] == 8192 * 8192 * 2
    assert r["gate_proj"]["weight_bytes"] == 8192 * 22528 * 2
    assert r["lm_head"]["weight_bytes"] == 256000 * 8192 * 2


def test_granite_and_mistral_small_decode_step():
    """1000 cached. Granite 3.3 8B: 8 KV heads x 128, MLP 12800, tied lm_head over 49159;
    Granite 3.1 3B-A800M: every layer MoE, top-8 of 40 experts 512 wide, 8 KV heads x 64;
    Mistral Small 3.1: q 32 x 128 = 4096 wide from h 5120, MLP 32768, lm_head of its own."""
    g = decode_rows("granite-3.3-8b", 1000)
    assert g["attention"]["kv_read_bytes"] == 8 * 1001 * 256 * 2
    assert g["up_proj"]["weight_bytes"] == 4096 * 12800 * 2
    assert g["lm_head"]["weight_bytes"] == 49159 * 4096 * 2
    m = decode_rows("granite-3.1-3b-a800m", 1000)
    assert m["attention"]["kv_read_bytes"] == 8 * 1001 * 128 * 2
    assert m["up_proj"]["weight_bytes"] == pytest.approx(8 * 1536 * 512 * 2)  # 40 (1 - (1 - 8/40)) = 8 hit
    assert m["router"]["weight_bytes"] == 1536 * 40 * 2 and m["up_proj"]["count"] == 32
    s = decode_rows("mistral-small-3.1", 1000)
    assert s["q_proj"]["weight_bytes"] == 5120 * 4096 * 2
    assert s["attention"]["kv_read_bytes"] == 8 * 1001 * 256 * 2
    assert s["up_proj"]["weight_bytes"] == 5120 * 32768 * 2
    assert s["lm_head"]["weight_bytes"] == 131072 * 5120 * 2
    assert not rl.load_model("mistral-small-3.1").tie_word_embeddings


def test_gemma2_27b_decode_step():
    """Gemma 2 27B, 5000 cached: 23 sliding layers read their 4096 window, 23 global ones
    5001 positions (16 KV heads x 2 x 128 x 2 B); q is 32 x 128 = 4096 wide from h 4608."""
    r = decode_rows("gemma-2-27b", 5000)
    assert r["sliding/attention"]["kv_read_bytes"] == 16 * 4096 * 256 * 2
    assert r["global/attention"]["kv_read_bytes"] == 16 * 5001 * 256 * 2
    assert (r["sliding/attention"]["count"], r["global/attention"]["count"]) == (23, 23)
    assert r["global/q_proj"]["weight_bytes"] == 4608 * 4096 * 2
    assert r["sliding/up_proj"]["weight_bytes"] == 4608 * 36864 * 2


def test_gemma_3_from_its_own_files_and_their_class_defaults():
    """google/gemma-3-27b-it's config.json leaves vocab_size, sliding_window_pattern and
    max_position_embeddings to Gemma3TextConfig (262208, 6, 131072), and the answer names
    each. Published: keras-hub's Gemma 3 presets (keras-team/keras-hub@00d9f10,
    gemma3_presets.py) count the text-only 27B at 27,009,002,240 and 4B at 3,880,099,328
    with a 262,144-row table; here 262,208 rows, 64 more: + 64 x 5376 and + 64 x 2560. By
    hand, 27B: a layer 2 x 5376 x 4096 (q, o) + 2 x 5376 x 2048 (k, v) + 3 x 5376 x 21504 +
    4 x 5376 (four norms) + 2 x 128 (q/k norms) = 412,898,560; x 62 + 5376 =
    25,599,716,096, + 262208 x 5376 (tied) = 27,009,346,304. 4B: 2 x 2560 x 2048 + 2 x 2560
    x 1024 + 3 x 2560 x 10240 + 4 x 2560 + 2 x 256 = 94,382,592; x 34 + 2560 + 262208 x
    2560 = 3,880,263,168."""
    m = rl.load_model("gemma-3-27b")
    assert total_parameters(m) == 27_009_346_304 == 27_009_002_240 + 64 * 5376
    assert total_parameters(rl.load_model("gemma-3-4b")) == 3_880_263_168 == 3_880_099_328 + 64 * 2560
    assert (m.vocab_size, m.max_position_embeddings) == (262208, 131072)
    assert [(g.label, g.count) for g in m.layer_groups] == [("sliding", 52), ("global", 10)]
    assert m.defaults == (
        "the config leaves these to Gemma3TextConfig's defaults: "
        "vocab_size 262208, sliding_window_pattern 6, max_position_embeddings 131072",
    )
    # the 4B's file states no heads either: Gemma3TextConfig's 8, 4 and 256 are the 4B's
    assert rl.load_model("gemma-3-4b").defaults == (
        "the config leaves these to Gemma3TextConfig's defaults: vocab_size 262208, num_attention_heads 8, "
        "num_key_value_heads 4, head_dim 256, sliding_window_pattern 6, max_position_embeddings 131072",
    )


def test_only_the_family_whose_files_omit_a_key_takes_its_class_default(tmp_path):
    """A Gemma 3 text config with its layer_types takes no pattern; a Llama config without
    vocab_size is refused (LlamaConfig's own files state it)."""
    text = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "num_hidden_layers": 2,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    m = rl.ModelConfig.from_hf_config(text)
    assert m.defaults == (
        "the config leaves these to Gemma3TextConfig's defaults: vocab_size 262208, max_position_embeddings 131072",
    )
    assert [(g.label, g.count) for g in m.layer_groups] == [("sliding", 1), ("global", 1)]
    llama = {**text, "model_type": "llama", "layer_types": None, "sliding_window": None}
    with pytest.raises(InvalidConfigError, match="missing 'vocab_size'"):
        rl.ModelConfig.from_hf_config(llama)


# Qwen2.5-VL-7B-Instruct's config as transformers 4.49 saved it (a fine-tune's unchanged copy:
# https://huggingface.co/GD-ML/AutoDrive-R2-7B-COT-SFT/blob/main/config.json); the keys that
# shape the decoder, and its vision_config
QWEN25_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 128000,
    "max_window_layers": 28,
    "model_type": "qwen2_5_vl",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"},
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vision_config": {"hidden_size": 1280, "in_chans": 3, "model_type": "qwen2_5_vl", "spatial_patch_size": 14},
    "vocab_size": 152064,
}


def test_qwen_vl_reads_its_text_decoder_from_either_layout():
    """A qwen2_5_vl config is Qwen2's decoder beside a vision tower: its keys at the top level
    (transformers 4.49's save) or under text_config (qwen2_5_vl_text, later saves) read the
    same. By hand: embeddings and the untied head 2 x 152,064 x 3,584 = 1,089,994,752; a layer
    q and o 2 x 3,584^2 + k and v 2 x 3,584 x 512 + MLP 3 x 3,584 x 18,944 + two norms
    2 x 3,584 = 233,053,184, x 28 = 6,525,489,152; + the final norm 3,584: 7,615,487,488
    (biases left out, as for every model). KV: 2 x 28 layers x 4 heads x 128 x 2 B = 57,344 B
    a token, every layer global (use_sliding_window false)."""
    flat = rl.ModelConfig.from_hf_config(QWEN25_VL_7B, name="qwen2.5-vl-7b")
    text = {k: v for k, v in QWEN25_VL_7B.items() if k not in ("vision_config", "architectures")}
    wrapped = {
        "model_type": "qwen2_5_vl",
        "tie_word_embeddings": False,
        "text_config": {**text, "model_type": "qwen2_5_vl_text"},
        "vision_config": QWEN25_VL_7B["vision_config"],
    }
    nested = rl.ModelConfig.from_hf_config(wrapped, name="qwen2.5-vl-7b")
    assert replace(flat, notes=()) == replace(nested, notes=())
    assert (flat.model_type, flat.num_layers, flat.num_kv_heads, flat.head_dim) == ("qwen2", 28, 4, 128)
    assert flat.sliding_window is None and not flat.tie_word_embeddings and flat.rotary
    assert total_parameters(flat) == 7_615_487_488
    assert kv_bytes_per_token(flat, FP16) == 57_344
    why = "qwen2's layers; its multimodal rotary prices as rotary"
    assert flat.notes[0] == f"qwen2_5_vl: the text decoder (its top-level keys, {why}); the vision tower is left out"
    assert nested.notes[:2] == (
        "qwen2_5_vl: the text decoder (text_config, qwen2_5_vl_text); the vision tower is left out",
        f"qwen2_5_vl_text: read as qwen2 ({why})",
    )


# microsoft/phi-2's config.json, every key that shapes the model, as its copies carry it
# (_name_or_path "microsoft/phi-2": https://huggingface.co/somosnlp/phi-2-LC/blob/main/config.json)
PHI2 = {
    "architectures": ["PhiForCausalLM"],
    "hidden_act": "gelu_new",
    "hidden_size": 2560,
    "intermediate_size": 10240,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "phi",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "partial_rotary_factor": 0.4,
    "qk_layernorm": False,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "vocab_size": 51200,
}


def test_phi2_reads_as_attention_and_mlp_off_one_layernorm():
    """Phi-2 (modeling_phi.py): attention and fc1 -> gelu_new -> fc2 both read input_layernorm's
    output and are summed with the layer's input; rotary over 40 % of each 80-wide head
    (priced over all of it, and said); its own lm_head. By hand: embeddings and head
    2 x 51,200 x 2,560 = 262,144,000; a layer 4 x 2,560^2 + 2 x 2,560 x 10,240 + one norm
    2,560 = 78,645,760, x 32 = 2,516,664,320; + the final norm 2,560: 2,778,810,880, biases
    left out (872,960 more: q, k, v, dense, fc1, fc2, the norms' and lm_head's). KV:
    2 x 32 layers x 32 heads x 80 x 2 B = 327,680 B a token. With qk_layernorm each head of q
    and k gets its own LayerNorm."""
    m = rl.ModelConfig.from_hf_config(PHI2, name="phi-2")
    assert (m.parallel_attn, m.mlp_norm_in_parallel, m.norm, m.gated_mlp) == (True, False, "layernorm", False)
    assert (m.head_dim, m.tie_word_embeddings, m.qk_norm) == (80, False, False)
    assert total_parameters(m) == 2_778_810_880
    assert kv_bytes_per_token(m, FP16) == 327_680
    assert m.notes == ("partial_rotary_factor: rotary over part of each head, priced over all of it (an upper bound)",)
    names = [op.name for op in layer_ops(m, 1, 1, 100, FP16)]
    assert names == [
        *("attn_norm", "q_proj", "k_proj", "v_proj", "rope", "attention", "o_proj", "attn_add"),
        *("up_proj", "mlp_act", "down_proj", "mlp_add"),
    ]
    normed = rl.ModelConfig.from_hf_config({**PHI2, "qk_layernorm": True})
    assert normed.qk_norm and "qk_layernorm: a LayerNorm over each head of q and k (Phi)" in normed.notes
    assert {"q_norm", "k_norm"} <= {op.name for op in layer_ops(normed, 1, 1, 100, FP16)}


def test_the_reader_names_what_it_read():
    assert rl.load_model("gpt-oss-20b").notes[-1] == "layers: 12 sliding, 12 global"
    assert rl.load_model("gpt-oss-20b").notes[2].startswith("quantization_config (mxfp4): routed experts as stored")
    assert "kimi_k2: read as deepseek_v3 (the architecture its config names)" in rl.load_model("kimi-k2").notes
    # a key set to true is named (true equals 1 in Python, which a step of 1 leaves unnamed)
    assert (
        "use_parallel_residual: attention and MLP in parallel, each off its own norm"
        in rl.load_model("pythia-6.9b").notes
    )
    assert "use_qk_norm: a norm over q and k" in rl.load_model("llama-4-scout").notes
    # a zero, false or empty value changes nothing and is not named; a step of 1 neither
    plain = {**PHI2, "partial_rotary_factor": 0.0, "final_logit_softcapping": 0, "qk_layernorm": False}
    assert rl.ModelConfig.from_hf_config({**plain, "decoder_sparse_step": 1}).notes == ()
    gemma = rl.load_model("gemma-3-4b").notes
    assert gemma[0] == "gemma3: the text decoder (text_config, gemma3_text); the vision tower is left out"
