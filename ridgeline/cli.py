"""The ``ridgeline`` command line. The only module that imports typer; heavy imports are lazy."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from .errors import RidgelineError


class OneLineErrors(TyperGroup):
    """Turn every usage or domain error into one line on stderr and exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        except RidgelineError as err:
            typer.echo(f"error: {err}", err=True)
            sys.exit(2)
        except typer.TyperException as err:  # usage errors: bad option values, missing args
            typer.echo(f"error: {err.format_message()}", err=True)
            sys.exit(getattr(err, "exit_code", 2))
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(cls=OneLineErrors, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Roofline performance analysis for LLM inference.")
hardware_app = typer.Typer(no_args_is_help=True, help="The hardware catalog.")
models_app = typer.Typer(no_args_is_help=True, help="The model catalog.")
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")

FORMATS = ("table", "json", "csv")

ModelArg = Annotated[Optional[str], typer.Argument(help="Catalog model name (see 'ridgeline models list').")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="A Hugging Face config.json instead of a catalog name.")]
HardwareOpt = Annotated[str, typer.Option("--hardware", "-H", help="Catalog device, 'host', or a device YAML file.")]
BatchOpt = Annotated[int, typer.Option(help="Sequences per batch.")]
SeqLenOpt = Annotated[int, typer.Option("--seq-len", help="Prompt length in tokens.")]
GenerateOpt = Annotated[int, typer.Option(help="Output tokens per sequence (0: no generation totals).")]
DtypeOpt = Annotated[str, typer.Option(help="Weights, activations and KV cache type: fp32, bf16, fp16, fp8, int8, int4.")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")]


def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=160)


def model_name(model: str | None, config: Path | None) -> str:
    if config is not None and model is not None:
        raise typer.BadParameter("give a catalog model name or --config, not both")
    if config is None and model is None:
        raise typer.BadParameter("name a model (see 'ridgeline models list') or pass --config config.json")
    return str(config) if config is not None else model


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}, got '{fmt}'")


def emit(text: str | None, renderables: list[Any], output: Path | None) -> None:
    """Print or write the result; the table view prints rich renderables."""
    from .report import write_atomic

    if text is None:
        if output is not None:
            raise typer.BadParameter("--output needs --format json or csv")
        out = console()
        for item in renderables:
            out.print(item)
        return
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        write_atomic(output, text)
        typer.echo(f"wrote {output}", err=True)


@app.command()
def analyze(model: ModelArg = None, config: ConfigOpt = None, hardware: HardwareOpt = "a6000",
            batch: BatchOpt = 1, seq_len: SeqLenOpt = 512, generate: GenerateOpt = 0,
            dtype: DtypeOpt = "fp16", fmt: FormatOpt = "table", output: OutputOpt = None) -> None:
    """Per-operator roofline of prefill and decode, generation totals and memory."""
    from .analyze import analyze as run
    from .report import render, rich_tables

    check_format(fmt)
    result = run(model_name(model, config), hardware, batch=batch, seq_len=seq_len,
                 generate=generate, dtype=dtype)
    text = render(result, fmt)
    emit(text, rich_tables(result) if text is None else [], output)


@hardware_app.command("list")
def hardware_list() -> None:
    """One device per line: name, then the key figures."""
    from .hardware import list_devices, load_device
    from .units import GIB, GIGA, TERA

    for name in list_devices():
        d = load_device(name)
        peaks = " ".join(f"{k}={v / TERA:g}T" for k, v in d.matrix_peak.items())
        typer.echo(f"{name}\t{d.full_name}\t{d.memory_capacity / GIB:g} GiB\t"
                   f"{d.memory_bandwidth / GIGA:g} GB/s\t{peaks}")


@hardware_app.command("show")
def hardware_show(name: Annotated[str, typer.Argument(help="Catalog name, 'host', or a YAML file.")]) -> None:
    """All fields of one device, in the units of its file."""
    from .hardware import load_device
    from .units import GIB, GIGA, KIB, MIB, TERA

    d = load_device(name)
    rows = [("name", d.name), ("full name", d.full_name), ("vendor", d.vendor), ("kind", d.kind),
            ("memory", f"{d.memory_capacity / GIB:g} GiB"),
            ("bandwidth", f"{d.memory_bandwidth / GIGA:g} GB/s")]
    rows += [(f"matrix {k}", f"{v / TERA:g} TOPS") for k, v in d.matrix_peak.items()]
    rows += [(f"vector {k}", f"{v / TERA:g} TOPS") for k, v in d.vector_peak.items()]
    rows += [("compute units", str(d.compute_units)),
             ("L1/shared per unit", f"{d.l1_bytes_per_unit / KIB:g} KiB"),
             ("L2 / last-level cache", f"{d.l2_bytes / MIB:g} MiB"),
             ("interconnect", f"{d.interconnect or '-'}" + (
                 f", {d.interconnect_bandwidth / GIGA:g} GB/s per direction"
                 if d.interconnect_bandwidth else ""))]
    rows += [("source", s) for s in d.sources]
    for key, value in rows:
        typer.echo(f"{key:22s} {value}")


@models_app.command("list")
def models_list() -> None:
    """One model per line: name, then its shape."""
    from .model import list_models, load_model

    for name in list_models():
        m = load_model(name)
        typer.echo(f"{name}\t{m.model_type}\t{m.num_layers} layers\thidden {m.hidden_size}\t"
                   f"{m.attention_kind} {m.num_heads}/{m.num_kv_heads} heads")


@models_app.command("show")
def models_show(name: Annotated[str, typer.Argument(help="Catalog name or a config.json path.")]) -> None:
    """The parsed ModelConfig and its parameter count."""
    from dataclasses import asdict

    from .layers import Precision
    from .memory import weight_bytes
    from .model import load_model

    m = load_model(name)
    for key, value in asdict(m).items():
        typer.echo(f"{key:32s} {value}")
    params = weight_bytes(m, Precision(1, 1, 1, "fp16", "fp16"))
    typer.echo(f"{'parameters':32s} {params / 1e9:.3f} B")


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
