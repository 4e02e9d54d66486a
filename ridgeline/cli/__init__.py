"""The ``ridgeline`` command line: app.py (the app, its error handling, how a command takes
its options), options.py (every option, declared once: a line of its table or a Settings
field), and one module per command family: analysis.py (analyze, sweep, compare, frontier),
catalog.py (hardware, models), decoder.py (e2e, decode-profile), serving.py (simulate,
simulate-check, serve, plan), measure.py (calibrate, validate, predictions). What a command
prints or writes is ridgeline.report's. The only package that imports typer; torch, dash and
the rest of kernels/ are imported by the commands that need them (kernels/commands.py, which
the measuring commands hand their options to, imports neither)."""

# each module registers its commands; this order is the order `ridgeline --help` lists them in
from ridgeline.cli import analysis, catalog, decoder, serving, measure  # noqa: F401, I001
from ridgeline.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
