"""Every option of every command, declared once: on the function that takes it, as
``Annotated[type, Doc(help)]`` (kernels/commands.py, ridgeline.api, ridgeline.serving.engines'
options_scheduler, resolve_options), else here: a line of ``options`` or a Settings field. A
command names the options it takes, in the order its help lists them (app.command); a variant
``name__command`` of this table means something else in one command (another default or
help) under the same flag."""

from __future__ import annotations

import dataclasses
import inspect
from functools import cache
from pathlib import Path
from typing import Annotated, get_args, get_type_hints

import typer
from typer.models import ParameterInfo
from typing_extensions import Doc

from ridgeline.engine.workload import Settings
from ridgeline.io.settings import DEPLOYMENT, SETTING_FIELDS, resolve_options

SHORT = {"output": ("-o",), "hardware": ("-H",)}  # a command's own option of these names takes them too
Text = str | None  # a deployment option is text, so that sweep and compare take lists ("16,8,4")


# fmt: off
def options(
    w_bits: Annotated[Text, typer.Option(help="Weight bits: 16, 8, 4, 2, 1 (integers below 16).")] = None,
    a_bits: Annotated[Text, typer.Option(help="Activation bits: 16 or 8.")] = None,
    kv_bits: Annotated[Text, typer.Option(help="KV-cache bits: 16, 8, 4, 2, 1.")] = None,
    model: Annotated[str | None, typer.Argument(help="Catalog model name (see 'ridgeline models list').")] = None,
    html: Annotated[Path | None, typer.Option(help="Also write the charts to one self-contained HTML file.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")] = None,
    batch__sweep: Annotated[str, typer.Option("--batch", help="Batch sizes, e.g. 1,2,4..256.")] = "1",
    seq_len__sweep: Annotated[str, typer.Option("--seq-len", help="Prompt lengths, e.g. 512,1024..32768.")] = "512",
    hardware__compare: Annotated[str, typer.Option("--hardware", "-H", help="Devices, comma-separated.")] = "a6000,h100-sxm",
    name: Annotated[str, typer.Argument(help="Catalog name, 'host', or a YAML file.")] = ...,
    refresh: Annotated[bool, typer.Option("--refresh", help="host: detect and measure again (the result is kept for later runs).")] = False,
    name__show: Annotated[str, typer.Argument(help="Catalog name or a config.json path.")] = ...,
    results: Annotated[list[Path], typer.Argument(help="A run's OUT/results.tar.gz, or the folder it unpacks to; several for stages run again later (a later file of the same name replaces an earlier).")] = ...,
    chunked_prefill: Annotated[bool | None, typer.Option("--chunked-prefill/--no-chunked-prefill", help="Split prompts to fit the token budget (default: the engine's; on for pytorch, vLLM and SGLang).")] = None,
    prefix_cache: Annotated[bool | None, typer.Option("--prefix-cache/--no-prefix-cache", help="Cache prompts' KV blocks by their ids (a Mooncake trace's hash_ids, or --prefix), LRU-evicted within the KV cache (default: the engine's; vLLM V1's, and the default engine's, is on; prompts without ids share nothing).")] = None,
    model__check: Annotated[str, typer.Argument(help="Catalog model (built with random weights).")] = "qwen2-0.5b",
    host: Annotated[str, typer.Option(help="Interface to bind; the default keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8050,
    debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, error pop-ups).")] = False,
    waitress: Annotated[bool, typer.Option("--waitress", help="Serve with waitress, a production WSGI server, instead of Flask's development server.")] = False,
    threads__serve: Annotated[int, typer.Option("--threads", min=1, help="waitress: requests served at once.")] = 8,
):
    """The table of the options no function declares: typer builds each from its line here."""
# fmt: on


def settings_table():
    """The options that set a ``Settings`` field (all but the *_bits above), with the field's help
    (the dashboard's): a signature for typer to read, as ``options``'."""
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(Settings)}
    hint = lambda text: Annotated[Text, typer.Option(help=f"{text[0].upper()}{text[1:]}.")]  # noqa: E731
    field = lambda n: helps[SETTING_FIELDS.get(n, n)]  # noqa: E731
    return signature([keyword(n, hint(field(n))) for n in DEPLOYMENT if not n.endswith("_bits")])


def keyword(name: str, annotation, default=None) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def signature(parameters: list[inspect.Parameter]):
    """A function of these parameters, for typer to read."""

    def table(**_): ...

    table.__signature__ = inspect.Signature(parameters)
    return table


@cache  # resolve_options is declared into every command: built once
def declared_options(*functions) -> tuple[dict, frozenset[str]]:
    """The options ``functions`` declare, as typer builds them, by name (a variant ``name__x``
    answers to ``name``), and which are paths. A keyword annotated ``Annotated[type,
    typer.Option(...)]`` is declared as written (the table); one annotated with its help,
    ``Annotated[type, Doc(help)]``, takes the flag ``--its-name`` (``-o``, ``-H`` too for
    output and hardware). Paths: typer hands them over as Paths, or (0.27) as strings."""
    lines, paths = {}, set()
    for function in functions:  # a table built here (settings_table) has its types in its signature
        hints = get_type_hints(function, include_extras=True)
        for name, p in inspect.signature(function).parameters.items():
            hint = hints.get(name, p.annotation)
            meta, kind = getattr(hint, "__metadata__", ()), getattr(hint, "__origin__", None)
            flags = (f"--{name.replace('_', '-')}", *SHORT.get(name, ()))
            option = [m for m in meta if isinstance(m, ParameterInfo)]
            option += [typer.Option(*flags, help=m.documentation) for m in meta if isinstance(m, Doc)]
            if option:
                lines[name] = keyword(name, Annotated[kind, option[0]], p.default)
                paths |= {name.split("__")[0]} if Path in (kind, *get_args(kind)) else set()
    table = typer.Typer(add_completion=False)
    table.command()(signature(list(lines.values())))
    params = {p.name: p for p in typer.main.get_command(table).params}
    for key, param in params.items():
        param.name = key.split("__")[0]
    return params, frozenset(paths)


@cache
def table_options() -> tuple[dict, frozenset[str]]:
    """The table's options (``options`` and ``settings_table``)."""
    return declared_options(options, settings_table())


def keywords_of(run) -> str:
    """The options of a command that hands them all to ``run``: its keywords (but echo and log)."""
    keywords = inspect.signature(run).parameters.values()
    return " ".join(p.name for p in keywords if p.kind == p.KEYWORD_ONLY and p.name not in ("echo", "log"))


def params_of(names: str, declared=(), variant: str = "") -> tuple[list, frozenset[str]]:
    """The options a command takes ('model config ... deployment'), in its help's order, and
    which are paths: each as a function of ``declared`` declares it (resolve_options declares
    the deployment's model, device and profile), else the table's (``name__variant`` where
    it has one)."""
    (own, own_paths), (table, table_paths) = declared_options(resolve_options, *declared), table_options()
    words = [w for name in names.split() for w in (DEPLOYMENT if name == "deployment" else [name])]
    params = [own.get(w) or table.get(f"{w}__{variant}") or table[w] for w in words]
    paths = own_paths | {w.split("__")[0] for w in words if w not in own and w.split("__")[0] in table_paths}
    return params, frozenset(paths)
