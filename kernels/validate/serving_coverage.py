"""Serving-level coverage: the committed serving runs (``reports/validation/serving``) of a
profile's device, each simulated again as ``ridgeline simulate-check --resimulate`` does
(``cb_server.served_of``: the run's trace, scheduler, data type and execution, the spec host
as recorded; the host terms the run records), with the simulator's intervals
(:mod:`ridgeline.serving.intervals`) from the profile's residual table.

The intervals describe the run's percentiles (all steps scaled by one factor quantile), not
one request's time, so the checks are the measured p50 and p90 of TTFT and of TPOT (a
request's (latency - TTFT) / (output - 1)) against the intervals of the simulated ones. A run
whose host terms were fitted to its own steps is not held out and is not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ridgeline.engine.intervals import COVERAGES, IntervalTable

FIGURES = ("ttft_s", "tpot_s")
STATS = ("p50", "p90")
COLUMNS = ["figure", "where", "ratio", *[f"{p}{c}" for c in COVERAGES for p in ("in", "half", "side")]]


def serving_runs(device_key: str) -> list[tuple[Path, dict[str, Any]]]:
    """The committed serving runs measured on ``device_key``, with their data."""
    from kernels.servecheck.cb_server import SERVING_DIR, _load_run

    runs = [(p, _load_run(p)) for p in sorted(SERVING_DIR.glob("serving-*.json"))]
    return [(p, data) for p, data in runs if data["meta"].get("device_key") == device_key]


def measured_tpot(data: dict[str, Any]) -> np.ndarray:
    """Each request's measured TPOT: (latency - TTFT) / (output - 1); NaN for one token."""
    m, out = data["measured"], np.asarray(data["trace"]["output_tokens"], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(
            out > 1, (np.asarray(m["latency_s"], float) - np.asarray(m["ttft_s"], float)) / (out - 1), np.nan
        )


def run_intervals(path: Path, data: dict[str, Any], profile: Path, table: IntervalTable):
    """The run simulated again with ``profile`` and its recorded host terms (as ``resimulate``
    does), and the intervals ``table`` puts on its summary."""
    from kernels.e2e.e2e import engine_settings
    from kernels.servecheck.cb_server import served_of, with_host
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.intervals import serving_intervals
    from ridgeline.serving.simulator import simulate_deployment, step_cost_of

    served = served_of(data, path, profile)
    sched = with_host(served.sched, data.get("overhead"))
    settings = engine_settings(served.dtype, served.execution)
    d = resolve(served.config, served.spec, settings=settings, ceilings=served.calibrated, intervals=(table, ""))
    point = simulate_deployment(d, served.arrivals, sched)
    cost = step_cost_of(d, sched)
    again = lambda scale: simulate_deployment(d, served.arrivals, sched, step_scale=scale, cost=cost)  # noqa: E731
    return point, serving_intervals(d, served.arrivals, sched, point, again)


def run_checks(path: Path, data: dict[str, Any], profile: Path, table: IntervalTable, name: str) -> list[dict]:
    """The run's measured TTFT and TPOT p50 and p90 against the intervals of the simulated ones."""
    from ridgeline.serving.simulator import percentiles

    point, intervals = run_intervals(path, data, profile, table)
    clock = str(data["meta"].get("clock", "")).split(":")[0] or "unrecorded"
    host = "its recorded host terms" if data.get("overhead") else "no host terms"
    name = f"{Path(name).name} ({clock} clock, {host}; queueing p50 measured "
    name += f"{np.nanmedian(data['measured']['queue_s']):.3g} s, simulated {point.summary['queue_s']['p50']:.3g} s)"
    measured = {
        "ttft_s": percentiles(np.asarray(data["measured"]["ttft_s"], float)),
        "tpot_s": percentiles(measured_tpot(data)),
    }
    out = []
    for figure in FIGURES:
        for stat in STATS:
            got, at = measured[figure][stat], point.summary[figure][stat]
            check = {"figure": figure, "where": name, "ratio": got / at}
            for c in COVERAGES:
                lo, hi = intervals[figure][stat][str(c)]
                check[f"in{c}"], check[f"half{c}"] = lo <= got <= hi, (hi - lo) / (2 * at)
                check[f"side{c}"] = 1 if got > hi else -1 if got < lo else 0
            out.append(check)
    return out


def serving_checks(
    device_key: str, profile: Path, table: IntervalTable, log: Callable[[str], None]
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The checks of every held-out serving run of ``device_key``; the files checked, and the
    runs their host terms were fitted to."""
    from ridgeline.errors import RidgelineError
    from ridgeline.io.catalog import REPORTS_DIR

    rows, checked, fitted = [], [], []
    for path, data in serving_runs(device_key):
        name = str(path.relative_to(REPORTS_DIR.parent))
        source = (data.get("overhead") or {}).get("from")
        if source and Path(source).name == path.name:
            log(f"serving: {name} not checked: its host terms were fitted to its own steps")
            continue
        try:
            rows += run_checks(path, data, profile, table, name)
        except RidgelineError as err:  # a run the profile cannot price
            log(f"serving: {name} not checked: {err}")
            continue
        checked.append(name)
        if source and source not in fitted:
            fitted.append(source)
    log(f"serving: {len(rows)} checks in {len(checked)} files")
    return pd.DataFrame(rows, columns=COLUMNS), checked, fitted
