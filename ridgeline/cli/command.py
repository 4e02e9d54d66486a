"""How a command takes its options (options.py's table, or the functions that declare them),
the deployment it names, and the output writers other packages add: what the command
modules (analysis, catalog, serving; kernels' and the viewer's) build on."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from ridgeline import Workload, errors
from ridgeline.cli.options import keywords_of, params_of
from ridgeline.io.files import check_writable
from ridgeline.io.resolve import Deployment
from ridgeline.io.settings import resolve_options
from ridgeline.report import check_format

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
