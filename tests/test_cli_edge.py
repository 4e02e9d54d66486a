"""The CLI edge: a missing torch is one error with one message, whatever the command."""
from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app


@pytest.mark.parametrize("args", [["calibrate"], ["validate"], ["e2e", "qwen2-0.5b"],
                                  ["decode-profile", "qwen2-0.5b"]])
def test_a_missing_torch_is_one_line(args, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output == (f"error: 'ridgeline {args[0]}' needs PyTorch: "
                             "pip install 'ridgeline[bench]'\n")


def test_measure_nothing_commands_need_no_torch(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)
    result = CliRunner().invoke(app, ["validate", "--repredict", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "no validation snapshot" in result.output
