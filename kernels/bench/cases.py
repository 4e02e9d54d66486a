"""Benchmark cases: which kernel runs at which shape, and the engine ``Op`` that predicts it.

Pure (no torch): a case carries a *recipe* from which :func:`build_op` rebuilds its ``Op``
with the current engine - from ``ridgeline.engine.layers.stage_ops`` on a catalog model (prefill
M = batch x tokens, decode M = batch), or with the ``ridgeline.engine.ops`` constructors where the
kernel moves other bytes than the engine's op (documented per builder). The benchmark reads
the kernel's shape from that op's ``dims``, so predicted and measured sit in one row, and
replaying a recorded snapshot needs only the recipes.

Calibration and validation shapes come from different models and sizes and are disjoint
(:func:`check_disjoint`): a calibrated prediction is only credited on shapes it was not
fitted to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import product
from types import MappingProxyType
from typing import Any

from ridgeline.engine import ops as O
from ridgeline.engine.layers import Plan, causal_pairs, stage_ops
from ridgeline.engine.ops import Op, Quant
from ridgeline.engine.precision import SCALE_BYTES, ZERO_POINT_BYTES, attention_key_block
from ridgeline.engine.roofline import ROW_TAIL_PERIOD
from ridgeline.engine.units import dtype_bytes
from ridgeline.io.resolve import load_model

# --- which shapes ----------------------------------------------------------------------

# Held out in every dimension (``held_out_overlap``): validation's models, batch sizes,
# context lengths and widths (every K and N of the models' GEMMs) are all absent from
# calibration. head_dim is not: the attention grid's 64, 96, 128 and 256 cover the catalog.
CALIBRATION_MODELS = ("qwen2-0.5b", "llama-3.2-1b", "qwen2-7b", "phi-3-mini")  # GQA and MHA
VALIDATION_MODELS = ("llama-3-8b", "llama-2-7b")  # GQA and MHA
QUICK_CALIBRATION_MODELS = ("qwen2-0.5b", "llama-3.2-1b")
QUICK_VALIDATION_MODELS = ("llama-3-8b",)

# (batch, tokens) per stage; prefill lengths per dtype (fp32 GEMMs are slow on a CPU)
WORKLOADS = {
    "calibration": {
        "prefill": {"fp32": [(2, 64), (2, 192)], "bf16": [(2, 64), (2, 192)], "fp16": [(2, 64), (2, 192)]},
        "decode": [(2, 512), (4, 2048), (32, 256)],
    },
    "validation": {
        "prefill": {"fp32": [(1, 320)], "bf16": [(1, 320), (3, 160), (1, 1536)], "fp16": [(1, 320), (3, 160)]},
        "decode": [(1, 1536), (8, 768), (48, 384)],
    },
}
QUICK_WORKLOADS = {
    "calibration": {
        "prefill": {"fp32": [(2, 64)], "bf16": [(2, 192)], "fp16": [(2, 192)]},
        "decode": [(2, 512), (4, 2048), (32, 256)],
    },
    "validation": {
        "prefill": {"fp32": [(1, 320)], "bf16": [(1, 320)], "fp16": [(1, 320)]},
        "decode": [(1, 1536), (8, 768)],
    },
}
# A fresh held-out draw (``drawn_cases``, ``validate --draw SEED``): the dense catalog models
# that calibration never measures, less the MoE and MLA ones (no kernels here), those whose
# largest projection weighs over DRAW_MAX_WEIGHT_BYTES in fp32 (the draw times one layer's
# kernels, so the bound is per op: a 70B's 8192 x 28672 is 0.9 GiB, a benchmark's inputs
# are copied to rotate), Mistral-7B (Llama-3-8B's shapes and kinds) and Gemma-7B (its hidden
# 3072 is Phi-3-mini's: not held out in width). Each draw takes at least one model whose
# activation and norm are not SiLU x up and RMSNorm (``DRAW_KINDS``: non-gated MLPs, LayerNorm
# with bias, Falcon's MQA) and records every model's kinds (``meta.draw.kinds``); batch sizes
# and context lengths are drawn from these ranges (inclusive; lengths in steps of 16)
# that calibration never uses; fp32 prompts are kept short (its products run at a tenth of a
# TFLOP/s on a CPU core), decode batch x length bounded (an MHA 13B layer's fp32 cache is
# 40 KiB a token). Prompts are drawn for DRAW_DTYPES in order whatever the device runs, so a
# seed draws the same workloads on every device.
DRAW_DTYPES = ("fp32", "bf16", "fp16")
DRAW_MODELS = ("llama-2-7b", "llama-3-8b", "llama-2-13b", "opt-6.7b", "gpt-j-6b", "falcon-7b")
DRAW_KINDS = ("opt-6.7b", "gpt-j-6b", "falcon-7b")  # ReLU, tanh-GELU, GELU; LayerNorm with bias
# dense catalog models added after the committed draws (issue 58) that would otherwise join
# the pool: with them every recorded seed would draw another set, so they wait for a new pool
DRAW_LATER = ("qwen3-8b", "phi-4", "pythia-6.9b", "granite-3.3-8b")
DRAW_MAX_WEIGHT_BYTES = 2**29
DRAW_MODEL_COUNT, DRAW_DECODES = 2, 2
DRAW_PREFILL_BATCH, DRAW_PREFILL_LENGTH = (1, 4), (64, 1024)
DRAW_PREFILL_TOKENS = {"fp32": 768, "default": 1536}
DRAW_DECODE_BATCH, DRAW_DECODE_LENGTH, DRAW_DECODE_TOKENS = (1, 64), (128, 4096), 32768
LINEAR_OPS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
QUANT_OPS = ("o_proj", "gate_proj", "down_proj")  # weight-only kernels, decode
INT4_GROUP = 128
SWEEP_M = (2, 4, 24, 96, 192, 384, 768)  # empirical roofline: bf16 m x 4096 x 4096
SWEEP_KN = 4096
# Skinny products: every row count from 1 to 16, then about sqrt(2) steps to 256, per data
# type, at (K, N) shapes of calibration models spanning their widths, long K and long N
# (``ridgeline.engine.roofline.RowTable`` interpolates them), and the catalog's longest common
# K: a 70B Llama's down_proj (28672 x 8192: 0.94 GB of fp32 weights, 0.47 GB in bf16; 28672 is
# no validation or draw width); fp32 rows stop at GRID_MAX_FP32_FLOPS (there: 64 rows; the
# 18-19K-wide shapes reach 256, so a prompt's product is not read from a 64-row point held flat)
GRID_M = (*range(1, 17), 24, 32, 48, 64, 96, 128, 192, 256)
# quick: to 1024 rows, a prompt's projections (a prompt of 1104 rows read from a table held
# flat past 256 rows was +22-30 % slow on draw 2722)
QUICK_GRID_M = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512, 1024)
GRID_KN = (
    (896, 4864),
    (4864, 896),
    (2048, 2048),
    (2048, 8192),
    (8192, 2048),
    (3584, 18944),
    (18944, 3584),
    (28672, 8192),
    (4608, 15360),  # the 13-18K-wide MLPs of 7-13B models (GPT-J, Falcon, Llama 2 13B, Llama 3 8B),
    (15360, 4608),  # at widths no catalog model has, so every draw stays held out
)
QUICK_GRID_KN = ((2048, 2048), (2048, 8192), (8192, 2048))
GRID_MAX_FP32_FLOPS = 4e10
# weight-only int8 / int4 products (bf16 activations) on the row grid up to the decode batches
QUANT_GRID_M = (*range(1, 17), 24, 32, 48, 64)
QUICK_QUANT_GRID_M = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)
WEIGHT_ONLY = {
    "int8_weight_only": {"w_dtype": "int8"},
    "int4_weight_only": {"w_dtype": "int4", "group_size": INT4_GROUP},
}
# Decode attention on a grid (calibration only): query rows per K/V head (1 = MHA, the GQA
# group, up to 128: multi-query models fold every head onto one K/V head, Falcon-7B's 71)
# x head_dim (to Gemma's and GPT-J's 256), at two cache lengths, per kernel (eager q.K^T and
# P.V, fused sdpa) and data type; 2 sequences x 8 K/V heads (a CPU kernel's time per query
# head at 71 rows there is within 4 % of Falcon's 1 K/V head at 16-33 sequences)
ATTENTION_GRID_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64, 128)
ATTENTION_GRID_HEAD_DIMS = (64, 96, 128, 256)
ATTENTION_GRID_KV = (512, 2048)
# transformers' two paths, fewer rows: enable_gqa (sdpa_gqa) from 2 rows (at 1 transformers
# calls plain SDPA) to the multi-query 128; the masked path (sdpa_repeat_kv) from 1 (an MHA
# model's padded batch) to 16: with one K/V head its copy is a view, priced as sdpa_gqa
# (``ridgeline.engine.ops.repeat_kv_attention``)
GROUP_GRID_ROWS = {"gqa": (2, 4, 8, 16, 32, 64, 128), "repeat_kv": (1, 2, 4, 8, 16)}
# Prompt attention on a grid (full calibration): causal over its own prompt at 5 lengths x
# head_dim, per kernel and data type, 2 sequences x 2 K/V heads (the same lengths for every
# data type: a draw avoids the calibration's lengths, whatever types the device runs)
# a CPU's eager q.K^T and P.V over a prompt (the engine's eager products, GQA folded onto the
# query rows as the decode grid measures them): on the same grid, at the fused kernel's rows
EAGER_PRODUCTS = ("qk_matmul", "sv_matmul")
PREFILL_GRID_ROWS = {
    "attention": (1, 4),
    "gqa": (2, 4, 8),
    "repeat_kv": (1, 4),
    **dict.fromkeys(EAGER_PRODUCTS, (1, 4)),
}
PREFILL_GRID_LENGTHS = (64, 128, 256, 512, 1024)
PREFILL_GRID_HEAD_DIMS = (64, 96, 128, 256)
PREFILL_GRID_KV_HEADS = 2
# a quick calibration's prompt table: the same lengths, fewer rows and head dims (a prompt of
# a multi-head model is 1 row, of a GQA model 4-8; head_dim 256 is Gemma's and GPT-J's)
QUICK_PREFILL_GRID_ROWS = {**PREFILL_GRID_ROWS, "gqa": (2, 8)}
QUICK_PREFILL_GRID_HEAD_DIMS = (64, 128, 256)
QUICK_ATTENTION_GRID_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128)
QUICK_ATTENTION_GRID_HEAD_DIMS = (64, 128, 256)  # 256: Gemma's and GPT-J's
QUICK_ATTENTION_GRID_KV = (512,)
ATTENTION_GRID_BATCH, ATTENTION_GRID_KV_HEADS = 2, 8
# Element-wise kernels on a grid of sizes (calibration only): token counts in powers of 2 at
# calibration widths (llama-3.2-1b's hidden 2048 and MLP width 8192, rows of 512 keys for
# the softmax), up to SIZE_GRID_MAX_BYTES moved, past the allocator's 32 MiB mmap threshold
SIZE_GRID_TOKENS = tuple(2**i for i in range(17))
# quick: 4x steps, and 2x past the last-level cache, where the rate falls off to memory's
QUICK_SIZE_GRID_TOKENS = tuple(sorted({4**i for i in range(9)} | {2048, 8192}))
SIZE_GRID_WIDTH = {"rmsnorm": 2048, "residual_add": 2048, "silu_mul": 8192, "softmax": 512, "rope": 2048}
# The other activation and norm kinds the catalog's dense models run, one series each at the
# same widths (full calibration only): Gemma's tanh-GELU x up, GPT-J's tanh-GELU, Falcon's
# GELU, OPT's ReLU; LayerNorm with its bias (OPT, GPT-J, Falcon)
SIZE_GRID_KINDS = {"gelu_tanh_mul": 8192, "gelu_tanh": 8192, "gelu": 8192, "relu": 8192, "layernorm": 2048}
# A norm reduces each row, so its rate at a size depends on the row's width as well: on a
# Zen 5, fp32 LayerNorm over rows of 3584 to 5120 takes 1.2x to 1.3x the time of rows of
# 2048 at the same bytes. Its series are measured at these widths too, one size table each
# (``ridgeline.engine.roofline.WIDTH_MARK``): the calibration models' hidden sizes 896 and
# 3584 and their MLP width 8192, so no width validation holds out is measured (the
# catalog's hidden sizes run from 896 to 16384: past 8192, held at it and named)
SIZE_GRID_NORM_WIDTHS = (896, 3584, 8192)
# A CPU softmax's rate moves with its row width too: on a Zen 5 a bf16 row of 160 keys takes
# 1.33x the time per byte of a row of 512, one of 2048 0.89x (fp32 has no such trend: its
# rows of 512 run 15-20 % slower than of 192 or 2048).
# Measured at these key counts as well (CPU calibration): calibration lengths, so a draw's
# never are; 192 (six 32-column vectors, no tail), not 128, which the tail series measures
SIZE_GRID_SOFTMAX_WIDTHS = (64, 192, 2048)
ACT_KERNELS = ("silu", "gelu", "gelu_tanh", "relu")  # kernels.bench.bench.ACTIVATIONS
SIZE_GRID_MAX_BYTES = 256 * 2**20
# A CPU softmax's vector tail (``ridgeline.engine.roofline.ROW_TAIL_PERIOD``): rows of
# SOFTMAX_TAIL_WIDTH + r keys for every remainder r, each ``SOFTMAX_TAIL_ROWS`` rows (within
# the L2 cache), so each row's extra time over a whole-vector row is measured
SOFTMAX_TAIL_WIDTH, SOFTMAX_TAIL_ROWS = 128, 1024
TAIL_SERIES = {"series": "tail"}
SIZE_GRID_ROPE = (32, 8, 64)  # heads, K/V heads, head_dim (llama-3.2-1b)
# A size-grid case's temporaries reach 32 MiB, where malloc's state decides their cost: timed
# with it steady (``kernels.bench.suite.steady_heap``). Rows measured before carry no mark, so
# ``calibrate --extend`` measures them again.
HEAP = {"heap": "steady"}

OP_CLASSES = ("gemm", "gemv", "attention", "softmax", "norm", "elementwise", "quant", "sweep")
# Kernels no serving stack runs for speed: measured and shown, but reported apart from the
# headline figures. SDPA's math backend (the fallback when no fused kernel applies) makes
# fp32 copies of K and V and writes the whole score matrix; on a CPU its time is mostly
# page faults on those fresh allocations (glibc maps each allocation above its 32 MiB
# threshold anew: with MALLOC_MMAP_THRESHOLD_ raised, llama-2-7b's batch-8 decode runs 5x
# faster). On CUDA, also ``_weight_int8pack_mm``.
REFERENCE_KERNELS = {
    "cpu": frozenset({("sdpa", "math")}),
    "cuda": frozenset({("sdpa", "math"), ("int8_weight_only", "")}),
}


def is_reference(case: Case | Mapping[str, Any], device: str = "cuda") -> bool:
    """A kernel reported apart from the headline on ``device`` (``REFERENCE_KERNELS``)."""
    kernel = case.get("kernel", "") if isinstance(case, Mapping) else case.kernel
    backend = case.get("backend", "") if isinstance(case, Mapping) else case.backend
    backend = backend if isinstance(backend, str) else ""  # a CSV's empty cell reads as NaN
    return (kernel, backend) in REFERENCE_KERNELS.get(device, REFERENCE_KERNELS["cuda"])


@dataclass(frozen=True)
class Case:
    """One kernel at one shape, and how to rebuild the Op that predicts it."""

    name: str  # model/stage/workload/op/dtype[/backend]
    op_class: str  # summary class (OP_CLASSES)
    kernel: str  # torch implementation (kernels/bench/bench.py)
    dtype: str  # activation / compute type: fp32 | bf16 | fp16
    recipe: Mapping[str, Any]  # builder + arguments for build_op (JSON-able)
    backend: str = ""  # sdpa backend; group size of int4
    split: str = "validation"  # calibration | validation
    stage: str = ""  # prefill | decode | sweep

    @property
    def op(self) -> Op:
        return build_op(self.recipe)

    def shape_key(self) -> tuple:
        """What makes two cases the same measurement: kernel, backend, type and dims."""
        dims = tuple(sorted((k, _plain(v)) for k, v in self.op.dims.items()))
        return (self.kernel, self.backend, self.dtype, dims)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_class": self.op_class,
            "kernel": self.kernel,
            "dtype": self.dtype,
            "backend": self.backend,
            "split": self.split,
            "stage": self.stage,
            "recipe": dict(self.recipe),
        }


def case_from_dict(raw: Mapping[str, Any]) -> Case:
    return Case(
        raw["name"],
        raw["op_class"],
        raw["kernel"],
        raw["dtype"],
        MappingProxyType(dict(raw["recipe"])),
        raw.get("backend", ""),
        raw.get("split", "validation"),
        raw.get("stage", ""),
    )


def _plain(value: Any) -> Any:
    """numpy scalars -> Python numbers, so dims compare, hash and serialise."""
    return value.item() if hasattr(value, "item") else value


# --- recipes -> Op (pure, replayable) ----------------------------------------------------


def precision(
    dtype: str, attention: str = "eager", w_dtype: str | None = None, group_size: int = 0, key_block: int = 0
) -> Plan:
    """Plan of a case: everything in ``dtype``; weight-only quantised weights in
    ``w_dtype`` with a bf16 scale per channel (int8) or scale + zero per group (int4),
    converted up inside the kernel - what torch's int8/int4 weight-only kernels store;
    the fused attention's causal key block as the engine has it on the case's device."""
    ab = dtype_bytes(dtype)
    if w_dtype is None:
        return Plan(ab, ab, ab, dtype, dtype, attention=attention, key_block=key_block)
    # per channel: one 16-bit scale (the size of one fp8 group scale); per group: scale + zero
    scale_bytes = SCALE_BYTES + ZERO_POINT_BYTES if group_size else SCALE_BYTES
    return Plan(
        dtype_bytes(w_dtype),
        ab,
        ab,
        dtype,
        dtype,
        scale_bytes=scale_bytes,
        group_size=group_size,
        dequant=True,
        attention=attention,
    )


@lru_cache(maxsize=512)
def _stage(model: str, stage: str, batch: int, length: int, p: Plan) -> dict[str, Op]:
    return {op.name: op for op in stage_ops(load_model(model), stage, batch, length, p)}


def _engine_op(r: Mapping[str, Any]) -> Op:
    p = precision(
        r["dtype"], r.get("attention", "eager"), r.get("w_dtype"), r.get("group_size", 0), r.get("key_block", 0)
    )
    op = _stage(r["model"], r["stage"], int(r["batch"]), int(r["length"]), p)[r["op"]]
    return replace(op, name=r["rename"]) if r.get("rename") else op


def _sdpa_math(r: Mapping[str, Any]) -> Op:
    """PyTorch's math backend (``_scaled_dot_product_attention_math``) as ``torch.profiler``
    shows it run, pass by pass: bf16/fp16 inputs converted to fp32 first (it computes in
    fp32, so the op is an fp32 op whatever the inputs), grouped K/V expanded to every query
    head with ``repeat_interleave`` (prefill; decode folds the group onto the query axis, as
    the benchmark calls it, and reads K/V once per K/V head), q and K^T scaled (one pass
    each), the full q x kv score matrix written, masked (causal), soft-maxed and read back
    by the second product, and the output converted back. The cache is read once from
    memory (``kv_read_bytes``); every later pass is activation traffic."""
    base = {**r, "attention": "eager"}
    qk, sv = (_engine_op({**base, "op": name}) for name in ("qk_matmul", "sv_matmul"))
    d = qk.dims
    b, h, g, q, kv, hd = (float(d[k]) for k in ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim"))
    ab, f32 = dtype_bytes(r["dtype"]), 4.0
    queries, keys, scores = b * h * q * hd, b * g * kv * hd, b * h * q * kv
    per_head = keys * (h / g if q > 1 and g != h else 1.0)  # K (or V) after the expansion
    passes = [
        ((queries + per_head) * f32, (queries + per_head) * f32),  # scale q, K^T
        ((queries + per_head) * f32, scores * f32),  # q @ K^T
        (scores * f32, scores * f32),  # softmax
        ((scores + per_head) * f32, queries * f32),
    ]  # P @ V
    if ab < f32:
        passes += [
            ((queries + 2 * keys) * ab, (queries + 2 * keys) * f32),  # to fp32
            (queries * f32, queries * ab),
        ]  # output back
    if per_head > keys:
        passes.append((2 * keys * f32, 2 * per_head * f32))  # repeat_interleave
    if r["stage"] == "prefill":
        passes.append((scores * f32, scores * f32))  # causal mask
    read, write = (sum(x[i] for x in passes) for i in (0, 1))
    # each pass's output is a fresh tensor (two for the conversions and the repeat of K, V)
    fresh = [queries * f32, per_head * f32, scores * f32, scores * f32, queries * f32]
    if ab < f32:
        fresh += [queries * f32, keys * f32, keys * f32, queries * ab]
    if per_head > keys:
        fresh += [per_head * f32, per_head * f32]
    if r["stage"] == "prefill":
        fresh.append(scores * f32)
    return Op(
        "sdpa_math",
        "attention",
        qk.count,
        flops=qk.flops + sv.flops,
        kv_read_bytes=2 * keys * ab,
        act_read_bytes=read - 2 * keys * ab,
        act_write_bytes=write,
        matrix=True,
        dtype="fp32",
        dims=qk.dims,
        alloc_bytes=tuple(fresh),
    )


def _mlp_act_eager(r: Mapping[str, Any]) -> Op:
    """act(gate) * up in eager PyTorch is two kernels: the activation writes a temporary that
    the multiply reads back. The temporary is written and read again at once, at the address
    the allocator handed out the call before, so it stays in the cache: memory sees 2 reads
    and 1 write per element, as for the fused kernel (counting it as 3 and 2 had its class
    want 1.27 of the copy roof on the development EPYC); the extra pass is time on the
    vector units, in the class's fit. An ungated act(up) is one kernel. The recipe names the
    kernel that ran (recipes from before kinds: always SiLU x up, whatever the model ran)."""
    op, kernel = _engine_op({**r, "op": "mlp_act"}), r.get("kernel", O.DEFAULT_ACT)
    if O.op_variant(op) != kernel:
        d = op.dims
        act = O.mlp_act(d["tokens"], d["width"], kernel.removesuffix("_mul"), kernel.endswith("_mul"), **_like(op, r))
        op = replace(act, name=op.name)
    return _eager_act(op)


def _like(op: Op, r: Mapping[str, Any]) -> dict[str, Any]:
    """The count, types and inputs of ``op`` (of recipe ``r``), to build another op like it."""
    return dict(ab=dtype_bytes(r["dtype"]), count=op.count, dtype=op.dtype, inputs=op.inputs)


def _eager_act(op: Op) -> Op:
    """The fused op as eager PyTorch runs it: a fresh tensor of the output's size per kernel."""
    fresh = (op.act_write_bytes, op.act_write_bytes) if op.dims["gated"] else (op.act_write_bytes,)
    return replace(op, name="mlp_act_eager", alloc_bytes=fresh)


