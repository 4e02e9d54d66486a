"""Roofline: time and bound of each op against a device's ceilings.

time = max(operations / compute roof, bytes / bandwidth roof) + per-kernel overhead
(Williams, Waterman, Patterson, "Roofline", CACM 2009). ``spec`` ceilings are datasheet
peaks; ``calibrated`` ones come from a measured device profile (``ridgeline calibrate``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .hardware import DeviceSpec
from .ops import BYTE_FIELDS, Op


@dataclass(frozen=True)
class Curve:
    """A measured quantity as a function of one size, interpolated linearly in the size's
    log and held flat beyond the outermost knots."""

    x: tuple[float, ...]     # increasing knots: rows of a skinny product
    y: tuple[float, ...]     # the value at each knot

    def at(self, size):
        return np.interp(np.log(np.asarray(size, dtype=float)), np.log(self.x), self.y)


@dataclass(frozen=True)
class RowTable:
    """A class's measured fraction of the roofline bound for skinny products: one curve in
    rows per measured (K, N) shape; between shapes, the mean of the curves weighted by
    inverse squared distance in (log K, log N) (a measured shape gives its own curve)."""

    shapes: tuple[tuple[float, float], ...]    # (k, n) of each curve
    curves: tuple[Curve, ...]

    def at(self, rows, k: float, n: float):
        values = np.stack([np.broadcast_to(c.at(rows), np.shape(rows)) for c in self.curves])
        kn = np.log(np.array(self.shapes, dtype=float))
        d2 = (kn[:, 0] - np.log(k)) ** 2 + (kn[:, 1] - np.log(n)) ** 2
        if np.any(d2 < 1e-12):
            return values[int(np.argmin(d2))]
        weights = 1.0 / d2
        return np.tensordot(weights / weights.sum(), values, axes=1)


@dataclass(frozen=True)
class Ceilings:
    """The roofs an op is timed against."""

    mode: str                               # spec | calibrated
    bandwidth: float                        # bytes/s
    matrix_peak: Mapping[str, float]        # ops/s per data type
    vector_peak: Mapping[str, float]        # ops/s per data type (element-wise)
    # per op kind: fraction of the roofs reached ("compute", "memory"), and fixed seconds
    efficiency: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    overhead_s: Mapping[str, float] = field(default_factory=dict)
    device: str = ""
    link_bandwidth: float | None = None     # bytes/s per direction between devices
    link_latency: float = 0.0               # seconds per hop
    # calibrated only: per class, the measured fraction of the roofline bound (max of the
    # matrix and memory roofs, never above 1) by rows and shape, replacing the class's
    # efficiency terms (skinny products, where libraries switch kernels between row counts)
    row_curves: Mapping[str, RowTable] = field(default_factory=dict)

    def vector_roof(self, dtype: str) -> float:
        return (self.vector_peak.get(dtype) or self.vector_peak.get("fp32")
                or min(self.matrix_peak.values()))

    def compute_roof(self, op: Op) -> float:
        if op.matrix:
            table = self.matrix_peak
            peak = table.get(op.dtype)
            if peak is None:
                from .errors import UnsupportedDtypeError
                raise UnsupportedDtypeError(op.dtype, self.device, sorted(table))
        else:
            peak = self.vector_roof(op.dtype)
        fraction = self.row_fraction(op)
        if fraction is not None:
            return peak * fraction
        terms = self.terms(op)
        return peak * terms.get("compute", 1.0) * _tile_fill(op, terms.get("rows_half"),
                                                              bool(terms.get("gemv")))

    def memory_roof(self, op: Op):
        """Bandwidth times the class's memory efficiency; a class whose one-row products run
        a BLAS GEMV kernel may stream those at their own rate (``gemv_memory``)."""
        fraction = self.row_fraction(op)
        if fraction is not None:
            return self.bandwidth * fraction
        terms = self.terms(op)
        rate = self.bandwidth * terms.get("memory", 1.0)
        rows = tile_rows(op) if "gemv_memory" in terms else None
        if rows is None:
            return rate
        return np.where(np.asarray(rows) == 1, self.bandwidth * terms["gemv_memory"], rate)

    def row_fraction(self, op: Op):
        """The class's measured fraction of the bound at the op's rows and shape (a GEMM's m,
        k, n), or None when its most specific key has efficiency terms instead (or the op is
        not a GEMM)."""
        for key in keys_for(op):
            if key in self.row_curves:
                dims = op.dims
                if "m" not in dims or "k" not in dims or "n" not in dims:
                    return None
                return self.row_curves[key].at(dims["m"], dims["k"], dims["n"])
            if key in self.efficiency:
                return None
        return None

    def overhead(self, op: Op) -> float:
        for key in keys_for(op):
            if key in self.overhead_s:
                return self.overhead_s[key]
        return self.overhead_s.get("default", 0.0)

    def terms(self, op: Op) -> Mapping[str, float]:
        """The efficiency terms of the most specific key the table holds (see ``keys_for``)."""
        for key in keys_for(op):
            if key in self.efficiency:
                return self.efficiency[key]
        return {}


def tile_rows(op: Op):
    """Rows a matrix kernel's tiles are filled with: ``m`` of a GEMM; for attention the query
    rows that share one K/V head, ``q_len * heads / kv_heads`` (decode: 1 with MHA, the group
    size with GQA, every head with MQA, as grouped kernels fold the group into the query
    axis); None for ops with neither."""
    dims = op.dims
    if "m" in dims:
        return dims["m"]
    q_len = dims.get("q_len")
    heads, kv_heads = dims.get("heads"), dims.get("kv_heads")
    if q_len is None or not heads or not kv_heads:
        return q_len
    return q_len * (heads / kv_heads)


def _tile_fill(op: Op, rows_half: float | None, gemv: bool = False):
    """Fraction of a matrix kernel's rate reached with ``rows`` rows per tile: rows / (rows +
    rows_half). A calibrated profile may give ``rows_half`` for a class (CPU GEMMs with a few
    rows leave the register tiles part-empty and repack the weights for little work; decode
    attention has one query row); spec ceilings never do, and ops without rows are not affected.
    A class whose one-row products dispatch to a matrix-vector kernel (BLAS GEMV: no tiles)
    says so with ``gemv``: its one-row ops get fill 1."""
    return tile_fill(tile_rows(op) if rows_half else None, rows_half, gemv)


def tile_fill(rows, rows_half: float | None, gemv: bool = False):
    """``_tile_fill`` for row counts (arrays broadcast); rows None or rows_half 0: fill 1."""
    if rows is None or not rows_half:
        return 1.0
    rows = np.asarray(rows, dtype=float)
    fill = rows / (rows + rows_half)
    # with ``gemv`` set, a one-row product runs a matrix-vector kernel with no tiles to fill
    return np.where(rows == 1, 1.0, fill) if gemv else fill


def keys_for(op: Op) -> tuple[str, ...]:
    """Efficiency/overhead keys of an op, most specific first: 'kind:name@dtype',
    'kind:name', 'kind@dtype', 'kind'. A profile may refine a kind by kernel ('linear:
    int8_weight_only') or by data type ('linear@bf16'); plain kind keys keep working."""
    return (f"{op.kind}:{op.name}@{op.dtype}", f"{op.kind}:{op.name}",
            f"{op.kind}@{op.dtype}", op.kind)


def spec_ceilings(device: DeviceSpec) -> Ceilings:
    """The datasheet roofline: an upper bound on speed."""
    vector = dict(device.vector_peak) or {"fp32": min(device.matrix_peak.values())}
    return Ceilings("spec", device.memory_bandwidth, device.matrix_peak,
                    MappingProxyType(vector), device=device.name,
                    link_bandwidth=device.interconnect_bandwidth,
                    link_latency=device.interconnect_latency or 0.0)


def roofline_time(compute_s, memory_s, network_s=0.0):
    """The roofline step: the slowest of doing the arithmetic, moving the bytes through
    device memory, and sending them over the interconnect."""
    return np.maximum(np.maximum(compute_s, memory_s), network_s)


def _stack(ops: Sequence[Op], field_name: str, ndim: int = 1) -> np.ndarray:
    """One field of every op as an array of shape (ops, *workload shape); fields that are
    scalars for every op get shape (ops, 1, ...) with ``ndim`` axes so they broadcast."""
    values = [getattr(op, field_name) for op in ops]
    try:  # fast path: every op has the same shape (all scalars in a single analysis)
        out = np.array(values, dtype=float)
    except ValueError:
        out = np.stack(np.broadcast_arrays(*values)).astype(float)
    return out.reshape(out.shape + (1,) * (ndim - out.ndim))


def _per_op(values: list, shape: tuple) -> np.ndarray:
    """One value per op, shape (ops, 1, ...) when all are scalars, else (ops, *workload)."""
    try:
        return np.array(values, dtype=float).reshape((len(values),) + (1,) * (len(shape) - 1))
    except (ValueError, TypeError):
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape[1:]) for v in values])


