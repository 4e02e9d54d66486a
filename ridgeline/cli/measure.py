"""The kernel measurements and the GPU run's predictions: calibrate, validate, predictions
register|compare (kernels/commands.py runs each; most of it needs torch, imported when it runs)."""

from __future__ import annotations

from kernels import commands
from ridgeline.cli.app import app, delegate, predictions_app

CALIBRATE = (
    "device__calibrate quick threads__calibrate output__calibrate refit extend check profile quiet_wait__calibrate"
)
VALIDATE = "device__calibrate quick threads__calibrate profile output_dir repredict__validate recorded_ceilings quiet_wait__calibrate draw through fit_intervals coverage output"
REGISTER = "hardware__register profile sizes transfer__register output"

delegate(app, "calibrate", CALIBRATE, commands.calibrate, "Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile.", echo=False)  # fmt: skip
delegate(app, "validate", VALIDATE, commands.validate, "Measure held-out kernel shapes and compare them with the spec and calibrated predictions.")  # fmt: skip
delegate(predictions_app, "register", REGISTER, commands.register_predictions, "Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels).")  # fmt: skip
delegate(predictions_app, "compare", "results predictions output", commands.compare_predictions, "After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o).")  # fmt: skip