def _size_grid(r: Mapping[str, Any]) -> Op:
    """An element-wise kernel at a grid size: ``tokens`` rows of ``width`` (the softmax:
    rows of ``width`` keys), as the engine's op of that kernel (same names, so the same
    class: attn_norm, attn_add, mlp_act_eager, softmax, rope; an activation's or norm's
    kernel is its kind: ``ridgeline.engine.ops.act_kernel``, ``NORM_OPS``)."""
    t, w, dtype = int(r["tokens"]), int(r["width"]), r["dtype"]
    kw = dict(ab=dtype_bytes(dtype), count=1, dtype=dtype)
    kernel = r["kernel"]
    if kernel in O.NORM_OPS:
        return O.norm("attn_norm", t, w, wb=kw["ab"], inputs=(), kind=kernel, **kw)
    if kernel == "residual_add":
        return O.residual_add("attn_add", t, w, inputs=(), **kw)
    if kernel.removesuffix("_mul") in ACT_KERNELS:
        return _eager_act(O.mlp_act(t, w, kernel.removesuffix("_mul"), kernel.endswith("_mul"), inputs=(), **kw))
    if kernel == "softmax":
        return O.softmax(1, 1, t, w, **kw)
    if kernel == "rope":
        heads, kv_heads, head_dim = SIZE_GRID_ROPE
        return O.rope(t, heads, kv_heads, head_dim, kvb=kw["ab"], **kw)
    raise ValueError(f"no size grid for kernel {kernel!r}")


