"""The machine's state against a profile's: the roofs a profile records, measured again now.

A profile's fractions hold in the state its roofs were measured in. On a shared machine
(a cloud VM) another tenant can take half the memory rate or slow the core for hours: on
the development Zen 3 host the m = 1 stream fell from 28 to 14 GB/s between one day and
the next, and every prediction from the earlier profile came out about 2x too fast.
``ridgeline calibrate --check`` and every ``validate`` measure the profile's own roofs again
with calibration's own code (the copy, each GEMM, the one-element dispatch, and on a CPU the
one-row product that set its memory roof) and say how far each one moved; ``validate``
records it beside its errors (``meta.machine_state``), before and after its cases.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from statistics import geometric_mean
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.io.profile import profile_ceilings
from ridgeline.io.resolve import measured_profile

DRIFT = 0.10  # a roof this far (as a ratio) from its calibration value: the machine drifted


def recorded_roofs(profile: Mapping[str, Any]) -> dict[str, float]:
    """The roofs a profile measured, as rates (higher is faster): its copy and GEMM runs
    (geometric mean of the runs before and after its cases), the stream case, and the
    dispatch as calls per microsecond."""
    m = profile.get("measurements") or {}
    out = {}
    if (m.get("copy") or {}).get("gb_s"):
        out["copy"] = geometric_mean(m["copy"].get("runs_gb_s") or [m["copy"]["gb_s"]])
    if (m.get("stream") or {}).get("gb_s"):
        out["stream"] = float(m["stream"]["gb_s"])
    for dtype, g in (m.get("gemm") or {}).items():
        out[f"{dtype} GEMM"] = geometric_mean(g.get("runs_tops") or [g["tops"]])
    if (m.get("dispatch") or {}).get("us"):
        out["dispatch"] = 1.0 / float(m["dispatch"]["us"])
    return out


def state_ratios(profile: Mapping[str, Any], runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each recorded roof's speed now over its speed at calibration (geometric mean over
    ``runs``, the rates ``measure_state`` returned); roofs a run did not measure are left out."""
    then = recorded_roofs(profile)
    return {
        k: round(geometric_mean([r[k] for r in runs]) / then[k], 3)
        for k in then
        if runs and all(r.get(k) for r in runs)
    }


def drifted(ratios: Mapping[str, float], tolerance: float = DRIFT) -> list[str]:
    """The roofs that moved past ``tolerance`` either way."""
    return [k for k, r in ratios.items() if abs(math.log(r)) > math.log1p(tolerance)]


def describe(ratios: Mapping[str, float], where: str) -> str:
    """One line: each roof's speed now as a multiple of the profile's, and what it means."""
    parts = ", ".join(f"{k} {r:.2f}x" for k, r in ratios.items())
    moved = drifted(ratios)
    if not moved:
        return f"machine state: {parts} the speed {where} measured (within {DRIFT:.0%}: its roofs hold now)"
    return (
        f"machine state: {parts} the speed {where} measured; {', '.join(moved)} moved more "
        f"than {DRIFT:.0%}, so its predictions do not hold in this state (calibrate again now, "
        "or measure when the machine is quieter)"
    )


def recorded_line(meta: Mapping[str, Any], where: str = "the profile") -> str:
    """``describe`` of the state a result file recorded (``meta.machine_state``); "" if none."""
    ratios = (meta.get("machine_state") or {}).get("ratios")
    return describe(ratios, where) if ratios else ""


def measure_state(cfg, profile: Mapping[str, Any], device: str) -> dict[str, float]:
    """The roofs ``profile`` records, measured now as its calibration measured them."""
    from kernels.bench.cases import suite_cases
    from kernels.bench.suite import device_options, run_case
    from kernels.calibrate.calibrate import measure_bandwidth, measure_dispatch, measure_gemm

    m = profile.get("measurements") or {}
    state: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "copy": measure_bandwidth(cfg)["gb_s"],
    }
    for dtype in m.get("gemm") or {}:
        state[f"{dtype} GEMM"] = (measure_gemm(cfg, dtype) or {}).get("tops")
    state["dispatch"] = 1.0 / measure_dispatch(cfg)["us"]
    name = (m.get("stream") or {}).get("case")
    case = (
        next((c for c in suite_cases("calibration", device_options(device)[0], False) if c.name == name), None)
        if name
        else None
    )
    if case is not None:
        row = run_case(case, cfg)
        state["stream"] = row["bytes"] / row["measured_s"] / 1e9 if row["status"] == "ok" else None
    return {k: (round(v, 5) if isinstance(v, float) else v) for k, v in state.items()}


def state_record(profile: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a result file keeps: the runs, each roof's ratio, and the roofs that drifted."""
    ratios = state_ratios(profile, runs)
    return {"runs": list(runs), "ratios": ratios, "drifted": drifted(ratios), "tolerance": DRIFT}


def check(device: str = "cpu", threads: int | None = None, profile=None, log=print) -> dict[str, Any]:
    """``ridgeline calibrate --check``: measure the state of this machine against its
    profile (or ``profile``) twice, write nothing; the record ``state_record`` returns."""
    from kernels.bench.provenance import datasheet_device, measured_key
    from kernels.bench.suite import setup

    cfg = setup(device, threads)
    path, prof = measured_profile(device, measured_key(device, cfg.threads), profile)
    _, notes = profile_ceilings(prof, datasheet_device(device, cfg.threads), where=str(path))
    for note in notes:
        log(f"warning: {note}")
    if not recorded_roofs(prof):
        raise RidgelineError(
            f"profile {path} records no roofs to check (no 'measurements'); calibrate again to record them"
        )
    record = state_record(prof, [measure_state(cfg, prof, device) for _ in range(2)])
    log(describe(record["ratios"], path.name))
    return record
