"""The ``ridgeline`` command line: app.py (the app, its error handling, output), options.py
(every option, declared once), and one module per command family: analysis.py (analyze,
sweep, compare, frontier), catalog.py (hardware, models), decoder.py (e2e, decode-profile),
serving.py (simulate, simulate-check, serve, plan), measure.py (calibrate, validate, predictions).
The only package that imports typer; torch, dash and kernels/ are imported by the commands that need them."""

# each module registers its commands; this order is the order `ridgeline --help` lists them in
from ridgeline.cli import analysis, catalog, decoder, serving, measure  # noqa: F401, I001
from ridgeline.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