def _int_matmul(r: Mapping[str, Any]) -> Op:
    """torch._int_mm / torch._scaled_mm: int8 (fp8) operands, int32 (bf16) output."""
    m, k, n, dtype = int(r["m"]), int(r["k"]), int(r["n"]), r["dtype"]
    out_bytes = 4 if dtype == "int8" else 2
    op = O.linear(r.get("rename", "int8_matmul"), m, k, n, q=Quant(1.0), ab=1.0, count=1, dtype=dtype, inputs=())
    return replace(op, act_write_bytes=m * n * out_bytes)


def _linear(r: Mapping[str, Any]) -> Op:
    """A product at a grid point; with ``w_dtype`` a weight-only quantised one, its weights
    stored as the model cases store them (``precision``)."""
    q = precision(r["dtype"], w_dtype=r.get("w_dtype"), group_size=int(r.get("group_size", 0))).quant
    return O.linear(
        r.get("rename", "linear"),
        int(r["m"]),
        int(r["k"]),
        int(r["n"]),
        q=q,
        ab=dtype_bytes(r["dtype"]),
        count=1,
        dtype=r["dtype"],
        inputs=(),
    )


def _attention_grid(r: Mapping[str, Any]) -> Op:
    """An attention kernel at a grid point: ``kernel`` qk_matmul / sv_matmul (eager),
    attention (fused: SDPA through one backend, ``rename`` saying which) or repeat_kv (Hugging
    Face's masked path: K/V copied to every query head, then SDPA with a boolean mask),
    ``rows`` query heads per K/V head. Decode has one query token; with ``q_len`` (a prompt
    over itself, ``q_len`` = ``kv_len``) the kernel is causal, its keys in whole blocks of
    ``key_block`` where the recipe has one (as the engine prices a CPU's prompts)."""
    b, g, kv, d = (int(r[k]) for k in ("batch", "kv_heads", "kv_len", "head_dim"))
    q = int(r.get("q_len", 1))
    h, ab = g * int(r["rows"]), dtype_bytes(r["dtype"])
    kw = dict(ab=ab, kvb=ab, count=1, dtype=r["dtype"])
    if r["kernel"] in ("attention", "repeat_kv"):
        causal = q > 1
        pairs = causal_pairs(q, int(r.get("key_block", 0))) if causal else q * kv
        positions = max(pairs / Plan.tile_rows, kv) if causal else kv
        op = O.flash_attention(b, h, g, q, pairs, positions, d, d, inputs=(), **kw)
        if r["kernel"] == "repeat_kv":
            op = O.repeat_kv_attention(op, kv, positions, ab)
            if op.name == "sdpa_gqa":  # MQA: repeat_kv returns a view, the grouped kernel's cost
                return op
        return replace(op, name=r["rename"]) if r.get("rename") else op
    build = {"qk_matmul": O.qk_matmul, "sv_matmul": O.sv_matmul}[r["kernel"]]
    return build(b, h, g, q, kv, d, **kw)


