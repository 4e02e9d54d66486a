"""Config + stage + workload + precision -> the list of ``Op`` of one forward pass.

Layer ops carry ``count = num_layers``; ``embed``, ``final_norm`` and ``lm_head`` run once.
Each op names the producers of the activations it reads (``inputs``), in data-flow order,
which is what the memory tracker's liveness walk needs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import ops as O
from .model import ModelConfig
from .ops import Op
from .workload import Number


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each stored tensor and the data types the arithmetic runs in."""

    wb: float            # layer weights (linear projections)
    ab: float            # activations, norms, embeddings, lm_head
    kvb: float           # KV cache
    matrix_dtype: str    # matrix ops
    vector_dtype: str    # element-wise ops


def attention_ops(c: ModelConfig, batch: Number, q_len: Number, kv_len: Number,
                  p: Precision, q_from: str) -> list[Op]:
    """qk_matmul -> softmax -> sv_matmul (eager: the score matrix goes through memory)."""
    args = (batch, c.num_heads, c.num_kv_heads, q_len, kv_len, c.head_dim)
    kw = dict(ab=p.ab, kvb=p.kvb, count=c.num_layers, dtype=p.matrix_dtype)
    return [
        replace(O.qk_matmul(*args, **kw), inputs=(q_from,)),
        O.softmax(batch, c.num_heads, q_len, kv_len, ab=p.ab, count=c.num_layers,
                  dtype=p.vector_dtype),
        O.sv_matmul(*args, **kw),
    ]


def mlp_ops(c: ModelConfig, tokens: Number, p: Precision, source: str) -> list[Op]:
    """gate_proj/up_proj -> mlp_act -> down_proj (gate only for gated MLPs)."""
    h, i, L = c.hidden_size, c.intermediate_size, c.num_layers
    lin = dict(wb=p.wb, ab=p.ab, count=L, dtype=p.matrix_dtype)
    ops = [O.linear("gate_proj", tokens, h, i, inputs=(source,), **lin)] if c.gated_mlp else []
    ops.append(O.linear("up_proj", tokens, h, i, inputs=(source,), **lin))
    act_in = ("gate_proj", "up_proj") if c.gated_mlp else ("up_proj",)
    ops.append(O.mlp_act(tokens, i, c.hidden_act, c.gated_mlp, ab=p.ab, count=L,
                         dtype=p.vector_dtype, inputs=act_in))
    ops.append(O.linear("down_proj", tokens, i, h, inputs=("mlp_act",), **lin))
    return ops


def layer_ops(c: ModelConfig, batch: Number, q_len: Number, kv_len: Number,
              p: Precision) -> list[Op]:
    """One decoder layer, ``count = num_layers``."""
    tokens = batch * q_len
    h, L = c.hidden_size, c.num_layers
    q_out, kv_out = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    lin = dict(wb=p.wb, ab=p.ab, count=L, dtype=p.matrix_dtype)
    vec = dict(ab=p.ab, count=L, dtype=p.vector_dtype)
    # k goes straight to the cache unless rotary rewrites it first
    k_to_kv = 0.0 if c.rotary else p.kvb
    ops = [
        O.norm("attn_norm", tokens, h, wb=p.ab, inputs=("x",), **vec),
        O.linear("q_proj", tokens, h, q_out, inputs=("attn_norm",), **lin),
        O.linear("k_proj", tokens, h, kv_out, inputs=("attn_norm",), out_kv_bytes=k_to_kv, **lin),
        O.linear("v_proj", tokens, h, kv_out, inputs=("attn_norm",), out_kv_bytes=p.kvb, **lin),
    ]
    if c.rotary:
        ops.append(O.rope(tokens, c.num_heads, c.num_kv_heads, c.head_dim, kvb=p.kvb, **vec))
    ops += attention_ops(c, batch, q_len, kv_len, p, "rope" if c.rotary else "q_proj")
    ops.append(O.linear("o_proj", tokens, q_out, h, inputs=("sv_matmul",), **lin))
    ops.append(O.residual_add("attn_add", tokens, h, inputs=("x", "o_proj"), **vec))
    mlp_source = "attn_norm"
    if not c.parallel_attn:
        ops.append(O.norm("mlp_norm", tokens, h, wb=p.ab, inputs=("attn_add",), **vec))
        mlp_source = "mlp_norm"
    ops += mlp_ops(c, tokens, p, mlp_source)
    ops.append(O.residual_add("mlp_add", tokens, h, inputs=("attn_add", "down_proj"), **vec))
    return ops


def head_ops(c: ModelConfig, batch: Number, q_len: Number, p: Precision) -> list[Op]:
    """embed before the layers; final_norm and lm_head after (lm_head on the last position only)."""
    tokens = batch * q_len
    h = c.hidden_size
    return [
        O.embed(tokens, h, wb=p.ab, ab=p.ab, dtype=p.vector_dtype),
        O.norm("final_norm", tokens, h, ab=p.ab, wb=p.ab, count=1, dtype=p.vector_dtype,
               inputs=("x",)),
        O.linear("lm_head", batch + 0 * q_len, h, c.vocab_size, wb=p.ab, ab=p.ab, count=1,
                 dtype=p.matrix_dtype, inputs=("final_norm",)),
    ]


def stage_ops(c: ModelConfig, stage: str, batch: Number, length: Number, p: Precision) -> list[Op]:
    """All ops of one forward pass.

    prefill: ``length`` prompt tokens per sequence, attending to themselves.
    decode: one new token per sequence with ``length`` tokens already cached (KV length + 1).
    """
    if stage == "prefill":
        q_len, kv_len = length, length
    elif stage == "decode":
        q_len, kv_len = 1 + 0 * length, length + 1
    else:
        raise ValueError(f"stage must be 'prefill' or 'decode', got {stage!r}")
    heads = head_ops(c, batch, q_len, p)
    return [heads[0], *layer_ops(c, batch, q_len, kv_len, p), *heads[1:]]
