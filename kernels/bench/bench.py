"""Torch implementations of the cases: inputs, the timed call, and a float64 reference.

``make_bench(case, device, cache_bytes)`` reads the kernel's shape from the case's ``Op``
dims, builds enough input sets to rotate through (working set > 3 x the last-level cache),
and returns the call to time plus ``check()``, which runs the kernel on a fresh random input
set (never zeros) and returns its relative error ||out - ref|| / ||ref|| against a float64
reference on a slice of the output. Feature checks raise ``Unsupported`` with a reason.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from kernels.bench.cases import Case, attention_dims
from kernels.bench.timing import rotation_sets

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2, "fp16": 5e-3}  # relative error, vs float64
ROPE_THETA = 10000.0  # the timing does not depend on it; the test reference uses the same


# The rotary embedding as kernels.e2e.decoder runs it (and ``_rope_decoder`` times it).
def rope_tables(head_dim: int, max_len: int, theta: float = ROPE_THETA) -> tuple[Tensor, Tensor]:
    """cos, sin: [max_len, head_dim], rotate-half layout (pairs i and i + head_dim/2)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: [B, H, S, D]; cos, sin: [S, D]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Unsupported(Exception):
    """This device/build cannot run the case; the message says why."""


@dataclass
class Bench:
    fn: Callable
    arg_sets: list[tuple]
    check: Callable[[], float]
    context: Callable[[], Any] = contextlib.nullcontext
    set_bytes: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN or inf never passes."""
    out, ref = out.double(), ref.double()
    err = float((out - ref).norm() / ref.norm())
    return err if math.isfinite(err) else math.inf


def _nbytes(args: tuple) -> int:
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def _sets(make: Callable[[], tuple], cache_bytes: float) -> tuple[list[tuple], int]:
    """Input sets to rotate through: one random set and copies of it at other addresses
    (what matters to the cache is the address, and copying is much faster than drawing)."""
    first = make()
    size = _nbytes(first)
    copies = [
        tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in first)
        for _ in range(rotation_sets(size, cache_bytes) - 1)
    ]
    return [first, *copies], size


def _randn(*shape, dtype, device) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float32, device=device).to(dtype)


def _nonzero_int8(*shape, device) -> torch.Tensor:
    """Random int8 in [-127, -1] U [1, 127]: never zero."""
    mag = torch.randint(1, 128, shape, dtype=torch.int16, device=device)
    sign = torch.randint(0, 2, shape, dtype=torch.int16, device=device) * 2 - 1
    return (mag * sign).to(torch.int8)


# --- one builder per kernel ----------------------------------------------------------


def _linear(case: Case, dev: str, cache: float) -> Bench:
    d, dt = case.op.dims, TORCH_DTYPES[case.dtype]
    m, k, n = int(d["m"]), int(d["k"]), int(d["n"])

    def make():  # x: [m, k], W: [n, k] (torch's Linear layout)
        return _randn(m, k, dtype=dt, device=dev), _randn(n, k, dtype=dt, device=dev) / math.sqrt(k)

    def check():
        x, w = make()
        out, r, c = F.linear(x, w), min(m, 16), min(n, 512)
        return rel_error(out[:r, :c], x[:r].double() @ w[:c].double().T)

    sets, size = _sets(make, cache)
    return Bench(F.linear, sets, check, set_bytes=size)


def _grouped(case: Case):
    """GQA folded into rows: Q [b, g, r*q, d] against K/V [b, g, kv, d] (r = heads / g),
    so each K/V head is read once, as the engine counts it."""
    a = attention_dims(case)
    b, h, g, q, kv, hd = (int(a[x]) for x in ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim"))
    return b, h, g, q, kv, hd, h // g


def _qk(case: Case, dev: str, cache: float) -> Bench:
    b, h, g, q, kv, hd, r = _grouped(case)
    dt = TORCH_DTYPES[case.dtype]

    def make():
        return (
            _randn(b, g, r * q, hd, dtype=dt, device=dev),
            _randn(b, g, kv, hd, dtype=dt, device=dev) / math.sqrt(hd),
        )

    def fn(qt, kt):
        return torch.matmul(qt, kt.transpose(-1, -2))

    def check():
        qt, kt = make()
        return rel_error(fn(qt, kt)[0, 0], qt[0, 0].double() @ kt[0, 0].double().T)

    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


def _sv(case: Case, dev: str, cache: float) -> Bench:
    b, h, g, q, kv, hd, r = _grouped(case)
    dt = TORCH_DTYPES[case.dtype]

    def make():
        p = torch.rand(b, g, r * q, kv, device=dev) + 0.01
        return (p / p.sum(-1, keepdim=True)).to(dt), _randn(b, g, kv, hd, dtype=dt, device=dev)

    def check():
        p, v = make()
        return rel_error(torch.matmul(p, v)[0, 0], p[0, 0].double() @ v[0, 0].double())

    sets, size = _sets(make, cache)
    return Bench(torch.matmul, sets, check, set_bytes=size)


def _softmax(case: Case, dev: str, cache: float) -> Bench:
    d, dt = case.op.dims, TORCH_DTYPES[case.dtype]
    rows, cols = int(d["rows"]), int(d["cols"])

    def make():
        return (_randn(rows, cols, dtype=dt, device=dev) * 3,)

    def fn(x):
        return torch.softmax(x, dim=-1)

    def check():
        (x,) = make()
        r = min(rows, 64)
        return rel_error(fn(x)[:r], torch.softmax(x[:r].double(), dim=-1))

    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


def _rmsnorm(case: Case, dev: str, cache: float) -> Bench:
    if not hasattr(F, "rms_norm"):
        raise Unsupported("torch.nn.functional.rms_norm needs torch >= 2.4")
    return _norm(case, dev, cache)


def _normed(x: torch.Tensor, centre: bool, eps: float) -> torch.Tensor:
    """x / rms(x) (RMSNorm), or (x - mean) / std (LayerNorm, ``centre``), in x's type."""
    x = x - x.mean(-1, keepdim=True) if centre else x
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


