"""Predictions for recorded shapes, without torch: used by ``validate`` and by CI's replay.

A validation snapshot (``reports/validation/*.json``) records, per case, the recipe of its Op
and the measured time, plus the ceilings each mode used. :func:`replay_snapshot` rebuilds
every Op with the *current* engine (``cases.build_op``), predicts it again with the recorded
ceilings through ``ridgeline.engine.roofline.evaluate``, and compares the new error with the
recorded one: an engine change that makes agreement worse beyond a margin shows up, case by
case, in CI on a machine without the device that measured it.

Run it: ``python -m kernels.validate.replay [snapshot.json ...]`` (exit 1 naming the cases that moved).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernels.bench.cases import case_from_dict
from ridgeline.engine.roofline import Ceilings, evaluate
from ridgeline.io.catalog import VALIDATION_DIR

REPLAY_MARGIN = 0.05  # |error| may grow by at most 5 points of relative error per case
MODES = ("spec", "calibrated")


def predict(ops: Sequence, ceilings: Ceilings) -> dict[str, np.ndarray]:
    """Per-call seconds, bound and intensity of each op (count ignored: one kernel call)."""
    table = evaluate(list(ops), ceilings)
    return {
        "time_s": np.ravel(table["time_s"]).astype(float),
        "bound": np.ravel(table["bound"]).astype(str),
        "intensity": np.ravel(table["intensity"]).astype(float),
        "perf": np.ravel(table["perf"]).astype(float),
    }


def percent(value: float | None, signed: bool = False) -> str:
    """A summary figure as a percentage; '-' where no row of the group was priced (NaN is
    how a pandas frame carries that None)."""
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def relative_error(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Signed: predicted / measured - 1 (positive = the model is slower than reality)."""
    return np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0


def replay_snapshot(snapshot: Mapping[str, Any], margin: float = REPLAY_MARGIN) -> dict[str, Any]:
    """Recompute both modes' predictions for a snapshot's ok rows; list the cases whose
    |error| grew by more than ``margin``."""
    ok = [r for r in snapshot["rows"] if r.get("status") == "ok"]
    worse, changed = [], 0
    out: dict[str, Any] = {"cases": len(ok)}
    for mode in MODES:
        rows = [r for r in ok if r.get(f"error_{mode}") is not None]  # unpriced rows stay unpriced
        ops = [case_from_dict(r).op for r in rows]
        measured = np.array([r["measured_s"] for r in rows], dtype=float)
        ceilings = Ceilings.from_dict(snapshot["ceilings"][mode])
        now = relative_error(predict(ops, ceilings)["time_s"], measured)
        then = np.array([r[f"error_{mode}"] for r in rows], dtype=float)
        changed += int(np.sum(~np.isclose(now, then, rtol=1e-9, atol=1e-12)))
        for r, a, b in zip(rows, then, now):
            if abs(b) > abs(a) + margin:
                worse.append({"case": r["name"], "mode": mode, "recorded": float(a), "now": float(b)})
        out[f"median_abs_{mode}"] = float(np.median(np.abs(now))) if rows else 0.0
    out.update(worse=worse, changed=changed)
    return out


# files beside the snapshots that hold no measurement: predictions of figures others published
NOT_SNAPSHOTS = ("published.json",)


def snapshots(folder: Path = VALIDATION_DIR) -> list[Path]:
    """The kernel snapshots (not e2e results, not the published figures' predictions) directly in ``folder``."""
    skip = NOT_SNAPSHOTS  # and the coverage files (kernels.validate.intervals): no kernel rows
    return sorted(
        p
        for p in folder.glob("*.json")
        if "e2e" not in p.name and p.name not in skip and not p.name.startswith("coverage-")
    )


def tracked_snapshots(folder: Path = VALIDATION_DIR) -> list[Path]:
    """The snapshots in ``folder`` that git tracks: the committed baselines, never a run a
    user left there. Outside a git checkout (an sdist), every snapshot in the folder."""
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", "."], cwd=folder, capture_output=True, text=True, timeout=30, check=True
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return snapshots(folder)
    tracked = {(folder / name).resolve() for name in listed}
    return [p for p in snapshots(folder) if p.resolve() in tracked]


def main(argv: Sequence[str] | None = None) -> int:
    paths = [Path(a) for a in (argv if argv is not None else sys.argv[1:])] or snapshots()
    failed = False
    for path in paths:
        result = replay_snapshot(json.loads(path.read_text()))
        status = "FAIL" if result["worse"] else "ok"
        print(
            f"{status} {path.name}: {result['cases']} cases, {result['changed']} predictions "
            f"changed, median |error| spec {result['median_abs_spec']:.1%}, "
            f"calibrated {result['median_abs_calibrated']:.1%}"
        )
        for w in result["worse"]:
            print(f"  worse ({w['mode']}): {w['case']}: {w['recorded']:+.1%} -> {w['now']:+.1%}")
        failed |= bool(result["worse"])
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
