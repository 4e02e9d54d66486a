"""Replay of validation snapshots without torch: committed ones, and the detection itself."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from kernels.bench.cases import suite_cases
from kernels.bench.suite import op_fields
from kernels.validate.replay import predict, relative_error, replay_snapshot, snapshots
from ridgeline.engine.roofline import Ceilings

CAL = Ceilings(
    "calibrated",
    40e9,
    {"fp32": 0.2e12, "bf16": 0.8e12, "int8": 1.6e12},
    {"fp32": 0.2e12},
    {"linear@bf16": {"compute": 0.9, "memory": 0.6}},
    {"default": 1e-6},
    device="test",
)
SPEC = Ceilings("spec", 60e9, {"fp32": 0.17e12, "bf16": 0.33e12, "int8": 0.66e12}, {"fp32": 0.17e12})


def synthetic_snapshot(n: int = 12) -> dict:
    """Rows 'measured' at exactly the calibrated prediction x 1.1."""
    cases = [c for c in suite_cases("validation", quick=True) if c.kernel in ("linear", "softmax")][:n]
    ceilings = {"spec": SPEC.to_dict(), "calibrated": CAL.to_dict()}
    rows = [{**c.to_dict(), **op_fields(c), "status": "ok"} for c in cases]
    measured = predict([c.op for c in cases], CAL)["time_s"] * 1.1
    for mode, ceil in (("spec", SPEC), ("calibrated", CAL)):
        err = relative_error(predict([c.op for c in cases], ceil)["time_s"], measured)
        for r, t, e in zip(rows, measured, err):
            r.update(measured_s=float(t), **{f"error_{mode}": float(e)})
    return json.loads(json.dumps({"ceilings": ceilings, "rows": rows}))


def test_replay_of_unchanged_engine_changes_nothing():
    snap = synthetic_snapshot()
    result = replay_snapshot(snap)
    assert result["cases"] == 12 and result["worse"] == [] and result["changed"] == 0
    assert result["median_abs_calibrated"] == pytest.approx(1 - 1 / 1.1)


def test_replay_names_cases_that_got_worse():
    snap = synthetic_snapshot()
    # pretend the recorded run agreed perfectly: now every case is ~9% off, beyond the 5% margin
    tampered = copy.deepcopy(snap)
    for r in tampered["rows"]:
        r["error_calibrated"] = 0.0
    result = replay_snapshot(tampered)
    worse = {w["case"] for w in result["worse"] if w["mode"] == "calibrated"}
    assert worse == {r["name"] for r in snap["rows"]}
    assert all(w["now"] == pytest.approx(1 / 1.1 - 1) for w in result["worse"])


def test_ceilings_round_trip_keeps_the_links():
    linked = Ceilings(
        "spec",
        3.35e12,
        {"bf16": 989.4e12},
        {"fp32": 67e12},
        device="mesh",
        link_bandwidth=448e9,
        link_latency=2e-6,
        link_per_peer=64e9,
        exp_rate=3e12,
    )
    for ceilings in (CAL, linked):
        again = Ceilings.from_dict(json.loads(json.dumps(ceilings.to_dict())))
        assert again.to_dict() == ceilings.to_dict()
    assert (again.link_bandwidth, again.link_latency, again.link_per_peer, again.exp_rate) == (448e9, 2e-6, 64e9, 3e12)


@pytest.mark.parametrize("path", snapshots(), ids=lambda p: p.name)
def test_committed_snapshot_replays_within_margin(path):
    """The current engine agrees with the committed measurements at least as well as the
    engine that recorded them (5 points of |error| margin per case)."""
    snap = json.loads(path.read_text())
    result = replay_snapshot(snap)
    assert result["cases"] > 0
    assert result["worse"] == [], "\n".join(
        f"{w['case']} ({w['mode']}): {w['recorded']:+.1%} -> {w['now']:+.1%}" for w in result["worse"]
    )
    assert np.isfinite(result["median_abs_calibrated"])


@pytest.mark.slow
def test_replay_needs_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, json; from kernels.validate.replay import replay_snapshot, snapshots; "
        "[replay_snapshot(json.load(open(p))) for p in snapshots()]; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