# norm kernel -> (the call on x [t, hid], weight w[, bias b]; its float64 reference)
NORMS: dict[str, tuple[Callable, Callable]] = {
    "rmsnorm": (lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6), lambda x, w: _normed(x, False, 1e-6) * w),
    "layernorm": (
        lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5),
        lambda x, w, b: _normed(x, True, 1e-5) * w + b,
    ),
    "layernorm_nobias": (
        lambda x, w: F.layer_norm(x, x.shape[-1:], w, None, 1e-5),
        lambda x, w: _normed(x, True, 1e-5) * w,
    ),
}


def _norm(case: Case, dev: str, cache: float) -> Bench:
    """A norm kernel (``NORMS``): RMSNorm as ``F.rms_norm``, LayerNorm as ``F.layer_norm``
    with or without its bias (what ``nn.LayerNorm`` runs), on x [tokens, hidden]."""
    d, dt = case.op.dims, TORCH_DTYPES[case.dtype]
    t, hid = int(d["tokens"]), int(d["hidden"])
    call, reference = NORMS[case.kernel]
    vectors = 2 if case.kernel == "layernorm" else 1  # weight (and bias)

    def make():
        return _randn(t, hid, dtype=dt, device=dev), *(_randn(hid, dtype=dt, device=dev) for _ in range(vectors))

    def check():
        x, *wb = make()
        return rel_error(call(x, *wb)[:16], reference(x[:16].double(), *(v.double() for v in wb)))

    sets, size = _sets(make, cache)
    return Bench(call, sets, check, set_bytes=size)


def _residual_add(case: Case, dev: str, cache: float) -> Bench:
    d, dt = case.op.dims, TORCH_DTYPES[case.dtype]
    t, hid = int(d["tokens"]), int(d["hidden"])

    def make():
        return _randn(t, hid, dtype=dt, device=dev), _randn(t, hid, dtype=dt, device=dev)

    def check():
        a, b = make()
        return rel_error(torch.add(a, b), a.double() + b.double())

    sets, size = _sets(make, cache)
    return Bench(torch.add, sets, check, set_bytes=size)


