"""The typer application, its one error handler, and what every command shares: the options
it takes (options.py) and the deployment it names. Output is ridgeline.report's."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ridgeline import Workload, errors
from ridgeline.cli.options import keywords_of, params_of
from ridgeline.io.files import check_writable
from ridgeline.io.resolve import Deployment
from ridgeline.io.settings import SETTING_FIELDS, resolve_options
from ridgeline.report import check_format


class OneLineErrors(TyperGroup):
    """Turn every usage or domain error into one line on stderr and exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        except errors.RidgelineError as err:
            words = [w for w in (sys.argv[1:] if args is None else args) if not w.startswith("-")]
            typer.echo(f"error: {err}{cli_advice(err, words[0] if words else '')}", err=True)
            sys.exit(2)
        except typer.TyperException as err:  # usage errors: bad option values, missing args
            typer.echo(f"error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except OSError as err:  # a file the user named that the system refuses to read or write
            where = f"{err.filename}: " if err.filename else ""
            typer.echo(f"error: {where}{err.strerror or err}", err=True)
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


def cli_advice(err: errors.RidgelineError, command: str = "") -> str:
    """The option of ``command`` that changes what an engine error names (the engine speaks
    of settings); plan takes no --config or --hardware."""
    if isinstance(err, errors.UnknownModelError) and command == "plan":
        return " Run 'ridgeline models list', or give the path of a config.json as the model."
    if isinstance(err, errors.UnknownModelError):
        return " Run 'ridgeline models list', or pass --config path/to/config.json."
    if isinstance(err, errors.UnknownDeviceError) and command == "plan":
        return " Run 'ridgeline hardware list' for the names --devices takes."
    if isinstance(err, errors.UnknownDeviceError):
        return " Run 'ridgeline hardware list', or pass --hardware path/to/device.yaml."
    if isinstance(err, errors.InvalidSettingError):
        option = {field: name for name, field in SETTING_FIELDS.items() if "bits" not in name}.get(err.setting)
        return f" (set with --{(option or err.setting).replace('_', '-')})"
    if isinstance(err, errors.ProfileMismatchError) and err.device == "this host":
        return " (ridgeline calibrate --device cpu)"
    if isinstance(err, errors.ProfileMismatchError):
        home = "host" if err.home.startswith("the host") else err.home
        return f" (--hardware {home}" + (", or --transfer)" if err.transferable else ")")
    return ""


OUTPUT_PATHS = ("output", "html", "timeline")  # the options that name a file a command writes


class TableCommand(TyperCommand):
    """A command taking the options ``names``: those the functions ``declared`` declare, else
    options.py's table's (options.params_of); its function takes only ``ctx`` and reads them
    with ``values(ctx)``."""

    names, declared, variant = "", (), ""

    def __init__(self, *, params, **extra):
        own, self.paths = params_of(self.names, self.declared, self.variant)
        super().__init__(params=[*params, *own], **extra)

    def invoke(self, ctx):
        ctx.meta["values"] = {k: as_path(v) if k in self.paths else v for k, v in ctx.params.items()}
        if "fmt" in ctx.params:  # --format is checked before any work
            check_format(ctx.params["fmt"], ctx.params.get("output"))
        for key in OUTPUT_PATHS:  # and so is every file a command writes
            if ctx.meta["values"].get(key) is not None:
                check_writable(ctx.meta["values"][key])
        ctx.params = {}
        return super().invoke(ctx)


def as_path(value: Any) -> Any:
    """A path option as ``pathlib.Path``: typer converts click's path strings in the wrapper
    that ``TableCommand`` skips, and some typers (0.27) leave them strings."""
    if value is None:
        return None
    return [Path(v) for v in value] if isinstance(value, list | tuple) else Path(value)


def command(group: typer.Typer, names: str, name: str | None = None, declared=(), variant: str = ""):
    """Register a command of ``group`` that takes the options ``names`` ('deployment': that
    group), as the functions ``declared`` declare them or else as the table does."""
    keys = {"names": names, "declared": declared, "variant": variant}
    return group.command(name, cls=type("Command", (TableCommand,), keys))


def values(ctx: typer.Context) -> dict[str, Any]:
    """Every option a command was given."""
    return ctx.meta["values"]


def delegate(group: typer.Typer, name: str, run: Callable[..., int], help: str, variant: str = "") -> None:
    """A command ``name`` of ``group`` that hands its options (``run``'s keywords) to ``run``
    (kernels/commands.py's, which import torch when they need it) and exits with its code."""

    def body(ctx: typer.Context) -> None:
        printing = {"echo": typer.echo} if "echo" in inspect.signature(run).parameters else {}
        raise typer.Exit(run(**values(ctx), **printing, log=echo_err))

    body.__doc__ = help
    command(group, keywords_of(run), name, (run,), variant)(body)


def pick(v: dict[str, Any], names: str) -> dict[str, Any]:
    """The options ``names`` ('batch seq_len') of ``v``, as keywords."""
    return {name: v[name] for name in names.split()}


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
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")


def add_plugins() -> None:
    """The commands other packages register through the entry point group ``ridgeline.commands``
    (kernels' measurements, the viewer's dashboard: pyproject.toml), in the order of their names."""
    for plugin in sorted(entry_points(group="ridgeline.commands"), key=lambda p: p.name):
        plugin.load()()


def writer(name: str) -> Callable[..., None]:
    """The output writer another package registers as ``name`` in the entry point group
    ``ridgeline.writers`` (the viewer's ``html``: one analysis's charts in a file)."""
    found = entry_points(group="ridgeline.writers", name=name)
    if not found:
        raise errors.RidgelineError(f"no '{name}' writer is installed: pip install 'ridgeline[viewer]'")
    return next(iter(found)).load()


def echo_err(message: str) -> None:
    typer.echo(message, err=True)


def deployment(params: dict[str, Any], settings: dict[str, Any] | None = None) -> Deployment:
    """A command's deployment, resolved once (ridgeline.io.settings.resolve_options); print the notes it raised."""
    Workload(**{k: params[k] for k in ("batch", "seq_len", "generate") if type(params.get(k)) is int})  # no note first
    d = resolve_options(**params, settings=settings)
    for note in d.notes:
        echo_err(f"warning: {note}")
    return d
