"""Kernel fusion: the ops of one pass as a serving engine runs them (``Plan.fusion``, the
names of ``workload.FUSIONS``).

PyTorch's eager decoder runs each projection, norm, add and rotary embedding as kernels of
their own (what the calibration measures). Serving engines fuse (each engine's description
under hardware/engines cites where):

- ``qkv``: q, k and v projections as one GEMM over the concatenated weights (vLLM's
  ``QKVParallelLinear``): the input is read once, the three outputs written.
- ``gate_up``: the gated MLP's gate and up projections as one GEMM (``MergedColumnParallelLinear``).
- ``add_norm``: the residual add inside the next norm (``fused_add_rms_norm``): the kernel
  reads the residual and the branch, writes the new residual and the normed output; the sum
  never goes back through memory. Each layer's ``mlp_add`` joins the next layer's
  ``attn_norm``: counted per layer, the first layer's norm (no add before it) and the last
  layer's add (into ``final_norm``) balance, so bytes and kernels are exact in total.
- ``rope``: the rotary embedding inside the attention kernel (TensorRT-LLM's attention op):
  attention reads the new k from the projection and writes it rotated to the cache.
- ``pointwise``: every norm, activation, add and rotary embedding left is one kernel (a
  custom CUDA op or a generated one), not PyTorch's several: marked ``dims["kernel"] =
  "fused"`` and priced by the profile's measured one-kernel element-wise class
  (``roofline.ONE_KERNEL``).

Pure: a list of ops in, a list of ops out; an op no fusion names is returned unchanged, so an
empty fusion is today's pass exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from ridgeline.engine.ops import BYTE_FIELDS, Op, replaced

POINTWISE_KINDS = ("norm", "elementwise")
SUMMED = ("flops", "vector_flops", "exps", *BYTE_FIELDS)


def merged_gemm(name: str, parts: Sequence[Op]) -> Op:
    """GEMMs over one input as one: output columns side by side, the input read once."""
    first = parts[0]
    total = {f: sum(getattr(op, f) for op in parts) for f in SUMMED}
    total["act_read_bytes"] = first.act_read_bytes  # one input, read once
    dims = {**first.dims, "n": sum(op.dims["n"] for op in parts)}
    return replaced(first, name=name, dims=dims, **total)


def fuse_gemms(ops: list[Op], groups: dict[str, tuple[str, ...]]) -> list[Op]:
    """Each group of GEMMs present (all its names) as one op, at the first one's place."""
    for name, names in groups.items():
        found = {op.name: op for op in ops if op.name in names}
        if len(found) < len(names):
            continue
        merged = merged_gemm(name, [found[n] for n in names])
        at = next(i for i, op in enumerate(ops) if op.name in names)
        ops = [op for op in ops if op.name not in names]
        ops.insert(at, merged)
        ops = renamed_inputs(ops, dict.fromkeys(names, name))
    return ops


def renamed_inputs(ops: list[Op], names: dict[str, str]) -> list[Op]:
    """Inputs that name a fused op point at what replaced it (liveness)."""

    def new(inputs: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(names.get(i, i) for i in inputs))

    return [op if not set(op.inputs) & names.keys() else replaced(op, inputs=new(op.inputs)) for op in ops]


def add_into_norm(add: Op, norm: Op, before: set[str]) -> Op:
    """``norm(residual + branch)`` as one kernel: the add's reads, both outputs written. It
    reads what the add read where that comes before it in the pass (the layer's input ``x``
    and the branch); the next layer's norm reads this layer's output, which the one-layer
    pass names ``x``."""
    inputs = (*add.inputs, *norm.inputs)
    kept = tuple(dict.fromkeys(i for i in inputs if i in before and i not in (add.name, norm.name)))
    return replaced(
        norm,
        flops=norm.flops + add.flops,
        act_read_bytes=add.act_read_bytes,
        act_write_bytes=add.act_write_bytes + norm.act_write_bytes,
        inputs=kept or norm.inputs,
    )


def fuse_adds(ops: list[Op]) -> list[Op]:
    """``attn_add`` into ``mlp_norm``; ``mlp_add`` into (the next layer's) ``attn_norm``."""
    for add, norm in (("attn_add", "mlp_norm"), ("mlp_add", "attn_norm")):
        names = [op.name for op in ops]
        if add not in names or norm not in names:
            continue
        by = {op.name: op for op in ops}
        before = {"x", *names[: names.index(norm)]}
        fused = add_into_norm(by[add], by[norm], before)
        ops = renamed_inputs([fused if op.name == norm else op for op in ops if op.name != add], {add: norm})
    return ops


def fuse_rope(ops: list[Op]) -> list[Op]:
    """The rotary embedding inside the attention that reads it: its reads of the new k and
    its cache write move there, its arithmetic joins the attention's vector work."""
    rope = next((op for op in ops if op.name == "rope"), None)
    attention = next((op for op in ops if "rope" in op.inputs), None)
    if rope is None or attention is None or attention.kind != "attention":
        return ops
    keys = rope.act_read_bytes - rope.act_write_bytes  # k's elements read (q's are rewritten)
    inside = replaced(
        attention,
        act_read_bytes=attention.act_read_bytes + keys,
        kv_write_bytes=attention.kv_write_bytes + rope.kv_write_bytes,
        vector_flops=attention.vector_flops + rope.flops,
        inputs=tuple(dict.fromkeys((*rope.inputs, *(i for i in attention.inputs if i != "rope")))),
    )
    return [inside if op is attention else op for op in ops if op is not rope]


def one_kernel(ops: list[Op]) -> list[Op]:
    """Every norm and element-wise op marked as one fused kernel (``dims["kernel"]``)."""
    return [replaced(op, dims={**op.dims, "kernel": "fused"}) if op.kind in POINTWISE_KINDS else op for op in ops]


GEMM_GROUPS = {
    "qkv": {"qkv_proj": ("q_proj", "k_proj", "v_proj")},
    "gate_up": {f"{p}gate_up_proj": (f"{p}gate_proj", f"{p}up_proj") for p in ("", "shared_", "dense_")},
}


def fuse(ops: list[Op], fusion: frozenset[str]) -> list[Op]:
    """The pass ``ops`` with the named fusions applied, in a fixed order."""
    for kind in ("qkv", "gate_up"):
        if kind in fusion:
            ops = fuse_gemms(ops, GEMM_GROUPS[kind])
    if "rope" in fusion:
        ops = fuse_rope(ops)
    if "add_norm" in fusion:
        ops = fuse_adds(ops)
    if "pointwise" in fusion:
        ops = one_kernel(ops)
    return ops