def _gelu_tanh_reference(x: torch.Tensor) -> torch.Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel, 2016)."""
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))


# activation -> (the eager call, its float64 reference); the gated kernels ('silu_mul' ...)
# run act(gate) * up: two kernels, the activation writes a temporary that the multiply reads
ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "silu": (F.silu, lambda x: x * torch.sigmoid(x)),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), _gelu_tanh_reference),
    "relu": (F.relu, lambda x: x.clamp(min=0)),
}


def _activation(case: Case, dev: str, cache: float) -> Bench:
    """An MLP activation kernel: ``silu_mul``, ``gelu_tanh_mul`` ... (gated: act(g) * u on
    two [tokens, width] inputs) or ``relu``, ``gelu`` ... (act(u) on one), in eager PyTorch."""
    d, dt = case.op.dims, TORCH_DTYPES[case.dtype]
    t, w = int(d["tokens"]), int(d["width"])
    gated = case.kernel.endswith("_mul")
    act, reference = ACTIVATIONS[case.kernel.removesuffix("_mul")]

    def make():
        return tuple(_randn(t, w, dtype=dt, device=dev) for _ in range(2 if gated else 1))

    def fn(*args):  # gate, up or up alone
        return act(args[0]) * args[1] if gated else act(args[0])

    def check():
        args = [a[:16].double() for a in make()]
        out = fn(*(a.to(dt) for a in args))
        return rel_error(out, reference(args[0]) * args[1] if gated else reference(args[0]))

    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


def _rope(case: Case, dev: str, cache: float) -> Bench:
    d = case.op.dims
    t, h, g, hd = int(d["tokens"]), int(d["heads"]), int(d["kv_heads"]), int(d["head_dim"])
    if case.dtype != "fp32":
        raise Unsupported("rotary kernel is a complex multiply: fp32 only")

    def make():  # q [t, h, d], k [t, g, d], rotation e^{i theta} per (token, pair)
        theta = torch.rand(t, 1, hd // 2, device=dev) * 6.28
        return (
            torch.randn(t, h, hd, device=dev),
            torch.randn(t, g, hd, device=dev),
            torch.polar(torch.ones_like(theta), theta),
        )

    def rotate(x, f):
        return torch.view_as_real(torch.view_as_complex(x.view(*x.shape[:-1], -1, 2)) * f).flatten(-2)

    def fn(q, k, f):
        return rotate(q, f), rotate(k, f)

    def check():
        q, k, f = make()
        out = fn(q, k, f)[0]
        qd = q.double().view(t, h, hd // 2, 2)
        c, s = f.real.double(), f.imag.double()
        ref = torch.stack((qd[..., 0] * c - qd[..., 1] * s, qd[..., 0] * s + qd[..., 1] * c), -1)
        return rel_error(out, ref.flatten(-2))

    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


def _rope_decoder(case: Case, dev: str, cache: float) -> Bench:
    """The rotary embedding exactly as ``kernels.e2e.decoder`` runs it: rotate-half
    (``apply_rope``) on q and k in the model's type, both [B, heads, S, D] views of the
    projections' [B, S, heads, D] output, cos/sin [S, D]."""
    d, r, dt = case.op.dims, case.recipe, TORCH_DTYPES[case.dtype]
    h, g, hd = int(d["heads"]), int(d["kv_heads"]), int(d["head_dim"])
    batch = int(r.get("batch", 1))
    seq = int(d["tokens"]) // batch
    start = int(r.get("length", 0)) if case.stage == "decode" else 0  # decode: at the cache end
    cos, sin = (t[start : start + seq].to(dt).to(dev) for t in rope_tables(hd, start + seq))

    def make():
        return (
            _randn(batch, seq, h, hd, dtype=dt, device=dev).transpose(1, 2),
            _randn(batch, seq, g, hd, dtype=dt, device=dev).transpose(1, 2),
        )

    def fn(q, k):
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin)

    def check():
        q, _ = make()
        x, c, s_ = q[:1].double(), cos.double(), sin.double()
        half = hd // 2
        ref = x * c + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * s_
        return rel_error(fn(q, q[:, :g])[0][:1], ref)

    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


