"""Roofline: time and bound of each op against a device's ceilings.

time = max(operations / compute roof, bytes / bandwidth roof) + per-kernel overhead
(Williams, Waterman, Patterson, "Roofline", CACM 2009), with two more roofs where they
apply: bytes over the interconnect, and exponentials on the special-function units. ``spec`` ceilings are datasheet
peaks; ``calibrated`` ones come from a measured device profile (``ridgeline calibrate``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from ridgeline.engine.collectives import MODELLED, collective_seconds
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.ops import BYTE_FIELDS, DEFAULT_VARIANTS, Op, base_name, op_variant
from ridgeline.engine.units import DTYPE_BITS, FLOAT_DTYPES, GIGA
from ridgeline.engine.workload import EXECUTIONS, Settings


@dataclass(frozen=True)
class Curve:
    """A measured quantity as a function of one size, interpolated linearly in the size's
    log and held flat beyond the outermost knots."""

    x: tuple[float, ...]  # increasing knots: rows of a skinny product
    y: tuple[float, ...]  # the value at each knot

    def at(self, size):
        return np.interp(np.log(np.asarray(size, dtype=float)), np.log(self.x), self.y)


@dataclass(frozen=True)
class RowTable:
    """A class's measured fraction of the roofline bound for skinny products: one curve in
    rows per measured (K, N) shape; between shapes, the mean of the curves weighted by
    inverse squared distance in (log K, log N) (a measured shape gives its own curve)."""

    shapes: tuple[tuple[float, float], ...]  # (k, n) of each curve
    curves: tuple[Curve, ...]

    @classmethod
    def from_entries(cls, raw) -> RowTable:
        """What ``Ceilings.to_dict`` wrote: [{k, n, x: rows, y: fractions}, ...]."""
        return cls(
            tuple((float(e["k"]), float(e["n"])) for e in raw),
            tuple(Curve(tuple(float(v) for v in e["x"]), tuple(float(v) for v in e["y"])) for e in raw),
        )

    @property
    def max_rows(self) -> float:
        """The most rows any curve was measured at."""
        return max(c.x[-1] for c in self.curves)

    def at(self, rows, k: float, n: float):
        values = np.stack([np.broadcast_to(c.at(rows), np.shape(rows)) for c in self.curves])
        kn = np.log(np.array(self.shapes, dtype=float))
        d2 = (kn[:, 0] - np.log(k)) ** 2 + (kn[:, 1] - np.log(n)) ** 2
        if np.any(d2 < 1e-12):
            return values[int(np.argmin(d2))]
        weights = 1.0 / d2
        return np.tensordot(weights / weights.sum(), values, axes=1)


@dataclass(frozen=True)
class GridTable:
    """A measured quantity on a full grid of named axes, interpolated linearly in the log
    of each axis (multilinear between the 2^d corners around a point) and held flat beyond
    the outermost knots."""

    axes: tuple[str, ...]  # e.g. rows, context, head_dim
    knots: tuple[tuple[float, ...], ...]  # increasing knots of each axis
    values: tuple  # nested tuples, one level per axis

    def at(self, **coords):
        grid = np.asarray(self.values, dtype=float)
        points = np.broadcast_arrays(*(np.asarray(coords[a], dtype=float) for a in self.axes))
        lows, fracs = [], []
        for knots, x in zip(self.knots, points):
            if len(knots) == 1:
                lows.append(np.zeros(x.shape, dtype=int))
                fracs.append(np.zeros(x.shape))
                continue
            pos = np.interp(np.log(x), np.log(knots), np.arange(len(knots), dtype=float))
            low = np.minimum(np.floor(pos).astype(int), len(knots) - 2)
            lows.append(low)
            fracs.append(pos - low)
        out = np.zeros(points[0].shape)
        for corner in np.ndindex(*(2,) * len(self.axes)):
            weight, index = np.ones(out.shape), []
            for c, low, frac, knots in zip(corner, lows, fracs, self.knots):
                weight = weight * (frac if c else 1.0 - frac)
                index.append(np.minimum(low + c, len(knots) - 1))
            out = out + weight * grid[tuple(index)]
        return out if out.ndim else float(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": list(self.axes),
            "knots": [[float(v) for v in k] for k in self.knots],
            "fraction": np.asarray(self.values, dtype=float).tolist(),
        }

    @classmethod
    def of(cls, axes, knots, values) -> GridTable:
        """A table from any numbers: axes and knots as sequences, values as an array or
        nested lists (frozen into nested tuples of floats)."""
        return cls(
            tuple(axes),
            tuple(tuple(float(v) for v in k) for k in knots),
            _nested(np.asarray(values, dtype=float).tolist()),
        )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> GridTable:
        """The inverse of :meth:`to_dict` (``ridgeline.io.profile`` checks a profile's first)."""
        return cls.of(raw["axes"], raw["knots"], raw["fraction"])


# the attention tables' axes (``attention_coords``)
ATTENTION_AXES = ("rows", "context", "head_dim")


def attention_coords(op: Op):
    """Where an attention op sits in a measured attention table: its stage ('decode' where
    one query token per sequence, else 'prefill'; arrays give an array), query rows per K/V
    head (the GQA group), context (decode: the keys read, ``kv_len`` or the fused op's
    pairs; prefill: the prompt, ``q_len``) and head_dim; None for ops without them."""
    d = op.dims
    if "q_len" not in d or "head_dim" not in d or not d.get("kv_heads"):
        return None
    q = np.asarray(d["q_len"], dtype=float)
    keys = np.asarray(d["kv_len"] if "kv_len" in d else d["pairs"], dtype=float)
    decode = q == 1
    context = np.where(decode, keys / np.maximum(q, 1), q)
    return decode, float(d["heads"]) / float(d["kv_heads"]), context, float(d["head_dim"])


# PyTorch's CUDA softmax runs rows of up to 1024 columns in one warp-per-row kernel and longer
# ones in a block-per-row kernel (aten/src/ATen/native/cuda/SoftMax.cu): a size curve per side
SOFTMAX_SPLIT_COLS = 1024
SOFTMAX_LONG = f">{SOFTMAX_SPLIT_COLS}"  # suffix of the long rows' size curve
# A norm reduces each row, so its rate at a size also depends on the row's width (on a Zen 5,
# fp32 LayerNorm over rows of 3584 to 5120 takes 1.2x to 1.3x the time of rows of 2048 at the
# same bytes; a bf16 softmax over 160 keys, 1.33x rows of 512): a class measured at several
# widths (a norm's hidden size, a softmax's keys) has a size curve per width, keyed
# 'norm:attn_norm.layernorm~w3584@fp32', and an op between two widths takes the fraction
# interpolated in log width (held at the outermost width past them)
WIDTH_MARK = "~w"
WIDTH_DIMS = {"norm": "hidden", "softmax": "cols"}  # the row width a size table is measured at


def width_key(key: str, width: float) -> str:
    """The key of ``key``'s size curve at one row width (its data type stays last)."""
    head, at, dtype = key.rpartition("@")
    return f"{head}{WIDTH_MARK}{width:g}@{dtype}" if at else f"{key}{WIDTH_MARK}{width:g}"


def width_curves(curves: Mapping[str, Curve], key: str) -> tuple[tuple[float, Curve], ...]:
    """``key``'s size curves by row width, narrowest first (none: one curve for all widths)."""
    head, at, dtype = key.rpartition("@")
    head, tail = (head, at + dtype) if at else (key, "")
    found = []
    for name, curve in curves.items():
        width = name.removeprefix(head + WIDTH_MARK).removesuffix(tail)
        if name.startswith(head + WIDTH_MARK) and name.endswith(tail) and width.isdigit():
            found.append((float(width), curve))
    return tuple(sorted(found, key=lambda item: item[0]))


def across_widths(curves: Sequence[tuple[float, Curve]], width, nbytes):
    """The fraction at ``nbytes`` for rows of ``width``: linear in log width between the two
    measured widths around it, the outermost one's past them. Vectorised."""
    logw = np.log([w for w, _ in curves])
    x = np.clip(np.log(np.asarray(width, dtype=float)), logw[0], logw[-1])
    *values, x = np.broadcast_arrays(*(c.at(nbytes) for _, c in curves), x)
    if len(values) == 1:
        return values[0]
    i = np.clip(np.searchsorted(logw, x, side="right") - 1, 0, len(logw) - 2)
    t = (x - logw[i]) / (logw[i + 1] - logw[i])
    stacked = np.stack(values)
    low, high = (np.take_along_axis(stacked, (i + d)[None], 0)[0] for d in (0, 1))
    return (1 - t) * low + t * high


# glibc's largest dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB):
# allocations at least this large are always mapped fresh (``man mallopt``, M_MMAP_THRESHOLD)
MMAP_THRESHOLD = 32 * 2**20
SIZE_KINDS = ("elementwise", "norm", "softmax")
# A CPU softmax row is computed a vector at a time: the columns past the last whole vector go
# through a slower tail whose cost per row depends on the remainder, not on the bytes (on an
# AVX-512 Xeon a bf16 row of 158 keys takes 2.4x one of 160). Measured per row at every
# remainder of this many columns: 2 x AVX-512's 16 fp32 lanes (a bf16 vector holds 32), a
# multiple of AVX2's and NEON's periods
ROW_TAIL_PERIOD = 32


@dataclass(frozen=True)
class Ceilings:
    """The roofs an op is timed against."""

    mode: str  # spec | calibrated | transferred
    bandwidth: float  # bytes/s
    matrix_peak: Mapping[str, float]  # ops/s per data type
    vector_peak: Mapping[str, float]  # ops/s per data type (element-wise)
    # per op kind: fraction of the roofs reached ("compute", "memory"), and fixed seconds
    efficiency: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    overhead_s: Mapping[str, float] = field(default_factory=dict)
    device: str = ""
    link_bandwidth: float | None = None  # bytes/s per direction between devices
    link_latency: float = 0.0  # seconds per hop
    link_per_peer: float | None = None  # point-to-point mesh: bytes/s per peer link (None: switched)
    collectives: str = ""  # cost model of collectives (collectives.MODELS; "": hops x link_latency)
    # NCCL's bus bandwidth and LL cap for the modelled collectives (bytes/s; None: link_bandwidth, no cap)
    collective_bandwidth: float | None = None
    ll_max: float | None = None
    exp_rate: float | None = None  # exponentials/s (special-function units; None: no roof)
    # execution terms of a device-time profile (empty: today's per-kernel overhead only)
    launch_gap_s: float = 0.0  # device idle between back-to-back kernels (graph)
    host_s: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # mode -> op -> s/call
    kernels: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # mode -> op -> launches
    execution: str = "graph"  # graph | eager | compiled (see composed_time)
    serial: bool = False  # the host is the device (a CPU)
    # calibrated only: per class, the measured fraction of the roofline bound (max of the
    # matrix and memory roofs, never above 1) by rows and shape, replacing the class's
    # efficiency terms (skinny products, where libraries switch kernels between row counts)
    row_curves: Mapping[str, RowTable] = field(default_factory=dict)
    # calibrated only: per element-wise class (elementwise, norm, softmax), the measured
    # fraction of the roofline bound by the op's bytes (caches, prefetch ramps and composite
    # kernels' extra passes change it with size), replacing the class's efficiency terms
    size_curves: Mapping[str, Curve] = field(default_factory=dict)
    # CPU, calibrated: bytes/s at which the operating system hands a process fresh pages (the
    # fault and the zeroing), paid by every tensor an op allocates at or above the C
    # allocator's mmap threshold: glibc maps each such allocation anew and unmaps it on free
    first_touch_rate: float | None = None
    mmap_threshold: float = MMAP_THRESHOLD
    # CPU, calibrated: per softmax class, seconds per row at each remainder of its columns
    # modulo ``ROW_TAIL_PERIOD`` (the vector loop's tail), on top of the size curve's time
    row_tails: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # calibrated only: per attention class, the measured fraction of the roofline bound on a
    # grid of rows per K/V head x context x head_dim, one table per stage (decode, prefill),
    # replacing the class's efficiency terms for the ops of that stage (GPU calibration)
    attention_tables: Mapping[str, Mapping[str, GridTable]] = field(default_factory=dict)
    # what a calibrated profile rests on: how it was timed (``TIMINGS``; "" for datasheet
    # roofs), the data types it measured classes of (empty: it names none), and the types it
    # did not measure priced with the classes of a measured type of the same datasheet rate
    timing: str = ""
    measured_dtypes: frozenset = frozenset()
    dtype_as: Mapping[str, str] = field(default_factory=dict)
    measured_peaks: frozenset = frozenset()  # matrix types with a measured peak (the rest: datasheet)
    # unmeasured matrix types whose peak is the nearest measured type's, scaled by the
    # datasheet's ratio of the two (type -> the measured type)
    peak_as: Mapping[str, str] = field(default_factory=dict)

    def group_bandwidth(self, devices):
        """Bytes/s one device sends at in a collective over ``devices``: a switched fabric
        (NVSwitch) gives every group the full link bandwidth; a fully connected mesh
        (MI300X's xGMI) gives one link per peer, (n - 1) x per-peer, capped at the total."""
        if self.link_per_peer is None:
            return self.link_bandwidth
        return np.minimum((np.asarray(devices) - 1) * self.link_per_peer, self.link_bandwidth)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (SI units): result files record the ceilings each mode used."""
        return {
            "mode": self.mode,
            "bandwidth": self.bandwidth,
            "matrix_peak": dict(self.matrix_peak),
            "vector_peak": dict(self.vector_peak),
            "efficiency": {k: dict(v) for k, v in self.efficiency.items()},
            "overhead_s": dict(self.overhead_s),
            "device": self.device,
            "link_bandwidth": self.link_bandwidth,
            "link_latency": self.link_latency,
            "link_per_peer": self.link_per_peer,
            "exp_rate": self.exp_rate,
            "launch_gap_s": self.launch_gap_s,
            "host_s": {k: dict(v) for k, v in self.host_s.items()},
            "kernels": {k: dict(v) for k, v in self.kernels.items()},
            "execution": self.execution,
            "serial": self.serial,
            "row_curves": {
                k: [{"k": kn[0], "n": kn[1], "x": list(cv.x), "y": list(cv.y)} for kn, cv in zip(v.shapes, v.curves)]
                for k, v in self.row_curves.items()
            },
            **self._measured_extras(),
        }

    def _measured_extras(self) -> dict[str, Any]:
        """The collectives' cost model, size curves, the first touch and what the profile
        rests on (its timing, the types it measured, stand-ins), where given (older result
        files record none)."""
        out: dict[str, Any] = {"collectives": self.collectives} if self.collectives else {}
        if self.collective_bandwidth:
            out.update(collective_bandwidth=self.collective_bandwidth, ll_max=self.ll_max)
        if self.timing:
            out.update(
                timing=self.timing,
                measured_dtypes=sorted(self.measured_dtypes),
                dtype_as=dict(self.dtype_as),
                measured_peaks=sorted(self.measured_peaks),
            )
        if self.peak_as:
            out["peak_as"] = dict(self.peak_as)
        if self.size_curves:
            out["size_curves"] = {k: {"x": list(v.x), "y": list(v.y)} for k, v in self.size_curves.items()}
        if self.first_touch_rate:
            out.update(first_touch_rate=self.first_touch_rate, mmap_threshold=self.mmap_threshold)
        if self.row_tails:
            out["row_tails"] = {k: list(v) for k, v in self.row_tails.items()}
        if self.attention_tables:
            out["attention_tables"] = {
                k: {stage: t.to_dict() for stage, t in v.items()} for k, v in self.attention_tables.items()
            }
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Ceilings:
        """What ``to_dict`` wrote; files from before links (or the exp roof) were recorded
        have none."""

        def frozen(table: Mapping | None) -> Mapping:
            return MappingProxyType(dict(table or {}))

        return cls(
            raw["mode"],
            float(raw["bandwidth"]),
            frozen(raw["matrix_peak"]),
            frozen(raw.get("vector_peak")),
            MappingProxyType({k: frozen(v) for k, v in (raw.get("efficiency") or {}).items()}),
            frozen(raw.get("overhead_s")),
            device=raw.get("device", ""),
            link_bandwidth=raw.get("link_bandwidth"),
            link_latency=float(raw.get("link_latency") or 0.0),
            link_per_peer=raw.get("link_per_peer"),
            collectives=raw.get("collectives") or "",
            collective_bandwidth=raw.get("collective_bandwidth"),
            ll_max=raw.get("ll_max"),
            exp_rate=raw.get("exp_rate"),
            launch_gap_s=float(raw.get("launch_gap_s") or 0.0),
            host_s=MappingProxyType({k: frozen(v) for k, v in (raw.get("host_s") or {}).items()}),
            kernels=MappingProxyType({k: frozen(v) for k, v in (raw.get("kernels") or {}).items()}),
            execution=raw.get("execution", "graph"),
            serial=bool(raw.get("serial", False)),
            row_curves=MappingProxyType(
                {k: RowTable.from_entries(v) for k, v in (raw.get("row_curves") or {}).items()}
            ),
            size_curves=MappingProxyType(
                {
                    k: Curve(tuple(map(float, v["x"])), tuple(map(float, v["y"])))
                    for k, v in (raw.get("size_curves") or {}).items()
                }
            ),
            first_touch_rate=raw.get("first_touch_rate"),
            mmap_threshold=float(raw.get("mmap_threshold") or MMAP_THRESHOLD),
            row_tails=MappingProxyType({k: tuple(map(float, v)) for k, v in (raw.get("row_tails") or {}).items()}),
            attention_tables=MappingProxyType(
                {
                    k: MappingProxyType({stage: GridTable.from_dict(t) for stage, t in v.items()})
                    for k, v in (raw.get("attention_tables") or {}).items()
                }
            ),
            timing=raw.get("timing", ""),
            measured_dtypes=frozenset(raw.get("measured_dtypes") or ()),
            dtype_as=frozen(raw.get("dtype_as")),
            measured_peaks=frozenset(raw.get("measured_peaks") or ()),
            peak_as=frozen(raw.get("peak_as")),
        )

    def vector_roof(self, dtype: str) -> float:
        return self.vector_peak.get(dtype) or self.vector_peak.get("fp32") or min(self.matrix_peak.values())

    def roofs(self, op: Op) -> tuple[Any, Any, Any, float]:
        """The op's compute roof, vector roof, memory roof and per-kernel overhead, with its
        class keys, terms and measured fraction looked up once (what ``evaluate`` asks of
        every op). A measured fraction is of the whole roofline bound (``fit_row_table``: the
        bound / the measured time), so it scales the vector work beside the matrix work too
        (a weight-only product's dequantising, a fused softmax); efficiency terms scale the
        matrix work only, as they were fitted."""
        keys = self.keys(op)
        terms, fraction = self._terms(keys), self._row_fraction(op, keys)
        vector = self.vector_roof(op.dtype)
        return (
            self._compute(op, terms, fraction),
            _measured_or(fraction, vector, vector),
            self._memory(op, terms, fraction),
            self._overhead(keys),
        )

    def compute_roof(self, op: Op) -> float:
        return self._compute(op, self.terms(op), self.row_fraction(op))

    def _compute(self, op: Op, terms: Mapping[str, float], fraction) -> float:
        if op.matrix:
            table = self.matrix_peak
            peak = table.get(op.dtype)
            if peak is None:
                from ridgeline.errors import UnsupportedDtypeError

                raise UnsupportedDtypeError(op.dtype, self.device, sorted(table))
        else:
            peak = self.vector_roof(op.dtype)
        rows_half = terms.get("rows_half")
        roof = peak * terms.get("compute", 1.0)
        if rows_half:  # else a fill of 1
            roof = roof * _tile_fill(op, rows_half, bool(terms.get("gemv")))
        return roof if fraction is None else _measured_or(fraction, peak, roof)

    def memory_roof(self, op: Op):
        """Bandwidth times the class's memory efficiency; a class whose one-row products run
        a BLAS GEMV kernel may stream those at their own rate (``gemv_memory``)."""
        return self._memory(op, self.terms(op), self.row_fraction(op))

    def _memory(self, op: Op, terms: Mapping[str, float], fraction):
        rate = self.bandwidth * terms.get("memory", 1.0)
        rows = tile_rows(op) if "gemv_memory" in terms else None
        if rows is not None:
            rate = np.where(np.asarray(rows) == 1, self.bandwidth * terms["gemv_memory"], rate)
        return rate if fraction is None else _measured_or(fraction, self.bandwidth, rate)

    def row_fraction(self, op: Op):
        """The class's measured fraction of the bound at the op's rows and shape, or None
        when its most specific key has efficiency terms only (or the op has no such shape):
        a GEMM's (m, k, n); an attention op's from its stage's measured table (a GPU's; a
        CPU's prompts), else by (query rows per K/V head, head_dim): a decode's held at the
        most rows measured past them, a few tokens of a step's where they are within the
        measured ones (the CPU kernel computes whole 512-key blocks, so a short causal chunk
        is the same work), NaN where they are more (a prompt with no table: the class's
        terms price it); an element-wise class's by the op's bytes."""
        return self._row_fraction(op, self.keys(op))

    def measures_grid(self) -> bool:
        """Whether any measured table (rows, sizes, attention) prices ops: datasheet roofs
        and efficiency terms measure none."""
        return bool(self.attention_tables or self.size_curves or self.row_curves)

    def _row_fraction(self, op: Op, keys: tuple[str, ...]):
        if not self.measures_grid():
            return None
        for key in keys:
            if key in self.attention_tables:
                table = self.attention_fraction(key, op)
                if key not in self.row_curves or table is None:
                    return table
                return np.where(np.isnan(table), self._attention_rows(key, op), table)  # a CPU's decodes
            if key in self.size_curves and op.kind in SIZE_KINDS:
                widths = width_curves(self.size_curves, key) if op.kind in WIDTH_DIMS else ()
                if widths and WIDTH_DIMS[op.kind] in op.dims:
                    found = across_widths(widths, op.dims[WIDTH_DIMS[op.kind]], op.bytes)
                    return found if found.ndim else float(found)
                long_rows = self.size_curves.get(key + SOFTMAX_LONG)
                if long_rows is not None and "cols" in op.dims:
                    return np.where(
                        np.asarray(op.dims["cols"]) > SOFTMAX_SPLIT_COLS,
                        long_rows.at(op.bytes),
                        self.size_curves[key].at(op.bytes),
                    )
                return self.size_curves[key].at(op.bytes)
            if key in self.row_curves:
                dims = op.dims
                if "m" in dims and "k" in dims and "n" in dims:
                    return self.row_curves[key].at(dims["m"], dims["k"], dims["n"])
                if "q_len" in dims and "head_dim" in dims:
                    return self._attention_rows(key, op)
                return None
            if key in self.efficiency:
                return None
        return None

    def _attention_rows(self, key: str, op: Op):
        """An attention op's fraction from the class's row table (rows per K/V head x
        head_dim): a decode past its rows at the most rows measured (the table held at its
        edge, as every table is; named as extrapolated), a prompt's rows past them NaN."""
        table = self.row_curves[key]
        rows, read = table_rows(op, table.max_rows)
        return np.where(read, table.at(np.minimum(rows, table.max_rows), op.dims["head_dim"], 1.0), np.nan)

    def attention_fraction(self, key: str, op: Op):
        """The class's measured fraction of the bound at the op's rows, context and head_dim,
        from its table of the op's stage; NaN where the class has no table of that stage
        (the class's terms price it) or the op is not attention-shaped."""
        coords = attention_coords(op)
        if coords is None:
            return None
        decode, rows, context, head_dim = coords
        tables = self.attention_tables[key]
        out = np.full(np.shape(context), np.nan)
        for stage, where in (("decode", decode), ("prefill", ~decode)):
            if stage in tables and np.any(where):
                value = tables[stage].at(rows=rows, context=context, head_dim=head_dim)
                out = np.where(where, value, out)
        return out if out.ndim else float(out)

    def overhead(self, op: Op) -> float:
        return self._overhead(self.keys(op))

    def _overhead(self, keys: tuple[str, ...]) -> float:
        table = self.overhead_s
        if table:
            for key in keys:
                if key in table:
                    return table[key]
            return table.get("default", 0.0)
        return 0.0

    def class_dtype(self, dtype: str) -> str:
        """The data type whose measured classes price ``dtype``: itself when the profile
        measured it (or names no types), the measured type of the same datasheet rate it
        stands in for (``dtype_as``), else the nearest measured type (``nearest_dtypes``),
        whose measured fractions then apply to ``dtype``'s own roofs (its peak is the
        nearest measured peak scaled by the datasheet ratio: ``io.profile``)."""
        if not self.measured_dtypes or dtype in self.measured_dtypes:
            return dtype
        if dtype in self.dtype_as:
            return self.dtype_as[dtype]
        return nearest_dtypes(dtype, self.measured_dtypes)[0]

    def keys(self, op: Op) -> tuple[str, ...]:
        """The op's class keys (``class_keys``) at the type whose measured class prices it:
        its class type (``class_dtype``), else the nearest measured type that has a class of
        the op's own (``nearest_dtypes``). A profile that measured classes by type never
        prices an op with a class pooled over every type while a typed class of its kind
        exists (the pooled keys stay last in the chain: the intervals' residual groups fall
        back to them); a profile that names no types keeps its pooled classes."""
        variant = FUSED if op.dims.get("kernel") == FUSED else op_variant(op)
        dtype = self.class_dtype(op.dtype)
        keys = class_keys(op.kind, op.name, dtype, variant)
        if not self.measured_dtypes:
            return keys
        if any(k in table for k in keys if k.endswith(f"@{dtype}") for table in self._class_tables):
            return keys  # a class of its own type (fits write no 'kind:name' pooled over types)
        pooled = tuple(k for k in keys if "@" not in k)
        for other in nearest_dtypes(dtype, self.measured_dtypes - {dtype}):
            typed = tuple(k for k in class_keys(op.kind, op.name, other, variant) if k.endswith(f"@{other}"))
            if any(k in table for k in typed for table in self._class_tables):
                return typed + pooled
        return keys

    @property
    def _class_tables(self) -> tuple[Mapping, ...]:
        return (self.efficiency, self.row_curves, self.size_curves, self.attention_tables, self.overhead_s)

    def terms(self, op: Op) -> Mapping[str, float]:
        """The efficiency terms of the most specific key the table holds (see ``keys``)."""
        return self._terms(self.keys(op))

    def _terms(self, keys: tuple[str, ...]) -> Mapping[str, float]:
        table = self.efficiency
        if table:
            for key in keys:
                if key in table:
                    return table[key]
        return {}


def _nested(values) -> tuple:
    """Lists of lists of numbers -> tuples of tuples of floats (hashable, frozen)."""
    if isinstance(values, (list, tuple)):
        return tuple(_nested(v) for v in values)
    return float(values)


def table_rows(op: Op, max_rows: float):
    """An attention op's query rows per K/V head, and where a row table measured up to
    ``max_rows`` prices it: a decode at any rows (past the table, at its edge), a prompt's
    only within them."""
    rows = np.asarray(tile_rows(op), dtype=float)
    return rows, (np.asarray(op.dims["q_len"]) == 1) | (rows <= max_rows)


def _measured_or(fraction, roof, otherwise):
    """``roof`` x the measured fraction where there is one (not None, not NaN), else
    ``otherwise``."""
    if fraction is None:
        return otherwise
    fraction = np.asarray(fraction, dtype=float)
    out = np.where(np.isnan(fraction), otherwise, roof * np.nan_to_num(fraction, nan=1.0))
    return out if out.ndim else float(out)


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


def nearest_dtypes(dtype: str, measured) -> tuple[str, ...]:
    """The measured types nearest ``dtype`` first: the same kind (float or integer), then the
    fewest bits apart, then by name (bf16 before fp16)."""
    bits = DTYPE_BITS.get(dtype, 16)

    def distance(other: str) -> tuple:
        return ((other in FLOAT_DTYPES) != (dtype in FLOAT_DTYPES), abs(DTYPE_BITS.get(other, 16) - bits), other)

    return tuple(sorted(measured, key=distance))


# An engine runs each norm, activation, add and rotary embedding as one fused kernel
# (``engine.fusion``, "pointwise"), where PyTorch runs several (its RMSNorm: pow, mean, rsqrt
# and two multiplies). Such an op is priced by the class of a measured element-wise op that
# is one kernel: the residual add (``kernels_per_op``: 1).
FUSED = "fused"
ONE_KERNEL = "elementwise:attn_add"

# the kernel a linear op runs when weights and activations share a quantised type (W8A8):
# torch._scaled_mm for fp8, torch._int_mm for int8, as the calibration measures them
QUANT_MATMUL = {"fp8": "fp8_matmul", "int8": "int8_matmul"}


def keys_for(op: Op) -> tuple[str, ...]:
    """Efficiency/overhead keys of an op, most specific first: 'kind:name@dtype',
    'kind:name', 'kind@dtype', 'kind'. A profile may refine a kind by kernel ('linear:
    int8_weight_only') or by data type ('linear@bf16'); plain kind keys keep working. An
    activation or norm (``op_variant``) looks up its own kind's classes first (``class_keys``)."""
    return class_keys(op.kind, op.name, op.dtype, op_variant(op))


@functools.lru_cache(maxsize=4096)
def class_keys(kind: str, name: str, dtype: str, variant: str = "") -> tuple[str, ...]:
    """The keys above; with a ``variant`` (the op's activation or norm kind) first the op's
    class of that kind ('elementwise:mlp_act_eager.gelu_tanh_mul@bf16') and the kind's class
    pooled over op names ('elementwise.gelu_tanh_mul@bf16', which prices the engine's
    'mlp_act'). The kinds profiles have always measured (``DEFAULT_VARIANTS``: SiLU x up,
    RMSNorm) keep their bare class names, so a profile from before kinds prices them as it did."""
    if variant == FUSED:  # an engine's one-kernel op: the measured one-kernel class, not PyTorch's
        return (f"{ONE_KERNEL}@{dtype}", f"{kind}@{dtype}", ONE_KERNEL, kind)
    name = base_name(name)  # a kind of layer's op is priced as the op
    plain = (f"{kind}:{name}@{dtype}", f"{kind}:{name}", f"{kind}@{dtype}", kind)
    kernel = QUANT_MATMUL.get(dtype) if kind == "linear" else None
    if kernel and name != kernel:  # a W8A8 projection: the quantised matmul's class first
        plain = (plain[0], f"{kind}:{kernel}@{dtype}", *plain[1:])
    if not variant:
        return plain
    own = f"{kind}:{name}@{dtype}" if variant in DEFAULT_VARIANTS else f"{kind}:{name}.{variant}@{dtype}"
    return tuple(dict.fromkeys((own, f"{kind}.{variant}@{dtype}", *plain)))


def device_links(device: DeviceSpec) -> dict[str, Any]:
    """The device's interconnect as Ceilings fields: bandwidth per direction, latency per hop
    (0 when unknown), the per-peer link bandwidth of a mesh (None on a switch), and the cost
    model of its collectives ("" when none: hops x latency). The one
    place ceilings get their links; a deployment's settings may override them
    (``with_links``)."""
    return {
        "link_bandwidth": device.interconnect_bandwidth,
        "link_latency": device.interconnect_latency or 0.0,
        "link_per_peer": device.interconnect_link_bandwidth,
        "collectives": device.collective_model,
        "collective_bandwidth": device.nccl_bus_bandwidth,
        "ll_max": device.nccl_ll_max,
    }


def spec_ceilings(device: DeviceSpec) -> Ceilings:
    """The datasheet roofline: an upper bound on speed."""
    vector = dict(device.vector_peak) or {"fp32": min(device.matrix_peak.values())}
    return Ceilings(
        "spec",
        device.memory_bandwidth,
        device.matrix_peak,
        MappingProxyType(vector),
        device=device.name,
        **device_links(device),
        exp_rate=device.exp_rate,
    )


def roofline_time(compute_s, memory_s, network_s=0.0, exp_s=0.0):
    """The roofline step: the slowest of doing the arithmetic, moving the bytes through
    device memory, sending them over the interconnect, and computing the exponentials."""
    return np.maximum(np.maximum(compute_s, memory_s), np.maximum(network_s, exp_s))


def _stack(ops: Sequence[Op], field_name: str, ndim: int = 1) -> np.ndarray:
    """One field of every op as an array of shape (ops, *workload shape); fields that are
    scalars for every op get shape (ops, 1, ...) with ``ndim`` axes so they broadcast."""
    values = [getattr(op, field_name) for op in ops]
    shapes = [getattr(v, "shape", ()) for v in values]
    if len(set(shapes)) <= 1:  # every op has the same shape (all scalars in a single analysis); or no op
        out = np.array(values, dtype=float)
    else:  # filled in place: cheaper than broadcasting every field to a view first
        ndim = max(map(len, shapes))
        padded = [(1,) * (ndim - len(s)) + s for s in shapes]
        out = np.empty((len(values), *(max(sizes) for sizes in zip(*padded))))
        for i, value in enumerate(values):
            out[i] = value
    return out.reshape(out.shape + (1,) * (ndim - out.ndim))


def _per_op(values: list, shape: tuple) -> np.ndarray:
    """One value per op, shape (ops, 1, ...) when all are scalars, else (ops, *workload)."""
    try:
        return np.array(values, dtype=float).reshape((len(values),) + (1,) * (len(shape) - 1))
    except (ValueError, TypeError):
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape[1:]) for v in values])


