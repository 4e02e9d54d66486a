"""The CLI edge: a missing torch is one error with one message, whatever the command."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app


@pytest.mark.parametrize("args", [["calibrate"], ["validate"], ["e2e", "qwen2-0.5b"], ["decode-profile", "qwen2-0.5b"]])
def test_a_missing_torch_is_one_line(args, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output == (f"error: 'ridgeline {args[0]}' needs PyTorch: pip install 'ridgeline[bench]'\n")


def test_measure_nothing_commands_need_no_torch(monkeypatch, tmp_path):
    from ridgeline.io.catalog import VALIDATION_DIR

    monkeypatch.setitem(sys.modules, "torch", None)
    result = CliRunner().invoke(app, ["validate", "--repredict", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "no validation snapshot" in result.output
    committed = VALIDATION_DIR / "e2e-cpu-amd-epyc-2t-llama-2-7b-2026-11-23.json"
    result = CliRunner().invoke(app, ["e2e", "--repredict", str(committed), "-o", str(tmp_path / "e2e.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "e2e.json").read_text())["rows"]


@pytest.mark.parametrize(
    "call,engine,cli",
    [
        (
            lambda rl: rl.analyze("llama-2-7b", "a6000", tp=3),
            "tp=3 does not divide 32 attention heads",
            ["analyze", "llama-2-7b", "--tp", "3"],
        ),
        (
            lambda rl: rl.analyze("llama-2-7b", "a6000", batch=0),
            "batch must be a positive whole number",
            ["analyze", "llama-2-7b", "--batch", "0"],
        ),
        (lambda rl: rl.analyze("llama-2-7x", "a6000"), "unknown model 'llama-2-7x'", ["analyze", "llama-2-7x"]),
    ],
)
def test_engine_errors_name_settings_and_the_cli_names_options(call, engine, cli):
    """A Python user reads no CLI flags; the CLI adds its own option to the same line."""
    import ridgeline as rl

    with pytest.raises(rl.RidgelineError) as err:
        call(rl)
    assert engine in str(err.value) and "--" not in str(err.value)
    assert "ridgeline " not in str(err.value)
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.startswith(f"error: {err.value}") and "--" in result.output


@pytest.mark.parametrize(
    "args", [["validate", "--draw", "-1"], ["validate", "--draw", "3", "--repredict", "snapshot.json"]]
)
def test_a_draw_takes_a_seed_and_measures(args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "--draw takes a seed >= 0 and measures: it does not go with --repredict" in result.output


@pytest.mark.parametrize(
    "args, line",
    [
        (["serve", "--debug", "--waitress"], "--debug runs Flask's development server; drop --debug or --waitress"),
        (["hardware", "show", "a6000", "--refresh"], "--refresh applies to 'host' only"),
        (["plan"], "name a model (see 'ridgeline models list')"),
    ],
)
def test_an_option_the_api_checks_is_one_line_and_exit_2(args, line):
    """The checks of an option's value live where it is taken (viewer.entry, io.resolve,
    api.plan_from_text); the command line prints them as its own usage errors."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.output == f"error: Invalid value: {line}\n"


def test_sweep_and_frontier_warn_past_the_models_length_as_analyze_does():
    """Issue 59 item 8: `sweep --seq-len 32768` on llama-2-7b (4096 positions) said nothing."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    says = "warning: 32895 positions exceed llama-2-7b's max_position_embeddings (4096)"
    for command in (["analyze"], ["sweep"], ["frontier", "--hardware", "h100-sxm"]):
        args = [*command, "llama-2-7b", "--seq-len", "32768", "--generate", "128"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0 and says in result.output.splitlines(), (command, result.output)
    data = json.loads(CliRunner().invoke(app, ["sweep", "llama-2-7b", "--seq-len", "512,32768", "-f", "json"]).output)
    assert data["notes"][-1] == "warning: 32768 positions exceed llama-2-7b's max_position_embeddings (4096)"