BUILDERS = {
    "engine": _engine_op,
    "sdpa_math": _sdpa_math,
    "mlp_act_eager": _mlp_act_eager,
    "int_matmul": _int_matmul,
    "linear": _linear,
    "attention_grid": _attention_grid,
    "size_grid": _size_grid,
}


def build_op(recipe: Mapping[str, Any]) -> Op:
    """The current engine's Op for a recorded recipe."""
    builder = recipe.get("builder")
    if builder not in BUILDERS:
        raise ValueError(f"unknown op recipe builder {builder!r}; known: {', '.join(BUILDERS)}")
    return BUILDERS[builder](recipe)


# --- case lists ----------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What the device offers: data types and sdpa backends to cover."""

    dtypes: tuple[str, ...] = ("fp32", "bf16")
    sdpa_backends: tuple[str, ...] = ("math", "flash")
    device: str = "cpu"
    extra: Mapping[str, Any] = field(default_factory=dict)
    int8: bool = True  # int8 x int8 products run natively (not a scalar fallback)


def _stage_cases(model: str, stage: str, batch: int, length: int, dtype: str, split: str, opts: Options) -> list[Case]:
    """A model stage's kernels: its projections (no gate_proj for an ungated MLP), attention
    per backend, its own norm and activation kernels (``model_kernels``), rotary embedding
    where it has one (fp32), and the quantised products."""
    where = f"{model}/{stage}/b{batch}x{length}"
    base = {"model": model, "stage": stage, "batch": batch, "length": length, "dtype": dtype}
    gemm = "gemm" if stage == "prefill" else "gemv"
    present = set(_stage(model, stage, batch, length, precision(dtype)))
    norm_kernel, act = model_kernels(model)
    cases = []

    def add(op_name, op_class, kernel, recipe, backend=""):
        suffix = f"/{backend}" if backend else ""
        cases.append(
            Case(
                f"{where}/{op_name}/{dtype}{suffix}",
                op_class,
                kernel,
                dtype,
                MappingProxyType(recipe),
                backend,
                split,
                stage,
            )
        )

    for name in (n for n in LINEAR_OPS if n in present):
        add(name, gemm, "linear", {"builder": "engine", **base, "op": name})
    add("qk_matmul", "attention", "qk_matmul", {"builder": "engine", **base, "op": "qk_matmul"})
    add("softmax", "softmax", "softmax", {"builder": "engine", **base, "op": "softmax"})
    add("sv_matmul", "attention", "sv_matmul", {"builder": "engine", **base, "op": "sv_matmul"})
    block = prompt_key_block(opts.device) if stage == "prefill" else {}  # a prompt as the engine prices it
    for backend in opts.sdpa_backends:
        if backend == "math":
            add("sdpa", "attention", "sdpa", {"builder": "sdpa_math", **base}, backend)
        elif backend in TRANSFORMERS_PATHS:
            add("sdpa", "attention", "sdpa", {**transformers_recipe(base, backend), **block}, backend)
        else:
            rename = {"flash": None}.get(backend, f"sdpa_{backend}")
            recipe = {"builder": "engine", **base, "attention": "flash", "op": "attention", **block}
            if rename:
                recipe["rename"] = rename
            add("sdpa", "attention", "sdpa", recipe, backend)
    add("attn_norm", "norm", norm_kernel, {"builder": "engine", **base, "op": "attn_norm"})
    add("attn_add", "elementwise", "residual_add", {"builder": "engine", **base, "op": "attn_add"})
    add("mlp_act", "elementwise", act, {"builder": "mlp_act_eager", **base, "kernel": act})
    if dtype == "fp32" and "rope" in present:  # the rotary kernel is a complex multiply: fp32 only
        add("rope", "elementwise", "rope", {"builder": "engine", **base, "op": "rope"})
    _quant_cases(add, base, stage, dtype, opts, [n for n in QUANT_OPS if n in present])
    return cases


