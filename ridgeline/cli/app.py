"""The typer application and its one error handler. A command's module (analysis, catalog,
serving; the plugins' through entry points) is imported only when that command runs or is
listed by ``load_all``; ``ridgeline --help`` reads the short help of each from ``COMMANDS`` and
the plugins' own tables. How a command takes its options is command.py's."""

from __future__ import annotations

import importlib
import sys
from difflib import get_close_matches
from functools import cache
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ridgeline import errors

# ridgeline's own commands, in the order `ridgeline --help` lists them: the module that
# registers each (imported when the command runs, so `ridgeline --help` imports no engine) and
# its short help, the first paragraph of its docstring (a test holds each to the command's own)
COMMANDS = {
    "analyze": ("ridgeline.cli.analysis", "Per-operator roofline of prefill and decode, generation totals and memory."),
    "sweep": ("ridgeline.cli.analysis", "Every combination of the listed values, batch x length in one vectorised pass each."),
    "compare": ("ridgeline.cli.analysis", "The same model and workload across devices and settings: one row each."),
    "frontier": ("ridgeline.cli.analysis", "Latency against throughput across batch sizes up to the largest that fits, and the best throughput meeting --tpot-slo / --ttft-slo."),
    "simulate": ("ridgeline.cli.serving", "Serve requests with continuous batching: latency percentiles, throughput, KV use; replicas behind a router, disaggregated pools, speculative decodes (docs/fleet.md)."),
    "plan": ("ridgeline.cli.serving", "Search deployments (devices x count x tp/pp x types x batch x chunk): bounds, then simulation; cost vs goodput."),
    "hardware": ("ridgeline.cli.catalog", "The hardware catalog."),
    "models": ("ridgeline.cli.catalog", "The model catalog."),
}  # fmt: skip


class OneLineErrors(TyperGroup):
    """Turn every usage or domain error into one line on stderr and exit code 2; load a
    command's module only when that command runs (``listed``: what ``--help`` shows without)."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(listed())

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        if cmd_name not in self.commands and (cmd_name in COMMANDS or cmd_name in listed()):
            load(cmd_name)
            self.commands.update(typer.main.get_command(app).commands)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> tuple:
        try:
            return super().resolve_command(ctx, args)
        except typer.TyperException as err:  # typer's own suggestion sees only the commands loaded yet
            unsaid = str(err).startswith("No such command") and "Did you mean" not in str(err)
            near = get_close_matches(args[0], list(listed())) if unsaid else []
            err.message = (
                f"{err.message.rstrip('.')}. Did you mean {', '.join(map(repr, near))}?" if near else err.message
            )
            raise

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:
        short = listed()  # cut to the width as click cuts a command's own help
        limit = formatter.width - 6 - max(map(len, short))
        with formatter.section("Commands"):
            formatter.write_dl([(n, TyperCommand(name=n, help=h).get_short_help_str(limit)) for n, h in short.items()])

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
        from ridgeline.io.settings import SETTING_FIELDS

        option = {field: name for name, field in SETTING_FIELDS.items() if "bits" not in name}.get(err.setting)
        return f" (set with --{(option or err.setting).replace('_', '-')})"
    if isinstance(err, errors.ProfileMismatchError) and err.device == "this host":
        return " (ridgeline calibrate --device cpu)"
    if isinstance(err, errors.ProfileMismatchError):
        home = "host" if err.home.startswith("the host") else err.home
        return f" (--hardware {home}" + (", or --transfer)" if err.transferable else ")")
    return ""


app = typer.Typer(
    cls=OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Roofline performance analysis for LLM inference.",
)


@app.callback()
def root() -> None:
    """A group, whatever is registered yet (typer makes one with a callback)."""


@cache
def plugins() -> list[Any]:
    """The modules other packages register commands from through the entry point group
    ``ridgeline.commands`` (kernels' measurements, the viewer's dashboard: pyproject.toml), in
    the order of their names: each lists its ``COMMANDS`` (name: short help), and the entry
    point's function adds them."""
    from importlib.metadata import entry_points  # read only when a plugin's command is named

    return sorted(entry_points(group="ridgeline.commands"), key=lambda plugin: plugin.name)


@cache
def listed() -> dict[str, str]:
    """Every command's short help by name: ridgeline's, then each plugin's."""
    theirs = {n: h for plugin in plugins() for n, h in importlib.import_module(plugin.module).COMMANDS.items()}
    return {name: h for name, (_, h) in COMMANDS.items()} | theirs


def load(name: str) -> None:
    """Register the command ``name`` (with the others of its module, once)."""
    if name in COMMANDS:
        importlib.import_module(COMMANDS[name][0])
        return
    plugin = next(p for p in plugins() if name in importlib.import_module(p.module).COMMANDS)
    if plugin.module not in REGISTERED:
        REGISTERED.add(plugin.module)
        plugin.load()()


REGISTERED: set[str] = set()  # the plugins whose commands are added


def load_all() -> typer.Typer:
    """The app with every command registered (for a caller that reads them all: tests, docs)."""
    for name in listed():
        load(name)
    return app
