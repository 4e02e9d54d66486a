"""ridgeline hardware list|show, ridgeline models list|show: the catalogs."""

from __future__ import annotations

import typer

from ridgeline.cli.app import app
from ridgeline.cli.command import command, values
from ridgeline.io.resolve import list_devices, list_models, load_device, load_model
from ridgeline.report import DEVICE_HEADER, MODEL_HEADER, device_line, device_rows, model_line, model_rows, print_lines

hardware_app = typer.Typer(no_args_is_help=True, help="The hardware catalog.")
models_app = typer.Typer(no_args_is_help=True, help="The model catalog.")
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")


@hardware_app.command("list")
def hardware_list() -> None:
    """One device per line after a header: name, then the key figures."""
    print_lines([DEVICE_HEADER, *(device_line(name, load_device(name)) for name in list_devices())])


@command(hardware_app, "name refresh", "show")
def hardware_show(ctx: typer.Context) -> None:
    """All fields of one device, in the units of its file."""
    print_lines(device_rows(load_device(values(ctx)["name"], refresh=values(ctx)["refresh"])))


@models_app.command("list")
def models_list() -> None:
    """One model per line after a header: name, then its shape."""
    print_lines([MODEL_HEADER, *(model_line(name, load_model(name)) for name in list_models())])


@command(models_app, "name__show", "show")
def models_show(ctx: typer.Context) -> None:
    """The parsed ModelConfig and its parameter count."""
    print_lines(model_rows(load_model(values(ctx)["name"])))
