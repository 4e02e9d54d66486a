"""Which data type the arithmetic runs in, given the operand types and the device.

An op runs in the lowest-precision type both operands are in and the device runs in
hardware; otherwise operands are converted up: integers climb int1 -> int2 -> int4 -> int8
and then to the activation's float type, fp8 climbs to fp16/bf16. A float type the device
cannot run at all (fp16 on a TPU, bf16 on a V100) is an error, not a silent change.
"""

from __future__ import annotations

import math

from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.layers import Plan
from ridgeline.engine.ops import Quant
from ridgeline.engine.units import DTYPE_BITS, FLOAT_DTYPES, dtype_bytes
from ridgeline.engine.workload import Settings, fusion_kinds
from ridgeline.errors import InvalidSettingError, UnsupportedDtypeError

_INT_LADDER = ("int1", "int2", "int4", "int8")


def _is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def _operand_type(w: str, a: str) -> str:
    """The narrowest type both operands can be expressed in."""
    if _is_float(w) != _is_float(a):
        return a if _is_float(a) else w
    if DTYPE_BITS[w] == DTYPE_BITS[a]:
        return a
    return w if DTYPE_BITS[w] > DTYPE_BITS[a] else a


def _supported(dtype: str, device: DeviceSpec) -> bool:
    if dtype.startswith("fp8"):
        return "fp8" in device.matrix_peak or dtype in device.matrix_peak
    return dtype in device.matrix_peak


def _float_fallback(a: str, device: DeviceSpec) -> str:
    for dtype in ((a,) if _is_float(a) and not a.startswith("fp8") else ()) + ("fp16", "bf16", "fp32"):
        if dtype in device.matrix_peak:
            return dtype
    raise UnsupportedDtypeError(a, device.name, sorted(device.matrix_peak))


def matrix_dtype(w: str, a: str, device: DeviceSpec) -> str:
    """The compute type of a matrix op with weights in ``w`` and activations in ``a``."""
    dtype = _operand_type(w, a)
    if _supported(dtype, device):
        return "fp8" if dtype.startswith("fp8") and "fp8" in device.matrix_peak else dtype
    if dtype in _INT_LADDER:
        for wider in _INT_LADDER[_INT_LADDER.index(dtype) + 1 :]:
            if wider in device.matrix_peak:
                return wider
        return _float_fallback(a, device)
    if dtype.startswith("fp8"):
        return _float_fallback(a, device)
    raise UnsupportedDtypeError(dtype, device.name, sorted(device.matrix_peak))


def vector_dtype(a: str) -> str:
    """Element-wise ops run in the activation type, or fp16 when activations are integers or
    a float narrower than 16 bits (fp8, fp6, fp4: quantised for the matrix units only)."""
    return a if _is_float(a) and DTYPE_BITS[a] >= 16 else "fp16"


SCALE_BYTES = 2.0  # an fp16 scale per group
ZERO_POINT_BYTES = 2.0  # an fp16 zero point per group (zero_points="fp16")


def _scale_bytes(w: str, zero_points: str = "fp16") -> float:
    """Bytes per quantisation group: integer weights carry an fp16 scale and a zero point,
    the zero point either fp16 or packed at the weight's own width (AWQ/GPTQ store 4-bit
    zeros packed eight to an int32: int4 with groups of 128 is 4 + 8 x 2.5/128 = 4.16 bits
    per weight); float weights (fp8/fp6/fp4) carry a scale only."""
    if w in _INT_LADDER:
        zero = ZERO_POINT_BYTES if zero_points == "fp16" else DTYPE_BITS[w] / 8
        return SCALE_BYTES + zero
    if w.startswith(("fp8", "fp6", "fp4")):
        return SCALE_BYTES
    return 0.0


# OCP Microscaling (MX) v1.0: a block of 32 FP4 (E2M1) values shares one 8-bit E8M0 scale,
# 4 + 8/32 = 4.25 bits a weight; gpt-oss's checkpoint stores its experts so (its config's
# quantization_config, quant_method "mxfp4": *_blocks of packed fp4, *_scales of uint8)
MX_BLOCK = 32
MX_SCALE_BYTES = 1.0


def expert_plan(expert_format: str, w: str, a: str, device: DeviceSpec) -> tuple[Quant | None, str]:
    """The routed experts' weight format and compute type where the checkpoint stores them
    as ``expert_format`` ("mxfp4") and the settings' weight type is wider than it; else
    (None, ""): the experts are priced as every linear layer. MXFP4 weights run as fp4
    weights do: in the operands' common type (``matrix_dtype``), converted up in the kernel."""
    if expert_format != "mxfp4" or DTYPE_BITS[w] <= DTYPE_BITS["fp4"]:
        return None, ""
    compute = matrix_dtype("fp4", a, device)
    return Quant(dtype_bytes("fp4"), MX_SCALE_BYTES, MX_BLOCK, dequant=DTYPE_BITS["fp4"] < DTYPE_BITS[compute]), compute


