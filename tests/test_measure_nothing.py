"""refit and repredict measure nothing (issue 12.2): pure functions of their input files,
checked on the committed runs with every way of reading this machine blocked; they write
only where told (a new file by default), never over their input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.io.catalog import PROFILES_DIR, VALIDATION_DIR

runner = CliRunner()
H100 = PROFILES_DIR / "cuda-nvidia-h100-80gb-hbm3.yaml"
CPU = PROFILES_DIR / "cpu-amd-epyc-1t.yaml"


@pytest.fixture(autouse=True)
def no_machine(monkeypatch):
    """Anything that reads the current machine fails the test."""
    import ridgeline.io.host as hw

    def refuse(*_a, **_k):
        raise AssertionError("a measure-nothing command read the current machine")

    for name in ("detect_host", "_nvidia_host", "measure_copy_bandwidth", "_cpuinfo"):
        monkeypatch.setattr(hw, name, refuse)
    try:
        import torch
    except ImportError:
        return
    monkeypatch.setattr(torch.cuda, "get_device_name", refuse)
    monkeypatch.setattr(torch.cuda, "is_available", refuse)


def recorded_subset(profile: Path, folder: Path, kinds=("softmax", "norm")) -> Path:
    """A copy of a committed profile with the calibration rows of a few op kinds (each
    kind is fitted on its own rows, so their terms must come out as committed)."""
    import pandas as pd

    rows = pd.read_csv(profile.with_suffix(".calibration.csv"), keep_default_na=False)
    copy = folder / profile.name
    shutil.copy(profile, copy)
    rows[rows.op_kind.isin(kinds)].to_csv(copy.with_suffix(".calibration.csv"), index=False)
    return copy


@pytest.mark.parametrize("profile", [H100, CPU], ids=lambda p: p.stem)
@pytest.mark.slow
def test_refit_of_a_committed_profile_gives_its_terms_without_the_machine(profile, tmp_path, monkeypatch):
    """The H100 profile refits on a machine without CUDA; the CPU one against the datasheet
    it records, not this machine's CPU (their softmax/norm terms use the vector peaks)."""
    copy = recorded_subset(profile, tmp_path)
    before = copy.read_bytes()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["calibrate", "--refit", str(copy)])
    assert result.exit_code == 0, result.output
    assert copy.read_bytes() == before
    refitted = yaml.safe_load((tmp_path / f"{profile.stem}.refit.yaml").read_text())
    committed = yaml.safe_load(profile.read_text())
    assert refitted["efficiency"] and all(committed["efficiency"][k] == v for k, v in refitted["efficiency"].items())
    assert all(committed["overhead_us"][k] == v for k, v in refitted["overhead_us"].items())
    assert refitted["meta"]["refit"]["from"] == str(copy)


def test_refit_refuses_to_write_over_its_input(tmp_path):
    copy = recorded_subset(H100, tmp_path)
    result = runner.invoke(app, ["calibrate", "--refit", str(copy), "-o", str(copy)])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "not over its input" in result.output


