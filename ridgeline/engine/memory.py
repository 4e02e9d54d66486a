"""Memory per device: weights, KV cache at its largest, activations at their liveness peak."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.layers import Plan, Shard, layer_parts, shard
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.ops import Op, quantised_bytes
from ridgeline.engine.workload import Number


def attention_parameters(c: ModelConfig, heads: int, kv_heads: int) -> int:
    """Projection weights of one layer's attention for ``heads`` query / ``kv_heads`` KV heads."""
    h, d = c.hidden_size, c.head_dim
    if not c.is_mla:
        return 2 * h * heads * d + 2 * h * kv_heads * d
    r, rope_d, nope, v_d = c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim, c.v_head_dim
    q = h * c.q_lora_rank + c.q_lora_rank * heads * (nope + rope_d) if c.q_lora_rank else h * heads * (nope + rope_d)
    return q + h * (r + rope_d) + r * heads * (nope + v_d) + heads * v_d * h


def mlp_parameters(c: ModelConfig, width: int) -> int:
    return (3 if c.gated_mlp else 2) * c.hidden_size * width


def attention_outputs(c: ModelConfig, heads: int, kv_heads: int) -> int:
    """Output channels of one layer's attention projections (``attention_parameters``'
    matrices): what per-channel quantisation keeps a scale and zero point for."""
    h, d = c.hidden_size, c.head_dim
    if not c.is_mla:
        return heads * d + 2 * kv_heads * d + h
    r, rope_d, nope, v_d = c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim, c.v_head_dim
    q = c.q_lora_rank + heads * (nope + rope_d) if c.q_lora_rank else heads * (nope + rope_d)
    return q + r + rope_d + heads * (nope + v_d) + h


def mlp_outputs(c: ModelConfig, width: int) -> int:
    """Output channels of one MLP's matrices (gate and up: width each; down: hidden)."""
    return (2 if c.gated_mlp else 1) * width + c.hidden_size if width else 0


def linear_groups(c: ModelConfig, s: Shard, attention: Callable, mlp: Callable) -> dict[str, int]:
    """The linear layers one device holds, by group, each counted by ``attention(c, heads,
    kv_heads)`` and ``mlp(c, width)`` per layer (parameters or output channels).

    ``experts`` counts every routed expert on the device; ``active_experts`` the top-k a
    token uses (for active parameters per token)."""
    out = {"attention": s.layers * attention(c, s.heads, s.kv_heads)}
    if not c.is_moe:
        out["mlp"] = s.layers * mlp(c, s.intermediate)
        return out
    out["mlp"] = s.dense_layers * mlp(c, s.intermediate)
    out["shared_experts"] = s.moe_layers * mlp(c, s.shared_intermediate)
    out["experts"] = s.moe_layers * s.experts * mlp(c, s.moe_intermediate)
    out["active_experts"] = s.moe_layers * c.num_experts_per_tok * mlp(c, s.moe_intermediate)
    return out


def _parameters(c: ModelConfig, s: Shard) -> dict[str, float]:
    """Parameters of the layers one device holds, by group (biases are left out: < 0.1%):
    the linear groups of ``linear_groups``, norms, and the MoE router."""
    out = linear_groups(c, s, attention_parameters, mlp_parameters)
    norms = (1 if c.parallel_attn and not c.mlp_norm_in_parallel else 2) + (2 if c.post_norms else 0)
    qk = 2 * c.head_dim if c.qk_norm else 0  # Qwen3's q_norm and k_norm weights
    if c.qk_norm_whole:  # OLMo 2's: as wide as q and k
        qk = (s.heads + s.kv_heads) * c.head_dim
    sinks = s.heads if c.attention_sinks else 0  # gpt-oss: one learned logit per head
    out["norms"] = s.layers * (c.hidden_size * norms + qk + sinks)
    if c.is_moe:
        out["router"] = s.moe_layers * c.hidden_size * c.num_experts
    return out


def _linear_total(groups: dict[str, int], active: bool) -> int:
    """Sum over the linear groups, with every routed expert or (``active``) the top-k."""
    experts = groups.get("active_experts" if active else "experts", 0)
    return experts + sum(v for k, v in groups.items() if k not in ("experts", "active_experts", "norms", "router"))


def weight_bytes(c: ModelConfig, p: Plan, active: bool = False) -> float:
    """Weights on the most loaded device: its layers (linear weights at the weight type with
    their quantisation scales, ``ops.quantised_bytes``; norms and router at 16 bits), plus
    embeddings and lm_head (vocabulary split over tensor-parallel devices; with pipeline
    stages the first holds the embeddings and the last lm_head, so the larger of the two
    counts)."""
    hb = p.head_bytes
    layers = sum(layer_weight_bytes(part, plan, active) for _, part, plan in layer_parts(c, p))
    table = math.ceil(c.vocab_size / p.tp) * c.hidden_size * hb
    head = 0 if c.tie_word_embeddings and p.pp == 1 else table
    ends = max(table, head) if p.pp > 1 else table + head
    return layers + ends + c.hidden_size * hb


