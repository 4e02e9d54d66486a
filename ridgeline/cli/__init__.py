"""The ``ridgeline`` command line, the only package of ridgeline that imports typer (kernels.cli
and viewer.cli add their commands to it through entry points): app.py (the app, its errors,
which module registers each command), command.py (how a command takes its options),
options.py (each option declared once) and a module per command family, imported when one of
its commands runs. What a command prints or writes is ridgeline.report's."""

from ridgeline.cli.app import app, load_all

__all__ = ["app", "load_all", "main"]


def main() -> None:
    app()
