"""Fit the calibrated roofline's per-class terms to measured calibration cases (pure numpy).

Model of one kernel class (same op kind, kernel and data type), the engine's own roofline:

    t = max(C / (e_compute * fill) + V, M / e_memory) + overhead
    fill = rows / (rows + rows_half)   (1 for one-row products of a 'gemv' class)

A 'gemv' class (plain projections: BLAS runs a one-row product as a matrix-vector kernel)
fits its one-row cases' memory efficiency apart, ``gemv_memory``, the other terms held.

with C = flops / measured matrix peak, V = vector work (dequantising) / vector peak (not
scaled: the engine runs it at the device's vector roof) and M = bytes / measured copy
bandwidth, all from ``ridgeline.roofline.evaluate`` on the measured roofs with no
efficiencies. ``e_compute`` and ``e_memory`` are the fractions of the measured roofs the
class reaches, ``overhead`` its fixed seconds per call (dispatch, threading, launch), and
for classes with rows (GEMM m, attention q_len) ``rows_half`` is the row count at which half
the tile rate is reached. They are found by grid search minimising the mean squared log
error over the class's calibration cases, with a weak pull of each efficiency towards 1 so
that a term no case constrains (a class that is never compute-bound) stays at the roof.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ridgeline.roofline import Ceilings, evaluate, tile_rows

EFF_GRID = np.geomspace(0.01, 4.0, 97)
OVERHEAD_GRID = np.concatenate([[0.0], np.geomspace(0.2e-6, 3e-3, 49)])
ROWS_HALF_GRID = np.array([0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256], dtype=float)
PULL = 2e-3          # weight of (log efficiency)^2 in the loss
NOISY_WEIGHT = 0.3   # noisy measurements count less
PLAIN_LINEAR = "linear"
MIN_TILED_CASES = 3   # a GEMV class fits its one-row products apart when this many others remain


def fit_key(op) -> str:
    """The class a calibration case fits: 'linear@bf16' for the plain projections (one
    GEMM kernel whatever the layer's name), 'kind:name@dtype' for every other kernel."""
    special = op.kind != "linear" or op.name.endswith(("_weight_only", "_matmul"))
    return f"{op.kind}:{op.name}@{op.dtype}" if special else f"{PLAIN_LINEAR}@{op.dtype}"


def roof_seconds(ops: Sequence, ceilings: Ceilings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matrix, vector and memory seconds of each op at 100% of the given roofs, no overhead
    (the tile fill and the efficiencies scale the matrix part only, as in ``Ceilings.compute_roof``)."""
    bare = replace(ceilings, efficiency={}, overhead_s={})
    table = evaluate(list(ops), bare)
    compute = np.ravel(table["compute_s"]).astype(float)
    vector = np.ravel(table["vector_flops"]).astype(float) / np.array(
        [bare.vector_roof(op.dtype) for op in ops], dtype=float)
    return compute - vector, vector, np.ravel(table["memory_s"]).astype(float)


def _fill(rows: np.ndarray | None, half: float, gemv: bool):
    """ridgeline.roofline._tile_fill for arrays of rows (one-row linear ops: GEMV, fill 1)."""
    if rows is None:
        return 1.0
    rows = np.asarray(rows, dtype=float)
    fill = rows / (rows + half)
    return np.where(rows == 1, 1.0, fill) if gemv else fill


def model_time(compute_s, vector_s, memory_s, fill, e_compute, e_memory, overhead_s=0.0):
    """The class model above, for arrays of cases (and, broadcast, grids of terms)."""
    return np.maximum(compute_s / fill / e_compute + vector_s, memory_s / e_memory) + overhead_s


def fit_class(compute_s: np.ndarray, memory_s: np.ndarray, measured_s: np.ndarray,
              weights: np.ndarray | None = None, rows: np.ndarray | None = None,
              vector_s: np.ndarray | None = None, gemv: bool = False) -> dict[str, float]:
    """Best (compute, memory, overhead[, rows_half]) for one class by exhaustive grid search.

    With ``rows`` (the m of each GEMM) the compute efficiency also follows the tile fill
    m / (m + rows_half) of ``ridgeline.roofline``; rows_half = 0 (no effect) wins ties.
    """
    c, m, t = (np.asarray(a, dtype=float) for a in (compute_s, memory_s, measured_s))
    v = np.zeros_like(c) if vector_s is None else np.asarray(vector_s, dtype=float)
    w = np.ones_like(t) if weights is None else np.asarray(weights, dtype=float)
    halves = ROWS_HALF_GRID if rows is not None else np.zeros(1)
    ec, em = EFF_GRID[:, None, None], EFF_GRID[None, :, None]
    pull = PULL * (np.log(EFF_GRID)[:, None] ** 2 + np.log(EFF_GRID)[None, :] ** 2)
    best_loss, best = np.inf, (0, 0, 0, 0)
    for h, half in enumerate(halves):
        fill = _fill(rows, half, gemv)
        roof = model_time(c, v, m, fill, ec, em)                    # [ec, em, case]
        for n, oh in enumerate(OVERHEAD_GRID):   # one overhead at a time keeps memory small
            loss = (np.log((roof + oh) / t) ** 2 * w).sum(-1) / w.sum() + pull
            a, b = np.unravel_index(np.argmin(loss), loss.shape)
            if loss[a, b] < best_loss:
                best_loss, best = loss[a, b], (a, b, n, h)
    i, j, k, h = best
    fill = _fill(rows, halves[h], gemv)
    pred = model_time(c, v, m, fill, EFF_GRID[i], EFF_GRID[j], OVERHEAD_GRID[k])
    return {"compute": float(EFF_GRID[i]), "memory": float(EFF_GRID[j]),
            "overhead_s": float(OVERHEAD_GRID[k]), "rows_half": float(halves[h]),
            **_errors(pred, t)}


def fit_profile_terms(rows: Iterable[Mapping[str, Any]], ops: Sequence, ceilings: Ceilings,
                      ) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, Any]]:
    """Efficiency and overhead tables for a profile, from ok calibration rows and their ops.

    Keys: each fitted class (``fit_key``), then pooled fallbacks 'kind@dtype' and 'kind' for
    ops of classes not calibrated (the engine's ``keys_for`` looks them up in that order).
    """
    rows = list(rows)
    compute_s, vector_s, memory_s = roof_seconds(ops, ceilings)
    measured = np.array([r["measured_s"] for r in rows], dtype=float)
    weights = np.array([NOISY_WEIGHT if r.get("noisy") else 1.0 for r in rows])
    groups: dict[str, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        key = fit_key(op)
        groups[key].append(i)
        pooled = f"{op.kind}@{op.dtype}"
        if pooled != key and op.kind != "linear":  # 'linear@dtype' is the plain GEMM class
            groups[pooled].append(i)
        groups[op.kind].append(i)
    efficiency, overhead, report = {}, {}, {}
    for key in sorted(groups):
        idx = np.array(groups[key])
        rows_m = [tile_rows(ops[i]) for i in idx]
        rows = None if any(r is None for r in rows_m) else np.array(rows_m, dtype=float)
        # plain GEMMs (BLAS) run one-row products as GEMV; the quantised kernels do not
        gemv = key.startswith(PLAIN_LINEAR + "@") or key == PLAIN_LINEAR
        one = rows == 1 if gemv and rows is not None else np.zeros(idx.size, dtype=bool)
        split = one.any() and (~one).sum() >= MIN_TILED_CASES
        tiled = idx[~one] if split else idx
        terms = fit_class(compute_s[tiled], memory_s[tiled], measured[tiled], weights[tiled],
                          None if rows is None else rows[~one] if split else rows,
                          vector_s[tiled], gemv=gemv)
        efficiency[key] = {"compute": round(terms["compute"], 4), "memory": round(terms["memory"], 4)}
        if terms["rows_half"]:
            efficiency[key]["rows_half"] = terms["rows_half"]
        if gemv and (terms["rows_half"] or split):
            efficiency[key]["gemv"] = 1.0
        if split:
            g = idx[one]
            efficiency[key]["gemv_memory"] = round(fit_gemv_memory(
                compute_s[g], vector_s[g], memory_s[g], measured[g], weights[g], terms), 4)
        overhead[key] = terms["overhead_s"]
        report[key] = _report(efficiency[key], terms["overhead_s"], compute_s[idx], vector_s[idx],
                              memory_s[idx], measured[idx], rows)
    return efficiency, overhead, report


def fit_gemv_memory(compute_s, vector_s, memory_s, measured_s, weights, terms) -> float:
    """Memory efficiency of a class's one-row products, its other terms held: BLAS runs them
    as a matrix-vector kernel, which streams the weights at its own rate."""
    roof = model_time(compute_s, vector_s, memory_s, 1.0, terms["compute"], EFF_GRID[:, None],
                      terms["overhead_s"])
    loss = (np.log(roof / measured_s) ** 2 * weights).sum(-1) / weights.sum()
    return float(EFF_GRID[np.argmin(loss + PULL * np.log(EFF_GRID) ** 2)])


def _report(terms, overhead_s, compute_s, vector_s, memory_s, measured_s, rows) -> dict[str, Any]:
    """Cases and |predicted / measured - 1| of a class under its fitted terms."""
    one = np.zeros(measured_s.size, dtype=bool) if rows is None else rows == 1
    fill = _fill(rows, terms.get("rows_half", 0.0), bool(terms.get("gemv")))
    memory = np.where(one, terms.get("gemv_memory", terms["memory"]), terms["memory"])
    return _errors(model_time(compute_s, vector_s, memory_s, fill, terms["compute"], memory,
                              overhead_s), measured_s)


def _errors(predicted_s, measured_s) -> dict[str, Any]:
    rel = np.abs(predicted_s / measured_s - 1)
    return {"cases": int(measured_s.size), "median_abs_error": float(np.median(rel)),
            "max_abs_error": float(rel.max())}
