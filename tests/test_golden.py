"""Hand-worked values for a grouped-query (Llama-3-8B) and a multi-query model (Falcon-7B).

Llama-3-8B: h=4096, 32 heads, 8 KV heads, d=128, i=14336, vocab 128256, 32 layers, untied
(meta-llama/Meta-Llama-3-8B config.json). Falcon-7B: h=4544, 71 heads, 1 KV head, d=64,
i=4h=18176, vocab 65024, 32 layers, parallel attention, tied (tiiuae/falcon-7b).
"""

from __future__ import annotations

import pytest

import ridgeline as rl
from ridgeline.engine.layers import Plan
from ridgeline.engine.memory import kv_cache_bytes, weight_bytes

FP16 = Plan(2, 2, 2, "fp16", "fp16")


def rows(analysis, stage):
    return {r["name"]: r for r in getattr(analysis, stage).records()}


def test_llama3_parameters_and_kv_per_token():
    m = rl.load_model("llama-3-8b")
    per_layer = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096
    params = 32 * per_layer + 2 * 128256 * 4096 + 4096
    assert params == 8_030_261_248  # the published "8.03B"
    assert weight_bytes(m, FP16) == 2 * params
    # 2 (K and V) x 32 layers x 8 heads x 128 x 2 bytes = 128 KiB per token
    assert kv_cache_bytes(m, 1, 1, FP16) == 131_072


def test_llama3_gqa_ops():
    a = rl.analyze("llama-3-8b", "h100-sxm", batch=1, seq_len=1024, attention="eager")
    pre, dec = rows(a, "prefill"), rows(a, "decode")
    assert pre["k_proj"]["flops"] == 2 * 1024 * 4096 * 1024
    assert pre["k_proj"]["weight_bytes"] == 4096 * 1024 * 2
    assert pre["qk_matmul"]["flops"] == 2 * 32 * 1024 * 1024 * 128
    # eager GQA: repeat_kv reads the 8 cached K heads and copies them to all 32 query heads;
    # the matmul reads q and the copy
    assert pre["repeat_k"]["kv_read_bytes"] == 1024 * 8 * 128 * 2
    assert pre["repeat_k"]["act_write_bytes"] == 1024 * 32 * 128 * 2
    assert pre["qk_matmul"]["act_read_bytes"] == 2 * 1024 * 32 * 128 * 2
    assert pre["rope"]["kv_write_bytes"] == 1024 * 8 * 128 * 2
    assert dec["sv_matmul"]["act_read_bytes"] == 32 * 1025 * 2 + 1025 * 32 * 128 * 2  # probabilities, V copy
    assert dec["lm_head"]["weight_bytes"] == 128256 * 4096 * 2
    assert a.decode.total["kv_read_bytes"] == 32 * 2 * 1025 * 8 * 128 * 2  # the cache once, by the copies
    flash = rows(rl.analyze("llama-3-8b", "h100-sxm", batch=1, seq_len=1024, attention="flash"), "decode")
    assert flash["attention"]["kv_read_bytes"] == 8 * 1025 * 256 * 2  # fused: once per KV head
    # the default, transformers' sdpa path: SDPA with enable_gqa reads the grouped K/V as they are
    auto = rl.analyze("llama-3-8b", "h100-sxm", batch=1, seq_len=1024)
    assert auto.plan.attention == "sdpa-gqa"
    assert rows(auto, "decode")["sdpa_gqa"]["kv_read_bytes"] == 8 * 1025 * 256 * 2
    assert auto.decode.total["kv_read_bytes"] == a.decode.total["kv_read_bytes"]


def test_falcon_mqa():
    m = rl.load_model("falcon-7b")
    assert (m.num_heads, m.num_kv_heads, m.head_dim, m.parallel_attn) == (71, 1, 64, True)
    per_layer = 2 * 4544 * 4544 + 2 * 4544 * 64 + 2 * 4544 * 18176 + 4544
    assert weight_bytes(m, FP16) == 2 * (32 * per_layer + 65024 * 4544 + 4544)
    assert kv_cache_bytes(m, 1, 1, FP16) == 2 * 32 * 64 * 2  # 8 KiB per token
    a = rl.analyze(m, "a100-80gb", batch=1, seq_len=2047, attention="eager")
    dec = rows(a, "decode")
    assert dec["qk_matmul"]["flops"] == 2 * 71 * 2048 * 64
    # eager copies the one K head to all 71 query heads (repeat_kv) before the matmul
    assert dec["repeat_k"]["kv_read_bytes"] == 2048 * 64 * 2
    assert dec["qk_matmul"]["act_read_bytes"] == 71 * 64 * 2 + 2048 * 71 * 64 * 2
    assert dec["qk_matmul"]["act_write_bytes"] == 71 * 2048 * 2
    assert "mlp_norm" not in dec and "gate_proj" not in dec  # one shared norm, plain MLP


def test_memory_fit_and_shortfall():
    a = rl.analyze("llama-2-70b", "a6000", batch=1, seq_len=512)
    assert not a.memory["fits"]
    # usable = 0.9 (memory_utilization) x 48 GiB - 0.75 GiB runtime reserve = 42.45 GiB
    assert a.memory["usable_bytes"] == pytest.approx(42.45 * 2**30)
    assert a.memory["shortfall_bytes"] == pytest.approx(a.memory["peak_bytes"] - 42.45 * 2**30)
    b = rl.analyze("llama-2-7b", "a6000", batch=1, seq_len=512)
    assert b.memory["fits"] and b.memory["shortfall_bytes"] == 0


def test_generation_totals():
    a = rl.analyze("llama-2-7b", "a6000", batch=4, seq_len=1024, generate=128)
    g = a.generation
    assert g["ttft_s"] == a.prefill.total["time_s"]
    assert g["total_s"] == pytest.approx(g["ttft_s"] + 127 * g["tpot_s"])
    assert g["tokens_per_s"] == pytest.approx(4 * 128 / g["total_s"])
    # decode is memory-bound at batch 4: TPOT ~ weights / bandwidth, within attention's share
    assert 13.2e9 / 768e9 < g["tpot_s"] < 1.2 * 13.5e9 / 768e9
