"""calibrate --extend: only the cases a profile's rows lack are measured, on the machine in
its state; the rows and the refit go to a new file, never over the input (the measuring and
the state check are stood in for: the rest is the real code)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from test_measure_nothing import recorded_subset
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.io.catalog import PROFILES_DIR

PROFILE = PROFILES_DIR / "cpu-amd-epyc-f25m17-1t.yaml"


@pytest.fixture
def stood_in(monkeypatch, tmp_path):
    """A subset of a committed CPU profile, and one new case the suite has beyond its rows."""
    import kernels.calibrate.calibrate as calibrate
    import kernels.calibrate.state as state

    copy = recorded_subset(PROFILE, tmp_path)
    stored = pd.read_csv(copy.with_suffix(".calibration.csv"), keep_default_na=False).to_dict("records")
    new = {**stored[0], "name": "new/case", "measured_s": stored[0]["measured_s"] * 2}
    new["recipe"] = json.loads(new.pop("recipe_json"))
    seen = {"measured": [], "drifted": False}
    monkeypatch.setattr(state, "check", lambda *a, **k: {"drifted": seen["drifted"]})
    monkeypatch.setattr(calibrate, "setup", lambda *a, **k: SimpleNamespace(quick=False))
    first = json.loads(stored[1]["recipe_json"])
    cases = [  # one as stored, one whose recipe changed since (measured again), one new
        SimpleNamespace(name=stored[1]["name"], recipe=first),
        SimpleNamespace(name=stored[2]["name"], recipe={**json.loads(stored[2]["recipe_json"]), "key_block": 512}),
        SimpleNamespace(name="new/case", recipe=new["recipe"]),
    ]
    monkeypatch.setattr(calibrate, "suite_cases", lambda *a, **k: cases)
    monkeypatch.setattr(calibrate, "device_options", lambda device: (None, {}))

    def run_cases(todo, cfg, **_):
        seen["measured"] += [c.name for c in todo]
        return [{**new, "name": c.name, "recipe": c.recipe} for c in todo]

    monkeypatch.setattr(calibrate, "run_cases", run_cases)
    monkeypatch.setattr("kernels.commands.require_torch", lambda what: None)
    return copy, len(stored), seen


def test_extend_measures_only_the_missing_cases_into_a_new_file(stood_in, tmp_path):
    copy, stored, seen = stood_in
    before, out = copy.read_bytes(), tmp_path / "out" / "extended.yaml"
    r = CliRunner().invoke(app, ["calibrate", "--threads", "1", "--extend", str(copy), "-o", str(out)])
    assert r.exit_code == 0, r.output
    changed = seen["measured"][0]
    assert seen["measured"] == [changed, "new/case"] and copy.read_bytes() == before
    rows = pd.read_csv(out.with_suffix(".calibration.csv"), keep_default_na=False)
    assert len(rows) == stored + 1 and list(rows["name"].iloc[-2:]) == [changed, "new/case"]
    assert json.loads(rows["recipe_json"].iloc[-2])["key_block"] == 512 and list(rows["name"]).count(changed) == 1
    meta = yaml.safe_load(out.read_text())["meta"]
    assert meta["extended"][-1]["cases"] == 2 and meta["extended"][-1]["from"] == str(copy)
    assert meta["calibration_ok"] == stored + 1


def test_extend_refuses_a_machine_out_of_its_state_and_its_own_input(stood_in, tmp_path):
    copy, _, seen = stood_in
    r = CliRunner().invoke(app, ["calibrate", "--extend", str(copy), "-o", str(copy)])
    assert r.exit_code == 2 and "not over its input" in r.output and r.output.count("\n") == 1
    seen["drifted"] = True
    r = CliRunner().invoke(app, ["calibrate", "--extend", str(copy), "-o", str(tmp_path / "x.yaml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "not in the state" in r.output and seen["measured"] == []
    assert not (tmp_path / "x.yaml").exists() and not (tmp_path / "x.calibration.csv").exists()


def test_extend_refuses_an_unwritable_output_before_measuring(stood_in, tmp_path):
    copy, _, seen = stood_in
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    r = CliRunner().invoke(app, ["calibrate", "--extend", str(copy), "-o", str(blocked / "x.yaml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "Traceback" not in r.output
    assert seen["measured"] == []