# the fields of every op ``evaluate`` reads, stacked into arrays (``_stack_fields``)
STACKED = ("flops", *BYTE_FIELDS, "vector_flops", "comm_bytes", "comm_hops", "exps", "count")


def _stack_fields(ops: Sequence[Op]) -> dict[str, np.ndarray]:
    """``_stack`` of each of ``STACKED``, shaped as ``evaluate`` uses them: in one array call
    when every field of every op is a scalar (a single analysis), else field by field."""
    try:
        scalars = np.array([[getattr(op, f) for op in ops] for f in STACKED], dtype=float)
    except ValueError:  # arrays of several shapes beside scalars (a sweep)
        scalars = None
    if scalars is not None and scalars.ndim == 2:
        return dict(zip(STACKED, scalars))
    out = {f: _stack(ops, f) for f in ("flops", *BYTE_FIELDS)}
    ndim = sum(out[f] for f in BYTE_FIELDS).ndim
    out.update({f: _stack(ops, f, ndim) for f in STACKED[6:-1]})
    out["count"] = np.array([op.count for op in ops], dtype=float).reshape((len(ops),) + (1,) * (ndim - 1))
    return out


def evaluate(ops: Sequence[Op], ceilings: Ceilings) -> dict[str, np.ndarray]:
    """Every op of a pass at once: bytes by destination, time, attainable perf and bound.

    Arrays have shape (ops, *workload shape); times are per instance (one of ``count``).
    """
    fields = _stack_fields(ops)
    table = {f: fields[f] for f in ("flops", *BYTE_FIELDS)}
    nbytes = sum(table[f] for f in BYTE_FIELDS)
    shape = (len(ops),) + (1,) * (nbytes.ndim - 1)
    compute, vector, memory, overhead = zip(*map(ceilings.roofs, ops)) if ops else ((), (), (), ())
    compute, memory = _per_op(list(compute), nbytes.shape), _per_op(list(memory), nbytes.shape)
    vector = _per_op(list(vector), nbytes.shape)
    overhead = np.array(overhead).reshape(shape)
    flops, vector_flops = table["flops"], fields["vector_flops"]
    compute_s = flops / compute + vector_flops / vector
    memory_s = nbytes / memory
    network_s = _network_seconds(ops, ceilings, fields["comm_bytes"], fields["comm_hops"])
    exp_s = fields["exps"] / ceilings.exp_rate if ceilings.exp_rate else 0 * nbytes
    first_touch = first_touch_seconds(ops, ceilings, nbytes.shape)
    tail = row_tail_seconds(ops, ceilings, nbytes.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(nbytes > 0, (flops + vector_flops) / nbytes, 0.0)
    table.update(
        bytes=nbytes,
        intensity=intensity,
        vector_flops=vector_flops,
        comm_bytes=fields["comm_bytes"],
        compute_s=compute_s,
        memory_s=memory_s,
        network_s=network_s,
        exp_s=exp_s + 0 * nbytes,
        overhead_s=overhead + 0 * nbytes,
        first_touch_s=first_touch,
        tail_s=tail,
        time_s=roofline_time(compute_s, memory_s, network_s, exp_s) + overhead + first_touch + tail,
        perf=np.minimum(compute, intensity * memory),
        bound=_bound(compute_s, memory_s, network_s, exp_s),
        count=fields["count"],
    )
    return table


def first_touch_seconds(ops: Sequence[Op], ceilings: Ceilings, shape: tuple) -> np.ndarray:
    """Per op, the seconds its fresh tensors at or above the mmap threshold take to be
    faulted in: their bytes / ``first_touch_rate`` (0 without one: a GPU, a datasheet)."""
    if not ceilings.first_touch_rate:
        return np.zeros(shape)
    threshold = ceilings.mmap_threshold
    fresh = [sum(np.where(np.asarray(a, dtype=float) >= threshold, a, 0.0) for a in op.allocations) for op in ops]
    return _per_op(fresh, shape) / ceilings.first_touch_rate + np.zeros(shape)


def tail_table(op: Op, ceilings: Ceilings):
    """A softmax op's rows, columns and its class's seconds per row by remainder
    (``Ceilings.row_tails``), or None (another kind, or a profile that measured none)."""
    if op.kind != "softmax" or "cols" not in op.dims or not ceilings.row_tails:
        return None
    table = next((ceilings.row_tails[k] for k in ceilings.keys(op) if k in ceilings.row_tails), None)
    return None if table is None else (np.asarray(op.dims["rows"]), np.asarray(op.dims["cols"]), np.asarray(table))


def row_tail_seconds(ops: Sequence[Op], ceilings: Ceilings, shape: tuple) -> np.ndarray:
    """Per op, the seconds its rows spend in the vector loop's tail: rows x the class's
    measured seconds per row at the op's columns modulo ``ROW_TAIL_PERIOD`` (0 for other
    ops, and without measured tails: a GPU, a datasheet)."""
    values = []
    for op in ops:
        found = tail_table(op, ceilings)
        values.append(0.0 if found is None else found[0] * _at_remainder(found[2], found[1]))
    return _per_op(values, shape) + np.zeros(shape)


def _at_remainder(table: np.ndarray, cols):
    """The table's seconds per row at ``cols`` modulo ``ROW_TAIL_PERIOD``."""
    return table[np.mod(np.asarray(cols), ROW_TAIL_PERIOD).astype(int)]


def decode_row_tails(ops_lo: Sequence[Op], ops_hi: Sequence[Op], ceilings: Ceilings, steps, shape: tuple):
    """Per op, the tail seconds of ``steps`` decode steps from the ops at the first step to
    those at the last (``row_tail_sum``)."""
    return _per_op([row_tail_sum(a, b, ceilings, steps) for a, b in zip(ops_lo, ops_hi)], shape) + np.zeros(shape)


def row_tail_sum(first: Op, last: Op, ceilings: Ceilings, steps):
    """The tail seconds of ``steps`` calls of a softmax op whose columns run one per call
    from the first call's to the last's (a decode's keys), or stay at the first's (a sliding
    window): each remainder's count of calls times its seconds per row times the rows."""
    found = tail_table(first, ceilings)
    if found is None:
        return 0.0
    rows, cols_lo, table = found
    cols_hi = np.asarray(last.dims["cols"])
    lo, hi = np.asarray(cols_lo, dtype=float)[..., None], np.asarray(cols_hi, dtype=float)[..., None]
    r = np.arange(ROW_TAIL_PERIOD)
    counts = np.floor((hi - r) / ROW_TAIL_PERIOD) - np.floor((lo - 1 - r) / ROW_TAIL_PERIOD)
    moving = np.sum(counts * table, axis=-1)
    fixed = np.asarray(steps) * _at_remainder(table, cols_lo)
    return rows * np.where(np.asarray(cols_hi) > np.asarray(cols_lo), moving, fixed)


BOUNDS = ("compute", "memory", "network", "exp")
BOUND_NAMES = np.asarray(BOUNDS)


def _bound(*seconds):
    """Name of the largest term; ties go to the earlier name (compute before memory)."""
    stacked = np.stack(np.broadcast_arrays(*seconds))
    return BOUND_NAMES[np.argmax(stacked, axis=0)]


def _network_seconds(ops: Sequence[Op], ceilings: Ceilings, comm: np.ndarray, hops: np.ndarray) -> np.ndarray:
    if not np.any(comm):
        return 0 * comm
    if not ceilings.link_bandwidth:
        from ridgeline.errors import InvalidSettingError

        raise InvalidSettingError(
            "link_bw_gb_s", f"{ceilings.device} has no interconnect bandwidth in its spec; give link_bw_gb_s"
        )
    # a point-to-point send uses one link; a collective the group's bandwidth
    groups = [2 if op.dims.get("collective") == "send" else op.dims.get("devices", 2) for op in ops]
    bandwidth = _per_op([ceilings.group_bandwidth(n) for n in groups], comm.shape)
    plain = comm / bandwidth + hops * ceilings.link_latency
    if ceilings.collectives:  # NCCL's cost model for what its tuning model prices
        bus = ceilings.collective_bandwidth
        modelled = [
            collective_seconds(
                ceilings.collectives, op.dims["collective"], comm[i], groups[i], bus or bandwidth[i], ceilings.ll_max
            )
            if op.dims.get("collective") in MODELLED and groups[i] > 1
            else plain[i]
            for i, op in enumerate(ops)
        ]
        plain = np.stack(np.broadcast_arrays(*modelled))
    return np.where(comm > 0, plain, 0.0)


def time_op(op: Op, ceilings: Ceilings) -> dict[str, np.ndarray]:
    """One op's row of :func:`evaluate` (time, perf, bound, bytes...)."""
    return {k: v[0] for k, v in evaluate([op], ceilings).items()}


# --- execution modes: device time and host time composed ----------------------------------
#
# A profile measured from the device's side (graph replay, profiler kernel durations) gives
# each op's device time d_i; the host's dispatch cost h_i per call and the kernels k_i each op
# launches are measured apart. How a step's time follows from them depends on how it runs:
#
#   graph     one launch replays every kernel: T = sum_i (d_i + k_i * gap)
#   eager     the host enqueues op i after h_i more seconds (E_i = h_1 + ... + h_i) and the
#   compiled  device runs it when both it and the op are ready:
#                 F_i = max(F_{i-1}, E_i) + d_i + k_i * gap,      F_0 = 0,
#             so T = F_n = max_k (E_k + sum_{j >= k} (d_j + k_j * gap)): the host's share
#             counts only where the host is the slower side (max(sum h, sum d) <= T <=
#             sum h + sum d). ``compiled`` is the same queue with torch.compile's host
#             costs and kernel counts (fused ops, no graphs).
#   CPU       no separate device: host and kernels run on one thread, T = sum_i (h_i + d_i).
#
# Ceilings without execution terms keep the per-kernel overhead sum in every mode.


TIMINGS = {  # how a profile's kernels were timed -> the words an answer names its basis with
    "device": "device time (CUDA-graph replay / profiler kernel durations)",
    "eager": "eager CUDA events, host-inclusive",
    "cpu": "a CPU timer (host and kernels on one thread)",
}


def with_execution(ceilings: Ceilings, device: DeviceSpec, execution: str) -> Ceilings:
    """The ceilings set to run in ``execution`` (a Settings value) on ``device``. ``auto``:
    graph on a GPU or accelerator (what serving stacks run for decode), eager on a CPU (no
    separate device: host and kernels share a thread, so nothing overlaps) or with a profile
    timed by eager events (its times hold the host: it has no device times for a graph).

    A device-time profile prices eager or compiled only with its measured host terms for
    that mode; an eager-timed one no graph. Anything else is refused, never the same number
    under another name (a fallback that is kept is named by ``ridgeline.engine.basis``)."""
    from ridgeline.errors import InvalidSettingError

    cpu = device.kind == "cpu"
    if execution == "auto":
        execution = "eager" if cpu or ceilings.timing == "eager" else "graph"
    if execution == "graph" and cpu:
        raise InvalidSettingError(
            "execution", f"{device.name} is a CPU: it runs no CUDA graphs; use execution eager or compiled"
        )
    missing = missing_execution_terms(ceilings, execution)
    if missing:
        raise InvalidSettingError(
            "execution",
            f"the {ceilings.mode} profile of {ceilings.device} cannot price {execution} execution: {missing}",
        )
    return replace(ceilings, execution=execution, serial=cpu)


def missing_execution_terms(ceilings: Ceilings, execution: str) -> str:
    """Why a profile cannot price ``execution`` ('' when it can): an eager-timed GPU profile
    holds host time in every kernel, so no graph (compiled is priced as its eager calls, an
    upper bound, and ``ridgeline.engine.basis`` says so); a device-time one needs the host terms it
    measured for eager or compiled."""
    if ceilings.timing == "eager" and execution == "graph":
        return (
            f"it was timed by {TIMINGS['eager']}, so it holds no device times for "
            "graph; use a device-time profile, or execution eager"
        )
    if ceilings.timing == "device" and execution != "graph" and not ceilings.host_s.get(execution):
        have = [m for m in EXECUTIONS if m == "graph" or ceilings.host_s.get(m)]
        return (
            f"it measured no {execution} host terms (host_us.{execution}; python -m "
            f"kernels.calibrate.host_profile measures them); use execution {' or '.join(have)}"
        )
    return ""


def has_execution_terms(ceilings: Ceilings) -> bool:
    return bool(ceilings.launch_gap_s or ceilings.host_s or ceilings.kernels)


def execution_key(table: Mapping[str, float], op: Op) -> str | None:
    """The key of ``op``'s own entry in a host or kernels table (keyed by engine op name:
    fused SDPA is 'attention'; the unfused qk_matmul, softmax and sv_matmul are ops of
    their own), 'default' where the table has none for it, or None."""
    if base_name(op.name) in table:
        return base_name(op.name)
    return "default" if "default" in table else None


def _lookup(table: Mapping[str, float], op: Op, default: float) -> float:
    """An op's entry: by engine op name, then 'default' (never another op's: a kind such
    as 'attention' is also the fused op's name)."""
    key = execution_key(table, op)
    return default if key is None else float(table[key])


def kernels_table(ceilings: Ceilings, execution: str) -> Mapping[str, float]:
    """The kernels-per-op table of ``execution`` (a graph replays the eager launches)."""
    return ceilings.kernels.get(execution) or ceilings.kernels.get("eager" if execution == "graph" else execution) or {}


def op_kernels(ceilings: Ceilings, op: Op, execution: str) -> float:
    """Kernels one call of ``op`` launches (a graph replays the eager launches; 1 unknown)."""
    return _lookup(kernels_table(ceilings, execution), op, 1.0)


def op_host(ceilings: Ceilings, op: Op, execution: str) -> float:
    """Host seconds to dispatch one call of ``op`` (0 in a graph: one replay per step)."""
    if execution == "graph":
        return 0.0
    return _lookup(ceilings.host_s.get(execution) or {}, op, 0.0)


def step_order(ops: Sequence[Op]) -> np.ndarray:
    """Indices of ``ops`` in the order one pass runs them: ops before the first repeated op,
    then the repeated (per-layer) ops layer by layer, then the rest."""
    counts = [int(op.count) for op in ops]
    repeated = [i for i, c in enumerate(counts) if c > 1]
    if not repeated:
        return np.array([i for i, c in enumerate(counts) if c > 0], dtype=int)
    first, last = repeated[0], repeated[-1]
    head = [i for i in range(first) if counts[i] > 0]
    body = [i for r in range(max(counts[first : last + 1])) for i in range(first, last + 1) if counts[i] > r]
    tail = [i for i in range(last + 1, len(ops)) for _ in range(counts[i])]
    return np.array(head + body + tail, dtype=int)


def queue_finish(host, device):
    """F_n of the queue F_i = max(F_{i-1}, E_i) + d_i, E the running sum of ``host``:
    max_k (E_k + sum_{j >= k} d_j), along axis 0 (calls in order; any trailing shape)."""
    host, device = np.broadcast_arrays(np.asarray(host, float), np.asarray(device, float))
    enqueued = np.cumsum(host, axis=0)
    remaining = np.flip(np.cumsum(np.flip(device, axis=0), axis=0), axis=0)
    return np.max(enqueued + remaining, axis=0)


def execution_terms(
    ops: Sequence[Op], table: Mapping[str, np.ndarray], ceilings: Ceilings, execution: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per op instance: device seconds (the roofline time, per-kernel overhead included, plus
    the launch gaps) and host seconds, shaped like ``table['time_s']``."""
    shape = (len(ops),) + (1,) * (table["time_s"].ndim - 1)
    gaps = np.array([op_kernels(ceilings, op, execution) for op in ops]).reshape(shape)
    host = np.array([op_host(ceilings, op, execution) for op in ops]).reshape(shape)
    return table["time_s"] + gaps * ceilings.launch_gap_s, host + 0 * table["time_s"]


def composed_time(
    ops: Sequence[Op], table: Mapping[str, np.ndarray], ceilings: Ceilings, execution: str, serial: bool
) -> dict[str, np.ndarray]:
    """One pass's seconds in ``execution`` mode (see above): ``time_s``, and the device's and
    the host's sums ``device_s`` and ``host_s``. ``serial``: the host is the device (a CPU)."""
    if execution not in EXECUTIONS:
        from ridgeline.errors import InvalidWorkloadError

        raise InvalidWorkloadError(f"unknown execution {execution!r}; use one of: {', '.join(EXECUTIONS)}")
    device, host = execution_terms(ops, table, ceilings, execution)
    count = table["count"]
    device_s, host_s = np.sum(count * device, axis=0), np.sum(count * host, axis=0)
    if serial or execution == "graph" or not np.any(host):
        time_s = device_s + host_s
    else:
        order = step_order(ops)
        time_s = queue_finish(host[order], device[order])
    return {"time_s": time_s, "device_s": device_s, "host_s": host_s}


def with_links(ceilings: Ceilings, device: DeviceSpec, settings: Settings) -> Ceilings:
    """The interconnect the settings ask for: their link bandwidth / latency where given
    (an override is one figure for every group size: no per-peer mesh links), else the
    device's; and the execution mode they ask for (``roofline.with_execution``)."""
    links = device_links(device)
    if settings.link_bw_gb_s:
        links.update(link_bandwidth=settings.link_bw_gb_s * GIGA, link_per_peer=None, collective_bandwidth=None)
    if settings.link_latency_us >= 0:  # the whole latency: per hop, no base, no protocol choice
        links.update(link_latency=settings.link_latency_us * 1e-6, collectives="")
    linked = replace(ceilings, **links)
    return with_execution(linked, device, settings.execution)