def model_kernels(model: str) -> tuple[str, str]:
    """The kernels of a catalog model's norm and MLP activation: 'rmsnorm', 'silu_mul' ..."""
    cfg = load_model(model)
    return cfg.norm, O.act_kernel(cfg.hidden_act, cfg.gated_mlp)


def int4_group(k: int) -> int | None:
    """The int4 group size of a product over ``k``: 128, or the largest of 64 and 32 that
    divides it (falcon-7b's 4,544 = 71 x 64, as AWQ and GPTQ quantise it); None if neither
    does (the kernel needs whole groups)."""
    return next((g for g in (INT4_GROUP, 64, 32) if k % g == 0), None)


def _quant_cases(add: Any, base: Mapping[str, Any], stage: str, dtype: str, opts: Options, names: list[str]) -> None:
    """The weight-only quantised products of a bf16 decode and the int8 (fp8) products of a
    bf16 prompt, at the shapes of the layers ``names``."""
    if dtype == "bf16" and stage == "decode":
        for name in names:
            add(
                f"{name}.int8wo",
                "quant",
                "int8_weight_only",
                {"builder": "engine", **base, "op": name, "w_dtype": "int8", "rename": "int8_weight_only"},
            )
            group = int4_group(int(_engine_op({**base, "op": name}).dims["k"]))
            if group:
                add(
                    f"{name}.int4wo",
                    "quant",
                    "int4_weight_only",
                    {
                        "builder": "engine",
                        **base,
                        "op": name,
                        "w_dtype": "int4",
                        "group_size": group,
                        "rename": "int4_weight_only",
                    },
                    f"g{group}",
                )
    if dtype == "bf16" and stage == "prefill" and opts.int8:
        for name in names:
            op = _engine_op({**base, "op": name})
            dims = {"m": int(op.dims["m"]), "k": int(op.dims["k"]), "n": int(op.dims["n"])}
            add(
                f"{name}.int8mm",
                "quant",
                "int8_matmul",
                {"builder": "int_matmul", **dims, "dtype": "int8", "rename": "int8_matmul"},
            )
            if opts.device == "cuda":
                add(
                    f"{name}.fp8mm",
                    "quant",
                    "fp8_matmul",
                    {"builder": "int_matmul", **dims, "dtype": "fp8", "rename": "fp8_matmul"},
                )


# The two ways Hugging Face transformers' ``sdpa`` attention calls SDPA (its
# ``sdpa_attention_forward``), measured and predicted as kernels of their own: without a mask
# (``use_gqa_in_sdpa``) it passes grouped K/V with ``enable_gqa=True``; with one it copies K/V
# to every query head (``repeat_kv``) and passes the mask. Either way PyTorch picks the
# backend (no ``sdpa_kernel`` context): what a user of transformers gets.
TRANSFORMERS_PATHS = {"gqa": "sdpa_gqa", "repeat_kv": "sdpa_repeat_kv"}


