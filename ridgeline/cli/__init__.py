"""The ``ridgeline`` command line, the only package of ridgeline that imports typer (kernels.cli
and viewer.cli add their commands to it through entry points): app.py (the app, its
errors, how a command takes its options), options.py (each option declared once) and a module
per command family. What a command prints or writes is ridgeline.report's."""

# each module registers its commands; this order is the order `ridgeline --help` lists them in,
# then the commands of kernels (measurements) and viewer (the dashboard), through entry points
from ridgeline.cli import analysis, catalog, serving  # noqa: F401, I001
from ridgeline.cli.app import add_plugins, app

add_plugins()

__all__ = ["app", "main"]


def main() -> None:
    app()
