"""The ``Op`` record and one small pure function per operator.

Conventions (the seed paper's, LLM-Viewer): a multiply-accumulate is 2 operations;
softmax costs 5 operations per element (max, subtract, exp, sum, divide); an RMSNorm 7 per
element (square, sum, mean, add eps, rsqrt, scale, weight; ``NORM_OPS`` counts LayerNorm the
same way). Sizes may be numpy arrays.
Bytes are split by where they go, so a setting changes exactly one term:
weights read, activations read, activations written, KV cache read, KV cache written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from ridgeline.engine.workload import Number

SOFTMAX_OPS = 5
# Operations per element of each norm kind, counted as the seed paper counts RMSNorm (square,
# sum, mean, add eps, rsqrt, scale, weight: the per-row steps counted per element). LayerNorm
# (``F.layer_norm``) also sums and means for the mean and subtracts it: 10; its bias adds 1.
# 'layernorm' has the bias (``nn.LayerNorm``'s default, what OPT, GPT-J and Falcon run).
NORM_OPS = {"rmsnorm": 7, "layernorm_nobias": 10, "layernorm": 11}
DEFAULT_NORM = "rmsnorm"
# Operations per element of the MLP activation (the gated multiply is counted separately).
ACT_OPS = {
    "silu": 4,
    "swish": 4,
    "relu": 1,
    "gelu": 8,
    "gelu_new": 8,
    "gelu_pytorch_tanh": 8,
    "gelu_fast": 8,
    "gelu_tanh": 8,
    "quick_gelu": 4,
}
# Hugging Face activation names -> the kernel that runs them: transformers' gelu_new and
# gelu_fast are the tanh approximation (written out as several eager kernels in Python, here
# priced as PyTorch's one ``gelu(approximate="tanh")`` kernel, as gelu_pytorch_tanh runs)
ACT_KINDS = {
    "swish": "silu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
}
DEFAULT_ACT = "silu_mul"  # the activation class profiles have always measured (SwiGLU)
DEFAULT_VARIANTS = frozenset({DEFAULT_ACT, DEFAULT_NORM})  # their classes keep bare names
ROPE_OPS = 3  # x*cos + rotate_half(x)*sin per element

BYTE_FIELDS = ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes", "kv_write_bytes")


@dataclass(frozen=True, init=False)
class Op:
    """One operator instance: what it computes and which bytes it moves (the defaults are
    ``__init__``'s)."""

    name: str
    kind: str  # linear | attention | softmax | norm | elementwise | embed
    count: int  # instances per forward pass (num_layers for layer ops)
    flops: Number
    weight_bytes: Number
    act_read_bytes: Number
    act_write_bytes: Number
    kv_read_bytes: Number
    kv_write_bytes: Number
    vector_flops: Number  # vector-unit work beside the matrix work (dequantising, fused softmax)
    comm_bytes: Number  # bytes each device sends over the interconnect
    comm_hops: Number  # sequential link hops of a collective (each costs the link latency)
    exps: Number  # exponentials (softmax), run on the special-function units
    matrix: bool  # runs on matrix units (GEMM/GEMV) rather than vector units
    dtype: str  # data type the arithmetic runs in
    inputs: tuple[str, ...]  # producers of the activations it reads (liveness)
    dims: Mapping[str, Any]  # kernel shape, for benchmarks
    # bytes of each fresh tensor the kernel allocates (None: one, its output, act_write_bytes);
    # a CPU pays the operating system's first touch of those above the allocator's mmap
    # threshold (``ridgeline.engine.roofline.Ceilings.first_touch_rate``)
    alloc_bytes: tuple[Number, ...] | None

    def __init__(
        self,
        name: str,
        kind: str,
        count: int,
        flops: Number,
        weight_bytes: Number = 0,
        act_read_bytes: Number = 0,
        act_write_bytes: Number = 0,
        kv_read_bytes: Number = 0,
        kv_write_bytes: Number = 0,
        vector_flops: Number = 0,
        comm_bytes: Number = 0,
        comm_hops: Number = 0,
        exps: Number = 0,
        matrix: bool = False,
        dtype: str = "fp16",
        inputs: tuple[str, ...] = (),
        dims: Mapping[str, Any] | None = None,
        alloc_bytes: tuple[Number, ...] | None = None,
    ) -> None:
        # one update of the instance's dict: a frozen dataclass's own __init__ sets each of the
        # 18 fields through object.__setattr__, which made building the ops most of the cost
        # of listing a pass (an analysis builds about 80)
        vars(self).update(
            name=name,
            kind=kind,
            count=count,
            flops=flops,
            weight_bytes=weight_bytes,
            act_read_bytes=act_read_bytes,
            act_write_bytes=act_write_bytes,
            kv_read_bytes=kv_read_bytes,
            kv_write_bytes=kv_write_bytes,
            vector_flops=vector_flops,
            comm_bytes=comm_bytes,
            comm_hops=comm_hops,
            exps=exps,
            matrix=matrix,
            dtype=dtype,
            inputs=inputs,
            dims={} if dims is None else dims,
            alloc_bytes=alloc_bytes,
        )

    @property
    def allocations(self) -> tuple[Number, ...]:
        """The fresh tensors the kernel allocates, in bytes each."""
        return (self.act_write_bytes,) if self.alloc_bytes is None else self.alloc_bytes

    @property
    def bytes(self) -> Number:
        return self.weight_bytes + self.act_read_bytes + self.act_write_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def intensity(self) -> Number:
        """Arithmetic intensity: operations per byte moved to and from device memory."""
        return self.flops / self.bytes


def base_name(name: str) -> str:
    """An op's name without the label of its kind of layer (``sliding/attention``: ``attention``)."""
    return name.rpartition("/")[2]


def replaced(op: Op, **changes: Any) -> Op:
    """``dataclasses.replace`` for an Op, without its per-field checks (a pass replaces a few)."""
    return Op(**{**vars(op), **changes})


def _dims(**kwargs: Any) -> Mapping[str, Any]:
    return MappingProxyType(kwargs)


@dataclass(frozen=True)
class Quant:
    """How linear-layer weights are stored: bytes per weight, group scales, dequantisation."""

    wb: float  # bytes per weight element
    scale_bytes: float = 0.0  # bytes of scale + zero point per group (0: not quantised)
    group_size: int = 0  # weights per group along k; 0 = one group per output channel
    dequant: bool = False  # converted up to the compute type inside the kernel


DEQUANT_OPS = 2  # per weight element: subtract the zero point, multiply by the scale


def when(flag, value):
    """``value`` where ``flag`` is set, else 0. ``flag`` may be an array: a plan whose data
    types are arrays prices several deployments in one evaluation (``ridgeline.serving.bounds``)."""
    if isinstance(flag, (bool, int, float, np.generic)) or np.ndim(flag) == 0:
        return value if flag else 0
    return np.where(flag, value, 0.0)


def quantised_bytes(weights: Number, out_channels: Number, q: Quant) -> Number:
    """Bytes of ``weights`` stored as ``q`` says: wb per weight, plus a scale and zero point
    (scale_bytes) per group of ``group_size`` weights along k, or per output channel when
    group_size is 0. The one formula for weights: linear ops read it, memory holds it."""
    groups = weights / q.group_size if q.group_size else out_channels
    return weights * q.wb + when(q.scale_bytes, groups * q.scale_bytes)


def linear(
    name: str,
    tokens: Number,
    k: int,
    n: int,
    *,
    q: Quant,
    ab: float,
    count: int,
    dtype: str,
    inputs: tuple[str, ...],
    out_kv_bytes: float = 0.0,
    experts: Number = 1,
) -> Op:
    """y[tokens, n] = x[tokens, k] @ W[k, n]: 2*tokens*k*n ops; each W read once.

    ``experts`` > 1: the weights of that many experts are read and ``tokens`` counts routed
    token slots. Quantised weights add their group scales to the bytes read and, when the
    kernel converts them up, DEQUANT_OPS vector operations per weight element.
    ``out_kv_bytes`` > 0 sends the output to the KV cache (k_proj/v_proj without rotary).
    """
    out = tokens * n
    weights = experts * k * n
    return Op(
        name,
        "linear",
        count,
        flops=2 * tokens * k * n,
        weight_bytes=quantised_bytes(weights, experts * n, q),
        act_read_bytes=tokens * k * ab,
        act_write_bytes=when(np.equal(out_kv_bytes, 0), out * ab),
        kv_write_bytes=out * out_kv_bytes,
        vector_flops=when(q.dequant, DEQUANT_OPS * weights),
        matrix=True,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(m=tokens, k=k, n=n, experts=experts),
    )


def qk_matmul(
    batch: Number,
    heads: int,
    kv_heads: int,
    q_len: Number,
    kv_len: Number,
    head_dim: int,
    *,
    ab: float,
    kvb: float,
    count: int,
    dtype: str,
    copied: bool = False,
    inputs: tuple[str, ...] = ("q",),
) -> Op:
    """scores[b, h, q, kv] = Q[b, h, q, d] @ K[b, g, kv, d]^T: 2*b*h*q*kv*d ops.

    K is read once per KV head (grouped heads share it) from the cache, or, ``copied``,
    from :func:`repeat_kv`'s copy (an activation of ``kv_heads`` = heads); the score matrix
    is written out.
    """
    keys = batch * kv_len * kv_heads * head_dim * (ab if copied else kvb)
    return Op(
        "qk_matmul",
        "attention",
        count,
        flops=2 * batch * heads * q_len * kv_len * head_dim,
        act_read_bytes=batch * q_len * heads * head_dim * ab + when(copied, keys),
        kv_read_bytes=when(not copied, keys),
        act_write_bytes=batch * heads * q_len * kv_len * ab,
        matrix=True,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(batch=batch, heads=heads, kv_heads=kv_heads, q_len=q_len, kv_len=kv_len, head_dim=head_dim),
    )


def sv_matmul(
    batch: Number,
    heads: int,
    kv_heads: int,
    q_len: Number,
    kv_len: Number,
    head_dim: int,
    *,
    ab: float,
    kvb: float,
    count: int,
    dtype: str,
    copied: bool = False,
) -> Op:
    """out[b, h, q, d] = P[b, h, q, kv] @ V[b, g, kv, d]: 2*b*h*q*kv*d ops (V from the
    cache, or from :func:`repeat_kv`'s copy when ``copied``, as in :func:`qk_matmul`)."""
    values = batch * kv_len * kv_heads * head_dim * (ab if copied else kvb)
    return Op(
        "sv_matmul",
        "attention",
        count,
        flops=2 * batch * heads * q_len * kv_len * head_dim,
        act_read_bytes=batch * heads * q_len * kv_len * ab + when(copied, values),
        kv_read_bytes=when(not copied, values),
        act_write_bytes=batch * q_len * heads * head_dim * ab,
        matrix=True,
        dtype=dtype,
        inputs=("softmax",),
        dims=_dims(batch=batch, heads=heads, kv_heads=kv_heads, q_len=q_len, kv_len=kv_len, head_dim=head_dim),
    )


def softmax(
    batch: Number,
    heads: int,
    q_len: Number,
    kv_len: Number,
    *,
    ab: float,
    count: int,
    dtype: str,
    out_bytes: float = 0.0,
    inputs: tuple[str, ...] = ("qk_matmul",),
) -> Op:
    """Row softmax over the score matrix: 5 ops per element (one of them an exponential),
    read once in ``ab`` bytes and written once in ``out_bytes`` (0: ``ab``)."""
    elems = batch * heads * q_len * kv_len
    return Op(
        "softmax",
        "softmax",
        count,
        flops=SOFTMAX_OPS * elems,
        exps=elems,
        act_read_bytes=elems * ab,
        act_write_bytes=elems * (out_bytes or ab),
        dtype=dtype,
        inputs=inputs,
        dims=_dims(rows=batch * heads * q_len, cols=kv_len),
    )


def repeat_kv(
    name: str,
    batch: Number,
    heads: int,
    kv_heads: int,
    kv_len: Number,
    head_dim: int,
    *,
    ab: float,
    kvb: float,
    count: int,
    dtype: str,
) -> Op:
    """transformers' ``repeat_kv`` of K or V (``name``): ``expand`` then ``reshape`` copies
    the g cached heads out to every query head, reading b*g*kv*d elements of the cache and
    writing b*h*kv*d into a fresh tensor, which the attention matmul then reads. The copy is
    in the activation type (a quantised cache hands transformers dequantised K/V)."""
    return Op(
        name,
        "elementwise",
        count,
        flops=0,
        kv_read_bytes=batch * kv_heads * kv_len * head_dim * kvb,
        act_write_bytes=batch * heads * kv_len * head_dim * ab,
        dtype=dtype,
        dims=_dims(batch=batch, heads=heads, kv_heads=kv_heads, kv_len=kv_len, head_dim=head_dim),
    )


def score_pass(
    name: str,
    batch: Number,
    heads: int,
    q_len: Number,
    kv_len: Number,
    *,
    in_bytes: float,
    out_bytes: float,
    flops: int,
    count: int,
    dtype: str,
    inputs: tuple[str, ...],
    mask_bytes: float = 0.0,
) -> Op:
    """One element-wise kernel over the score matrix [b, h, q, kv]: ``flops`` per element,
    each read in ``in_bytes`` and written in ``out_bytes`` (a scale, a mask add, a cast), plus
    a mask [b, 1, q, kv] of ``mask_bytes`` per element, broadcast over the heads."""
    elems = batch * heads * q_len * kv_len
    return Op(
        name,
        "elementwise",
        count,
        flops=flops * elems,
        act_read_bytes=elems * in_bytes + batch * q_len * kv_len * mask_bytes,
        act_write_bytes=elems * out_bytes,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(rows=batch * heads * q_len, cols=kv_len),
    )


def norm(
    name: str,
    tokens: Number,
    hidden: int,
    *,
    ab: float,
    wb: float,
    count: int,
    dtype: str,
    inputs: tuple[str, ...],
    kind: str = DEFAULT_NORM,
) -> Op:
    """RMSNorm or LayerNorm (``kind``, a ``NORM_OPS`` key): ``NORM_OPS[kind]`` ops per element;
    the weight vector (hidden) is read too, and LayerNorm's bias vector (hidden) beside it.

    The seed paper leaves the weight vector out; it is kept in ``weight_bytes`` here.
    """
    elems = tokens * hidden
    vectors = 2 if kind == "layernorm" else 1  # weight (and bias)
    return Op(
        name,
        "norm",
        count,
        flops=NORM_OPS[kind] * elems,
        weight_bytes=vectors * hidden * wb,
        act_read_bytes=elems * ab,
        act_write_bytes=elems * ab,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(tokens=tokens, hidden=hidden, norm=kind),
    )


def residual_add(
    name: str, tokens: Number, hidden: int, *, ab: float, count: int, dtype: str, inputs: tuple[str, ...]
) -> Op:
    """out = residual + branch: 1 op per element, both operands read, one written.

    The seed paper counts one operand read (0.25 ops/byte in fp16); counting both gives 1/6.
    """
    elems = tokens * hidden
    return Op(
        name,
        "elementwise",
        count,
        flops=elems,
        act_read_bytes=2 * elems * ab,
        act_write_bytes=elems * ab,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(tokens=tokens, hidden=hidden),
    )


def mlp_act(
    tokens: Number,
    width: int,
    act: str,
    gated: bool,
    *,
    ab: float,
    count: int,
    dtype: str,
    inputs: tuple[str, ...],
    name: str = "mlp_act",
) -> Op:
    """act(gate) * up (gated) or act(up): ACT_OPS per element (+1 for the gate multiply)."""
    elems = tokens * width
    per_elem = ACT_OPS.get(act, 8) + (1 if gated else 0)
    return Op(
        name,
        "elementwise",
        count,
        flops=per_elem * elems,
        act_read_bytes=(2 if gated else 1) * elems * ab,
        act_write_bytes=elems * ab,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(tokens=tokens, width=width, act=act, gated=gated),
    )


def act_kernel(act: str, gated: bool) -> str:
    """The kernel of an MLP activation: its kind (``ACT_KINDS``), '_mul' when gated
    (act(gate) * up: two kernels in eager PyTorch), e.g. 'silu_mul', 'gelu_tanh', 'relu'."""
    kind = ACT_KINDS.get(act, act)
    return f"{kind}_mul" if gated else kind


def op_variant(op: Op) -> str:
    """The kind of an activation or norm op ('' for other ops): its kernel (``act_kernel``) or
    its norm kind. A profile's class of that kind prices it before the op's generic classes."""
    dims = op.dims
    if "act" in dims:
        return act_kernel(str(dims["act"]), bool(dims.get("gated", True)))
    return str(dims.get("norm", "")) if op.kind == "norm" else ""


def rope(
    tokens: Number, heads: int, kv_heads: int, head_dim: int, *, ab: float, kvb: float, count: int, dtype: str
) -> Op:
    """Rotary embedding of q and k: 3 ops per element; rotated k goes to the KV cache."""
    q_elems, k_elems = tokens * heads * head_dim, tokens * kv_heads * head_dim
    return Op(
        "rope",
        "elementwise",
        count,
        flops=ROPE_OPS * (q_elems + k_elems),
        act_read_bytes=(q_elems + k_elems) * ab,
        act_write_bytes=q_elems * ab,
        kv_write_bytes=k_elems * kvb,
        dtype=dtype,
        inputs=("q_proj", "k_proj"),
        dims=_dims(tokens=tokens, heads=heads, kv_heads=kv_heads, head_dim=head_dim),
    )


def flash_attention(
    batch: Number,
    heads: int,
    kv_heads: int,
    q_len: Number,
    pairs: Number,
    kv_read_positions: Number,
    qk_dim: int,
    v_dim: int,
    *,
    ab: float,
    kvb: float,
    count: int,
    dtype: str,
    inputs: tuple[str, ...],
    v_in_k: bool = False,
) -> Op:
    """Fused attention with tiles held on chip: no score matrix in memory.

    ``pairs``: (query, key) pairs attended per (sequence, head) after causal/window masking.
    Matrix work 2*pairs*(qk_dim + v_dim) per head, softmax 5 per pair on vector units (one
    exponential per pair); K/V read ``kv_read_positions`` times per KV head (once per query
    tile that needs them), a row of qk_dim + v_dim elements, or of qk_dim alone when V is
    the first v_dim columns of the cached K row (``v_in_k``: absorbed MLA, as FlashMLA reads it).
    """
    row = qk_dim if v_in_k else qk_dim + v_dim
    return Op(
        "attention",
        "attention",
        count,
        flops=2 * batch * heads * pairs * (qk_dim + v_dim),
        vector_flops=SOFTMAX_OPS * batch * heads * pairs,
        exps=batch * heads * pairs,
        act_read_bytes=batch * q_len * heads * qk_dim * ab,
        kv_read_bytes=batch * kv_heads * kv_read_positions * row * kvb,
        act_write_bytes=batch * q_len * heads * v_dim * ab,
        matrix=True,
        dtype=dtype,
        inputs=inputs,
        dims=_dims(batch=batch, heads=heads, kv_heads=kv_heads, q_len=q_len, pairs=pairs, head_dim=qk_dim, v_dim=v_dim),
    )


def repeat_kv_attention(op: Op, kv_len: Number, kv_read_positions: Number, kvb: float) -> Op:
    """Hugging Face's ``repeat_kv`` + SDPA with a boolean mask, from the fused op ``op``:
    K and V read once from the cache and written expanded to every query head (a copy when
    heads > kv_heads > 1; none for MHA, where ``repeat_kv`` returns its input, nor for MQA,
    where it returns a stride-0 view that SDPA reads as ``enable_gqa`` does), then the kernel
    reads the expanded K/V ``kv_read_positions`` times per query head and the mask [batch, 1,
    q_len, kv_len] (one byte a pair). The two copies are fresh tensors (``alloc_bytes``)."""
    d = op.dims
    batch, heads, kv_heads, q_len = d["batch"], d["heads"], d["kv_heads"], d["q_len"]
    row = d["head_dim"] + d["v_dim"]
    mask = batch * q_len * kv_len
    if heads <= kv_heads:
        return replaced(op, name="sdpa_repeat_kv", act_read_bytes=op.act_read_bytes + mask)
    if kv_heads == 1:  # MQA: the expand of one K/V head reshapes to a stride-0 view, no copy,
        return replaced(op, name="sdpa_gqa", act_read_bytes=op.act_read_bytes + mask)  # as enable_gqa
    copies = batch * heads * kv_len * row * kvb
    return replaced(
        op,
        name="sdpa_repeat_kv",
        kv_read_bytes=batch * kv_heads * kv_len * row * kvb,
        act_read_bytes=op.act_read_bytes + batch * heads * kv_read_positions * row * kvb + mask,
        act_write_bytes=op.act_write_bytes + copies,
        alloc_bytes=(op.act_write_bytes, copies * d["head_dim"] / row, copies * d["v_dim"] / row),
    )


def split_combine(batch: Number, heads: int, splits: Number, v_dim: int, *, count: int, dtype: str) -> Op:
    """Flash-decoding's reduction: each KV split writes an fp32 partial output and its
    max/sum, which one more kernel reads and rescales (3 ops per partial element)."""
    partial = batch * heads * splits * (v_dim + 2) * 4
    return Op(
        "attn_combine",
        "elementwise",
        count,
        flops=3 * batch * heads * splits * v_dim,
        act_read_bytes=partial,
        act_write_bytes=batch * heads * v_dim * 2 + 0 * partial,
        dtype=dtype,
        inputs=("attention",),
        dims=_dims(batch=batch, heads=heads, splits=splits),
    )


def collective(
    name: str,
    elems: Number,
    devices: int,
    *,
    ab: float,
    count: int,
    kind: str = "all_reduce",
    inputs: tuple[str, ...] = (),
) -> Op:
    """Bytes one device sends over the links.

    all_reduce (ring): 2(n-1)/n x message, 2(n-1) latency hops; all_to_all and all_gather
    (ring): (n-1)/n x message, n-1 hops; send (pipeline point-to-point): the message, one hop.
    ``elems`` is the full message (all_gather: the gathered result).
    """
    message = elems * ab
    sent, hops = {
        "all_reduce": (2 * (devices - 1) / devices, 2 * (devices - 1)),
        "all_to_all": ((devices - 1) / devices, devices - 1),
        "all_gather": ((devices - 1) / devices, devices - 1),
        "send": (1.0, 1),
    }[kind]
    return Op(
        name,
        "comm",
        count,
        flops=0 * elems,
        comm_bytes=sent * message,
        comm_hops=hops,
        inputs=inputs,
        dims=_dims(elems=elems, devices=devices, collective=kind),
    )


def embed(tokens: Number, hidden: int, *, wb: float, ab: float, dtype: str) -> Op:
    """Embedding gather: one row of the table read per token, no arithmetic."""
    return Op(
        "embed",
        "embed",
        1,
        flops=0 * tokens,
        weight_bytes=tokens * hidden * wb,
        act_write_bytes=tokens * hidden * ab,
        dtype=dtype,
        dims=_dims(tokens=tokens, hidden=hidden),
    )