def evaluate(ops: Sequence[Op], ceilings: Ceilings) -> dict[str, np.ndarray]:
    """Every op of a pass at once: bytes by destination, time, attainable perf and bound.

    Arrays have shape (ops, *workload shape); times are per instance (one of ``count``).
    """
    table = {f: _stack(ops, f) for f in ("flops", *BYTE_FIELDS)}
    nbytes = sum(table[f] for f in BYTE_FIELDS)
    shape = (len(ops),) + (1,) * (nbytes.ndim - 1)
    compute = _per_op([ceilings.compute_roof(op) for op in ops], nbytes.shape)
    memory = _per_op([ceilings.memory_roof(op) for op in ops], nbytes.shape)
    overhead = np.array([ceilings.overhead(op) for op in ops]).reshape(shape)
    vector = np.array([ceilings.vector_roof(op.dtype) for op in ops]).reshape(shape)
    flops, vector_flops = table["flops"], _stack(ops, "vector_flops", nbytes.ndim)
    compute_s = flops / compute + vector_flops / vector
    memory_s = nbytes / memory
    network_s = _network_seconds(ops, ceilings, nbytes.ndim)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(nbytes > 0, (flops + vector_flops) / nbytes, 0.0)
    # an op either moves bytes through memory or over the link, never both: the larger
    # of the two is its transfer time, which keeps each op's time a max of two terms
    transfer_s = np.maximum(memory_s, network_s)
    table.update(
        bytes=nbytes, intensity=intensity, vector_flops=vector_flops,
        comm_bytes=_stack(ops, "comm_bytes", nbytes.ndim),
        compute_s=compute_s, memory_s=transfer_s, overhead_s=overhead + 0 * nbytes,
        time_s=roofline_time(compute_s, memory_s, network_s) + overhead,
        perf=np.minimum(compute, intensity * memory),
        bound=np.where(network_s > np.maximum(compute_s, memory_s), "network",
                       np.where(compute_s >= memory_s, "compute", "memory")),
        count=np.array([op.count for op in ops], dtype=float).reshape(shape),
    )
    return table


def _network_seconds(ops: Sequence[Op], ceilings: Ceilings, ndim: int) -> np.ndarray:
    comm = _stack(ops, "comm_bytes", ndim)
    if not np.any(comm):
        return 0 * comm
    if not ceilings.link_bandwidth:
        from .errors import InvalidWorkloadError
        raise InvalidWorkloadError(
            f"{ceilings.device} has no interconnect bandwidth in its spec; pass --link-bw GB/s")
    hops = _stack(ops, "comm_hops", ndim)
    return np.where(comm > 0, comm / ceilings.link_bandwidth + hops * ceilings.link_latency, 0.0)


def time_op(op: Op, ceilings: Ceilings) -> dict[str, np.ndarray]:
    """One op's row of :func:`evaluate` (time, perf, bound, bytes...)."""
    return {k: v[0] for k, v in evaluate([op], ceilings).items()}


def stage_time(ops: Sequence[Op], ceilings: Ceilings):
    """Seconds for one forward pass: sum over ops of count x time (arrays broadcast)."""
    table = evaluate(ops, ceilings)
    return np.sum(table["count"] * table["time_s"], axis=0)
