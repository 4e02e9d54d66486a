"""Where the time goes: measured minus the datasheet (``spec``) prediction, split into parts.

A waterfall starts at the spec prediction and adds one effect at a time, each the difference
of two predictions that differ by that effect alone, until the last prediction; what is left
to the measurement is the remainder, reported as a part of its own:

    spec + kernel efficiency + launch and host + scheduler and batching + queueing
         + preemption + remainder = measured

- kernel efficiency: the calibrated roofs and fractions (no per-op fixed cost, no launch
  gap, no host dispatch) minus spec;
- launch and host: the calibrated profile's per-op fixed costs and its execution terms
  (launch gaps, host dispatch in the run's execution mode) and, for serving, the host
  seconds per step and per request measured in the run's own steps;
- scheduler and batching: a request's service time in the trace minus its time alone
  (serving only: sharing steps with other requests);
- queueing: the simulated wait from arrival to admission (serving only);
- preemption: the recorded KV cache's limit against one large enough for every request
  at once (its preemptions and the admissions held for blocks; serving only).

A part that the record cannot separate is None in ``chain`` and 0 in the result, with a
note saying why: its effect stays in the remainder, never invented. This module is pure
arithmetic on numbers already predicted (``kernels.e2e.e2e`` and
``kernels.servecheck.cb_server`` predict them); it reads and writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ridgeline.engine.roofline import Ceilings
from ridgeline.errors import RidgelineError

PARTS = ("kernel_efficiency", "launch_host", "scheduler_batching", "queueing", "preemption", "remainder")
LABELS = {
    "kernel_efficiency": "kernel efficiency",
    "launch_host": "launch and host",
    "scheduler_batching": "scheduler and batching",
    "queueing": "queueing",
    "preemption": "preemption",
    "remainder": "remainder",
}
E2E_METRICS = ("ttft", "tpot")
SERVING_METRICS = ("ttft", "latency")  # means over the trace's requests
FIXED_BATCH = "a fixed batch run back to back: no scheduler, no queue, no preemption"


def without_launch(ceilings: Ceilings) -> Ceilings:
    """The calibrated roofs and fractions alone: no per-op fixed seconds, launch gaps, host
    dispatch or kernel counts (the kernels' own efficiency; what ``launch_host`` adds back)."""
    return replace(ceilings, overhead_s={}, launch_gap_s=0.0, host_s={}, kernels={}, timing="")


def _finite(value: Any, what: str) -> float:
    if value is None or isinstance(value, bool) or not math.isfinite(float(value)):
        raise RidgelineError(f"waterfall: {what} is {value!r}; a waterfall needs a finite number of seconds")
    return float(value)


def split(
    measured: float, spec: float, chain: Mapping[str, float | None], notes: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The parts from ``spec`` to ``measured``. ``chain`` maps parts (in ``PARTS`` order,
    the remainder excluded) to the prediction *after* adding that effect, or None where it
    cannot be separated (the part is 0, its note says why, the remainder holds it).
    Exact by construction: the remainder is measured less spec and the other parts."""
    measured, spec = _finite(measured, "the measured time"), _finite(spec, "the spec prediction")
    unknown = set(chain) - set(PARTS[:-1])
    if unknown:
        raise RidgelineError(f"waterfall: unknown part(s) {sorted(unknown)}; use {', '.join(PARTS[:-1])}")
    parts, previous, out_notes = {}, spec, dict(notes or {})
    for part in PARTS[:-1]:
        after = chain.get(part)
        if after is None:
            parts[part] = 0.0
            out_notes.setdefault(part, "not separable from this record: left in the remainder")
            continue
        after = _finite(after, f"the prediction with {LABELS[part]}")
        parts[part] = after - previous
        previous = after
    reached = spec
    for part in PARTS[:-1]:  # summed in the order a reader adds them, so they meet measured
        reached += parts[part]
    parts["remainder"] = measured - reached
    return {
        "spec_s": spec,
        "parts": parts,
        "predicted_s": previous,
        "measured_s": measured,
        "separated": [p for p in PARTS[:-1] if chain.get(p) is not None],
        "notes": {p: out_notes[p] for p in PARTS if p in out_notes},
    }


def e2e_waterfall(row: Mapping[str, Any], metric: str) -> dict[str, Any]:
    """One e2e row's waterfall for ``metric`` (ttft or tpot) from its predictions: spec,
    ``kernels`` (calibrated without launch and host terms) and calibrated."""
    m = f"{metric}_s"
    kernels, calibrated = row.get(f"predicted_kernels_{m}"), row.get(f"predicted_calibrated_{m}")
    notes = {p: FIXED_BATCH for p in ("scheduler_batching", "queueing", "preemption")}
    chain = {"kernel_efficiency": kernels, "launch_host": calibrated}
    if calibrated is None:
        why = row.get("calibrated_unpriced") or "no calibrated profile of this device"
        notes.update(kernel_efficiency=f"no calibrated prediction ({why})", launch_host="no calibrated prediction")
        chain = {}
    elif kernels is None:
        notes.update(
            kernel_efficiency=(
                "this record holds no prediction without launch and host terms (ridgeline e2e "
                "--repredict FILE makes one): calibrated minus spec is left in the remainder"
            ),
            launch_host="not separable from kernel efficiency in this record",
        )
        chain = {}
    return split(row[f"measured_{m}"], row[f"predicted_spec_{m}"], chain, notes)


def e2e_waterfalls(row: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Both metrics of one e2e row."""
    return {metric: e2e_waterfall(row, metric) for metric in E2E_METRICS}


def serving_waterfall(
    measured: Mapping[str, float], means: Mapping[str, Mapping[str, float | None]], notes: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """A serving run's waterfalls (mean TTFT and mean latency over its requests) from the
    means of the simulations that differ by one effect each (``cb_server.waterfall_means``):
    ``spec_alone``, ``kernels_alone``, ``host_alone`` (each request served by itself), and
    over the trace with an unbounded KV cache ``service`` (latency less queueing),
    ``unbounded`` (with queueing), and ``recorded`` (the run's own KV cache)."""
    out = {}
    for metric in SERVING_METRICS:
        chain = {
            "kernel_efficiency": means["kernels_alone"][metric],
            "launch_host": means["host_alone"][metric],
            "scheduler_batching": means["service"][metric],
            "queueing": means["unbounded"][metric],
            "preemption": means["recorded"][metric],
        }
        out[metric] = split(measured[metric], means["spec_alone"][metric], chain, notes)
    return out


def waterfall_lines(name: str, waterfall: Mapping[str, Any]) -> list[str]:
    """One line: spec, each part signed, measured (ms), and the notes under it."""
    parts, notes = waterfall["parts"], waterfall["notes"]
    cells = ", ".join(f"{LABELS[p]} {parts[p] * 1e3:+.2f}" for p in PARTS if notes.get(p) != FIXED_BATCH)
    lines = [
        f"waterfall {name}: spec {waterfall['spec_s'] * 1e3:.2f} ms, {cells}, measured {waterfall['measured_s'] * 1e3:.2f} ms"
    ]
    return lines + [f"  {LABELS[p]}: {note}" for p, note in notes.items()]
