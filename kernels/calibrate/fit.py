"""Fit the calibrated roofline's per-class terms to measured calibration cases (pure numpy).

Model of one kernel class (same op kind, kernel and data type), the engine's own roofline
(``ridgeline.engine.roofline.roofline_time`` and ``tile_fill``):

    t = max(C / (e_compute * fill) + V, M / e_memory) + overhead
    fill = rows / (rows + rows_half)   (1 for one-row products of a 'gemv' class)

with C = flops / measured matrix peak, V = vector work (dequantising) / vector peak (not
scaled: the engine runs it at the device's vector roof) and M = bytes / measured copy
bandwidth, all from ``ridgeline.engine.roofline.evaluate`` on the measured roofs with no
efficiencies. ``e_compute`` and ``e_memory`` are the fractions of the measured roofs the
class reaches, ``overhead`` its fixed seconds per call (dispatch, threading, launch), and
for classes with rows (GEMM m, attention q_len) ``rows_half`` is the row count at which half
the tile rate is reached. They are found by grid search minimising the mean squared log
error over the class's calibration cases, with a weak pull of each efficiency towards 1 so
that a term no case constrains (a class that is never compute-bound) stays at the roof.

A fraction of a measured roof is never above 1, except where a CPU's writes make it so: the
memory roof is a read stream, and an op whose output lands in a buffer the cache holds moves its
writes beside its reads, so a class's memory fraction may reach its bytes / read bytes
(``write_free``: 1.5 for a residual add). The search also looks above; a class whose best fit
wants more is *refused* that value (it gets the best fit within) and listed in
``ProfileFit.refused``: its bytes or flops, or the roof it is measured against, are wrong.

Plain projections (skinny products: BLAS switches kernels between row counts, not
monotonically) are predicted through a measured *row table* instead: for each (K, N) shape
of the row-count grid (``kernels.bench.cases.grid_cases``), the fraction of the roofline bound
max(C, M) the class reaches after its fixed overhead at each row count, at most 1; the engine
interpolates it in log rows and between shapes in (log K, log N) (``ridgeline.engine.roofline.RowTable``).
K and N get their own axes because the measurement says so: in the committed EPYC profile the
seven shapes its grid then had reach 0.45 to 0.77 of the bound at m = 1 in fp32, 0.40 to 0.51 in bf16.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kernels.bench.cases import SIZE_GRID_WIDTH
from ridgeline.engine.ops import op_variant
from ridgeline.engine.roofline import (
    ATTENTION_AXES,
    ROW_TAIL_PERIOD,
    SIZE_KINDS,
    SOFTMAX_LONG,
    SOFTMAX_SPLIT_COLS,
    WIDTH_DIMS,
    Ceilings,
    Curve,
    GridTable,
    RowTable,
    attention_coords,
    evaluate,
    first_touch_seconds,
    keys_for,
    roofline_time,
    row_tail_seconds,
    tile_fill,
    tile_rows,
    width_key,
)

# fractions of a roof: 1.0 is a grid point; the points above 1 only detect a wish to exceed it
EFF_GRID = np.geomspace(0.01, 1.0, 74)
WANT_GRID = np.concatenate([EFF_GRID, np.geomspace(1.0, 4.0, 24)[1:]])
OVERHEAD_GRID = np.concatenate([[0.0], np.geomspace(0.2e-6, 3e-3, 49)])
ROWS_HALF_GRID = np.array([0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256], dtype=float)
PULL = 2e-3  # weight of (log efficiency)^2 in the loss
NOISY_WEIGHT = 0.3  # noisy measurements count less
PLAIN_LINEAR = "linear"
# the products measured on the row grid (kernels.bench.cases.grid_cases, quant_grid_cases)
ROW_TABLE_CLASSES = (f"{PLAIN_LINEAR}@", "linear:int8_weight_only@", "linear:int4_weight_only@")
MIN_TILED_CASES = 3  # a GEMV class fits its one-row products apart when this many others remain
MIN_CURVE_ROWS = 8  # a plain GEMM class with this many distinct row counts gets a row curve
# a decode attention class measured at this many rows per K/V head (some head_dim) gets a row
# table: transformers' grouped paths are measured at GROUP_GRID_ROWS (2, 4, 8, 16) only, and
# their rate falls with the rows (the CPU kernel does not fold the group), which no constant
# efficiency term follows
MIN_DECODE_GRID_ROWS = 4
REFUSE_ABOVE = 1.05  # a wish above this fraction of a roof is reported (below: noise)
FLOOR = 0.05  # a case's time less its first touch is kept at least this fraction of it


# Rules of the fit that a profile records (``meta.fit``): a profile calibrated before a rule
# existed records none and refits without it, so that refitting a committed profile gives its
# committed terms (``recorded_rules``); every new calibration records all of them.
FIT_RULES = {
    "overhead_cap": True,  # an overhead never above the class's fastest kernel
    "judge_between": True,  # a GPU grid's knots judged from their neighbours
    "kind_classes": True,  # an activation's or norm's kind pooled over op names ('norm.layernorm@bf16')
}


def recorded_rules(profile: Mapping[str, Any]) -> dict[str, bool]:
    """The ``FIT_RULES`` a profile was fitted with (absent: off)."""
    rules = (profile.get("meta") or {}).get("fit") or {}
    return {name: bool(rules.get(name, False)) for name in FIT_RULES}


@dataclass(frozen=True)
class ProfileFit:
    """What a profile takes from its calibration rows."""

    efficiency: dict[str, dict[str, float]]  # class -> terms
    overhead_s: dict[str, float]  # class -> seconds per call
    row_curves: dict[str, list[dict[str, Any]]]  # class -> [{k, n, rows, fraction}]
    report: dict[str, Any]  # class -> cases and errors
    refused: list[dict[str, Any]]  # class, term, wanted fraction, cases
    size_curves: dict[str, dict[str, Any]] = field(default_factory=dict)  # class -> {bytes, fraction, cap}
    # class -> stage -> {axes, knots, fraction}: attention on a measured grid
    attention_tables: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    row_tails: dict[str, tuple[float, ...]] = field(default_factory=dict)  # softmax class -> s per row by remainder


def fit_key(op) -> str:
    """The class a calibration case fits: 'linear@bf16' for the plain projections (one
    GEMM kernel whatever the layer's name), 'kind:name@dtype' for every other kernel, and
    for an activation or norm of another kind than SiLU x up or RMSNorm the first of the
    engine's keys, which names its kind ('elementwise:mlp_act_eager.gelu_tanh_mul@bf16')."""
    special = op.kind != "linear" or op.name.endswith(("_weight_only", "_matmul"))
    return keys_for(op)[0] if special else f"{PLAIN_LINEAR}@{op.dtype}"


def roof_seconds(ops: Sequence, ceilings: Ceilings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matrix, vector and memory seconds of each op at 100% of the given roofs, no overhead
    (the tile fill and the efficiencies scale the matrix part only, as in ``Ceilings.compute_roof``)."""
    bare = replace(ceilings, efficiency={}, overhead_s={}, row_curves={}, attention_tables={})
    table = evaluate(list(ops), bare)
    compute = np.ravel(table["compute_s"]).astype(float)
    vector = np.ravel(table["vector_flops"]).astype(float) / np.array(
        [bare.vector_roof(op.dtype) for op in ops], dtype=float
    )
    return compute - vector, vector, np.ravel(table["memory_s"]).astype(float)


def _fill(rows: np.ndarray | None, half: float, gemv: bool):
    return tile_fill(rows, half, gemv)


def model_time(compute_s, vector_s, memory_s, fill, e_compute, e_memory, overhead_s=0.0):
    """The class model above, for arrays of cases (and, broadcast, grids of terms)."""
    return roofline_time(compute_s / fill / e_compute + vector_s, memory_s / e_memory) + overhead_s


def fit_class(
    compute_s: np.ndarray,
    memory_s: np.ndarray,
    measured_s: np.ndarray,
    weights: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    vector_s: np.ndarray | None = None,
    gemv: bool = False,
    memory_cap: float = 1.0,
    overhead_cap: bool = True,
) -> dict[str, Any]:
    """Best (compute, memory, overhead[, rows_half]) for one class by exhaustive grid search,
    the compute efficiency at most 1 and the memory one at most ``memory_cap`` (``write_free``);
    ``wanted`` holds the efficiencies above those an unbounded search would have chosen
    (empty when none).

    With ``rows`` (the m of each GEMM) the compute efficiency also follows the tile fill
    m / (m + rows_half) of ``ridgeline.engine.roofline``; rows_half = 0 (no effect) wins ties.
    """
    c, m, t = (np.asarray(a, dtype=float) for a in (compute_s, memory_s, measured_s))
    v = np.zeros_like(c) if vector_s is None else np.asarray(vector_s, dtype=float)
    w = np.ones_like(t) if weights is None else np.asarray(weights, dtype=float)
    halves = ROWS_HALF_GRID if rows is not None else np.zeros(1)
    overheads = capped_overheads(t) if overhead_cap else OVERHEAD_GRID
    ec, em = WANT_GRID[:, None, None], WANT_GRID[None, :, None]
    pull = PULL * (np.log(WANT_GRID)[:, None] ** 2 + np.log(WANT_GRID)[None, :] ** 2)
    inside = (WANT_GRID[:, None] <= 1.0) & (WANT_GRID[None, :] <= memory_cap * (1 + 1e-9))
    best = {"bounded": (np.inf, (0, 0, 0, 0)), "free": (np.inf, (0, 0, 0, 0))}
    for h, half in enumerate(halves):
        fill = _fill(rows, half, gemv)
        roof = model_time(c, v, m, fill, ec, em)  # [ec, em, case]
        for n, oh in enumerate(overheads):  # one overhead at a time keeps memory small
            loss = (np.log((roof + oh) / t) ** 2 * w).sum(-1) / w.sum() + pull
            for name, masked in (("free", loss), ("bounded", np.where(inside, loss, np.inf))):
                a, b = np.unravel_index(np.argmin(masked), masked.shape)
                if masked[a, b] < best[name][0]:
                    best[name] = (masked[a, b], (a, b, n, h))
    i, j, k, h = best["bounded"][1]
    fi, fj = best["free"][1][:2]
    wanted = {
        term: float(WANT_GRID[x])
        for term, x, cap in (("compute", fi, 1.0), ("memory", fj, memory_cap))
        if WANT_GRID[x] > REFUSE_ABOVE * cap
    }
    fill = _fill(rows, halves[h], gemv)
    pred = model_time(c, v, m, fill, WANT_GRID[i], WANT_GRID[j], overheads[k])
    return {
        "compute": float(WANT_GRID[i]),
        "memory": float(WANT_GRID[j]),
        "overhead_s": float(overheads[k]),
        "rows_half": float(halves[h]),
        "wanted": wanted,
        **_errors(pred, t),
    }


def capped_overheads(measured_s) -> np.ndarray:
    """The overheads a class may be fitted: ``OVERHEAD_GRID`` up to its smallest measured
    kernel. A fixed cost per call is part of every call, so it never exceeds the fastest
    call measured; an intercept extrapolated from long kernels could (issue 24: fitted from
    1536 cached tokens up, efficient SDPA's 66.7 µs exceeded whole kernels of the draw)."""
    least = float(np.min(measured_s))
    return OVERHEAD_GRID[OVERHEAD_GRID <= least]


def fit_row_table(
    bound_s: np.ndarray,
    measured_s: np.ndarray,
    dims: np.ndarray,
    weights: np.ndarray | None = None,
    cap: float = 1.0,
    overheads: np.ndarray = OVERHEAD_GRID,
    between: bool = False,
    least: int = MIN_CURVE_ROWS,
) -> dict[str, Any]:
    """A class's fraction of the roofline bound by rows, per measured (K, N) shape, and its
    overhead. ``dims`` holds each case's (m, k, n); ``least``: the row counts a shape needs.

    Shapes measured at ``MIN_CURVE_ROWS`` or more row counts (the grid) become the table's
    curves. For each overhead on the grid, a curve's value at each row count is the median of
    bound / (measured - overhead) there, at most ``cap`` (1, or a CPU class's ``write_free``);
    the overhead kept is the one whose table
    (read as the engine reads it: ``ridgeline.engine.roofline.RowTable``) gives the least weighted
    squared log error over all the class's cases, the other shapes' included. ``wanted``
    lists the (k, n, rows) whose median is above 1.

    ``between`` (a GPU's grid, where the class may have no case off its knots): a curve's
    inner knots are judged by the curve without them (interpolated from the knots on either
    side), as ``fit_attention_tables`` judges its grid points; else every knot reproduces
    itself whatever the overhead and the search learns nothing from the grid.
    """
    b, t = np.asarray(bound_s, dtype=float), np.asarray(measured_s, dtype=float)
    dims = np.asarray(dims, dtype=float)
    w = np.ones_like(t) if weights is None else np.asarray(weights, dtype=float)
    shapes = sorted(
        {(k, n) for _, k, n in dims if np.unique(dims[(dims[:, 1] == k) & (dims[:, 2] == n), 0]).size >= least}
    )
    by_shape = {
        kn: np.flatnonzero((dims[:, 1] == kn[0]) & (dims[:, 2] == kn[1])) for kn in {(k, n) for _, k, n in dims}
    }
    best = (np.inf, None)
    for oh in overheads:
        busy = t - oh
        if (busy <= 0).any():
            break  # the overhead grid increases: no larger one fits
        raw = [_knots(dims[by_shape[kn], 0], b[by_shape[kn]] / busy[by_shape[kn]]) for kn in shapes]
        table = RowTable(tuple(shapes), tuple(Curve(tuple(x), tuple(np.minimum(y, cap))) for x, y in raw))
        pred = np.empty_like(t)
        for (k, n), idx in by_shape.items():
            pred[idx] = b[idx] / table.at(dims[idx, 0], k, n) + oh
        judged = pred.copy()
        if between:
            for (k, n), curve in zip(table.shapes, table.curves):
                idx = by_shape[(k, n)]
                inner = idx[np.isin(dims[idx, 0], curve.x[1:-1])]
                judged[inner] = b[inner] / _without_knot(curve, dims[inner, 0]) + oh
        loss = (np.log(judged / t) ** 2 * w).sum() / w.sum()
        if loss < best[0] - 1e-15:
            best = (loss, (oh, raw, table, pred))
    oh, raw, table, pred = best[1]
    entries = [
        {
            "k": float(k),
            "n": float(n),
            "rows": [float(x) for x in curve.x],
            "fraction": [round(float(y), 4) for y in curve.y],
        }
        for (k, n), curve in zip(table.shapes, table.curves)
    ]
    wanted = [
        (k, n, float(x), float(y))
        for (k, n), (xs, ys) in zip(shapes, raw)
        for x, y in zip(xs, ys)
        if y > REFUSE_ABOVE * cap
    ]
    return {"table": entries, "overhead_s": float(oh), "wanted": wanted, **_errors(pred, t)}


def _without_knot(curve: Curve, x: np.ndarray) -> np.ndarray:
    """At inner knots ``x`` of ``curve``, its value interpolated (in log x) from the knots on
    either side, as if the knot had not been measured."""
    xs, ys = np.log(np.asarray(curve.x)), np.asarray(curve.y)
    j = np.searchsorted(xs, np.log(x))
    a = (np.log(x) - xs[j - 1]) / (xs[j + 1] - xs[j - 1])
    return (1 - a) * ys[j - 1] + a * ys[j + 1]


MIN_TABLE_CONTEXTS = 3  # an attention grid measured at this many contexts becomes a table


def attention_grid_points(rows: Sequence[Mapping[str, Any]], ops: Sequence) -> dict[str, np.ndarray]:
    """Per stage ('decode', 'prefill'), which of a class's cases are points of a measured
    attention grid (``builder: attention_grid`` without a model) with at least
    ``MIN_TABLE_CONTEXTS`` contexts; stages with fewer are left out. The CPU's decode grid
    (two cache lengths) stays a row table (``_decode_grid``)."""
    out = {}
    grid = np.array(
        [
            (r.get("recipe") or {}).get("builder") == "attention_grid" and "model" not in (r.get("recipe") or {})
            for r in rows
        ],
        dtype=bool,
    )
    coords = [attention_coords(op) for op in ops]
    for stage, decode in (("decode", True), ("prefill", False)):
        mask = np.array(
            [g and c is not None and bool(np.all(c[0] == decode)) for g, c in zip(grid, coords)], dtype=bool
        )
        contexts = {float(np.ravel(coords[i][2])[0]) for i in np.flatnonzero(mask)}
        if len(contexts) >= MIN_TABLE_CONTEXTS:
            out[stage] = mask
    return out


def _table_coords(ops: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Each op's stage (True: decode) and (rows, context, head_dim); NaN rows for ops that are
    not attention-shaped."""
    decode, xyz = [], []
    for op in ops:
        c = attention_coords(op)
        if c is None:
            decode.append(False)
            xyz.append((np.nan, np.nan, np.nan))
            continue
        decode.append(bool(np.all(c[0])))
        xyz.append((c[1], float(np.ravel(c[2])[0]), c[3]))
    return np.array(decode, dtype=bool), np.array(xyz, dtype=float)


def fit_attention_tables(
    bound_s: np.ndarray,
    measured_s: np.ndarray,
    ops: Sequence,
    points: Mapping[str, np.ndarray],
    weights: np.ndarray | None = None,
    overheads: Sequence[float] | None = None,
) -> dict[str, Any]:
    """A class's fraction of the roofline bound on its measured attention grid, one table
    per stage in ``points`` (``attention_grid_points``), and its overhead.

    For each overhead up to the class's smallest measured kernel (``capped_overheads``), each
    grid cell's value is the median of bound / (measured - overhead) there, at most 1; a cell
    not measured (a case skipped) takes the mean of its measured neighbours along each axis,
    repeatedly. Every grid point reproduces itself whatever the overhead, so a point between
    two measured contexts is judged by the table without it (interpolated from its
    neighbours): the overhead kept is the one under which the tables, read as the engine
    reads them (``ridgeline.engine.roofline.GridTable``, multilinear in the log of rows, context and
    head_dim), predict the points between and the class's model-shape cases with the least
    weighted squared log error - the fixed cost that leaves the rate smoothest in context.
    ``covered`` marks the cases the tables price; ``wanted`` lists the cells whose median is
    above 1. ``overheads`` fixes the choice (a CPU class's decode row table chose it)."""
    b, t = np.asarray(bound_s, dtype=float), np.asarray(measured_s, dtype=float)
    w = np.ones_like(t) if weights is None else np.asarray(weights, dtype=float)
    decode, xyz = _table_coords(ops)
    covered = np.zeros(t.size, dtype=bool)
    for stage in points:
        covered |= (decode == (stage == "decode")) & ~np.isnan(xyz[:, 0])
    knots = {
        stage: tuple(tuple(float(v) for v in np.unique(xyz[mask, a])) for a in range(3))
        for stage, mask in points.items()
    }
    best = (np.inf, None)
    for oh in capped_overheads(t) if overheads is None else overheads:
        busy = t - oh
        if (busy[covered] <= 0).any():
            break
        tables, raw = {}, {}
        for stage, mask in points.items():
            cells = np.full(tuple(len(k) for k in knots[stage]), np.nan)
            ratio = b[mask] / busy[mask]
            index = [np.searchsorted(k, xyz[mask, a]) for a, k in enumerate(knots[stage])]
            for cell in set(zip(*index)):
                here = np.all(np.stack(index, 1) == cell, axis=1)
                cells[cell] = np.median(ratio[here])
            raw[stage] = cells
            tables[stage] = GridTable.of(ATTENTION_AXES, knots[stage], np.minimum(_fill_holes(cells), 1.0))
        pred, judged = np.full(t.size, np.nan), np.full(t.size, np.nan)
        for stage, table in tables.items():
            idx = covered & (decode == (stage == "decode"))
            pred[idx] = b[idx] / table.at(rows=xyz[idx, 0], context=xyz[idx, 1], head_dim=xyz[idx, 2]) + oh
            judged[idx] = pred[idx]
            # a grid point is judged by the table without it: interpolated from the contexts
            # on either side (each point reproduces itself whatever the overhead)
            inner = _between_neighbours(table, xyz[:, 1]) & points[stage]
            without = _leave_context_out(table)
            judged[inner] = (
                b[inner] / without.at(rows=xyz[inner, 0], context=xyz[inner, 1], head_dim=xyz[inner, 2]) + oh
            )
        ok = covered & np.isfinite(judged)
        loss = (np.log(judged[ok] / t[ok]) ** 2 * w[ok]).sum() / max(w[ok].sum(), 1e-30)
        if loss < best[0] - 1e-15:
            best = (loss, (oh, tables, raw, pred))
    if best[1] is None:
        return {"tables": {}, "overhead_s": 0.0, "covered": np.zeros(t.size, dtype=bool), "wanted": [], "cases": 0}
    oh, tables, raw, pred = best[1]
    wanted = [
        (stage, tuple(float(k[i]) for k, i in zip(knots[stage], cell)), float(v))
        for stage, cells in raw.items()
        for cell, v in np.ndenumerate(cells)
        if np.isfinite(v) and v > REFUSE_ABOVE
    ]
    return {
        "tables": tables,
        "overhead_s": float(oh),
        "covered": covered,
        "wanted": wanted,
        **_errors(pred[covered], t[covered]),
    }


def _between_neighbours(table: GridTable, context: np.ndarray) -> np.ndarray:
    """Which contexts are inner knots of the table's context axis (a knot on each side)."""
    knots = table.knots[ATTENTION_AXES.index("context")]
    return np.isin(context, knots[1:-1])


def _leave_context_out(table: GridTable) -> GridTable:
    """The table with each inner context knot's values replaced by the interpolation (in
    log context) of the knots on either side: what the table predicts there without it."""
    axis = ATTENTION_AXES.index("context")
    values = np.asarray(table.values, dtype=float)
    x = np.log(np.asarray(table.knots[axis]))
    out = values.copy()
    for j in range(1, len(x) - 1):
        a = (x[j] - x[j - 1]) / (x[j + 1] - x[j - 1])
        before, after = np.take(values, j - 1, axis), np.take(values, j + 1, axis)
        index = [slice(None)] * values.ndim
        index[axis] = j
        out[tuple(index)] = (1 - a) * before + a * after
    return GridTable.of(table.axes, table.knots, out)


def _fill_holes(cells: np.ndarray) -> np.ndarray:
    """NaN cells of a grid take the mean of their finite neighbours along each axis, until
    none is left (all NaN: left as it is)."""
    cells = cells.copy()
    while np.isnan(cells).any() and np.isfinite(cells).any():
        filled = cells.copy()
        for index in zip(*np.nonzero(np.isnan(cells))):
            near = []
            for axis in range(cells.ndim):
                for step in (-1, 1):
                    j = list(index)
                    j[axis] += step
                    if 0 <= j[axis] < cells.shape[axis] and np.isfinite(cells[tuple(j)]):
                        near.append(cells[tuple(j)])
            if near:
                filled[index] = float(np.mean(near))
        cells = filled
    return cells


def _knots(rows: np.ndarray, fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct row counts and the median fraction at each."""
    knots = np.unique(rows)
    return knots, np.array([np.median(fraction[rows == k]) for k in knots])


def _has_grid(dims: np.ndarray, least: int = MIN_CURVE_ROWS) -> bool:
    """Some (k, n) shape is measured at ``least`` row counts or more."""
    shapes = {(k, n) for _, k, n in dims}
    return any(np.unique(dims[(dims[:, 1] == k) & (dims[:, 2] == n), 0]).size >= least for k, n in shapes)


def _groups(ops: Sequence, pooled: bool = True, kinds: bool = True) -> dict[str, list[int]]:
    """Case indices per class, plus (``pooled``) fallbacks: an activation's or norm's kind
    over op names ('norm.layernorm@bf16', ``class_keys``), 'kind@dtype' and 'kind'."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        key = fit_key(op)
        groups[key].append(i)
        if not pooled:
            continue
        if kinds and op_variant(op):
            groups[f"{op.kind}.{op_variant(op)}@{op.dtype}"].append(i)
        pooled_key = f"{op.kind}@{op.dtype}"
        if pooled_key != key and op.kind != "linear":  # 'linear@dtype': the plain GEMM class
            groups[pooled_key].append(i)
        groups[op.kind].append(i)
    return groups


def fit_profile_terms(
    rows: Iterable[Mapping[str, Any]],
    ops: Sequence,
    ceilings: Ceilings,
    pooled: bool = True,
    cpu: bool = False,
    overhead_cap: bool = True,
    judge_between: bool = True,
    kind_classes: bool = True,
) -> ProfileFit:
    """Efficiency, overhead and row-curve tables for a profile, from ok calibration rows and
    their ops.

    Keys: each fitted class (``fit_key``), then pooled fallbacks 'kind@dtype' and 'kind' for
    ops of classes not calibrated (the engine's ``keys_for`` looks them up in that order);
    ``pooled=False`` leaves those out (cross-validation predicts calibrated classes only).
    ``cpu``: memory fractions may reach ``write_free`` (a CPU's write-allocate cache; a GPU
    writes DRAM sectors without reading them, so its copy roof counts writes at face value).
    ``overhead_cap``, ``judge_between`` and ``kind_classes``: the ``FIT_RULES`` (off to refit
    an older profile as it was fitted).
    """
    rows = list(rows)
    compute_s, vector_s, memory_s = roof_seconds(ops, ceilings)
    measured = np.array([r["measured_s"] for r in rows], dtype=float)
    # a CPU's first touch of fresh pages is its own measured term: the classes fit the rest
    touch = np.ravel(first_touch_seconds(ops, ceilings, (len(ops),)))
    measured = np.maximum(measured - touch, FLOOR * measured)
    # so is a CPU softmax's vector tail, from its own series (which no class fits)
    tail = np.array([is_tail_case(r) for r in rows], dtype=bool)
    tails = fit_row_tails([ops[i] for i in np.flatnonzero(tail)], measured[tail])
    with_tails = replace(ceilings, row_tails=tails)
    measured = np.maximum(measured - np.ravel(row_tail_seconds(ops, with_tails, (len(ops),))), FLOOR * measured)
    weights = np.array([NOISY_WEIGHT if r.get("noisy") else 1.0 for r in rows])
    efficiency, overhead, curves, report, refused, sizes = {}, {}, {}, {}, [], {}
    tables: dict[str, dict[str, Any]] = {}
    for key, members in sorted(_groups(ops, pooled, kind_classes).items()):
        idx = np.array([i for i in members if not tail[i]])
        if not idx.size:
            continue
        rows_m = [tile_rows(ops[i]) for i in idx]
        class_rows = None if any(r is None for r in rows_m) else np.array(rows_m, dtype=float)
        size = _size_grid(key, [rows[i] for i in idx], [ops[i] for i in idx])
        if size is not None:
            cap = float(write_free(ops[i] for i in idx)) if cpu else 1.0
            overheads = OVERHEAD_GRID
            parts = _width_parts(key, [ops[i] for i in idx], size) or _softmax_sides(
                key, [rows[i] for i in idx], [ops[i] for i in idx]
            )
            for suffix, part in parts:
                name = suffix if "@" in suffix else key + suffix  # a width's own key, or a side's suffix
                sub, dims = idx[part], size[part]
                bound = roofline_time(compute_s[sub] + vector_s[sub], memory_s[sub])
                table = fit_row_table(
                    bound, measured[sub], dims, weights[sub], cap, overheads, between=judge_between and not cpu
                )
                entry = table["table"][0]
                sizes[name] = {
                    "bytes": entry["rows"],
                    "fraction": entry["fraction"],
                    "cap": round(cap, 4),
                }
                if not suffix:  # one overhead per class: the short rows' (or the only) fit
                    overhead[key] = table["overhead_s"]
                    overheads = np.array([min(table["overhead_s"], 0.99 * measured[idx].min())])
                report[name + " (size table)"] = {k: table[k] for k in ("cases", "median_abs_error", "max_abs_error")}
                refused += [
                    {
                        "class": name,
                        "term": f"fraction at {b:g} bytes",
                        "wanted": round(f, 3),
                        "cases": int(sub.size),
                    }
                    for _, _, b, f in table["wanted"]
                ]
            continue
        points = (
            attention_grid_points([rows[i] for i in idx], [ops[i] for i in idx]) if key.startswith("attention:") else {}
        )
        if points:  # attention on a measured grid: a table per stage (GPU calibration)
            bound = roofline_time(compute_s[idx] + vector_s[idx], memory_s[idx])
            table_fit = (bound, measured[idx], [ops[i] for i in idx], points, weights[idx])
            fitted = fit_attention_tables(*table_fit)
            tables[key] = {stage: t.to_dict() for stage, t in fitted["tables"].items()}
            overhead[key] = fitted["overhead_s"]
            report[key + " (attention table)"] = {k: fitted[k] for k in ("cases", "median_abs_error", "max_abs_error")}
            refused += [
                {
                    "class": key,
                    "term": f"{stage} fraction at rows, context, head_dim {', '.join(f'{v:g}' for v in at)}",
                    "wanted": round(f, 3),
                    "cases": int(fitted["cases"]),
                }
                for stage, at, f in fitted["wanted"]
            ]
            rest = ~fitted["covered"]
            if not rest.any():
                continue
            idx = idx[rest]
            class_rows = None if class_rows is None else class_rows[rest]
        decode = _decode_grid(key, [ops[i] for i in idx])
        if points and decode is None:  # the rest of a class priced by tables: by its terms
            terms = _fit_terms(
                key,
                idx,
                class_rows,
                compute_s,
                vector_s,
                memory_s,
                measured,
                weights,
                float(write_free(ops[i] for i in idx)) if cpu else 1.0,
                overhead_cap,
            )
            efficiency[key] = terms["efficiency"]
            report[key] = _report(
                efficiency[key], overhead[key], compute_s[idx], vector_s[idx], memory_s[idx], measured[idx], class_rows
            )
            continue
        dims = np.array([[ops[i].dims.get(d, 0) for d in ("m", "k", "n")] for i in idx], dtype=float)
        if key.startswith(ROW_TABLE_CLASSES) and _has_grid(dims):
            bound = roofline_time(compute_s[idx] + vector_s[idx], memory_s[idx])
            table = fit_row_table(bound, measured[idx], dims, weights[idx])
            curves[key], overhead[key] = table["table"], table["overhead_s"]
            report[key] = {k: table[k] for k in ("cases", "median_abs_error", "max_abs_error")}
            refused += [
                {
                    "class": key,
                    "term": f"fraction at m={m:g} of {k:g}x{n:g}",
                    "wanted": round(f, 3),
                    "cases": int(idx.size),
                }
                for k, n, m, f in table["wanted"]
            ]
            continue
        if decode is not None:  # decode attention: a row table by (rows per K/V head, head_dim)
            # (beside a prefill table: a CPU measures prompts on a grid, decodes at two lengths)
            table_idx, dims = idx[decode[0]], decode[1]
            bound = roofline_time(compute_s[table_idx] + vector_s[table_idx], memory_s[table_idx])
            table = fit_row_table(bound, measured[table_idx], dims, weights[table_idx], least=MIN_DECODE_GRID_ROWS)
            curves[key] = table["table"]
            report[key + " (decode table)"] = {k: table[k] for k in ("cases", "median_abs_error", "max_abs_error")}
            refused += [
                {
                    "class": key,
                    "term": f"fraction at {m:g} rows, head_dim {k:g}",
                    "wanted": round(f, 3),
                    "cases": int(table_idx.size),
                }
                for k, _, m, f in table["wanted"]
            ]
            if points:  # the prompt tables again, at the one overhead of the class: the decodes'
                fitted = fit_attention_tables(*table_fit, overheads=[table["overhead_s"]])
                if fitted["tables"]:
                    tables[key] = {stage: t.to_dict() for stage, t in fitted["tables"].items()}
                    report[key + " (attention table)"] = {
                        k: fitted[k] for k in ("cases", "median_abs_error", "max_abs_error")
                    }
            idx = idx[~decode[0]]
            class_rows = None if class_rows is None else class_rows[~decode[0]]
            if not idx.size:
                overhead[key] = table["overhead_s"]
                continue
        terms = _fit_terms(
            key,
            idx,
            class_rows,
            compute_s,
            vector_s,
            memory_s,
            measured,
            weights,
            float(write_free(ops[i] for i in idx)) if cpu else 1.0,
            overhead_cap,
        )
        efficiency[key], overhead[key] = terms["efficiency"], terms["overhead_s"]
        if decode is not None:
            overhead[key] = table["overhead_s"]  # one overhead per class: the table's
        report[key] = _report(
            efficiency[key],
            terms["overhead_s"],
            compute_s[idx],
            vector_s[idx],
            memory_s[idx],
            measured[idx],
            class_rows,
        )
        refused += [
            {"class": key, "term": term, "wanted": round(f, 3), "cases": int(idx.size)}
            for term, f in terms["wanted"].items()
        ]
    return ProfileFit(efficiency, overhead, curves, report, refused, sizes, tables, tails)


def is_tail_case(row: Mapping[str, Any]) -> bool:
    """A case of the softmax tail series (``kernels.bench.cases.softmax_tail_cases``)."""
    return (row.get("recipe") or {}).get("series") == "tail"


def fit_row_tails(ops: Sequence, measured: np.ndarray) -> dict[str, tuple[float, ...]]:
    """Per softmax class measured at every width from a whole number of ``ROW_TAIL_PERIOD``
    columns through one period more, the seconds per row each remainder adds: a row's time
    past the whole-vector width's row scaled to its keys, at least 0. A class missing a
    width gets none."""
    series: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)
    for op, m in zip(ops, measured):
        series[fit_key(op)][int(op.dims["cols"])] = (float(m), float(op.dims["rows"]))
    out = {}
    for key, points in series.items():
        base = min(points)
        if base % ROW_TAIL_PERIOD or any(base + r not in points for r in range(ROW_TAIL_PERIOD)):
            continue
        whole, rows = points[base]
        out[key] = tuple(
            max(0.0, (points[base + r][0] - whole * (base + r) / base) / rows) for r in range(ROW_TAIL_PERIOD)
        )
    return out


def _size_grid(key: str, rows: Sequence[Mapping[str, Any]], ops: Sequence) -> np.ndarray | None:
    """For one element-wise class measured on the size grid (``kernels.bench.cases.size_grid_cases``,
    at ``MIN_CURVE_ROWS`` sizes or more): each case's (bytes, shape, 1), the grid's cases as
    one shape (the table's knots) and the model cases as another (predicted through it, so
    they choose the overhead with the grid); else None. Caches, prefetch ramps and composite
    kernels (a CPU's rms_norm converts to fp32 and makes five passes) change an element-wise
    rate with its size, not monotonically, so it is measured there."""
    if ":" not in key or not key.startswith(tuple(f"{k}:" for k in SIZE_KINDS)):
        return None
    grid = np.array([(r.get("recipe") or {}).get("builder") == "size_grid" for r in rows])
    series = {_series(op) for op, g in zip(ops, grid) if g}
    grid |= np.array([_series(op) in series and _on_grid_tokens(op) for op in ops])
    if np.unique([float(op.bytes) for op, g in zip(ops, grid) if g]).size < MIN_CURVE_ROWS:
        return None
    return np.array([[float(op.bytes), 1.0 if g else 2.0, 1.0] for op, g in zip(ops, grid)])


def _series(op) -> tuple:
    """What a size-grid series holds fixed: everything of the op's dimensions but its tokens."""
    return tuple(sorted((k, str(v)) for k, v in op.dims.items() if k != "tokens"))


def _on_grid_tokens(op) -> bool:
    """A model case at a power of two tokens of a grid series' width is that grid point: the
    suite keeps the first case of a shape (``kernels.bench.cases.dedupe``), and the model
    cases come first (Llama-3.2-1B's decode at batch 4 is the RMSNorm grid's 4 x 2048)."""
    tokens = op.dims.get("tokens")
    return isinstance(tokens, (int, np.integer)) and tokens > 0 and not tokens & (tokens - 1)


def _width_parts(key: str, ops: Sequence, size: np.ndarray) -> list[tuple[str, np.ndarray]] | None:
    """For a norm or softmax class measured on the size grid at more than one row width
    (``kernels.bench.cases.SIZE_GRID_NORM_WIDTHS``, ``SIZE_GRID_SOFTMAX_WIDTHS``; each at
    ``MIN_CURVE_ROWS`` sizes or more):
    the class at the base width's grid with its model cases ('': its overhead, and the curve
    an older engine reads), then each width's grid points on their own (``width_key``: the
    engine interpolates between them in log width). None for other classes and profiles
    measured at one width. ``size``: ``_size_grid``'s (bytes, shape, 1) of the ops."""
    dim = WIDTH_DIMS.get(ops[0].kind) if ops else None
    if dim is None:
        return None
    grid = size[:, 1] == 1.0
    width = np.array([float(np.max(op.dims.get(dim, 0))) for op in ops])
    widths = [w for w in np.unique(width[grid]) if np.unique(size[grid & (width == w), 0]).size >= MIN_CURVE_ROWS]
    base = float(SIZE_GRID_WIDTH["softmax" if ops[0].kind == "softmax" else "rmsnorm"])
    if len(widths) < 2 or base not in widths:
        return None
    return [("", ~grid | (width == base))] + [(width_key(key, w), grid & (width == w)) for w in widths]


def _softmax_sides(key: str, rows: Sequence[Mapping[str, Any]], ops: Sequence) -> list[tuple[str, np.ndarray]]:
    """The parts of an element-wise class measured on the size grid that get a size table
    each: for a softmax measured on both sides of ``SOFTMAX_SPLIT_COLS`` columns (each side
    at ``MIN_CURVE_ROWS`` sizes or more: PyTorch's CUDA softmax runs another kernel past
    1024 columns), rows up to it ('') and longer ones (``SOFTMAX_LONG``); otherwise the whole
    class ('')."""
    everything = [("", np.ones(len(ops), dtype=bool))]
    if not key.startswith("softmax:"):
        return everything
    long_rows = np.array([float(np.max(op.dims.get("cols", 0))) > SOFTMAX_SPLIT_COLS for op in ops])
    grid = np.array([(r.get("recipe") or {}).get("builder") == "size_grid" for r in rows])
    sizes = [
        np.unique([op.bytes for op, g, s in zip(ops, grid, long_rows) if g and s == side]).size
        for side in (False, True)
    ]
    if min(sizes) < MIN_CURVE_ROWS:
        return everything
    return [("", ~long_rows), (SOFTMAX_LONG, long_rows)]


def _decode_grid(key: str, ops: Sequence) -> tuple[np.ndarray, np.ndarray] | None:
    """For one attention kernel class (``attention:name@dtype``): which of its cases are
    decode (one query token) and their (rows per K/V head, head_dim, 1), when some head_dim
    was measured at ``MIN_CURVE_ROWS`` row counts or more (the attention grid); else None.
    The CPU kernels switch paths by rows and head_dim as BLAS does by m (reports/RESULTS.md,
    "Figures the manuals cite", derives how much from the committed CSV), so decode
    attention is a measured table, not a fitted curve."""
    if not key.startswith("attention:"):
        return None
    decode = np.array(
        [np.all(np.asarray(op.dims.get("q_len", 0)) == 1) and "head_dim" in op.dims for op in ops], dtype=bool
    )
    if not decode.any():
        return None
    dims = np.array(
        [[float(tile_rows(op)), float(op.dims["head_dim"]), 1.0] for op, d in zip(ops, decode) if d], dtype=float
    )
    return (decode, dims) if _has_grid(dims, MIN_DECODE_GRID_ROWS) else None


def write_free(ops: Iterable) -> float:
    """The most of the memory roof a class can reach: the roof is a read stream, and a write
    into a buffer the cache holds (an allocator's reused output) costs no read of its line
    and is written back later, beside the reads, so the fastest an op can run is its reads
    at the roof. The least bytes / read bytes over the class (1 for reads only; 1.5 for
    a residual add: two reads, one write)."""
    ratios = [
        float(np.min(op.bytes / np.maximum(op.weight_bytes + op.act_read_bytes + op.kv_read_bytes, 1.0))) for op in ops
    ]
    return max(1.0, min(ratios, default=1.0))


def _fit_terms(
    key, idx, rows, compute_s, vector_s, memory_s, measured, weights, memory_cap: float = 1.0, overhead_cap: bool = True
) -> dict[str, Any]:
    """One class's efficiency terms: tile fill where it has rows, and for plain GEMMs (BLAS
    runs one-row products as GEMV; the quantised kernels do not) the one-row products apart."""
    gemv = key.startswith(PLAIN_LINEAR + "@") or key == PLAIN_LINEAR
    one = rows == 1 if gemv and rows is not None else np.zeros(idx.size, dtype=bool)
    split = one.any() and (~one).sum() >= MIN_TILED_CASES
    tiled = idx[~one] if split else idx
    terms = fit_class(
        compute_s[tiled],
        memory_s[tiled],
        measured[tiled],
        weights[tiled],
        None if rows is None else rows[~one] if split else rows,
        vector_s[tiled],
        gemv=gemv,
        memory_cap=memory_cap,
        overhead_cap=overhead_cap,
    )
    eff = {"compute": round(terms["compute"], 4), "memory": round(terms["memory"], 4)}
    if terms["rows_half"]:
        eff["rows_half"] = terms["rows_half"]
    if gemv and (terms["rows_half"] or split):
        eff["gemv"] = 1.0
    if split:
        g = idx[one]
        eff["gemv_memory"] = round(
            fit_gemv_memory(compute_s[g], vector_s[g], memory_s[g], measured[g], weights[g], terms), 4
        )
    return {"efficiency": eff, "overhead_s": terms["overhead_s"], "wanted": terms["wanted"]}


def fit_gemv_memory(compute_s, vector_s, memory_s, measured_s, weights, terms) -> float:
    """Memory efficiency of a class's one-row products, its other terms held: BLAS runs them
    as a matrix-vector kernel, which streams the weights at its own rate."""
    roof = model_time(compute_s, vector_s, memory_s, 1.0, terms["compute"], EFF_GRID[:, None], terms["overhead_s"])
    loss = (np.log(roof / measured_s) ** 2 * weights).sum(-1) / weights.sum()
    return float(EFF_GRID[np.argmin(loss + PULL * np.log(EFF_GRID) ** 2)])


def _report(terms, overhead_s, compute_s, vector_s, memory_s, measured_s, rows) -> dict[str, Any]:
    """Cases and |predicted / measured - 1| of a class under its fitted terms."""
    one = np.zeros(measured_s.size, dtype=bool) if rows is None else rows == 1
    fill = _fill(rows, terms.get("rows_half", 0.0), bool(terms.get("gemv")))
    memory = np.where(one, terms.get("gemv_memory", terms["memory"]), terms["memory"])
    return _errors(model_time(compute_s, vector_s, memory_s, fill, terms["compute"], memory, overhead_s), measured_s)


def _errors(predicted_s, measured_s) -> dict[str, Any]:
    rel = np.abs(predicted_s / measured_s - 1)
    return {"cases": int(measured_s.size), "median_abs_error": float(np.median(rel)), "max_abs_error": float(rel.max())}
