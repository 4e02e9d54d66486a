"""ridgeline hardware list|show, ridgeline models list|show: the catalogs."""

from __future__ import annotations

from typing import Annotated

import typer

from ridgeline.cli.app import hardware_app, models_app
from ridgeline.io.resolve import detect_host, list_devices, list_models, load_device, load_model
from ridgeline.report import DEVICE_HEADER, MODEL_HEADER, device_line, device_rows, model_line, model_rows

HELP_REFRESH = "host: detect and measure again (the result is kept for later runs)."


@hardware_app.command("list")
def hardware_list() -> None:
    """One device per line after a header: name, then the key figures."""
    typer.echo(DEVICE_HEADER)
    for name in list_devices():
        typer.echo(device_line(name, load_device(name)))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Catalog name, 'host', or a YAML file.")],
    refresh: Annotated[bool, typer.Option("--refresh", help=HELP_REFRESH)] = False,
) -> None:
    """All fields of one device, in the units of its file."""
    if refresh and name != "host":
        raise typer.BadParameter("--refresh applies to 'host' only")
    for line in device_rows(detect_host(refresh=True) if refresh else load_device(name)):
        typer.echo(line)


@models_app.command("list")
def models_list() -> None:
    """One model per line after a header: name, then its shape."""
    typer.echo(MODEL_HEADER)
    for name in list_models():
        typer.echo(model_line(name, load_model(name)))


@models_app.command("show")
def models_show(name: Annotated[str, typer.Argument(help="Catalog name or a config.json path.")]) -> None:
    """The parsed ModelConfig and its parameter count."""
    for line in model_rows(load_model(name)):
        typer.echo(line)
