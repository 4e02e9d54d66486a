"""The deployment options are declared once (options.deployment_options) and listed, in that
order, right after --output in each of the five commands that take them."""

import typer

from ridgeline.cli import app
from ridgeline.io.settings import DEPLOYMENT


def test_the_deployment_group_follows_output_in_each_command_that_takes_it():
    group = typer.main.get_command(app)
    for name in ("analyze", "sweep", "compare", "frontier", "simulate"):
        names = [p.name for p in group.commands[name].params]
        at = names.index("output") + 1
        assert tuple(names[at : at + len(DEPLOYMENT)]) == DEPLOYMENT, name
        assert len(set(names)) == len(names), name
    assert DEPLOYMENT[0] == "w_bits" and DEPLOYMENT[-1] == "execution" and len(DEPLOYMENT) == 18
    assert "w_bits" not in [p.name for p in group.commands["plan"].params]


def test_path_options_reach_the_commands_as_paths_whatever_typer_passes():
    """typer 0.27 hands a command's path options over as strings (the GPU machine's typer:
    every e2e row failed to write); the table command turns them into Paths."""
    from pathlib import Path

    from ridgeline.cli.app import TableCommand, as_path

    assert as_path("out/e2e.json") == Path("out/e2e.json") and as_path(None) is None
    assert as_path(("a.tar.gz", Path("b"))) == [Path("a.tar.gz"), Path("b")]
    command = type("Probe", (TableCommand,), {"names": "output__e2e"})(name="probe", callback=lambda: None, params=[])
    ctx = command.make_context("probe", ["--output", "x.json"])
    ctx.params["output"] = "x.json"  # as typer 0.27 leaves it
    with ctx:
        command.invoke(ctx)
    assert ctx.meta["values"] == {"output": Path("x.json")}
