"""The measuring commands, registered with the ``ridgeline`` CLI through the entry point
``ridgeline.commands`` (pyproject.toml), so the CLI never imports this package: a real
decoder measured (e2e, decode-profile), transformers' continuous batching against the
simulator (simulate-check), the kernel measurements (calibrate, validate) and the GPU run's
predictions (predictions register|compare). kernels/commands.py runs each and declares its
options; it is imported when one of them runs, and what needs torch when that runs."""

import typer

# each command's help, which `ridgeline --help` lists without importing the commands
COMMANDS = {
    "e2e": "Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions.",
    "decode-profile": "Split an eager decode step into host dispatch and device work (is it host-bound?).",
    "simulate-check": "Replay a trace on transformers' continuous batching (CPU or GPU) and compare with the simulator.",
    "calibrate": "Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile.",
    "validate": "Measure held-out kernel shapes and compare them with the spec and calibrated predictions.",
    "predictions": "Predictions registered before a GPU run, and the run held against them.",
}


def register() -> None:
    """Add the measuring commands to the ``ridgeline`` app."""
    from kernels import commands
    from ridgeline.cli.app import app
    from ridgeline.cli.command import delegate

    for name in ("e2e", "decode-profile", "calibrate", "validate"):
        delegate(app, name, getattr(commands, name.replace("-", "_")), COMMANDS[name])
    delegate(app, "simulate-check", commands.simulate_check, COMMANDS["simulate-check"], "check")
    predictions = typer.Typer(no_args_is_help=True, help=COMMANDS["predictions"])
    delegate(predictions, "register", commands.register_predictions, "Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels).")  # fmt: skip
    delegate(predictions, "compare", commands.compare_predictions, "After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o).")  # fmt: skip
    app.add_typer(predictions, name="predictions")
