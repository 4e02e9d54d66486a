"""The dashboard's setting controls take their help from Settings' field metadata."""

from __future__ import annotations

import dataclasses

from ridgeline.engine.workload import Settings
from viewer.state import setting_controls


def test_every_setting_has_help_and_its_control_shows_it():
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    controls = {c.key: c for c in setting_controls()}
    assert set(controls) == set(fields)
    for name, f in fields.items():
        assert f.metadata["help"] and controls[name].help == f.metadata["help"]
    assert controls["tp"].help == "tensor-parallel devices"
