"""CI gate on measured vs predicted: the bounds and the verdict (pure; see docs/bounds.md).

``.ci/validate_gate.py`` runs a quick CPU calibration and validation and the snapshot replay,
then asks :func:`verdict` whether the calibrated errors stay inside the bounds below. The
bounds come from repeated quick runs on the development machine (docs/bounds.md; RESULTS.md lists the runs):
the worst observed value plus headroom for a noisier CI machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

# calibrated |predicted / measured - 1| over all ok cases of a quick CPU validation
MAX_MEDIAN_ABS_ERROR = 0.20
MAX_P90_ABS_ERROR = 0.45


def verdict(
    result: Mapping[str, Any],
    max_median: float = MAX_MEDIAN_ABS_ERROR,
    max_p90: float = MAX_P90_ABS_ERROR,
    worst: int = 8,
) -> list[str]:
    """Reasons to fail (empty: pass): any errored case, or calibrated median / p90 |error|
    over its bound (then the cases with the largest errors are named)."""
    rows = result["rows"]
    problems = [f"case errored: {r['name']}: {r['reason']}" for r in rows if r["status"] == "error"]
    good = [r for r in rows if r["status"] == "ok"]
    if not good:
        return problems + ["no case was measured"]
    err = np.abs(np.array([r["error_calibrated"] for r in good], dtype=float))
    median, p90 = float(np.median(err)), float(np.quantile(err, 0.9))
    if median > max_median or p90 > max_p90:
        order = np.argsort(-err)[:worst]
        named = ", ".join(f"{good[i]['name']} ({good[i]['error_calibrated']:+.0%})" for i in order)
        problems.append(
            f"calibrated |error| median {median:.1%} (bound {max_median:.0%}), "
            f"p90 {p90:.1%} (bound {max_p90:.0%}); largest: {named}"
        )
    return problems


def headline(result: Mapping[str, Any]) -> str:
    good = [r for r in result["rows"] if r["status"] == "ok"]
    parts = []
    for mode in ("spec", "calibrated"):
        err = np.abs(np.array([r[f"error_{mode}"] for r in good], dtype=float))
        if err.size:
            parts.append(f"{mode} median {np.median(err):.1%} p90 {np.quantile(err, 0.9):.1%}")
    return f"{len(good)} cases ok; " + "; ".join(parts)