def unquantised_dtype(a: str) -> str:
    """The type of what stays unquantised whatever --dtype/--w-bits/--a-bits say: embeddings,
    norms, the MoE router and lm_head are kept in the activation's float type, or fp16 when
    activations are integers or fp8 (the rule of vLLM/AWQ/GPTQ checkpoints)."""
    return vector_dtype(a)


def flash_tile_rows(on_chip_bytes: float, head_dim: int, ab: float) -> int:
    """Query rows per flash-attention tile: with M elements on chip, B_c = ceil(M / 4d) and
    B_r = min(B_c, d) (Dao et al., FlashAttention, Algorithm 1)."""
    elements = (on_chip_bytes or 64 * 1024) / ab
    return int(max(16, min(math.ceil(elements / (4 * head_dim)), head_dim)))


# Keys per block of the fused attention kernel where it computes whole blocks under a causal
# mask: PyTorch's CPU flash kernel (its kv split size, 512). GPU flash kernels skip masked
# tiles of 64-128 keys: counted exactly causal (0).
ATTENTION_KEY_BLOCK = {"cpu": 512}


def attention_key_block(kind: str) -> int:
    """The fused attention kernel's causal key block on a device of ``kind`` (0: exact)."""
    return ATTENTION_KEY_BLOCK.get(kind, 0)


def check_domain(tp: int, device: DeviceSpec) -> None:
    """Tensor parallelism within the devices one interconnect joins (where the datasheet says
    how many): an all-reduce across domains would cross the network, which is not modelled."""
    if device.interconnect_domain and tp > device.interconnect_domain:
        raise InvalidSettingError(
            "tp",
            f"tp={tp} is more than the {device.interconnect_domain} devices one {device.interconnect or 'interconnect'} "
            f"domain of {device.name} joins; keep tp within it and split the rest with pp",
        )


def make_plan(
    settings: Settings, device: DeviceSpec, head_dim: int = 128, expert_format: str = "", sdpa: bool = True
) -> Plan:
    """The per-analysis context of the layer builder: byte widths, compute types,
    quantisation terms, the attention kernel and the parallel layout; the routed experts in
    the checkpoint's own format where ``expert_format`` names one (``expert_plan``); ``sdpa``:
    the model's transformers class runs SDPA (``ModelConfig.transformers_sdpa``)."""
    check_domain(settings.tp, device)
    w, a = settings.w_dtype, settings.a_dtype
    expert_quant, expert_dtype = expert_plan(expert_format, w, a, device)
    compute = matrix_dtype(w, a, device)
    ab = dtype_bytes(a)
    kept = unquantised_dtype(a)
    attention = resolve_attention(settings.attention, sdpa)
    return Plan(
        wb=dtype_bytes(w),
        ab=ab,
        kvb=dtype_bytes(settings.kv_dtype),
        matrix_dtype=compute,
        vector_dtype=vector_dtype(a),
        scale_bytes=_scale_bytes(w, settings.zero_points),
        group_size=settings.group_size,
        dequant=DTYPE_BITS[w] < DTYPE_BITS[compute] or (not _is_float(w) and _is_float(compute)),
        attention=attention,
        kv_block=settings.kv_block,
        tile_rows=flash_tile_rows(device.l1_bytes_per_unit, head_dim, max(ab, 2.0)),
        key_block=attention_key_block(device.kind),
        compute_units=max(device.compute_units, 1),
        tp=settings.tp,
        pp=settings.pp,
        ep=settings.ep,
        micro_batches=settings.micro_batches,
        hb=dtype_bytes(kept),
        head_dtype=_float_fallback(kept, device),
        memory_utilization=settings.memory_utilization,
        transformers_eager=attention == "eager",
        half_to_float=attention == "eager" and device.kind == "gpu" and a == "fp16",
        fusion=fusion_kinds(settings.fusion),
        expert_quant=expert_quant,
        expert_dtype=expert_dtype,
    )


def resolve_attention(attention: str, sdpa: bool = True) -> str:
    """The attention setting ``auto`` stands for: the path transformers' default attention
    (``attn_implementation="sdpa"``, ``sdpa_attention_forward``) takes for a batch without
    padding, on every device. ``use_gqa_in_sdpa`` sees no mask (and head_dim <= 256), so
    grouped K/V go to SDPA with ``enable_gqa=True``: ``sdpa-gqa``. The H100 run of 2026-11-26
    recorded this path at every prompt (``reports/validation/gpu-runs/cuda-nvidia-h100-80gb-
    hbm3-2026-11-26/run2-hf``); on CUDA, SDPA's cuDNN and flash backends take grouped K/V
    without copies. A model whose class runs no SDPA (``sdpa`` false) takes transformers'
    eager path instead. Others are kept."""
    if attention != "auto":
        return attention
    return "sdpa-gqa" if sdpa else "eager"