def transformers_recipe(base: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """A model stage's attention as one of ``TRANSFORMERS_PATHS`` runs it (an
    ``attention_grid`` recipe at the stage's shape: prefill attends over its own prompt)."""
    cfg = load_model(base["model"])
    prefill = base["stage"] == "prefill"
    length = int(base["length"])
    rows = cfg.num_heads // cfg.num_kv_heads
    recipe = {
        "builder": "attention_grid",
        "kernel": "attention" if backend == "gqa" else "repeat_kv",
        "rows": rows,
        "batch": int(base["batch"]),
        "kv_heads": cfg.num_kv_heads,
        "kv_len": length,
        "head_dim": cfg.head_dim,
        "dtype": base["dtype"],
        "rename": TRANSFORMERS_PATHS[backend] if rows > 1 or backend != "gqa" else "attention",
        "model": base["model"],
        "stage": base["stage"],
        "length": length,
    }
    if prefill:
        recipe["q_len"] = length
    return recipe


def sweep_cases(dtype: str = "bf16", split: str = "validation") -> list[Case]:
    """The empirical roofline: one GEMM kernel whose operations per byte grow with m
    (about m/2 per byte in bf16 while the weights dominate), from memory- to compute-bound."""
    return [
        Case(
            f"sweep/m{m}x{SWEEP_KN}x{SWEEP_KN}/{dtype}",
            "sweep",
            "linear",
            dtype,
            MappingProxyType({"builder": "linear", "m": m, "k": SWEEP_KN, "n": SWEEP_KN, "dtype": dtype}),
            split=split,
            stage="sweep",
        )
        for m in SWEEP_M
    ]


def grid_cases(dtypes: Iterable[str], quick: bool = False) -> list[Case]:
    """Skinny products on a dense grid of row counts per data type (calibration only): the
    libraries switch kernels between row counts, so the efficiency curve is measured, not
    assumed."""
    ms, kns = (QUICK_GRID_M, QUICK_GRID_KN) if quick else (GRID_M, GRID_KN)
    return [
        Case(
            f"grid/m{m}x{k}x{n}/{dtype}",
            "gemv" if m <= 16 else "gemm",
            "linear",
            dtype,
            MappingProxyType({"builder": "linear", "m": m, "k": k, "n": n, "dtype": dtype}),
            split="calibration",
            stage="grid",
        )
        for dtype in dtypes
        for k, n in kns
        for m in ms
        if dtype != "fp32" or 2 * m * k * n <= GRID_MAX_FP32_FLOPS
    ]


def attention_grid_cases(dtypes: Iterable[str], quick: bool = False, backends: Iterable[str] = ()) -> list[Case]:
    """Decode attention on a grid of rows per K/V head x head_dim x cache length, per kernel
    and data type (calibration only): the kernels switch paths by rows and head_dim, so the
    decode rate is measured there, not assumed (``kernels.calibrate.fit`` makes it a row table).
    With ``backends`` naming transformers' paths (``TRANSFORMERS_PATHS``), those kernels too,
    at their ``GROUP_GRID_ROWS``."""
    rows, dims, kvs = (
        (QUICK_ATTENTION_GRID_ROWS, QUICK_ATTENTION_GRID_HEAD_DIMS, QUICK_ATTENTION_GRID_KV)
        if quick
        else (ATTENTION_GRID_ROWS, ATTENTION_GRID_HEAD_DIMS, ATTENTION_GRID_KV)
    )
    kernels = {"qk_matmul": ("qk_matmul", ""), "sv_matmul": ("sv_matmul", ""), "attention": ("sdpa", "flash")}
    paths = {"gqa": ("attention", "sdpa_gqa"), "repeat_kv": ("repeat_kv", "sdpa_repeat_kv")}
    kernels.update({paths[b][0] + "/" + b: ("sdpa", b) for b in backends if b in paths})
    cases = []
    for dtype in dtypes:
        for name, (kernel, backend) in kernels.items():
            for d in dims:
                for kv in kvs:
                    for r in rows if backend not in paths else [r for r in rows if r in GROUP_GRID_ROWS[backend]]:
                        recipe = {
                            "builder": "attention_grid",
                            "kernel": name.split("/")[0],
                            "rows": r,
                            "batch": ATTENTION_GRID_BATCH,
                            "kv_heads": ATTENTION_GRID_KV_HEADS,
                            "kv_len": kv,
                            "head_dim": d,
                            "dtype": dtype,
                            **({"rename": paths[backend][1]} if backend in paths else {}),
                        }
                        suffix = f"/{backend}" if backend else ""
                        cases.append(
                            Case(
                                f"agrid/{name}/r{r}xd{d}xkv{kv}/{dtype}{suffix}",
                                "attention",
                                kernel,
                                dtype,
                                MappingProxyType(recipe),
                                backend,
                                split="calibration",
                                stage="decode",
                            )
                        )
    return cases


def prompt_key_block(device: str) -> dict[str, int]:
    """A prompt recipe's ``key_block`` on ``device`` (its fused kernel's causal key block), or
    nothing where the kernel is exactly causal."""
    block = attention_key_block(device)
    return {"key_block": block} if block else {}


def prefill_grid_cases(
    dtypes: Iterable[str], backends: Iterable[str] = (), device: str = "cpu", quick: bool = False
) -> list[Case]:
    """Prompt attention on a grid of prompt lengths x head_dim, per fused kernel (SDPA's
    flash and transformers' two paths in ``backends``) and data type, causal over its own
    prompt: a CPU's flash kernel walks query and key blocks whose fill changes with the
    length, so the prompt rate is a measured table (``kernels.calibrate.fit``: a prefill
    attention table), not the decode terms. On a CPU also the eager q.K^T and P.V
    (``EAGER_PRODUCTS``, over the whole square). ``quick``: fewer rows and head dims."""
    rows_for = QUICK_PREFILL_GRID_ROWS if quick else PREFILL_GRID_ROWS
    head_dims = QUICK_PREFILL_GRID_HEAD_DIMS if quick else PREFILL_GRID_HEAD_DIMS
    kernels = {"attention": ("attention", "flash", None)}
    kernels.update({b: (k, b, TRANSFORMERS_PATHS[b]) for b, k in (("gqa", "attention"), ("repeat_kv", "repeat_kv"))})
    if device == "cpu":  # the eager products too: their prompt rate moves with length and head_dim
        kernels.update({k: (k, "", None) for k in EAGER_PRODUCTS})
    cases = []
    for dtype in dtypes:
        for name, (kernel, backend, rename) in kernels.items():
            if backend not in ("flash", "") and backend not in backends:
                continue
            for d, length, r in product(head_dims, PREFILL_GRID_LENGTHS, rows_for[name]):
                recipe = {
                    "builder": "attention_grid",
                    "kernel": kernel,
                    "rows": r,
                    "batch": ATTENTION_GRID_BATCH,
                    "kv_heads": PREFILL_GRID_KV_HEADS,
                    "kv_len": length,
                    "q_len": length,
                    "head_dim": d,
                    "dtype": dtype,
                    **({"rename": rename} if rename else {}),
                    **(prompt_key_block(device) if backend else {}),  # the eager products: the whole square
                }
                cases.append(
                    Case(
                        f"pgrid/{name}/r{r}xd{d}xq{length}/{dtype}" + (f"/{backend}" if backend else ""),
                        "attention",
                        "sdpa" if backend else kernel,
                        dtype,
                        MappingProxyType(recipe),
                        backend,
                        split="calibration",
                        stage="prefill",
                    )
                )
    return cases


SIZE_GRID_CLASSES = {
    "rmsnorm": "norm",
    "residual_add": "elementwise",
    "silu_mul": "elementwise",
    "softmax": "softmax",
    "rope": "elementwise",
    **{k: "norm" if k in O.NORM_OPS else "elementwise" for k in SIZE_GRID_KINDS},
}


def quant_grid_cases(dtypes: Iterable[str], quick: bool = False) -> list[Case]:
    """The weight-only int8 and int4 products on the row-count grid (calibration only), with
    bf16 activations as the model cases have them: their kernels change with the rows as the
    plain products' do (on an AMX Xeon a one-row int8 product streams its weights near the
    memory roof, which a tile fill fitted at 2, 4 and 32 rows cannot see), so they get a
    measured row table too."""
    if "bf16" not in dtypes:
        return []
    ms, kns = (QUICK_QUANT_GRID_M, QUICK_GRID_KN) if quick else (QUANT_GRID_M, GRID_KN)
    return [
        Case(
            f"qgrid/{kernel}/m{m}x{k}x{n}/bf16",
            "quant",
            kernel,
            "bf16",
            MappingProxyType({"builder": "linear", "m": m, "k": k, "n": n, "dtype": "bf16", "rename": kernel, **extra}),
            split="calibration",
            stage="grid",
        )
        for kernel, extra in WEIGHT_ONLY.items()
        for k, n in kns
        for m in ms
    ]


def size_grid_series(kernel: str, width: int, dtype: str, tokens: Iterable[int], max_bytes: float) -> list[Case]:
    """One element-wise kernel at one width over growing token counts, up to ``max_bytes`` moved."""
    cases = []
    for t in tokens:
        recipe = {"builder": "size_grid", "kernel": kernel, "tokens": t, "width": width, "dtype": dtype, **HEAP}
        if _size_grid(recipe).bytes > max_bytes:
            break
        name = f"sgrid/{kernel}/t{t}xw{width}/{dtype}"
        case = Case(
            name, SIZE_GRID_CLASSES[kernel], kernel, dtype, MappingProxyType(recipe), split="calibration", stage="grid"
        )
        cases.append(case)
    return cases


def size_grid_cases(dtypes: Iterable[str], quick: bool = False, device: str = "cpu") -> list[Case]:
    """Element-wise kernels on a grid of sizes per data type (calibration only): from a few
    bytes (the call's fixed cost) through the caches to memory and past the mmap threshold,
    so each class's rate by size is measured, not assumed (``kernels.calibrate.fit`` makes it a size
    table). The rotary kernel is fp32 only, as in the model cases; the other activation and
    norm kinds (``SIZE_GRID_KINDS``) are measured by quick calibrations too, on the coarser
    series: no model's kind is left to a generic class. Norms are measured at more row widths
    (``SIZE_GRID_NORM_WIDTHS``), and so is a CPU's softmax (``SIZE_GRID_SOFTMAX_WIDTHS``)."""
    cases = []
    widths = {**SIZE_GRID_WIDTH, **SIZE_GRID_KINDS}
    more = dict.fromkeys(O.NORM_OPS, SIZE_GRID_NORM_WIDTHS) | (
        {"softmax": SIZE_GRID_SOFTMAX_WIDTHS} if device == "cpu" else {}
    )
    for dtype in dtypes:
        for kernel, width in widths.items():
            if kernel == "rope" and dtype != "fp32":
                continue
            tokens = QUICK_SIZE_GRID_TOKENS if quick else SIZE_GRID_TOKENS
            for w in (width, *more.get(kernel, ())):
                cases += size_grid_series(kernel, w, dtype, tokens, SIZE_GRID_MAX_BYTES)
    return cases


def softmax_tail_cases(dtypes: Iterable[str]) -> list[Case]:
    """The softmax at ``SOFTMAX_TAIL_ROWS`` rows of every width from ``SOFTMAX_TAIL_WIDTH``
    through one ``ROW_TAIL_PERIOD`` more (CPU calibration, quick or full): the fit takes each
    row's time past the whole-vector width's, scaled to its keys, as the tail's
    (``kernels.calibrate.fit.fit_row_tails``)."""
    return [
        Case(
            f"stail/softmax/t{SOFTMAX_TAIL_ROWS}xw{width}/{dtype}",
            SIZE_GRID_CLASSES["softmax"],
            "softmax",
            dtype,
            MappingProxyType(
                {"builder": "size_grid", "kernel": "softmax", "tokens": SOFTMAX_TAIL_ROWS, "width": width}
                | {"dtype": dtype, **TAIL_SERIES}
            ),
            split="calibration",
            stage="grid",
        )
        for dtype in dtypes
        for width in range(SOFTMAX_TAIL_WIDTH, SOFTMAX_TAIL_WIDTH + ROW_TAIL_PERIOD)
    ]


def dedupe(cases: Iterable[Case]) -> list[Case]:
    """First case of each shape key (gate_proj and up_proj are one measurement)."""
    seen, out = set(), []
    for case in cases:
        key = case.shape_key()
        if key not in seen:
            seen.add(key)
            out.append(case)
    return out


def suite_cases(split: str, opts: Options = Options(), quick: bool = False) -> list[Case]:
    """All cases of a split, deduplicated by shape."""
    models = {
        ("calibration", False): CALIBRATION_MODELS,
        ("validation", False): VALIDATION_MODELS,
        ("calibration", True): QUICK_CALIBRATION_MODELS,
        ("validation", True): QUICK_VALIDATION_MODELS,
    }[(split, quick)]
    loads = (QUICK_WORKLOADS if quick else WORKLOADS)[split]
    if quick:  # the math backend is the eager path in one call: covered by qk/softmax/sv
        opts = replace(opts, sdpa_backends=tuple(b for b in opts.sdpa_backends if b != "math") or opts.sdpa_backends)
    cases = _model_cases(models, loads, split, opts)
    if split == "calibration":
        cases += (
            grid_cases(opts.dtypes, quick)
            + quant_grid_cases(opts.dtypes, quick)
            + size_grid_cases(opts.dtypes, quick, opts.device)
        )
        if opts.device == "cpu":
            cases += softmax_tail_cases(opts.dtypes)
        if "flash" in opts.sdpa_backends:
            cases += attention_grid_cases(opts.dtypes, quick, opts.sdpa_backends)
            cases += prefill_grid_cases(opts.dtypes, opts.sdpa_backends, opts.device, quick)
    else:
        dtype = "bf16" if "bf16" in opts.dtypes else opts.dtypes[0]
        sweep = sweep_cases(dtype)
        cases += sweep[::2] if quick else sweep
    return dedupe(cases)


def _model_cases(models: Iterable[str], loads: Mapping[str, Any], split: str, opts: Options) -> list[Case]:
    """Every model's stage cases at ``loads`` ({"prefill": {dtype: [(batch, length)]},
    "decode": [(batch, length)]}), per data type."""
    cases: list[Case] = []
    for model in models:
        for dtype in opts.dtypes:
            for batch, length in loads["prefill"].get(dtype, []):
                cases += _stage_cases(model, "prefill", batch, length, dtype, split, opts)
            for batch, length in loads["decode"]:
                cases += _stage_cases(model, "decode", batch, length, dtype, split, opts)
    return cases


def drawn_cases(
    seed: int, opts: Options = Options(), models: int = DRAW_MODEL_COUNT
) -> tuple[list[Case], dict[str, Any]]:
    """A fresh held-out set (``validate --draw SEED``): ``models`` catalog models drawn from
    ``DRAW_MODELS`` less those calibration measures (one of ``DRAW_KINDS``), one prompt
    (batch, length) per data type and ``DRAW_DECODES`` decode (batch, length) pairs drawn
    uniformly from the ``DRAW_*`` ranges, each value redrawn until calibration (full and
    quick) never used it in that dimension. Returns the cases and what was drawn (the models'
    norm and activation kernels under 'kinds')."""
    import random

    rnd = random.Random(seed)
    calibration = suite_cases("calibration", opts, False) + suite_cases("calibration", opts, True)
    used = dimension_values(calibration)

    def fresh(dim: str, lo: int, hi: int, step: int = 1) -> int:
        values = [v for v in range(lo, hi + 1, step) if v not in used[dim]]
        return rnd.choice(values)

    picked = _draw_models(rnd, [m for m in DRAW_MODELS if m not in used["model"]], models)
    loads: dict[str, Any] = {"prefill": {}, "decode": []}
    for dtype in dict.fromkeys(DRAW_DTYPES + tuple(opts.dtypes)):
        batch = fresh("batch", *DRAW_PREFILL_BATCH)
        tokens = DRAW_PREFILL_TOKENS.get(dtype, DRAW_PREFILL_TOKENS["default"])
        loads["prefill"][dtype] = [
            (batch, fresh("length", DRAW_PREFILL_LENGTH[0], min(DRAW_PREFILL_LENGTH[1], tokens // batch), 16))
        ]
    loads["prefill"] = {d: w for d, w in loads["prefill"].items() if d in opts.dtypes}
    for _ in range(DRAW_DECODES):
        batch = fresh("batch", *DRAW_DECODE_BATCH)
        loads["decode"].append(
            (batch, fresh("length", DRAW_DECODE_LENGTH[0], min(DRAW_DECODE_LENGTH[1], DRAW_DECODE_TOKENS // batch), 16))
        )
    return dedupe(_model_cases(picked, loads, "validation", opts)), {
        "seed": seed,
        "models": picked,
        "kinds": {m: list(model_kernels(m)) for m in picked},  # norm, activation kernels
        "prefill": {d: [list(w) for w in v] for d, v in loads["prefill"].items()},
        "decode": [list(w) for w in loads["decode"]],
    }


def _draw_models(rnd: Any, pool: list[str], count: int) -> list[str]:
    """``count`` models of ``pool``, the first of them of ``DRAW_KINDS`` (an activation or
    norm other than SiLU x up and RMSNorm), sorted."""
    kinds = [m for m in pool if m in DRAW_KINDS]
    first = [rnd.choice(kinds)] if kinds and count else []
    rest = [m for m in pool if m not in first]
    return sorted(first + rnd.sample(rest, min(count - len(first), len(rest))))


def check_disjoint(calibration: Iterable[Case], validation: Iterable[Case]) -> None:
    """Raise if a validation shape was also a calibration shape, or if validation shares a
    model, batch size, context length or width with calibration (``held_out_overlap``)."""
    calibration, validation = list(calibration), list(validation)
    fitted = {c.shape_key(): c.name for c in calibration}
    shared = [(c.name, fitted[c.shape_key()]) for c in validation if c.shape_key() in fitted]
    if shared:
        raise ValueError(
            f"{len(shared)} validation cases share their shape with calibration "
            f"cases, e.g. {shared[0][0]} = {shared[0][1]}"
        )
    overlap = {dim: values for dim, values in held_out_overlap(calibration, validation).items() if values}
    if overlap:
        dim, values = next(iter(overlap.items()))
        raise ValueError(
            f"validation is not held out in {', '.join(overlap)}: calibration "
            f"also uses {dim} {', '.join(map(str, sorted(values, key=str)))}"
        )


def case_dimensions(case: Case) -> dict[str, set]:
    """The dimensions a case is drawn from: its model, batch size and context length (model
    stages), and its widths (the K and N of the model's GEMMs: hidden and intermediate
    sizes, query and key/value widths; a bare GEMM's K and N). A grid or sweep GEMM's m is a row count, not a batch: the grid measures them all."""
    r = case.recipe
    if "model" in r:
        cfg = load_model(r["model"])
        widths = {cfg.hidden_size, cfg.intermediate_size, cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim}
        return {"model": {r["model"]}, "batch": {int(r["batch"])}, "length": {int(r["length"])}, "width": widths}
    if r.get("builder") == "attention_grid":  # a grid point's sequences and context
        return {"model": set(), "batch": {int(r["batch"])}, "length": {int(r["kv_len"])}, "width": set()}
    if r.get("builder") == "size_grid":  # a row of keys is a context length; others widths
        key = "length" if r["kernel"] == "softmax" else "width"
        return {"model": set(), "batch": set(), "length": set(), "width": set(), key: {int(r["width"])}}
    return {"model": set(), "batch": set(), "length": set(), "width": {int(r[d]) for d in ("k", "n") if d in r}}


def held_out_overlap(calibration: Iterable[Case], validation: Iterable[Case]) -> dict[str, set]:
    """Per dimension (model, batch, length, width), the values validation shares with
    calibration; all empty when validation is held out in every dimension."""
    cal, val = dimension_values(calibration), dimension_values(validation)
    return {dim: cal[dim] & val[dim] for dim in cal}


def dimension_values(cases: Iterable[Case]) -> dict[str, set]:
    """Per dimension (model, batch, length, width), every value the cases use."""
    out: dict[str, set] = {"model": set(), "batch": set(), "length": set(), "width": set()}
    for case in cases:
        for dim, vals in case_dimensions(case).items():
            out[dim] |= vals
    return out


def attention_dims(case: Case) -> Mapping[str, Any]:
    """batch, heads, kv_heads, q_len, kv_len, head_dim of an attention case (the fused op's
    dims count attended pairs instead of the KV length; the eager op of the same recipe has it)."""
    if case.recipe.get("builder") == "attention_grid":
        return build_op({**case.recipe, "kernel": "qk_matmul"}).dims
    recipe = {k: v for k, v in case.recipe.items() if k not in ("rename", "builder")}
    return _engine_op({**recipe, "attention": "eager", "op": "qk_matmul"}).dims
