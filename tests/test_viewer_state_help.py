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


def test_a_default_quoted_in_a_help_is_the_fields_default():
    quoted = {f.name: f for f in dataclasses.fields(Settings) if "default " in f.metadata["help"]}
    assert set(quoted) == {"memory_utilization"}  # the one field whose help names its default
    for name, f in quoted.items():
        said = f.metadata["help"].split("default ")[1].rstrip(")")
        assert float(said) == f.default, name
