"""The deployment options are declared once (options.deployment_options) and listed, in that
order, right after --output in each of the five commands that take them."""

import typer

from ridgeline.cli import load_all
from ridgeline.io.settings import DEPLOYMENT


def test_the_deployment_group_follows_output_in_each_command_that_takes_it():
    group = typer.main.get_command(load_all())
    for name in ("analyze", "sweep", "compare", "frontier", "simulate"):
        names = [p.name for p in group.commands[name].params]
        at = names.index("output") + 1
        assert tuple(names[at : at + len(DEPLOYMENT)]) == DEPLOYMENT, name
        assert len(set(names)) == len(names), name
    assert DEPLOYMENT[0] == "w_bits" and DEPLOYMENT[-1] == "fusion" and len(DEPLOYMENT) == 20
    assert "w_bits" not in [p.name for p in group.commands["plan"].params]


def test_path_options_reach_the_commands_as_paths_whatever_typer_passes():
    """typer 0.27 hands a command's path options over as strings (the GPU machine's typer:
    every e2e row failed to write); the table command turns them into Paths, both the table's
    and those a measuring command declares on its function (kernels/commands.py)."""
    from pathlib import Path

    from kernels import commands
    from ridgeline.cli.command import TableCommand, as_path

    assert as_path("out/e2e.json") == Path("out/e2e.json") and as_path(None) is None
    assert as_path(("a.tar.gz", Path("b"))) == [Path("a.tar.gz"), Path("b")]
    for kind in ({"names": "output hardware"}, {"names": "output hardware", "declared": (commands.e2e,)}):
        command = type("Probe", (TableCommand,), kind)(name="probe", callback=lambda: None, params=[])
        ctx = command.make_context("probe", ["--output", "x.json"])
        ctx.params = {"output": "x.json", "hardware": "host"}  # as typer 0.27 leaves them
        with ctx:
            command.invoke(ctx)
        assert ctx.meta["values"] == {"output": Path("x.json"), "hardware": "host"}


def test_a_command_takes_the_options_its_function_declares_in_their_order():
    """A measuring command's options are its function's keywords (kernels/commands.py), each
    with the help its annotation gives; simulate and plan take the ones ridgeline.api declares."""
    import inspect

    from kernels import commands
    from ridgeline import api

    group = typer.main.get_command(load_all())
    runs = {"calibrate": commands.calibrate, "validate": commands.validate, "e2e": commands.e2e}
    runs |= {"decode-profile": commands.decode_profile, "simulate-check": commands.simulate_check}
    for name, run in runs.items():
        keywords = [k for k, p in inspect.signature(run).parameters.items() if p.kind == p.KEYWORD_ONLY]
        assert [p.name for p in group.commands[name].params] == [k for k in keywords if k not in ("echo", "log")]
    calibrate = {p.name: p for p in group.commands["calibrate"].params}
    assert (calibrate["check"].opts, calibrate["check"].secondary_opts, calibrate["output"].opts) == (
        ["--check"],
        [],
        ["--output", "-o"],
    )
    assert (
        calibrate["threads"].help == "torch CPU threads, fixed for the run (default: all cores this process may use)."
    )
    assert calibrate["device"].default == "cpu" and calibrate["profile"].help.startswith("Measured device profile YAML")
    simulate = {p.name: p for p in group.commands["simulate"].params}
    assert simulate["prompt"].help == "Prompt tokens per Poisson request." and simulate["prompt"].default == 512
    assert simulate["ttft_slo"].help == "TTFT target, seconds." and simulate["max_batch"].default is None
    plan = {p.name: p for p in group.commands["plan"].params}
    assert plan["replicas"].help.startswith("Replica counts R") and plan["output"].opts == ["--output", "-o"]
    generate = [inspect.signature(f).parameters["generate"].default for f in (api.analyze_with_draft, api.compare)]
    assert generate == [0, 128]
    compare = {p.name: p for p in group.commands["compare"].params}
    assert compare["generate"].default == 128 and compare["hardware"].default == "a6000,h100-sxm"
