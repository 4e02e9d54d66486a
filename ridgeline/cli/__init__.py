"""The ``ridgeline`` command line, the only package that imports typer: app.py (the app, its
errors, how a command takes its options), options.py (each option declared once) and a module
per command family. What a command prints or writes is ridgeline.report's."""

# each module registers its commands; this order is the order `ridgeline --help` lists them in
from ridgeline.cli import analysis, catalog, decoder, serving, measure  # noqa: F401, I001
from ridgeline.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