def test_a_profile_without_its_datasheet_cannot_be_refitted(tmp_path):
    copy = recorded_subset(CPU, tmp_path)
    raw = yaml.safe_load(copy.read_text())
    del raw["datasheet"]
    copy.write_text(yaml.safe_dump(raw))
    result = runner.invoke(app, ["calibrate", "--refit", str(copy), "-o", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2 and "records no datasheet device" in result.output


@pytest.mark.parametrize(
    "name",
    [
        "e2e-cpu-amd-epyc-2t-llama-2-7b-2026-11-23.json",
        "e2e-cuda-nvidia-h100-80gb-hbm3-llama-3-8b-compile-2026-11-23.json",
    ],
)
def test_e2e_repredict_of_a_committed_run_is_pure(name, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    committed = VALIDATION_DIR / name
    before = committed.read_bytes()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["e2e", "--repredict", str(committed)])
    assert result.exit_code == 0, result.output
    assert committed.read_bytes() == before
    new = json.loads((tmp_path / name.replace(".json", "-repredicted.json")).read_text())
    old = json.loads(before)
    for a, b in zip(old["rows"], new["rows"], strict=True):
        for key in a:
            if key.startswith(("predicted_", "error_")):
                assert b[key] == a[key], key  # today's engine, the recorded devices: same numbers
    out = tmp_path / "deep" / "rep.json"
    assert runner.invoke(app, ["e2e", "--repredict", str(committed), "-o", str(out)]).exit_code == 0
    assert out.is_file()


@pytest.mark.slow
def test_validate_repredict_of_a_committed_snapshot_is_pure(tmp_path, monkeypatch):
    committed = VALIDATION_DIR / "cpu-amd-epyc-1t-2026-11-23.json"
    before = committed.read_bytes()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["validate", "--repredict", str(committed)])
    assert result.exit_code == 0, result.output
    assert committed.read_bytes() == before
    new = json.loads((tmp_path / "cpu-amd-epyc-1t-2026-11-23-repredicted.json").read_text())
    old = json.loads(before)
    ok = [r for r in old["rows"] if r["status"] == "ok"]
    assert [r["error_calibrated"] for r in new["rows"] if r["status"] == "ok"] == pytest.approx(
        [r["error_calibrated"] for r in ok], rel=1e-12
    )
    assert new["ceilings"]["spec"] == {
        **old["ceilings"]["spec"],
        "link_bandwidth": None,
        "link_latency": 0.0,
        "link_per_peer": None,
        "exp_rate": None,
        "launch_gap_s": 0.0,
        "host_s": {},
        "kernels": {},
        "execution": "graph",
        "serial": False,
    }


def test_validate_repredict_on_the_recorded_ceilings_moves_only_what_the_engine_moved(tmp_path, monkeypatch):
    # a snapshot whose profile file is gone (it names a run's own profile): with
    # --recorded-ceilings it is predicted again on the roofs it recorded, and the earlier
    # re-prediction is kept under "before"
    from kernels.validate.replay import replay_snapshot

    committed = VALIDATION_DIR / "cpu-amd-epyc-f25m17-1t-2026-11-26-quick.json"
    before = committed.read_bytes()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["validate", "--repredict", str(committed), "--profile", str(CPU)])
    assert result.exit_code == 2 and "profile" in result.output  # another host's profile
    result = runner.invoke(app, ["validate", "--repredict", str(committed), "--recorded-ceilings"])
    assert result.exit_code == 0, result.output
    assert committed.read_bytes() == before
    old = json.loads(before)
    new = json.loads((tmp_path / f"{committed.stem}-repredicted.json").read_text())
    assert new["ceilings"]["calibrated"] == old["ceilings"]["calibrated"]
    assert new["meta"]["repredicted"]["profile"] == "the ceilings the snapshot recorded"
    assert new["meta"]["repredicted"]["before"] == old["meta"]["repredicted"]
    assert replay_snapshot(new)["changed"] == 0


@pytest.mark.parametrize("extra", [[], ["--profile", str(CPU)]])
def test_recorded_ceilings_go_with_a_snapshot_and_no_profile(extra, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    command = ["validate", "--recorded-ceilings", *extra]
    if extra:
        command += ["--repredict", str(VALIDATION_DIR / "cpu-amd-epyc-1t-2026-11-23.json")]
    result = runner.invoke(app, command)
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "--recorded-ceilings goes with --repredict SNAPSHOT and without --profile" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command, what",
    [
        (["validate", "--repredict"], "validation snapshot"),
        (["e2e", "--repredict"], "ridgeline e2e result"),
        (["simulate-check", "--resimulate"], "serving run"),
    ],
)
@pytest.mark.parametrize("text, problem", [('{"meta": ', "malformed JSON"), ("{}", "(no meta")])
def test_measure_nothing_commands_refuse_a_file_that_is_not_their_result(
    command, what, text, problem, tmp_path, monkeypatch
):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*command, str(bad)])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert f"is not a {what}" in result.output and problem in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # nothing written
