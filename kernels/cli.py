"""The measuring commands, registered with the ``ridgeline`` CLI through the entry point
``ridgeline.commands`` (pyproject.toml), so the CLI never imports this package: a real
decoder measured (e2e, decode-profile), transformers' continuous batching against the
simulator (simulate-check), the kernel measurements (calibrate, validate) and the GPU run's
predictions (predictions register|compare). kernels/commands.py runs each and declares its
options; what needs torch is imported when it runs."""

import typer

from kernels import commands
from ridgeline.cli.app import app, delegate


def register() -> None:
    """Add the measuring commands to the ``ridgeline`` app."""
    delegate(app, "e2e", commands.e2e, "Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions.")  # fmt: skip
    delegate(app, "decode-profile", commands.decode_profile, "Split an eager decode step into host dispatch and device work (is it host-bound?).")  # fmt: skip
    delegate(app, "simulate-check", commands.simulate_check, "Replay a trace on transformers' continuous batching (CPU or GPU) and compare with the simulator.", "check")  # fmt: skip
    delegate(app, "calibrate", commands.calibrate, "Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile.")  # fmt: skip
    delegate(app, "validate", commands.validate, "Measure held-out kernel shapes and compare them with the spec and calibrated predictions.")  # fmt: skip
    predictions = typer.Typer(
        no_args_is_help=True, help="Predictions registered before a GPU run, and the run held against them."
    )
    delegate(predictions, "register", commands.register_predictions, "Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels).")  # fmt: skip
    delegate(predictions, "compare", commands.compare_predictions, "After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o).")  # fmt: skip
    app.add_typer(predictions, name="predictions")
