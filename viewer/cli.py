"""The dashboard's command, registered with the ``ridgeline`` CLI through the entry point
``ridgeline.commands`` (pyproject.toml), so the CLI never imports the viewer: ridgeline serve
(viewer.entry imports dash only when it runs)."""

import typer

from ridgeline.cli.app import app, command, values
from viewer.entry import run_dashboard


def register() -> None:
    """Add ``serve`` to the ``ridgeline`` app."""

    @command(app, "host port debug waitress threads__serve")
    def serve(ctx: typer.Context) -> None:
        """Start the dashboard (Dash) and print its URL."""
        run_dashboard(**values(ctx), echo=typer.echo)
