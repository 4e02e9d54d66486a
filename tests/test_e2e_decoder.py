"""The e2e decoder against an independent naive implementation (full recompute, no cache)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from kernels.e2e.decoder import Decoder, check_fits, footprint
from kernels.e2e.e2e import truncate
from ridgeline.engine.model import ModelConfig
from ridgeline.errors import RidgelineError  # noqa: E402
from ridgeline.io.resolve import load_model

TINY = ModelConfig(
    name="tiny",
    model_type="llama",
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=4,
    head_dim=8,
    intermediate_size=48,
    vocab_size=50,
    tie_word_embeddings=False,
)


# --- the reference: loops and einsum over the model's own weights, float64 -----------


def ref_norm(x, kind, weight, bias):
    if kind == "layernorm":
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * weight


def ref_rope(x, theta=10000.0):
    """x: [B, S, H, D]; position s rotates the pair (i, i + D/2) by s * theta^(-2i/D)."""
    out = x.clone()
    D = x.shape[-1]
    for s in range(x.shape[1]):
        for i in range(D // 2):
            angle = s * theta ** (-2 * i / D)
            a, b = x[:, s, :, i], x[:, s, :, i + D // 2]
            out[:, s, :, i] = a * math.cos(angle) - b * math.sin(angle)
            out[:, s, :, i + D // 2] = b * math.cos(angle) + a * math.sin(angle)
    return out


def ref_act(name, x):
    if name == "silu":
        return x / (1 + torch.exp(-x))
    if name == "gelu_new":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))  # exact gelu


def ref_attention(q, k, v, window):
    """q: [B, S, H, D], k/v: [B, S, Hkv, D]; query head h reads kv head h // (H / Hkv)."""
    B, S, H, D = q.shape
    group = H // k.shape[2]
    out = torch.zeros_like(q)
    for h in range(H):
        kh, vh = k[:, :, h // group], v[:, :, h // group]
        scores = torch.einsum("bsd,btd->bst", q[:, :, h], kh) / math.sqrt(D)
        s_at, t_at = torch.arange(S)[:, None], torch.arange(S)[None, :]
        visible = (t_at <= s_at) & ((t_at > s_at - window) if window else True)
        scores = scores.masked_fill(~visible, float("-inf"))
        out[:, :, h] = torch.einsum("bst,btd->bsd", torch.softmax(scores, -1), vh)
    return out


def reference_logits(model, tokens):
    """All-position logits [B, S, V] of the whole sequence, recomputed from scratch."""
    c = model.config
    W = {k: v.double() for k, v in model.state_dict().items()}
    B, S = tokens.shape
    x = W["embed.weight"][tokens]
    for i in range(c.num_layers):
        p = f"layers.{i}."
        n = ref_norm(x, c.norm, W[p + "attn_norm.weight"], W.get(p + "attn_norm.bias"))
        q = (n @ W[p + "q_proj.weight"].T).view(B, S, c.num_heads, c.head_dim)
        k = (n @ W[p + "k_proj.weight"].T).view(B, S, c.num_kv_heads, c.head_dim)
        v = (n @ W[p + "v_proj.weight"].T).view(B, S, c.num_kv_heads, c.head_dim)
        q, k = ref_rope(q), ref_rope(k)
        a = ref_attention(q, k, v, c.sliding_window).reshape(B, S, -1)
        attn_out = a @ W[p + "o_proj.weight"].T
        if c.parallel_attn and not c.mlp_norm_in_parallel:
            m_in = n  # GPT-J, Falcon: the MLP reads attention's normed input
        else:  # GPT-NeoX normalises the layer's input; the rest, attention's sum
            m_in = x if c.mlp_norm_in_parallel else x + attn_out
            m_in = ref_norm(m_in, c.norm, W[p + "mlp_norm.weight"], W.get(p + "mlp_norm.bias"))
        up = m_in @ W[p + "up_proj.weight"].T
        hidden = (
            ref_act(c.hidden_act, m_in @ W[p + "gate_proj.weight"].T) * up if c.gated_mlp else ref_act(c.hidden_act, up)
        )
        x = x + attn_out + hidden @ W[p + "down_proj.weight"].T
    x = ref_norm(x, c.norm, W["final_norm.weight"], W.get("final_norm.bias"))
    head = W["embed.weight"] if c.tie_word_embeddings else W["lm_head.weight"]
    return x @ head.T


VARIANTS = {
    "mha-swiglu-rms": {},
    "gqa-swiglu-rms": {"num_kv_heads": 2},
    "mqa-swiglu-rms": {"num_kv_heads": 1},
    "mha-plain-gelu-layernorm": {"gated_mlp": False, "hidden_act": "gelu", "norm": "layernorm"},
    "mqa-parallel-layernorm": {
        "num_kv_heads": 1,
        "gated_mlp": False,
        "hidden_act": "gelu_new",
        "norm": "layernorm",
        "parallel_attn": True,
    },
    "mha-parallel-two-norms": {  # GPT-NeoX: the MLP normalises the layer's input itself
        "gated_mlp": False,
        "hidden_act": "gelu",
        "norm": "layernorm",
        "parallel_attn": True,
        "mlp_norm_in_parallel": True,
    },
    "gqa-geglu-tied": {"num_kv_heads": 2, "hidden_act": "gelu_new", "tie_word_embeddings": True},
    "gqa-sliding-window": {"num_kv_heads": 2, "sliding_window": 4},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_prefill_and_decode_match_reference_fp64(variant):
    config = replace(TINY, **VARIANTS[variant])
    model = Decoder(config, "fp64", max_batch=2, max_len=16, seed=3)
    tokens = torch.randint(0, config.vocab_size, (2, 11), generator=torch.Generator().manual_seed(1))
    prompt = 7
    got = model(tokens[:, :prompt], 0, all_logits=True)
    torch.testing.assert_close(got, reference_logits(model, tokens[:, :prompt]), rtol=1e-10, atol=1e-10)
    for pos in range(prompt, tokens.shape[1]):  # four decode steps, one token each
        step = model(tokens[:, pos : pos + 1], pos)
        want = reference_logits(model, tokens[:, : pos + 1])[:, -1]
        torch.testing.assert_close(step, want, rtol=1e-10, atol=1e-10)


def test_fp32_matches_fp64_reference_and_greedy_steps_agree():
    config = replace(TINY, num_kv_heads=2)
    model = Decoder(config, "fp32", max_batch=1, max_len=16, seed=0)
    tokens = torch.randint(0, config.vocab_size, (1, 5), generator=torch.Generator().manual_seed(2))
    want = reference_logits(model, tokens)
    torch.testing.assert_close(model(tokens, 0, all_logits=True).double(), want, rtol=1e-5, atol=1e-5)
    first = model.prefill(tokens)
    assert first.tolist() == want[:, -1].argmax(-1).tolist()
    second = model.decode(first, 5)
    extended = torch.cat([tokens, first[:, None]], dim=1)
    assert second.tolist() == reference_logits(model, extended)[:, -1].argmax(-1).tolist()


def test_same_seed_same_weights_and_bf16_runs():
    a = Decoder(TINY, "bf16", seed=5)
    b = Decoder(TINY, "bf16", seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert a.k_cache.shape == (2, 1, 4, 2048, 8)
    token = a.prefill(torch.tensor([[1, 2, 3]]))
    assert token.shape == (1,) and 0 <= int(token) < TINY.vocab_size


def test_the_engines_footprint_matches_the_built_model():
    """ridgeline.engine.memory's weights are the decoder's parameters but LayerNorm biases (left
    out by the engine); its KV cache is the decoder's static cache."""
    for overrides in (
        {},
        {"num_kv_heads": 1, "norm": "layernorm", "gated_mlp": False},
        {"tie_word_embeddings": True, "parallel_attn": True},
        {"parallel_attn": True, "mlp_norm_in_parallel": True, "norm": "layernorm", "gated_mlp": False},
    ):
        config = replace(TINY, **overrides)
        model = Decoder(config, "fp32", max_batch=3, max_len=4)
        weights, cache = footprint(config, 3, 4, 4)
        params = sum(p.numel() for n, p in model.named_parameters() if not n.endswith("norm.bias"))
        assert weights == 4 * params
        assert cache == (model.k_cache.numel() + model.v_cache.numel()) * 4


def test_truncate_and_unsupported_models():
    llama = load_model("llama-2-7b")
    assert truncate(llama, 8).num_layers == 8 and truncate(llama, None) is llama
    with pytest.raises(RidgelineError, match="--layers must be between 1 and 32"):
        truncate(llama, 40)
    with pytest.raises(RidgelineError, match="mixture-of-experts is not implemented"):
        Decoder(load_model("mixtral-8x7b"))


def test_check_fits_refuses_with_a_layers_hint():
    llama = load_model("llama-2-7b")
    # 7B in bf16 is 13.5 GB of weights: 70% of 16 GiB holds it only when truncated
    with pytest.raises(RidgelineError, match=r"needs 1[34]\.\d GiB .* try --layers \d+$"):
        check_fits(llama, 1, 1024, "bf16", "cpu", available=16 * 2**30)
    check_fits(truncate(llama, 8), 1, 1024, "bf16", "cpu", available=16 * 2**30)
