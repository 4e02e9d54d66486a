"""One formula for the bytes of quantised weights (``ops.quantised_bytes``): the linear ops
read what memory holds, scales and zero points included."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ridgeline as rl
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.memory import weight_bytes
from ridgeline.engine.ops import Quant, quantised_bytes


def test_per_channel_and_grouped_scales_by_hand():
    int4 = Quant(0.5, 4.0, 0)  # fp16 scale + fp16 zero point per output channel
    assert quantised_bytes(4096 * 11008, 4096, int4) == 4096 * 11008 / 2 + 4096 * 4
    grouped = Quant(0.5, 4.0, 128)
    assert quantised_bytes(4096 * 11008, 4096, grouped) == 4096 * 11008 / 2 + 4096 * 11008 / 128 * 4
    assert quantised_bytes(1000, 10, Quant(2.0)) == 2000  # unquantised: no scales


def test_llama_2_7b_int4_per_channel_weights_by_hand():
    """32 layers of q, k, v, o (4096 x 4096) and gate, up (4096 -> 11008), down (11008 ->
    4096) at half a byte, a 4-byte scale + zero point per output channel (4 x 4096 + 2 x
    11008 + 4096 = 42496 a layer, not one per 4096 weights: down_proj has 4096 outputs);
    two fp16 norms a layer, untied fp16 embeddings and lm_head, the final norm."""
    d = rl.resolve("llama-2-7b", "a6000", w_dtype="int4")
    linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    scales = 32 * 42496 * 4
    expected = linear / 2 + scales + 32 * 2 * 4096 * 2 + 2 * 32000 * 4096 * 2 + 4096 * 2
    assert weight_bytes(d.model, d.plan) == expected


@pytest.mark.parametrize("model", ["llama-2-7b", "opt-6.7b", "qwen2-7b", "llama-3-8b"])
@pytest.mark.parametrize(
    "options", [{"w_dtype": "int4"}, {"w_dtype": "int8", "tp": 2}, {"w_dtype": "int4", "group_size": 128}]
)
def test_memory_holds_the_scales_the_linear_ops_read(model, options):
    """Dense models: the scale and zero-point bytes memory counts on a device equal those
    the layers' linear ops read in one decode step (each op's bytes beyond wb per weight)."""
    d = rl.resolve(model, "h100-sxm", **options)
    p = d.plan
    held = weight_bytes(d.model, p) - weight_bytes(d.model, replace(p, scale_bytes=0.0))
    read = 0.0
    for op in stage_ops(d.model, "decode", 1, 64, p):
        if op.kind == "linear" and op.name not in ("lm_head", "router"):
            weights = op.dims["experts"] * op.dims["k"] * op.dims["n"]
            read += op.count * (op.weight_bytes - weights * p.wb)
    assert held > 0 and held == pytest.approx(read, rel=1e-12)
