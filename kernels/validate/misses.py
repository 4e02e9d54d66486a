"""The misses of a coverage check, each with its cause read off the checks themselves.

A level misses when its share inside the nominal 50 % or 80 % interval is outside 40–60 % or
70–90 % (issue 27), or when its median 80 % half-width is above the goal (kernels 10 %, e2e
TPOT 15 %). The cause says, from the checks that missed: whether the interval is too narrow
on both sides, biased to one side (the measurements slower or faster than its ends) or too
wide; how far the measurements fall from the prediction against the interval's width; where
most misses are (a kernel class and size band, an e2e row, a serving run); and what the fit
rests on. It is a description of the data, not a fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ridgeline.engine.intervals import COVERAGES

WIDTH_GOALS = {"kernel-lomo": 0.10, "kernel-snapshots": 0.10, "e2e": 0.15}  # median 80 % half-width
ONE_SIDE = 0.75  # a miss is a bias when this share of the checks outside lie on one side


def times(x: float) -> str:
    return f"×{x:.3g}"


def spread(ratio: pd.Series) -> str:
    """The central 80 % of measured / predicted."""
    lo, hi = np.quantile(ratio, [0.1, 0.9])
    return f"the central 80 % of measured / predicted spans {times(lo)}–{times(hi)}"


def worst(checks: pd.DataFrame, outside: pd.Series, what: str) -> str:
    """Where most of the ``outside`` checks (``what``) lie, with their share and median ratio."""
    counts = checks.loc[outside, "where"].value_counts()
    where = counts.index[0]
    mine = checks["where"] == where
    return (
        f"most in {where} ({counts.iloc[0]} of the {int(outside.sum())} {what}; {int(mine.sum())} checks there, "
        f"median measured / predicted {times(checks.loc[mine, 'ratio'].median())})"
    )


def coverage_cause(checks: pd.DataFrame, c: int, rests_on: str) -> str:
    """Why the ``c`` % interval holds too few or too many of ``checks``."""
    outside = ~checks[f"in{c}"].astype(bool)
    above, below = int((checks[f"side{c}"] > 0).sum()), int((checks[f"side{c}"] < 0).sum())
    ratio, half = checks["ratio"].median(), checks[f"half{c}"].median()
    share = outside.mean()
    if share < 1 - (c + 10) / 100:
        return (
            f"too wide: median half-width {half:.1%}, while {spread(checks['ratio'])} "
            f"(median {times(ratio)}); {rests_on}"
        )
    if max(above, below) >= ONE_SIDE * (above + below):
        side = "slower than its upper end" if above > below else "faster than its lower end"
        shape = f"biased: {max(above, below)} of {above + below} outside measured {side}"
        where = worst(checks, checks[f"side{c}"] == (1 if above > below else -1), f"measured {side}")
    else:
        shape = f"too narrow on both sides: {above} above its upper end, {below} below its lower end"
        where = worst(checks, outside, "outside")
    return (
        f"{shape}; median measured / predicted {times(ratio)} against a median half-width of {half:.1%}, "
        f"and {spread(checks['ratio'])}; {where}; {rests_on}"
    )


def by_model(frame: pd.DataFrame) -> str:
    """Each model's median measured / predicted and the central 80 % of its own residuals:
    models far apart against their own spread leave a fold's table too narrow."""
    parts = []
    for model, r in sorted(frame.groupby("model")["r"]):
        lo, mid, hi = np.exp(np.quantile(r, [0.1, 0.5, 0.9]))
        parts.append(f"{model or 'no model'} {times(mid)} ({times(lo)}–{times(hi)}, {len(r)} rows)")
    return "per model, median measured / predicted (central 80 %): " + ", ".join(parts)


def width_cause(checks: pd.DataFrame, goal: float, rests_on: str) -> str:
    """Why the median 80 % half-width is above the goal: the measurements' own scatter, or
    intervals wider than it; and the most checked place above the goal."""
    lo, hi = np.quantile(checks["ratio"], [0.1, 0.9])
    scatter = (hi - lo) / 2
    shape = (
        f"the measurements scatter that widely ({spread(checks['ratio'])}, a half-width of {scatter:.1%})"
        if scatter > goal
        else f"the intervals are wider than the measurements' scatter ({spread(checks['ratio'])}, a half-width of {scatter:.1%})"
    )
    wide = checks[checks["half80"] > goal]
    top = wide["where"].value_counts().index[0]
    mine = wide["where"] == top
    return (
        f"{shape}; {len(wide)} of {len(checks)} checks above the goal, most in {top} ({int(mine.sum())}, "
        f"median half-width {wide.loc[mine, 'half80'].median():.1%}); {rests_on}"
    )


def level_misses(name: str, checks: pd.DataFrame, summary: dict[str, Any], rests_on: str) -> list[dict[str, Any]]:
    """A level's misses: each interval outside its band, and the width above its goal."""
    out = []
    for c in COVERAGES:
        if summary["n"] and not summary[f"holds_{c}"]:
            out.append(
                {
                    "level": name,
                    "figure": f"{c} % interval",
                    "band": f"{c - 10}–{c + 10} % inside",
                    "value": round(summary[f"coverage_{c}"], 4),
                    "cause": coverage_cause(checks, c, rests_on),
                }
            )
    goal = WIDTH_GOALS.get(name)
    picked = checks[checks["figure"] == "tpot_s"] if name == "e2e" else checks
    if goal is not None and len(picked):
        half = float(picked["half80"].median())
        if half > goal:
            out.append(
                {
                    "level": name,
                    "figure": "median 80 % half-width" + (" of TPOT" if name == "e2e" else ""),
                    "band": f"≤ {goal:.0%}",
                    "value": round(half, 4),
                    "cause": width_cause(picked, goal, rests_on),
                }
            )
    return out