SDPA_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Hugging Face transformers' ``repeat_kv`` (models/llama/modeling_llama.py): [b, g, s, d]
    -> [b, g * n_rep, s, d], a copy (``expand`` then ``reshape``); the input itself for MHA."""
    if n_rep == 1:
        return x
    b, g, s, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, s, d).reshape(b, g * n_rep, s, d)


def _sdpa(case: Case, dev: str, cache: float) -> Bench:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    a = attention_dims(case)
    b, h, g, q, kv, hd = (int(a[x]) for x in ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim"))
    dt, causal = TORCH_DTYPES[case.dtype], case.stage == "prefill"
    if case.backend in ("gqa", "repeat_kv"):
        return _sdpa_transformers(case, dev, cache, (b, h, g, q, kv, hd), dt, causal)
    backend = getattr(SDPBackend, SDPA_BACKENDS[case.backend], None)
    if backend is None:
        raise Unsupported(f"torch {torch.__version__} has no sdpa backend {case.backend}")

    def context():
        return sdpa_kernel([backend])

    def make():  # q [b, h, q, d], k/v [b, g, kv, d]
        return (
            _randn(b, h, q, hd, dtype=dt, device=dev),
            _randn(b, g, kv, hd, dtype=dt, device=dev),
            _randn(b, g, kv, hd, dtype=dt, device=dev),
        )

    fold = q == 1 and g != h  # decode with grouped KV heads

    def fn(qt, kt, vt):
        if fold:  # the query heads sharing a KV head ride on the query axis: K/V read once per
            # KV head, no repeat_interleave copy (how decode kernels run grouped-query attention)
            batch = qt.shape[0]
            out = F.scaled_dot_product_attention(qt.reshape(batch, g, h // g, hd), kt, vt)
            # reshape, not view: the memory-efficient kernel returns a [b, q, h, d] layout
            return out.reshape(batch, h, 1, hd)
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=g != h)

    def check():
        qt, kt, vt = make()
        with context():
            out = fn(qt, kt, vt)[0, : h // g]
        qd, kd, vd = qt[0, : h // g].double(), kt[0, 0].double(), vt[0, 0].double()
        scores = qd @ kd.T / math.sqrt(hd)
        if causal:
            mask = torch.ones(q, kv, dtype=torch.bool, device=dev).tril(kv - q)
            scores = scores.masked_fill(~mask, float("-inf"))
        return rel_error(out, torch.softmax(scores, -1) @ vd)

    try:
        with context():
            small = [
                _randn(1, h, min(q, 8), hd, dtype=dt, device=dev),
                _randn(1, g, min(kv, 8), hd, dtype=dt, device=dev),
                _randn(1, g, min(kv, 8), hd, dtype=dt, device=dev),
            ]
            fn(*small)
    except RuntimeError as err:
        raise Unsupported(
            f"sdpa backend {case.backend} unavailable for this shape/dtype: {str(err).splitlines()[0][:120]}"
        ) from None
    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, context=context, set_bytes=size)


def _sdpa_transformers(case: Case, dev: str, cache: float, shape: tuple, dt, causal: bool) -> Bench:
    """SDPA as transformers' ``sdpa_attention_forward`` calls it, PyTorch choosing the
    backend: ``gqa``, no mask, grouped K/V with ``enable_gqa=True`` (``is_causal`` for a
    prompt); ``repeat_kv``, K/V copied to every query head and a boolean mask [b, 1, q, kv]
    (causal for a prompt, all true for a decode step), ``is_causal=False``."""
    b, h, g, q, kv, hd = shape
    gqa = case.backend == "gqa"
    if gqa and "enable_gqa" not in F.scaled_dot_product_attention.__doc__:
        raise Unsupported(f"torch {torch.__version__}: scaled_dot_product_attention has no enable_gqa")

    def make():  # q [b, h, q, d], k/v [b, g, kv, d] (the cache), mask [b, 1, q, kv]
        qkv = (
            _randn(b, h, q, hd, dtype=dt, device=dev),
            _randn(b, g, kv, hd, dtype=dt, device=dev),
            _randn(b, g, kv, hd, dtype=dt, device=dev),
        )
        if gqa:
            return qkv
        mask = torch.ones(q, kv, dtype=torch.bool, device=dev)
        mask = mask.tril(kv - q) if causal else mask
        return (*qkv, mask.expand(b, 1, q, kv).contiguous())

    def fn(qt, kt, vt, mask=None):
        if gqa:
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=g != h)
        return F.scaled_dot_product_attention(
            qt, repeat_kv(kt, h // g), repeat_kv(vt, h // g), attn_mask=mask, is_causal=False
        )

    def check():
        args = make()
        out = fn(*args)[0, : h // g]
        qd, kd, vd = args[0][0, : h // g].double(), args[1][0, 0].double(), args[2][0, 0].double()
        scores = qd @ kd.T / math.sqrt(hd)
        if causal:
            mask = torch.ones(q, kv, dtype=torch.bool, device=dev).tril(kv - q)
            scores = scores.masked_fill(~mask, float("-inf"))
        return rel_error(out, torch.softmax(scores, -1) @ vd)

    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


def _int8_weight_only(case: Case, dev: str, cache: float) -> Bench:
    d = case.op.dims
    m, k, n = int(d["m"]), int(d["k"]), int(d["n"])
    dt = TORCH_DTYPES[case.dtype]
    if not hasattr(torch, "_weight_int8pack_mm"):
        raise Unsupported("torch._weight_int8pack_mm missing")

    def make():  # x [m, k], W int8 [n, k], one scale per output channel
        return (
            _randn(m, k, dtype=dt, device=dev),
            _nonzero_int8(n, k, device=dev),
            (torch.rand(n, device=dev) * 0.01 + 0.001).to(dt),
        )

    def check():
        x, w, s = make()
        out, c = torch._weight_int8pack_mm(x, w, s), min(n, 512)
        ref = x[:16].double() @ (w[:c].double() * s[:c].double()[:, None]).T
        return rel_error(out[:16, :c], ref)

    _probe(lambda: torch._weight_int8pack_mm(*_small_int8(dt, dev)), "torch._weight_int8pack_mm")
    sets, size = _sets(make, cache)
    return Bench(torch._weight_int8pack_mm, sets, check, set_bytes=size)


def _small_int8(dt, dev):
    return (
        _randn(2, 64, dtype=dt, device=dev),
        _nonzero_int8(32, 64, device=dev),
        torch.ones(32, dtype=dt, device=dev),
    )


def _probe(call: Callable, what: str) -> None:
    try:
        call()
    except (RuntimeError, NotImplementedError, TypeError) as err:
        raise Unsupported(f"{what} not available here: {str(err).splitlines()[0][:120]}") from None


def _int4_weight_only(case: Case, dev: str, cache: float) -> Bench:
    d = case.op.dims
    m, k, n = int(d["m"]), int(d["k"]), int(d["n"])
    gs = int(case.recipe.get("group_size", 128))
    dt = TORCH_DTYPES[case.dtype]
    on_cpu = dev == "cpu"
    if on_cpu and not hasattr(torch, "_weight_int4pack_mm_for_cpu"):
        raise Unsupported("torch._weight_int4pack_mm_for_cpu missing")
    if not on_cpu and dt != torch.bfloat16:
        raise Unsupported("torch._weight_int4pack_mm on CUDA needs bf16 activations")

    def pack(q):  # q int32 [n, k] in 0..15
        if on_cpu:
            return torch._convert_weight_to_int4pack_for_cpu(q, 1)
        u8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
        return torch._convert_weight_to_int4pack(u8, 8)

    def mm(x, w, sz):
        if on_cpu:
            return torch._weight_int4pack_mm_for_cpu(x, w, gs, sz)
        return torch._weight_int4pack_mm(x, w, gs, sz)

    def raw():  # dequantised W = (q - 8) * scale + zero, per group of gs along k
        q = torch.randint(0, 16, (n, k), dtype=torch.int32, device=dev)
        q = torch.where(q == 8, torch.full_like(q, 9), q)  # no zero weights
        sz = torch.stack(
            [torch.rand(k // gs, n, device=dev) * 0.01 + 0.001, torch.rand(k // gs, n, device=dev) * 1e-3], -1
        ).to(dt)
        return q, sz

    def make():
        q, sz = raw()
        return _randn(m, k, dtype=dt, device=dev), pack(q), sz

    def check():
        q, sz = raw()
        x = _randn(m, k, dtype=dt, device=dev)
        out, c = mm(x, pack(q), sz), min(n, 256)
        scale = sz[:, :c, 0].double().repeat_interleave(gs, 0).T
        zero = sz[:, :c, 1].double().repeat_interleave(gs, 0).T
        ref = x[:16].double() @ ((q[:c].double() - 8) * scale + zero).T
        return rel_error(out[:16, :c], ref)

    sets, size = _sets(make, cache)
    return Bench(mm, sets, check, set_bytes=size, notes={"group_size": gs})


def _int_matmul(case: Case, dev: str, cache: float) -> Bench:
    d = case.op.dims
    m, k, n = int(d["m"]), int(d["k"]), int(d["n"])
    fp8 = case.kernel == "fp8_matmul"
    if fp8:
        if dev != "cuda" or torch.cuda.get_device_capability() < (8, 9):
            raise Unsupported("fp8 torch._scaled_mm needs a CUDA GPU of compute capability >= 8.9")
        f8 = torch.float8_e4m3fn

        def make():  # a [m, k] row-major, b = W^T [k, n] column-major, per-tensor scales
            return (
                (torch.randn(m, k, device=dev) * 0.5).to(f8),
                (torch.randn(n, k, device=dev) * 0.5).to(f8).t(),
                torch.tensor(0.5, device=dev),
                torch.tensor(0.25, device=dev),
            )

        def fn(a, b, sa, sb):
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

        def check():
            a, b, sa, sb = make()
            c = min(n, 512)
            ref = (a[:32].double() @ b[:, :c].double()) * float(sa) * float(sb)
            return rel_error(fn(a, b, sa, sb)[:32, :c], ref)
    else:
        if not hasattr(torch, "_int_mm"):
            raise Unsupported("torch._int_mm missing")

        def make():
            return _nonzero_int8(m, k, device=dev), _nonzero_int8(n, k, device=dev).t()

        def fn(a, b):
            return torch._int_mm(a, b)

        def check():
            a, b = make()
            c = min(n, 512)
            return rel_error(fn(a, b)[:32, :c], a[:32].double() @ b[:, :c].double())

        _probe(lambda: fn(_nonzero_int8(32, 64, device=dev), _nonzero_int8(64, 64, device=dev).t()), "torch._int_mm")
    sets, size = _sets(make, cache)
    return Bench(fn, sets, check, set_bytes=size)


BUILDERS: dict[str, Callable[[Case, str, float], Bench]] = {
    "linear": _linear,
    "qk_matmul": _qk,
    "sv_matmul": _sv,
    "softmax": _softmax,
    "rmsnorm": _rmsnorm,
    "layernorm": _norm,
    "layernorm_nobias": _norm,
    "residual_add": _residual_add,
    **{f"{act}{gate}": _activation for act in ACTIVATIONS for gate in ("", "_mul")},
    "rope": _rope,
    "rope_decoder": _rope_decoder,
    "sdpa": _sdpa,
    "int8_weight_only": _int8_weight_only,
    "int4_weight_only": _int4_weight_only,
    "int8_matmul": _int_matmul,
    "fp8_matmul": _int_matmul,
}


def tolerance(case: Case) -> float:
    if case.kernel == "int8_matmul":
        return 1e-9  # exact integer arithmetic
    if case.kernel == "fp8_matmul":
        return 2e-2  # bf16 output
    return TOLERANCE[case.dtype]


def make_bench(case: Case, device: str, cache_bytes: float) -> Bench:
    if case.kernel not in BUILDERS:
        raise Unsupported(f"no torch implementation of kernel {case.kernel!r}")
    if case.dtype not in TORCH_DTYPES:
        raise Unsupported(f"no torch type for {case.dtype}")
    return BUILDERS[case.kernel](case, device, cache_bytes)
