"""FP8 priced from FP8 measurements (issue 54, goal 4).

A W8A8 projection runs the quantised matmul the calibration measures (``torch._scaled_mm``
for fp8, ``torch._int_mm`` for int8: the ``linear:fp8_matmul@fp8`` class), never a class
pooled over every type; a type the profile measured no class of takes the nearest measured
type's class on its own roofs, and says so (tests/test_basis.py holds those notes)."""

from __future__ import annotations

import pytest

import ridgeline as rl
from ridgeline.engine.layers import stage_ops
from ridgeline.io.catalog import PROFILES_DIR
from ridgeline.io.resolve import resolve

H200 = PROFILES_DIR / "cuda-nvidia-h200.yaml"
H100 = PROFILES_DIR / "cuda-nvidia-h100-80gb-hbm3.yaml"
# (device, profile, execution): each GPU's datasheet and its committed profile (the H100's
# prices eager execution only: it was timed by eager CUDA events)
ROOFS = [
    ("h200", None, "graph"),
    ("h100-sxm", None, "graph"),
    ("h200", H200, "graph"),
    ("h100-sxm", H100, "eager"),
]
WORKLOADS = [  # (model, batch, prompt, generate)
    ("llama-3-8b", 1, 128, 128),
    ("llama-3-8b", 64, 2048, 128),
    ("llama-2-7b", 16, 512, 64),
    ("mixtral-8x7b", 8, 1024, 32),
    ("qwen2-7b", 256, 256, 256),
]


@pytest.mark.parametrize("device,profile,execution", ROOFS)
@pytest.mark.parametrize("model,batch,prompt,generate", WORKLOADS)
def test_fp8_is_never_slower_than_bf16_where_the_datasheet_rates_it_higher(
    device, profile, execution, model, batch, prompt, generate
):
    d = rl.load_device(device)
    assert d.matrix_peak["fp8"] > d.matrix_peak["bf16"]
    how = dict(batch=batch, seq_len=prompt, generate=generate, profile=profile, execution=execution)
    fp8 = rl.analyze(model, device, dtype="fp8", **how).generation
    bf16 = rl.analyze(model, device, dtype="bf16", **how).generation
    for key in ("ttft_s", "tpot_s", "total_s"):
        assert fp8[key] <= bf16[key] * (1 + 1e-9), (key, fp8[key], bf16[key])


def ridge(d, dtype: str) -> float:
    """Operations per byte at which the matrix roof meets the memory roof."""
    return d.ceilings.matrix_peak[dtype] / d.ceilings.bandwidth


@pytest.mark.parametrize("device,profile,execution", ROOFS)
@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_a_decode_that_streams_its_weights_below_the_ridge_is_memory_bound(device, profile, execution, dtype):
    """A decode projection does 2 x batch operations per weight, reading wb bytes per weight:
    intensity 2 x batch / wb, below the ridge for every batch checked here (fp8: 2 x 64 / 1
    = 128 against the H200 profile's 1207 / 4.23 = 285 and the datasheet's 1979 / 4.8 = 412)."""
    d = resolve("llama-3-8b", device, dtype=dtype, profile=profile, execution=execution)
    wb = d.plan.wb
    for batch in (1, 8, 32, 64):
        assert 2 * batch / wb < ridge(d, d.plan.matrix_dtype)
        a = rl.analyze(d, batch=batch, seq_len=1024, generate=8)
        ops = a.decode.ops
        linear = ops[(ops.kind == "linear") & (ops.name != "lm_head")]
        assert set(linear.bound) == {"memory"}, (batch, linear[["name", "bound"]].to_dict("records"))


def test_w8a8_projections_run_the_measured_quantised_matmul():
    d = resolve("llama-3-8b", "h200", dtype="fp8", profile=H200)
    ops = {op.name: op for op in stage_ops(d.model, "decode", 64, 2048, d.plan)}
    for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
        assert d.ceilings.keys(ops[name])[1] == "linear:fp8_matmul@fp8"
        # the measured class: all of the measured fp8 peak, all of the bandwidth, 6.026 us
        assert dict(d.ceilings.terms(ops[name])) == {"compute": 1.0, "memory": 1.0}
        assert d.ceilings.overhead(ops[name]) == pytest.approx(6.026e-6)
    # q_proj at batch 64: 4096 x 4096 fp8 weights (16.78 MB, + 8 KiB of scales) stream at the
    # measured 4232.47 GB/s; its 2 x 64 x 4096^2 = 2.147 GFLOP at 1206.96 TFLOP/s take 1.78 us
    a = rl.analyze(d, batch=64, seq_len=2048, generate=2)
    q = a.decode.ops.set_index("name").loc["q_proj"]
    assert q.time_s == pytest.approx(q.bytes / 4232.47e9 + 6.026e-6, rel=1e-6)


def test_fp4_activations_quantise_only_the_matrix_work():
    """NVFP4 (weights and activations fp4, B200's 9000 TFLOP/s): the projections compute in
    fp4; element-wise ops, norms, the embedding and lm_head run in fp16, as with fp8 (before,
    --dtype fp4 ran them 'in fp4')."""
    a = rl.analyze("llama-3-70b", "b200", dtype="fp4", batch=64, seq_len=1024, generate=8)
    dtypes = dict(zip(a.decode.ops["name"], a.decode.ops["dtype"]))
    assert dtypes["q_proj"] == "fp4" and dtypes["down_proj"] == "fp4"
    assert {dtypes[n] for n in ("attn_norm", "mlp_act", "mlp_add", "final_norm", "lm_head")} == {"fp16"}
