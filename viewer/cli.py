"""The dashboard's command, registered with the ``ridgeline`` CLI through the entry point
``ridgeline.commands`` (pyproject.toml), so the CLI never imports the viewer: ridgeline serve
(viewer.entry imports dash only when it runs)."""

import typer

# the command's help, which `ridgeline --help` lists without importing the viewer
COMMANDS = {"serve": "Start the dashboard (Dash) and print its URL."}


def register() -> None:
    """Add ``serve`` to the ``ridgeline`` app."""
    from ridgeline.cli.app import app
    from ridgeline.cli.command import command, values
    from viewer.entry import run_dashboard

    @command(app, "host port debug waitress threads__serve")
    def serve(ctx: typer.Context) -> None:
        run_dashboard(**values(ctx), echo=typer.echo)

    serve.__doc__ = COMMANDS["serve"]
