"""The kernel measurements and the GPU run's predictions: calibrate, validate, predictions
register|compare (kernels/commands.py runs each; most of it needs torch, imported when it runs)."""

from __future__ import annotations

import typer

from ridgeline.cli.app import app, command, echo_err, predictions_app, values

CALIBRATE = (
    "device__calibrate quick threads__calibrate output__calibrate refit extend check profile quiet_wait__calibrate"
)
VALIDATE = "device__calibrate quick threads__calibrate profile output_dir repredict__validate quiet_wait__calibrate draw through fit_intervals coverage output"


@command(app, CALIBRATE)
def calibrate(ctx: typer.Context) -> None:
    """Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile."""
    from kernels import commands

    raise typer.Exit(commands.calibrate(**values(ctx), log=echo_err))


@command(app, VALIDATE)
def validate(ctx: typer.Context) -> None:
    """Measure held-out kernel shapes and compare them with the spec and calibrated predictions."""
    from kernels import commands

    raise typer.Exit(commands.validate(**values(ctx), echo=typer.echo, log=echo_err))


@command(predictions_app, "hardware__register profile sizes transfer__register output", "register")
def predictions_register(ctx: typer.Context) -> None:
    """Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels)."""
    from kernels import commands

    raise typer.Exit(commands.register_predictions(**values(ctx), echo=typer.echo, log=echo_err))


@command(predictions_app, "results predictions output", "compare")
def predictions_compare(ctx: typer.Context) -> None:
    """After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o)."""
    from kernels import commands

    raise typer.Exit(commands.compare_predictions(**values(ctx), echo=typer.echo, log=echo_err))