def layer_weight_bytes(c: ModelConfig, p: Plan, active: bool = False) -> float:
    """The weights of a uniform model's layers on one device (``weight_bytes``' layers); the
    routed experts in their own format where the plan keeps one (``Plan.expert_quant``)."""
    s = shard(c, p)
    parts = _parameters(c, s)
    outputs = linear_groups(c, s, attention_outputs, mlp_outputs)
    kept = (parts["norms"] + parts.get("router", 0)) * p.head_bytes
    if p.expert_quant is None or not c.is_moe:
        return quantised_bytes(_linear_total(parts, active), _linear_total(outputs, active), p.quant) + kept
    routed = "active_experts" if active else "experts"
    rest = {k: v for k, v in parts.items() if k not in ("experts", "active_experts")}
    rest_outputs = {k: v for k, v in outputs.items() if k not in ("experts", "active_experts")}
    experts = quantised_bytes(parts[routed], outputs[routed], p.expert_quant)
    return quantised_bytes(_linear_total(rest, active), _linear_total(rest_outputs, active), p.quant) + experts + kept


ONE_BYTE = Plan(1, 1, 1, "fp16", "fp16")  # one byte per weight: weight_bytes counts parameters


def total_parameters(c: ModelConfig) -> float:
    """Every parameter of the model (biases left out, as in ``_parameters``)."""
    return weight_bytes(c, ONE_BYTE)


def active_parameters(c: ModelConfig) -> float:
    """Parameters a token touches in one forward pass (MoE: only its top-k experts)."""
    return weight_bytes(c, ONE_BYTE, active=True)


def usable_bytes(device: DeviceSpec, p: Plan) -> float:
    """Device memory the serving runtime may fill: ``memory_utilization`` x capacity less
    the runtime's fixed reserve (CUDA context, library workspaces), as vLLM budgets it
    (``gpu_memory_utilization`` x total memory, minus non-torch memory)."""
    return device.memory_capacity * p.memory_utilization - device.runtime_reserve


def kv_capacity_bytes(c: ModelConfig, device: DeviceSpec, p: Plan, activation_bytes: Number = 0.0) -> Number:
    """Bytes available to the KV cache on one device: usable memory less the weights and
    the peak activations of the largest step (``activation_bytes``); never below 0."""
    return np.maximum(usable_bytes(device, p) - weight_bytes(c, p) - activation_bytes, 0.0)


def kv_bytes_per_token(c: ModelConfig, p: Plan) -> float:
    """KV cache one token adds on one device: K and V per layer and KV head
    (2 * L * g * d), or MLA's latent + rotary key (L * (r + d_rope)), replicated over TP;
    summed over the kinds of layer of a model whose layers differ."""
    return sum(_kv_per_token(part, plan) for _, part, plan in layer_parts(c, p))


def _kv_per_token(c: ModelConfig, p: Plan) -> float:
    s = shard(c, p)
    if c.is_mla:
        return s.layers * (c.kv_lora_rank + c.qk_rope_head_dim) * p.kvb
    return 2 * s.layers * s.kv_heads * c.head_dim * p.kvb


def kv_cache_bytes(c: ModelConfig, batch: Number, kv_len: Number, p: Plan) -> Number:
    """The cache for ``batch`` sequences of ``kv_len`` tokens (a sliding window caps the
    length kept; paged attention allocates whole blocks), layer kind by layer kind: a
    sliding layer keeps at most W tokens, a chunked one at most C."""
    return sum(_kv_cache(part, batch, kv_len, plan) for _, part, plan in layer_parts(c, p))


def _kv_cache(c: ModelConfig, batch: Number, kv_len: Number, p: Plan) -> Number:
    kept = np.minimum(kv_len, c.sliding_window) if c.sliding_window else kv_len
    if p.attention == "paged":
        kept = np.ceil(kept / p.kv_block) * p.kv_block
    return batch * kept * _kv_per_token(c, p)


def activation_peak(ops: Sequence[Op], input_bytes: Number) -> Number:
    """Largest sum of live activation tensors while walking ``ops`` in order.

    A tensor is born when its op writes it (size = the op's activation write) and dies
    after the last op that lists its producer in ``inputs``; ``x`` (the layer input) is
    alive from the start. Weights and the KV cache are counted elsewhere.
    """
    index = {op.name: i for i, op in enumerate(ops)}
    sizes = {op.name: op.act_write_bytes for op in ops}
    sizes["x"] = input_bytes
    born = {name: index.get(name, -1) for name in sizes}
    last = dict(born)
    for i, op in enumerate(ops):
        for src in op.inputs:
            if src in last:
                last[src] = max(last[src], i)
    peak = 0 * input_bytes
    for i in range(len(ops)):
        live = sum(sizes[t] for t in sizes if born[t] <= i <= last[t])
        peak = np.maximum(peak, live)
    return peak
