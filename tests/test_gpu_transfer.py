"""Transfer report on recorded data: the committed H100 snapshot and e2e rows (no torch run)."""

from __future__ import annotations

import json

import pytest

from kernels.gpu.transfer import e2e_errors, main, transfer_report
from ridgeline.engine.roofline import spec_ceilings
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.resolve import load_device

H100 = "cuda-nvidia-h100-80gb-hbm3"
SNAPSHOT = REPORTS_DIR / "validation" / f"{H100}-2026-11-23.json"
PROFILE = REPORTS_DIR / "profiles" / f"{H100}.yaml"
E2E = REPORTS_DIR / "validation" / f"e2e-{H100}-llama-2-7b-compile-2026-11-23.json"


def as_spec(_profile, device):
    """A stand-in transfer: the datasheet roofline of the target (what a profile of
    fractions 1 and no overheads would transfer to)."""
    return spec_ceilings(device)


def test_e2e_predictions_replay_the_recorded_rows():
    device = load_device("h100-sxm")
    rows = json.loads(E2E.read_text())["rows"]
    out = e2e_errors(E2E, spec_ceilings(device), device)
    assert [r["execution"] for r in out] == ["eager", "compiled"]  # rows from before modes
    for recorded, again in zip(rows, out):
        assert again["predicted_calibrated_tpot_s"] == pytest.approx(recorded["predicted_spec_tpot_s"], rel=1e-9)
        assert again["error_calibrated_tpot"] == pytest.approx(recorded["error_spec_tpot"], rel=1e-9)


def test_transfer_report_on_the_recorded_snapshot(tmp_path):
    report = transfer_report(SNAPSHOT, PROFILE, [E2E], ceilings_for=as_spec)
    recorded = {r["name"]: r["error_spec"] for r in json.loads(SNAPSHOT.read_text())["rows"] if r["status"] == "ok"}
    again = {r["name"]: r["error_calibrated"] for r in report["kernels"]["rows"]}
    assert again.keys() == recorded.keys() and len(again) == 400
    assert all(again[k] == pytest.approx(recorded[k], rel=1e-6, abs=1e-9) for k in recorded)
    split = report["kernels"]["split"]
    assert split["headline"]["n"] + split["reference"]["n"] == 400
    assert report["meta"]["device"] == "h100-sxm" and report["meta"]["mode"] == "spec"


def test_transfer_command_refuses_bad_inputs(tmp_path, capsys):
    assert main([str(tmp_path / "none.json"), str(PROFILE)]) == 2
    assert "no validation snapshot" in capsys.readouterr().err
