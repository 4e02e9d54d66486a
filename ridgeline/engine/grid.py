"""Where an op lies against what a calibrated profile measured: its measured tables' spans.

A table prices an op inside its knots by interpolation and past them by holding the outermost
value (``RowTable``, ``GridTable``, ``Curve`` in ``ridgeline.engine.roofline``): past them the
answer is *extrapolated*. Each table the engine reads (``Ceilings.row_fraction``) measured
these dimensions:

- a product's row table: rows (``m``) up to ``max_rows``, and the span of its (K, N) shapes;
- a decode attention row table (CPU): rows per K/V head from the fewest measured at the op's
  head_dim, and head_dim over its shapes (where its rows are read);
- an attention grid table (GPU; a CPU's prompts): rows, context and head_dim over its knots, per stage;
- an element-wise size table: the op's bytes between its smallest and largest size (a norm
  measured at several row widths: its width between theirs, too).

Datasheet roofs and efficiency terms measure no grid: nothing is extrapolated there.
Vectorised: an op's dims may be arrays (a sweep), and ``Span.outside`` is elementwise. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.ops import Op
from ridgeline.engine.roofline import (
    SIZE_KINDS,
    SOFTMAX_LONG,
    SOFTMAX_SPLIT_COLS,
    WIDTH_DIMS,
    Ceilings,
    attention_coords,
    table_rows,
    width_curves,
)
from ridgeline.engine.units import format_bytes

if TYPE_CHECKING:  # pragma: no cover
    from ridgeline.engine.roofline import Curve, GridTable, RowTable

SLACK = 1e-9  # relative: a value on a knot is inside


@dataclass(frozen=True)
class Span:
    """One measured dimension of the table that prices an op: the op's value (an array where
    the workload is; NaN where that table does not price it) and the measured range."""

    dimension: str  # rows | k | n | head_dim | context | bytes | width
    value: Any
    low: float
    high: float

    @property
    def outside(self):
        """True where the value lies past the measured range (NaN: never)."""
        v = np.asarray(self.value, dtype=float)
        return (v < self.low * (1 - SLACK)) | (v > self.high * (1 + SLACK))


def measured_spans(op: Op, ceilings: Ceilings) -> tuple[Span, ...]:
    """The spans of the table that prices ``op`` (``Ceilings.row_fraction``'s choice of key),
    with the op's value on each; none where no table prices it."""
    if not ceilings.measures_grid():
        return ()
    for key in ceilings.keys(op):
        if key in ceilings.attention_tables:
            tables = ceilings.attention_tables[key]
            rows = key in ceilings.row_curves and "decode" not in tables  # a CPU: decodes by rows
            return _grid_spans(tables, op) + (_decode_spans(ceilings.row_curves[key], op) if rows else ())
        if key in ceilings.size_curves and op.kind in SIZE_KINDS:
            return _size_spans(ceilings.size_curves, key, op)
        if key in ceilings.row_curves:
            return _row_spans(ceilings.row_curves[key], op)
        if key in ceilings.efficiency:
            return ()
    return ()


def outside_spans(op: Op, ceilings: Ceilings) -> tuple[Span, ...]:
    """The spans ``op`` lies outside of, anywhere in its workload: where it is extrapolated."""
    if not ceilings.measures_grid():
        return ()
    return tuple(s for s in measured_spans(op, ceilings) if np.any(s.outside))


def _row_spans(table: RowTable, op: Op) -> tuple[Span, ...]:
    """A product's rows, k and n; a decode attention op's rows per K/V head (past the
    table: its widest group's rate) and head_dim; a prompt's where its rows are within the
    table's (more rows: the class's terms price it, no table)."""
    d = op.dims
    ks, ns = [s[0] for s in table.shapes], [s[1] for s in table.shapes]
    if "m" in d and "k" in d and "n" in d:
        rows = Span("rows", d["m"], min(c.x[0] for c in table.curves), table.max_rows)
        return rows, Span("k", d["k"], min(ks), max(ks)), Span("n", d["n"], min(ns), max(ns))
    if "q_len" in d and "head_dim" in d:
        rows, read = table_rows(op, table.max_rows)
        same = [c.x[0] for shape, c in zip(table.shapes, table.curves) if shape[0] == float(d["head_dim"])]
        low = min(same or [c.x[0] for c in table.curves])  # the fewest rows measured at its head_dim
        return (
            Span("rows", np.where(read, rows, np.nan), low, table.max_rows),
            Span("head_dim", np.where(read, float(d["head_dim"]), np.nan), min(ks), max(ks)),
        )
    return ()


def _decode_spans(table: RowTable, op: Op) -> tuple[Span, ...]:
    """``_row_spans`` of the op's decodes only (its prompts: the prefill table's)."""
    coords = attention_coords(op)
    if coords is None:
        return ()
    return tuple(Span(s.dimension, np.where(coords[0], s.value, np.nan), s.low, s.high) for s in _row_spans(table, op))


def _grid_spans(tables: Mapping[str, GridTable], op: Op) -> tuple[Span, ...]:
    """An attention op's rows, context and head_dim against each stage's table knots."""
    coords = attention_coords(op)
    if coords is None:
        return ()
    decode, rows, context, head_dim = coords
    spans = []
    for stage, where in (("decode", decode), ("prefill", ~decode)):
        table = tables.get(stage)
        if table is None or not np.any(where):
            continue
        values = dict(rows=rows, context=context, head_dim=head_dim)
        for axis, knots in zip(table.axes, table.knots):
            spans.append(Span(axis, np.where(where, values[axis], np.nan), knots[0], knots[-1]))
    return tuple(spans)


def _size_spans(curves: Mapping[str, Curve], key: str, op: Op) -> tuple[Span, ...]:
    """An element-wise op's bytes against its size table (a softmax's long rows: its own; a
    norm or softmax measured at several widths: its width (a softmax's: its keys) against
    theirs, its bytes against the tables of the widths it lies between)."""
    nbytes, curve, long_curve = np.asarray(op.bytes, dtype=float), curves[key], curves.get(key + SOFTMAX_LONG)
    widths = width_curves(curves, key) if WIDTH_DIMS.get(op.kind) in op.dims else ()
    if widths:
        width = np.asarray(op.dims[WIDTH_DIMS[op.kind]], dtype=float)
        low, high = float(width.min()), float(width.max())
        near = [c for w, c in widths if low <= w <= high]
        if not near or low < high:  # and the widths around it
            near += [c for w, c in widths[::-1] if w < low][:1] + [c for w, c in widths if w > high][:1]
        span = Span("bytes", nbytes, max(c.x[0] for c in near), min(c.x[-1] for c in near))
        name = "keys" if op.kind == "softmax" else "width"
        return Span(name, width, widths[0][0], widths[-1][0]), span
    if long_curve is None or "cols" not in op.dims:
        return (Span("bytes", nbytes, curve.x[0], curve.x[-1]),)
    long_rows = np.asarray(op.dims["cols"]) > SOFTMAX_SPLIT_COLS
    return (
        Span("bytes", np.where(long_rows, np.nan, nbytes), curve.x[0], curve.x[-1]),
        Span("bytes", np.where(long_rows, nbytes, np.nan), long_curve.x[0], long_curve.x[-1]),
    )


def outside_range(span: Span) -> tuple[float, float]:
    """The least and the most of the op's values past the span's range."""
    outside = np.asarray(span.outside)
    values = np.broadcast_to(np.asarray(span.value, dtype=float), outside.shape)[outside]
    return float(values.min()), float(values.max())


def describe(dimension: str, outside: Sequence[float], measured: Sequence[float]) -> str:
    """'k 28672 (measured 896–18944)': the dimension, the least and most values past the
    range (``outside_range``), the measured range."""
    return f"{dimension} {_between(dimension, *outside)} (measured {_between(dimension, *measured)})"


def _between(dimension: str, low: float, high: float) -> str:
    text = format_bytes if dimension == "bytes" else "{:g}".format
    return text(low) if low == high else f"{text(low)}–{text(high)}"
