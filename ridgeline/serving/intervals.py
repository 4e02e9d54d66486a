"""Serving intervals: the simulator's percentiles with the 80 % and 50 % intervals that the
profile's residuals put on every step's time (:mod:`ridgeline.engine.intervals`).

A latency percentile rises with the steps' costs, so a quantile of the step-time factor
gives that quantile of the percentile: the run is simulated again with every step's forward
scaled by the 10, 25, 75 and 90 % quantiles of the factor (four runs more, on the same
arrivals). The factor is a stage's: prefill chunks take the prefill factor of one prompt
chunk, decodes the decode factor of the run's mean batch at its mean context, and a mixed
step the two blended by its share of prompt tokens. The two stages share their classes'
draws and are taken at the same quantile (comonotone: the wider choice when they do not
move together exactly). Throughput falls as the factor rises; each interval is the two runs'
figures in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ridgeline.engine.analyze import plain
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.intervals import stage_factors, unmeasured_note
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.roofline import evaluate
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import SimResult

LEVELS = (10, 25, 75, 90)  # step-factor quantiles simulated, per cent
NESTED = {"80": (10, 25, 75, 90), "50": (25, 75)}  # the factor quantiles each central interval spans
SURE = 90  # the rate search's factor quantile: meets the SLOs with probability >= 0.9
LATENCIES = ("queue_s", "ttft_s", "tpot_s", "latency_s")
RATES = ("requests_per_s", "output_tokens_per_s")
METHOD = (
    "4 more runs with every step's forward scaled by the 10/25/75/90 % quantiles of the "
    "step-time factor (prefill chunks and decodes each by their stage's, comonotone)"
)


def step_factors(d: Deployment, arrivals: Arrivals, point: SimResult, s: Scheduler) -> dict[int, tuple[float, float]]:
    """Per quantile level (``LEVELS``), the (prefill, decode) factors of a step's forward:
    a prompt chunk of the mean prompt (at most the token budget), and the run's mean batch
    decoding at its mean context (prompt + half the output)."""
    prompt, output = float(np.mean(arrivals.prompt)), float(np.mean(arrivals.output))
    chunk = max(int(min(prompt, s.token_budget)), 1)
    batch = max(round(float(point.summary["mean_running"])), 1)
    ops = {
        "prefill": stage_ops(d.model, "prefill", 1, chunk, d.plan),
        "decode": stage_ops(d.model, "decode", batch, int(prompt + output / 2), d.plan),
    }
    tables = {stage: evaluate(o, d.ceilings) for stage, o in ops.items()}
    weights = {stage: np.ravel(t["count"] * t["time_s"]) for stage, t in tables.items()}
    f = stage_factors(ops, weights, d.ceilings, d.intervals)
    return {q: (float(np.quantile(f["prefill"], q / 100)), float(np.quantile(f["decode"], q / 100))) for q in LEVELS}


def summary_intervals(runs: dict[int, SimResult]) -> dict[str, Any]:
    """The central intervals of every percentile (and mean) of ``LATENCIES`` and of the
    ``RATES``, from the runs at each factor quantile: each interval spans the runs at its
    quantiles and those of every narrower interval, so the 50 % band lies inside the 80 %
    one even where a percentile does not move monotonically with the factor (a queue that
    forms or clears between two factors)."""

    def span(values: list) -> list:
        return [None, None] if any(v is None for v in values) else [min(values), max(values)]  # None: no such figure

    def bands(figure: Callable[[SimResult], float | None]) -> dict[str, list]:
        return {c: span([figure(runs[q]) for q in levels]) for c, levels in NESTED.items()}

    out: dict[str, Any] = {}
    for key in LATENCIES:
        out[key] = {stat: bands(lambda r, k=key, s=stat: r.summary[k][s]) for stat in runs[LEVELS[0]].summary[key]}
    for key in RATES:
        out[key] = bands(lambda r, k=key: r.summary[k])
    return out


def serving_intervals(
    d: Deployment, arrivals: Arrivals, s: Scheduler, point: SimResult, run: Callable[[tuple[float, float]], SimResult]
) -> dict[str, Any]:
    """The intervals of ``point``'s summary (``run(step_scale)`` simulates the same arrivals
    with the forward scaled), what they rest on and the factors used; or why there are none."""
    if d.intervals is None:
        return {"none": d.no_interval or "no measured residuals for these ceilings"}
    factors = step_factors(d, arrivals, point, s)
    runs = {q: run(factors[q]) for q in LEVELS}
    ops = {stage: stage_ops(d.model, stage, 1, 1, d.plan) for stage in ("prefill", "decode")}  # the kinds of op
    unmeasured = unmeasured_note(ops, d.ceilings, d.intervals)
    return plain(
        {
            **summary_intervals(runs),
            "basis": f"{d.intervals.basis}; {METHOD}{'; ' + unmeasured if unmeasured else ''}",
            "step_factors": {str(q): {"prefill": p, "decode": f} for q, (p, f) in factors.items()},
        }
    )
