"""Prediction intervals: how far measured times have fallen from predicted ones, per class
of kernel, and what that makes of a whole pass's time.

A profile's ``intervals`` section holds, per group of ops, the empirical quantiles of the
held-out residuals ``r = log(measured / predicted)`` (``LEVELS``: 0, 5 %, ..., 100 %) and
how many residuals are behind them. A group is a pricing class key (``Ceilings.keys``:
'linear:q_proj@bf16', 'linear@bf16', 'attention' ...) alone, or with a size band
(``band``); an op takes the first group holding at least ``MIN_COUNT`` residuals of: its key chain
within its band, its band's pool ('*|large'), its chain across bands, all of them ('*').
The pools hold device kernels' residuals; a collective (``UNPOOLED``: link time, not a
device kernel) none of whose chain's keys holds a group has no measured residuals of its
kind and takes none (``UNMEASURED``): it borrows no other kind's, its factor is 1 (its time
enters at its point) and the answer names it.

A pass's time is a sum over ops whose errors are correlated within a class (one kernel
family runs many times), so the ops of one class share one draw: a seeded uniform ``u``
per class, each op's factor ``exp(Q_op(u))``, and the pass's factor is the time-weighted
sum of its ops' factors. The intervals are quantiles of that factor over ``SAMPLES``
draws, times the point prediction. Ops past the measured grid (``ridgeline.engine.grid``)
widen their spread around the median by ``1 + log2(distance)`` (``widening``): an
assumption, said in the basis, not a measured figure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from ridgeline.engine.grid import outside_range, outside_spans
from ridgeline.engine.ops import Op

LEVELS = np.linspace(0.0, 1.0, 21)  # the stored quantile levels of each group
MIN_COUNT = 20  # fewest residuals a group needs to stand on its own
SAMPLES = 512  # class-level draws behind an analysis's intervals
SEED = 0
COVERAGES = (50, 80)  # the central intervals reported, in per cent
COVERAGE_KEYS = tuple(str(c) for c in COVERAGES)  # their names in the JSON
POOL = "*"
BYTE_BANDS = ((2**20, "small"), (2**26, "medium"))  # below each bound; 'large' above
FEW_ROWS = 8  # matrix products with at most this many rows are matrix-vector-like
MOST_KEPT = 512  # results a table keeps for the next analyses: draws (a stage's: ~60 KiB), op intervals
UNMEASURED = ""  # the group of an op with no measured residuals of its kind: no spread, its factor is 1
UNPOOLED = ("comm",)  # op kinds the pools (device kernels' residuals) do not stand for


def band(op: Op) -> str:
    """The size band of an op: its bytes (small < 1 MiB ≤ medium < 64 MiB ≤ large) and, for
    a matrix product, whether it has few rows (≤ 8: a matrix-vector product)."""
    nbytes = _largest(op.bytes)
    size = "large"
    for bound, name in BYTE_BANDS:
        if nbytes < bound:
            size = name
            break
    rows = op.dims.get("m")
    if op.matrix and rows is not None:
        return f"{size}/{'few-rows' if _largest(rows) <= FEW_ROWS else 'many-rows'}"
    return size


def _largest(value) -> float:
    """The largest of a number or an array (a plain number skips numpy's slow scalar path)."""
    return float(value) if isinstance(value, (int, float)) else float(np.max(value))


@dataclass(frozen=True)
class IntervalTable:
    """Residual quantiles per group (see the module docstring) and what they rest on."""

    groups: Mapping[str, tuple[int, np.ndarray]]  # group -> (residuals, quantiles at LEVELS)
    basis: str  # 'held-out residuals of ...' or 'spec residuals from N devices ...'
    extra: Mapping[str, Any] = field(default_factory=dict)

    def group_of(self, keys: Sequence[str], size_band: str) -> str:
        """The first group this table holds: the chain ``keys`` within the size band, the
        band's pool, the chain across bands, the whole pool (the size matters most: a small
        kernel's launch-bound residuals do not stand for a large one's)."""
        keys = tuple(keys)
        found = self._found.get((keys, size_band))
        if found is None:
            order = [f"{key}|{size_band}" for key in keys] + [f"{POOL}|{size_band}", *keys]
            found = self._found[keys, size_band] = next((name for name in order if name in self.groups), POOL)
        return found

    def holds(self, keys: Sequence[str]) -> bool:
        """Whether a key of the chain ``keys`` holds a group in some band (residuals of its own)."""
        return any(key in self._classes for key in keys)

    @cached_property
    def _classes(self) -> frozenset[str]:
        """The keys holding a group (a group's name before '|'), the pools aside."""
        return frozenset(g.split("|")[0] for g in self.groups) - {POOL}

    @cached_property
    def _found(self) -> dict[tuple, str]:
        """The groups ``group_of`` found, by its arguments (a few dozen: the classes and bands)."""
        return {}

    def quantiles(self, group: str) -> np.ndarray:
        return self.groups[group][1]

    @cached_property
    def medians(self) -> Mapping[str, float]:
        """Each group's median log residual (its quantiles at 0.5)."""
        return MappingProxyType({g: np.interp(0.5, LEVELS, q) for g, (_, q) in self.groups.items()})

    @cached_property
    def _kept(self) -> dict[tuple, Any]:
        return {}

    def kept(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per ``key`` and kept for the next analyses, whose draws
        are the same (one seed); at most ``MOST_KEPT`` at a time."""
        if key not in self._kept:
            if len(self._kept) >= MOST_KEPT:
                self._kept.clear()
            self._kept[key] = make()
        return self._kept[key]

    def count(self, group: str) -> int:
        return self.groups[group][0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "levels": [round(float(v), 4) for v in LEVELS],
            "min_count": MIN_COUNT,
            **dict(self.extra),
            "groups": {k: {"n": int(n), "q": [round(float(v), 5) for v in q]} for k, (n, q) in self.groups.items()},
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> IntervalTable:
        groups = {str(k): (int(v["n"]), np.asarray(v["q"], dtype=float)) for k, v in raw["groups"].items()}
        extra = {k: v for k, v in raw.items() if k not in ("basis", "levels", "min_count", "groups")}
        return cls(MappingProxyType(groups), str(raw["basis"]), MappingProxyType(extra))


def fit_table(
    log_ratios: Sequence[float], chains: Sequence[Sequence[str]], bands: Sequence[str], basis: str, **extra
) -> IntervalTable:
    """Quantiles of ``log_ratios`` (log measured / predicted) per group: each residual counts
    toward every key of its chain, with and without its band, and toward the pool; groups
    with fewer than ``MIN_COUNT`` are left out (their ops fall back along the chain)."""
    r = np.asarray(log_ratios, dtype=float)
    if r.size == 0:
        raise ValueError("no residuals to fit intervals from")
    members: dict[str, list[int]] = {POOL: list(range(r.size))}
    for i, (chain, size_band) in enumerate(zip(chains, bands)):
        members.setdefault(f"{POOL}|{size_band}", []).append(i)
        for key in chain:
            members.setdefault(key, []).append(i)
            members.setdefault(f"{key}|{size_band}", []).append(i)
    groups = {
        name: (len(idx), np.quantile(r[idx], LEVELS))
        for name, idx in sorted(members.items())
        if len(idx) >= MIN_COUNT or name == POOL
    }
    return IntervalTable(MappingProxyType(groups), basis, MappingProxyType(extra))


def widening(distance) -> np.ndarray:
    """How much an op's spread widens at ``distance`` times past its measured grid (1 inside)."""
    return 1.0 + np.log2(np.maximum(np.asarray(distance, dtype=float), 1.0))


def op_draws(table: IntervalTable, groups: Sequence[str], distances, u: np.ndarray) -> np.ndarray:
    """Per op, its log factor at each class draw: ``u`` is (samples, classes) and each op's
    class is its group's key (the part before '|'); shape (samples, ops). The ops of one
    group share its quantiles at the draws, interpolated once and widened per op; an op of
    no group (``UNMEASURED``) draws 0 (a factor of 1)."""
    names = tuple(g for g in dict.fromkeys(groups) if g != UNMEASURED)
    median = np.array([table.medians[g] for g in names] + [0.0])  # the last column: the unmeasured ops'
    drawn = table.kept(("draws", names, u.tobytes()), lambda: _drawn(table, names, u))
    drawn = np.column_stack([drawn, np.zeros(u.shape[0])])
    at = [names.index(g) if g != UNMEASURED else len(names) for g in groups]
    wide = np.array([widening(d) if d > 1 else 1.0 for d in distances])  # widening(1) is exactly 1
    return np.ascontiguousarray(median[at] + wide * drawn[:, at])  # [samples, ops], C order as the matmul expects


def op_factors(table: IntervalTable, groups: Sequence[str], distances, u: np.ndarray, named: tuple) -> np.ndarray:
    """``exp`` of :func:`op_draws`, kept (read-only): every analysis with these groups,
    distances and uniforms (``named`` names them, as ``shared_draws`` gives it) draws the same."""

    def make() -> np.ndarray:
        factors = np.exp(op_draws(table, groups, distances, u))
        factors.setflags(write=False)
        return factors

    return table.kept(("factors", tuple(groups), tuple(distances), named), make)


def _drawn(table: IntervalTable, groups: Sequence[str], u: np.ndarray) -> np.ndarray:
    """Each group's log residual quantiles at the uniforms of its class, less its median:
    (samples, groups) for ``u`` (samples, classes: the groups' keys in sorted order); the
    interpolation is most of an analysis's intervals, so it is kept (read-only)."""
    if not groups:
        return np.zeros((u.shape[0], 0))
    classes = sorted({g.split("|")[0] for g in groups})
    columns = [u[:, classes.index(g.split("|")[0])] for g in groups]
    drawn = np.column_stack([np.interp(c, LEVELS, table.quantiles(g)) for c, g in zip(columns, groups)])
    drawn = drawn - np.array([table.medians[g] for g in groups])
    drawn.setflags(write=False)
    return drawn


def pass_factors(weights, factors: np.ndarray) -> np.ndarray:
    """A pass's factor per draw: its ops' factors (``op_factors``) weighted by their share of its time."""
    w = np.asarray(weights, dtype=float)
    total = w.sum()
    if total <= 0:
        return np.ones(factors.shape[0])
    return factors @ (w / total)


def centrals(figures: Mapping[str, tuple[np.ndarray, float]]) -> dict[str, dict[str, list[float]]]:
    """The central ``COVERAGES`` intervals of each figure's ``point`` times its ``factors``
    ({name: (factors, point)}), all in one quantile pass: {name: {'80': [lo, hi], ...}}."""
    ends = [end for c in COVERAGES for end in ((1 - c / 100) / 2, (1 + c / 100) / 2)]
    q = np.quantile(np.column_stack([f for f, _ in figures.values()]), ends, axis=0)  # [ends, figures]
    out = {}
    for j, (name, (_, point)) in enumerate(figures.items()):
        out[name] = {
            str(c): [float(point * q[2 * i, j]), float(point * q[2 * i + 1, j])] for i, c in enumerate(COVERAGES)
        }
    return out


def residual_interval(table: IntervalTable, group: str, distance: float = 1.0) -> dict[str, list[float]]:
    """One op's central intervals as factors of its prediction (exp of the group's quantiles;
    an op of no group, ``UNMEASURED``, its point: 1 to 1)."""
    if group == UNMEASURED:
        return {c: [1.0, 1.0] for c in COVERAGE_KEYS}
    ends = table.kept(("op", group, float(distance)), lambda: _residual_ends(table, group, distance))
    return {c: [ends[2 * i], ends[2 * i + 1]] for i, c in enumerate(COVERAGE_KEYS)}


def _residual_ends(table: IntervalTable, group: str, distance: float) -> tuple[float, ...]:
    """(lo, hi) of each of ``COVERAGES`` in turn, as factors."""
    q = table.quantiles(group)
    median = table.medians[group]
    w = widening(distance)
    ends = []
    for c in COVERAGES:
        lo, hi = np.interp([(1 - c / 100) / 2, (1 + c / 100) / 2], LEVELS, q)
        ends += [float(np.exp(median + w * (lo - median))), float(np.exp(median + w * (hi - median)))]
    return tuple(ends)


def grid_distance(op: Op, ceilings) -> float:
    """How many times past its measured grid ``op`` lies, on its farthest dimension (1 inside)."""
    if not (ceilings.attention_tables or ceilings.size_curves or ceilings.row_curves):
        return 1.0  # no measured grid (the datasheet's roofs): nothing is past it
    far = 1.0
    for span in outside_spans(op, ceilings):
        lo, hi = outside_range(span)
        far = max(far, hi / span.high if hi > span.high else 1.0, span.low / lo if 0 < lo < span.low else 1.0)
    return far


def op_groups(ops: Sequence[Op], ceilings, table: IntervalTable) -> tuple[list[str], list[float]]:
    """Each op's group in ``table`` (``op_group``) and its distance past the measured grid."""
    groups = [op_group(op, ceilings, table) for op in ops]
    return groups, [grid_distance(op, ceilings) for op in ops]


def op_group(op: Op, ceilings, table: IntervalTable) -> str:
    """``op``'s group in ``table``, or ``UNMEASURED`` for an ``UNPOOLED`` kind with no
    residuals of its own (a collective: the pools' device kernels do not stand for it)."""
    keys = ceilings.keys(op)
    if op.kind in UNPOOLED and not table.holds(keys):
        return UNMEASURED
    return table.group_of(keys, band(op))


def unmeasured_note(ops: Mapping[str, Sequence[Op]], ceilings, table: IntervalTable) -> str:
    """The kinds of op (a collective by its name) with no measured residuals of their kind
    (``UNMEASURED``), which are in the intervals at their point, in one line ('' when none)."""
    kinds = {
        op.dims.get("collective", op.kind).replace("_", "-")
        for stage in ops.values()
        for op in stage
        if op_group(op, ceilings, table) == UNMEASURED
    }
    if not kinds:
        return ""
    return (
        f"{', '.join(sorted(kinds))}: no measured residuals of their kind; their time is in the interval at their point"
    )


def shared_draws(groups_by_stage: Sequence[Sequence[str]], samples: int = SAMPLES, seed: int = SEED):
    """One draw per class shared by every stage (a class's error is one error): a function
    giving the uniforms of a stage's groups, one column per class in sorted order, and what
    names them (samples, seed, every class, the stage's classes)."""
    classes = tuple(sorted({g.split("|")[0] for groups in groups_by_stage for g in groups if g != UNMEASURED}))

    def u_of(groups: Sequence[str]) -> tuple[np.ndarray, tuple]:
        own = tuple(sorted({g.split("|")[0] for g in groups if g != UNMEASURED}))
        return _class_uniforms(samples, seed, classes, own), (samples, seed, classes, own)

    return u_of


@functools.lru_cache(maxsize=256)
def _class_uniforms(samples: int, seed: int, classes: tuple[str, ...], own: tuple[str, ...]) -> np.ndarray:
    """The columns of ``own``'s classes among ``classes``' seeded uniforms (read-only)."""
    u = _uniforms(samples, len(classes), seed)[:, [classes.index(c) for c in own]]
    u.setflags(write=False)
    return u


@functools.lru_cache(maxsize=64)
def _uniforms(samples: int, classes: int, seed: int) -> np.ndarray:
    """The seeded uniforms, (samples, classes): the same at every call, so made once (read-only)."""
    u = np.random.default_rng(seed).random((samples, classes))
    u.setflags(write=False)
    return u


def summary(table: IntervalTable, groups: Sequence[str], extrapolated: int, unmeasured: str = "") -> dict[str, Any]:
    """What an analysis's intervals rest on: the table's basis, the groups used and their
    counts, and the kinds of op with no residuals of their own (``unmeasured_note``)."""
    used = sorted(set(groups) - {UNMEASURED})
    return {
        "basis": table.basis,
        "samples": SAMPLES,
        "seed": SEED,
        "groups": {g: table.count(g) for g in used},
        "widened_past_grid": extrapolated,
        **({"unmeasured": unmeasured} if unmeasured else {}),
    }


def analysis_intervals(
    ops: Mapping[str, Sequence[Op]],
    weights: Mapping[str, Any],
    ceilings,
    table: IntervalTable,
    points: Mapping[str, Any],
) -> dict[str, Any]:
    """The central intervals of an analysis's headline figures. ``ops`` and ``weights``
    (count x time per op) per stage ('prefill', 'decode'); ``points``: 'ttft_s', 'tpot_s',
    'total_s', 'tokens_per_s' and 'tokens' (a generation), else 'prefill_s' and 'decode_s'
    (one pass each). Both stages share their classes' draws."""
    groups = {s: op_groups(ops[s], ceilings, table) for s in ops}
    u_of = shared_draws([g for g, _ in groups.values()])
    f = {s: pass_factors(np.ravel(weights[s]), op_factors(table, g, dist, *u_of(g))) for s, (g, dist) in groups.items()}
    figures: dict[str, tuple[np.ndarray, float]] = {}
    if "ttft_s" in points:
        ttft, total = float(points["ttft_s"]), float(points["total_s"])
        totals = ttft * f["prefill"] + (total - ttft) * f["decode"]
        figures["ttft_s"] = (f["prefill"], ttft)
        if points.get("tpot_s") is not None:
            figures["tpot_s"] = (f["decode"], float(points["tpot_s"]))
        figures["total_s"] = (totals, 1.0)
        figures["tokens_per_s"] = (float(points["tokens"]) / totals, 1.0)
    else:
        figures["prefill_s"] = (f["prefill"], float(points["prefill_s"]))
        figures["decode_s"] = (f["decode"], float(points["decode_s"]))
    out: dict[str, Any] = centrals(figures)
    out["ops"] = {s: [residual_interval(table, g, d) for g, d in zip(*groups[s])] for s in groups}
    every = [g for g, _ in groups.values()]
    far = sum(int(d > 1.0) for _, dist in groups.values() for d in dist)
    unmeasured = unmeasured_note(ops, ceilings, table)
    return {**out, **summary(table, [g for gs in every for g in gs], far, unmeasured)}


# --- stage factors for many points at once (sweeps, the serving simulator) -------------


def stage_factors(
    ops: Mapping[str, Sequence[Op]], weights: Mapping[str, Any], ceilings, table: IntervalTable
) -> dict[str, np.ndarray]:
    """Per stage, the factor of its time at each class draw, for every point at once:
    ``weights[stage]`` is count x time per op, (ops,) or (ops, points); the result is
    (samples,) or (samples, points). The stages share their classes' draws, as in
    :func:`analysis_intervals`; an op's group is its band at its largest point."""
    groups = {s: op_groups(ops[s], ceilings, table) for s in ops}
    u_of = shared_draws([g for g, _ in groups.values()])
    out = {}
    for s, (g, dist) in groups.items():
        w = np.asarray(weights[s], dtype=float).reshape(len(g), -1)  # [ops, points]
        total = w.sum(axis=0)
        share = w / np.where(total > 0, total, 1.0)
        f = op_factors(table, g, dist, *u_of(g)) @ share  # [samples, points]
        f[:, total <= 0] = 1.0
        out[s] = f if np.ndim(weights[s]) > 1 else f[:, 0]
    return out


def bands(factors: np.ndarray, point) -> dict[str, np.ndarray]:
    """Per point, the ends of the central ``COVERAGES`` intervals of ``point`` times
    ``factors`` ((samples, points)): {'lo80': [points], 'hi80': ..., 'lo50': ..., 'hi50': ...}."""
    out = {}
    for c in COVERAGES:
        lo, hi = np.quantile(factors, [(1 - c / 100) / 2, (1 + c / 100) / 2], axis=0)
        out[f"lo{c}"], out[f"hi{c}"] = lo * point, hi * point
    return out


def memory_risk(peak: float, usable: float, peaks: Mapping[str, Any] | None) -> dict[str, Any]:
    """fits / at risk / does not fit, from the predicted ``peak`` and the measured-over-
    predicted peak ratios of committed end-to-end runs (``peaks``: 'low', 'high', 'basis';
    None: none measured, and "at risk" is never said without them)."""
    if peaks is None:
        return {
            "fit": "fits" if peak <= usable else "does not fit",
            "peak_basis": "no measured peaks on this kind of device",
        }
    lo, hi = float(peak) * peaks["low"], float(peak) * peaks["high"]
    fit = "does not fit" if peak > usable else ("at risk" if hi > usable else "fits")
    return {"fit": fit, "peak_interval_bytes": [lo, hi], "peak_basis": peaks["basis"]}
