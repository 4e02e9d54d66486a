"""The kernel measurements and the GPU run's predictions: calibrate, validate, predictions
register|compare (kernels/commands.py runs each and declares its options; most of it needs
torch, imported when it runs)."""

from kernels import commands
from ridgeline.cli.app import app, delegate, predictions_app

delegate(app, "calibrate", commands.calibrate, "Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile.")  # fmt: skip
delegate(app, "validate", commands.validate, "Measure held-out kernel shapes and compare them with the spec and calibrated predictions.")  # fmt: skip
delegate(predictions_app, "register", commands.register_predictions, "Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels).")  # fmt: skip
delegate(predictions_app, "compare", commands.compare_predictions, "After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o).")  # fmt: skip
