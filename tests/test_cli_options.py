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
