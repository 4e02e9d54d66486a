"""The machine's state against its profile: roofs measured again, as ratios, and the verdict."""

from __future__ import annotations

import math

import pytest
import yaml
from typer.testing import CliRunner

from kernels.calibrate import state
from ridgeline.cli import app
from ridgeline.io.catalog import PROFILES_DIR

runner = CliRunner()
PROFILE = {
    "measurements": {
        "copy": {"gb_s": 25.0, "runs_gb_s": [16.0, 25.0]},
        "stream": {"case": "grid/m1x8192x2048/fp32", "gb_s": 28.0},
        "gemm": {"fp32": {"tops": 0.1, "runs_tops": [0.1, 0.09]}},
        "dispatch": {"us": 2.0},
    }
}


def test_recorded_roofs_are_rates_from_both_calibration_runs():
    """copy sqrt(16 x 25) = 20 GB/s, GEMM sqrt(0.1 x 0.09) TOPS, dispatch 1 / 2 us."""
    roofs = state.recorded_roofs(PROFILE)
    assert roofs == pytest.approx({"copy": 20.0, "stream": 28.0, "fp32 GEMM": math.sqrt(0.009), "dispatch": 0.5})


def test_ratios_take_the_geometric_mean_of_the_runs_and_skip_what_was_not_measured():
    runs = [
        {"copy": 10.0, "stream": 14.0, "fp32 GEMM": 0.06, "dispatch": 0.25},
        {"copy": 40.0, "stream": 14.0, "fp32 GEMM": 0.06, "dispatch": None},
    ]
    ratios = state.state_ratios(PROFILE, runs)
    assert ratios == {"copy": 1.0, "stream": 0.5, "fp32 GEMM": round(0.06 / math.sqrt(0.009), 3)}
    assert state.drifted(ratios) == ["stream", "fp32 GEMM"]
    assert state.state_ratios(PROFILE, []) == {}


@pytest.mark.parametrize(("ratio", "moved"), [(0.92, False), (1.09, False), (0.90, True), (1.12, True), (0.5, True)])
def test_drift_is_symmetric_in_log_around_ten_percent(ratio, moved):
    assert state.drifted({"copy": ratio}) == (["copy"] if moved else [])


def test_the_verdict_names_the_roofs_that_moved_and_what_to_do():
    line = state.describe({"copy": 0.64, "fp32 GEMM": 0.97}, "p.yaml")
    assert line.startswith("machine state: copy 0.64x, fp32 GEMM 0.97x the speed p.yaml measured")
    assert "copy moved more than 10%" in line and "calibrate again now" in line
    assert "roofs hold now" in state.describe({"copy": 1.04}, "p.yaml")


def test_the_committed_zen3_profile_records_every_roof():
    """Its calibration: copy runs 16.80 and 19.83 GB/s, stream 28.351, fp32 0.0961 / 0.0955
    TOPS, dispatch 1.565 us."""
    profile = yaml.safe_load((PROFILES_DIR / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
    roofs = state.recorded_roofs(profile)
    assert set(roofs) == {"copy", "stream", "fp32 GEMM", "dispatch"}
    assert roofs["copy"] == pytest.approx(math.sqrt(16.8035 * 19.8269), rel=1e-4)
    assert roofs["stream"] == 28.351 and roofs["dispatch"] == pytest.approx(1 / 1.5647, rel=1e-4)


@pytest.mark.parametrize(("speed", "code"), [(1.0, 0), (0.5, 1)])
def test_calibrate_check_exits_1_when_a_roof_moved(monkeypatch, tmp_path, speed, code):
    """Measured rates are stubbed: the verdict and the exit code follow the ratios."""
    pytest.importorskip("torch")
    profile = tmp_path / "p.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "bandwidth_gb_s": 25.0,
                "matrix_peak_tops": {"fp32": 0.1},
                "meta": {"device_kind": "cpu", "spec_device": "host"},
                **PROFILE,
            }
        )
    )
    rates = {k: v * speed for k, v in state.recorded_roofs(PROFILE).items()}
    monkeypatch.setattr(state, "measure_state", lambda cfg, prof, device: rates)
    result = runner.invoke(app, ["calibrate", "--check", "--threads", "1", "--profile", str(profile)])
    assert result.exit_code == code, result.output
    assert ("moved more than 10%" in result.output) == bool(code)
    assert f"copy {speed:.2f}x" in result.output


def test_calibrate_check_without_recorded_roofs_is_one_line(tmp_path):
    pytest.importorskip("torch")
    profile = tmp_path / "p.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "bandwidth_gb_s": 25.0,
                "matrix_peak_tops": {"fp32": 0.1},
                "meta": {"device_kind": "cpu", "spec_device": "host"},
            }
        )
    )
    result = runner.invoke(app, ["calibrate", "--check", "--threads", "1", "--profile", str(profile)])
    assert result.exit_code == 2
    assert "records no roofs to check" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--check", "--threads", "-1"], "--threads must be at least 1, got -1"),
        (["--profile", "p.yaml"], "--profile goes with --check"),
        (["--check", "-o", "out.yaml"], "--check writes nothing: drop --refit and --output"),
    ],
)
def test_calibrate_check_bad_options_are_one_line(args, message, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["calibrate", *args])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out.yaml").exists()
