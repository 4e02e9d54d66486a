"""Memory: weights, KV cache at its largest, activations at their liveness peak."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .layers import Precision
from .model import ModelConfig
from .ops import Op
from .workload import Number


def layer_parameters(c: ModelConfig) -> dict[str, int]:
    """Parameters of one decoder layer by group (biases are left out: < 0.1%)."""
    h, d = c.hidden_size, c.head_dim
    attn = h * c.num_heads * d * 2 + h * c.num_kv_heads * d * 2
    mlp = (3 if c.gated_mlp else 2) * h * c.intermediate_size
    norms = h * (1 if c.parallel_attn else 2)
    return {"attention": attn, "mlp": mlp, "norms": norms}


def weight_bytes(c: ModelConfig, p: Precision) -> float:
    """All weights once: layers (linear at the weight type, norms at 16 bits), embeddings,
    final norm, and lm_head unless tied to the embeddings."""
    per_layer = layer_parameters(c)
    layers = c.num_layers * ((per_layer["attention"] + per_layer["mlp"]) * p.wb
                             + per_layer["norms"] * p.ab)
    table = c.vocab_size * c.hidden_size * p.ab
    head = 0 if c.tie_word_embeddings else table
    return layers + table + head + c.hidden_size * p.ab


def kv_cache_bytes(c: ModelConfig, batch: Number, kv_len: Number, p: Precision) -> Number:
    """K and V for every layer, sequence and cached position: 2 * L * b * s * g * d bytes."""
    return 2 * c.num_layers * batch * kv_len * c.num_kv_heads * c.head_dim * p.kvb


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
