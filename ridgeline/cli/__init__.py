"""The ``ridgeline`` command line: app.py (the app, its error handling, how a command takes
its options), options.py (how each option is declared once), and a module per command family:
analysis.py (analyze, sweep, compare, frontier), catalog.py (hardware, models), decoder.py
(e2e, decode-profile), serving.py (simulate, simulate-check, serve, plan), measure.py
(calibrate, validate, predictions). What a command prints or writes is ridgeline.report's.
The only package that imports typer; torch and dash are imported by the commands that need
them (kernels/commands.py, which runs the measuring commands, imports neither)."""

# each module registers its commands; this order is the order `ridgeline --help` lists them in
from ridgeline.cli import analysis, catalog, decoder, serving, measure  # noqa: F401, I001
from ridgeline.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
