"""The typer application, its one error handler, and what every command shares: resolving
the deployment it names and printing or writing the result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ridgeline.cli.options import params_of, path_options
from ridgeline.errors import (
    InvalidSettingError,
    ProfileMismatchError,
    RidgelineError,
    UnknownDeviceError,
    UnknownModelError,
)
from ridgeline.io.files import write_atomic
from ridgeline.io.resolve import Deployment
from ridgeline.io.settings import SETTING_FIELDS, resolve_options
from ridgeline.report import console, frame_text, frame_view, to_terminal


class OneLineErrors(TyperGroup):
    """Turn every usage or domain error into one line on stderr and exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        except RidgelineError as err:
            typer.echo(f"error: {err}{cli_advice(err)}", err=True)
            sys.exit(2)
        except typer.TyperException as err:  # usage errors: bad option values, missing args
            typer.echo(f"error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except OSError as err:  # a file the user named that the system refuses to read or write
            where = f"{err.filename}: " if err.filename else ""
            typer.echo(f"error: {where}{err.strerror or err}", err=True)
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


def cli_advice(err: RidgelineError) -> str:
    """The option that changes what an engine error names (the engine speaks of settings)."""
    if isinstance(err, UnknownModelError):
        return " Run 'ridgeline models list', or pass --config path/to/config.json."
    if isinstance(err, UnknownDeviceError):
        return " Run 'ridgeline hardware list', or pass --hardware path/to/device.yaml."
    if isinstance(err, InvalidSettingError):
        option = {field: name for name, field in SETTING_FIELDS.items() if "bits" not in name}.get(err.setting)
        return f" (set with --{(option or err.setting).replace('_', '-')})"
    if isinstance(err, ProfileMismatchError) and err.device == "this host":
        return " (ridgeline calibrate --device cpu)"
    if isinstance(err, ProfileMismatchError):
        home = "host" if err.home.startswith("the host") else err.home
        return f" (--hardware {home}" + (", or --transfer)" if err.transferable else ")")
    return ""


class TableCommand(TyperCommand):
    """A command taking the options ``names`` of options.py's table; its function takes only
    ``ctx`` and reads them with ``values(ctx)``."""

    names = ""

    def __init__(self, *, params, **extra):
        super().__init__(params=[*params, *params_of(self.names)], **extra)

    def invoke(self, ctx):
        ctx.meta["values"] = {k: as_path(v) if k in path_options() else v for k, v in ctx.params.items()}
        ctx.params = {}
        return super().invoke(ctx)


def as_path(value: Any) -> Any:
    """A path option as ``pathlib.Path``: typer converts click's path strings in the wrapper
    that ``TableCommand`` skips, and some typers (0.27) leave them strings."""
    if value is None:
        return None
    return [Path(v) for v in value] if isinstance(value, list | tuple) else Path(value)


def command(group: typer.Typer, names: str, name: str | None = None):
    """Register a command of ``group`` that takes the options ``names`` ('deployment': that group)."""
    return group.command(name, cls=type("Command", (TableCommand,), {"names": names}))


def values(ctx: typer.Context) -> dict[str, Any]:
    """Every option a command was given."""
    return ctx.meta["values"]


app = typer.Typer(
    cls=OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Roofline performance analysis for LLM inference.",
)
hardware_app = typer.Typer(no_args_is_help=True, help="The hardware catalog.")
models_app = typer.Typer(no_args_is_help=True, help="The model catalog.")
predictions_app = typer.Typer(
    no_args_is_help=True, help="Predictions registered before a GPU run, and the run held against them."
)
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(predictions_app, name="predictions")


def echo_err(message: str) -> None:
    typer.echo(message, err=True)


def echo_lines(lines) -> None:
    for line in lines:
        typer.echo(line)


def write_text(path: Path, text: str) -> None:
    write_atomic(path, text)
    echo_err(f"wrote {path}")


def deployment(params: dict[str, Any], settings: dict[str, Any] | None = None) -> Deployment:
    """A command's deployment, resolved once (ridgeline.io.settings.resolve_options); print the notes it raised."""
    d = resolve_options(params, settings)
    for note in d.notes:
        echo_err(f"warning: {note}")
    return d


def emit(text: str | None, renderables: list[Any], output: Path | None) -> None:
    """Print or write the result; the table view prints rich renderables."""
    if text is None:
        if output is not None:
            raise typer.BadParameter("--output needs --format json or csv")
        out, piped = console(), not to_terminal()
        for item in renderables:  # piped, a line of text is never wrapped: grep and tail get it whole
            out.print(item, soft_wrap=piped and isinstance(item, str))
        return
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        write_text(output, text)


def show_frame(frame, fmt: str, output: Path | None, title: str, notes=(), mode: str | None = None) -> None:
    """A DataFrame as a rich table, CSV or JSON records (with the ceilings' ``mode``)."""
    text = frame_text(frame, fmt, notes, mode)
    emit(text, frame_view(frame, title, notes) if text is None else [], output)
