"""The ``ridgeline`` command line. The only module that imports typer; heavy imports are lazy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from ridgeline.errors import RidgelineError, require_torch
from ridgeline.io.traces import CHECK_OUTPUT_RANGE, CHECK_PROMPT_RANGE


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
    from ridgeline.errors import InvalidSettingError, ProfileMismatchError, UnknownDeviceError, UnknownModelError

    if isinstance(err, UnknownModelError):
        return " Run 'ridgeline models list', or pass --config path/to/config.json."
    if isinstance(err, UnknownDeviceError):
        return " Run 'ridgeline hardware list', or pass --hardware path/to/device.yaml."
    if isinstance(err, InvalidSettingError):
        option = {
            field: name for name, (field, kind, _h) in SETTING_FIELDS.items() if kind != "bits" and "dtype" not in name
        }.get(err.setting, err.setting)
        return f" (set with --{option.replace('_', '-')})"
    if isinstance(err, ProfileMismatchError) and err.device == "this host":
        return " (ridgeline calibrate --device cpu)"
    if isinstance(err, ProfileMismatchError):
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
hardware_app = typer.Typer(no_args_is_help=True, help="The hardware catalog.")
models_app = typer.Typer(no_args_is_help=True, help="The model catalog.")
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
predictions_app = typer.Typer(
    no_args_is_help=True, help="Predictions registered before a GPU run, and the run held against them."
)
app.add_typer(predictions_app, name="predictions")

FORMATS = ("table", "json", "csv")

ModelArg = Annotated[Optional[str], typer.Argument(help="Catalog model name (see 'ridgeline models list').")]
ConfigOpt = Annotated[
    Optional[Path], typer.Option("--config", help="A Hugging Face config.json instead of a catalog name.")
]
HardwareOpt = Annotated[str, typer.Option("--hardware", "-H", help="Catalog device, 'host', or a device YAML file.")]
BatchOpt = Annotated[int, typer.Option(help="Sequences per batch.")]
SeqLenOpt = Annotated[int, typer.Option("--seq-len", help="Prompt length in tokens.")]
GenerateOpt = Annotated[int, typer.Option(help="Output tokens per sequence (0: no generation totals).")]
DtypeOpt = Annotated[
    str, typer.Option(help="Weights, activations and KV cache type: fp32, bf16, fp16, fp8, int8, int4.")
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")]
OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")
]
ProfileOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--profile",
        help="Measured device profile YAML ('ridgeline calibrate' writes one; reports/profiles holds the committed ones): the calibrated roofline of the device it was measured on. Measuring commands default to the measured device's own.",
    ),
]
TransferOpt = Annotated[
    bool,
    typer.Option(
        "--transfer",
        help="Apply --profile to another GPU of its architecture: its measured fractions on this device's datasheet roofs (labelled 'transferred'; it keeps how the profile was timed: the committed H100 profile is eager CUDA events, host-inclusive, so eager execution only).",
    ),
]

# Deployment settings (ridgeline.engine.workload.Settings), shared by analyze, sweep, compare and
# frontier: CLI name -> (Settings field, parser, help). Values are text so that sweep and
# compare can take lists ("16,8,4").
SETTING_FIELDS = {
    "w_bits": ("w_dtype", "bits", "Weight bits: 16, 8, 4, 2, 1 (integers below 16)."),
    "a_bits": ("a_dtype", "bits", "Activation bits: 16 or 8."),
    "kv_bits": ("kv_dtype", "bits", "KV-cache bits: 16, 8, 4, 2, 1."),
    "w_dtype": ("w_dtype", str, "Weight type, e.g. fp8_e4m3, bf16, int4."),
    "a_dtype": ("a_dtype", str, "Activation type."),
    "kv_dtype": ("kv_dtype", str, "KV-cache type."),
    "group_size": ("group_size", int, "Quantisation group size (0: per channel)."),
    "attention": ("attention", str, "eager, flash, flash-decoding or paged."),
    "kv_block": ("kv_block", int, "Tokens per KV block (paged)."),
    "tp": ("tp", int, "Tensor-parallel devices."),
    "pp": ("pp", int, "Pipeline-parallel stages."),
    "ep": ("ep", int, "Expert-parallel devices (MoE)."),
    "micro_batches": ("micro_batches", int, "Pipeline micro-batches."),
    "link_bw": ("link_bw_gb_s", float, "Interconnect GB/s per direction (overrides the catalog)."),
    "link_latency": ("link_latency_us", float, "Interconnect latency per hop, µs."),
    "zero_points": (
        "zero_points",
        str,
        "Integer weights' zero points: fp16 or packed (AWQ/GPTQ, at the weight's width).",
    ),
    "memory_utilization": (
        "memory_utilization",
        float,
        "Fraction of device memory the runtime may use (vLLM's gpu_memory_utilization; default 0.9).",
    ),
    "execution": (
        "execution",
        str,
        "graph, eager or compiled (auto: graph on a GPU, eager on a CPU); matters with a device-time profile.",
    ),
}


def with_deployment(fn):
    """Add the deployment options (SETTING_FIELDS) to a command's signature and hand them
    to it as one ``deploy`` dict, so each command declares them once."""
    import functools
    import inspect
    import typing

    hints = {
        name: Annotated[Optional[str], typer.Option(f"--{name.replace('_', '-')}", help=text)]
        for name, (_field, _kind, text) in SETTING_FIELDS.items()
    }
    signature = inspect.signature(fn)
    own = [p for p in signature.parameters.values() if p.name != "deploy"]
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=h) for n, h in hints.items()]

    @functools.wraps(fn)
    def command(**kwargs):
        deploy = {name: kwargs.pop(name) for name in SETTING_FIELDS}
        return fn(deploy=deploy, **kwargs)

    evaluated = typing.get_type_hints(fn, include_extras=True)  # annotations are strings here
    own_kw = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=evaluated[p.name]) for p in own]
    command.__signature__ = signature.replace(parameters=own_kw + extra, return_annotation=None)
    command.__annotations__ = {**{p.name: p.annotation for p in own_kw}, **hints}
    return command


def parse_values(text: str, cast=int) -> list:
    """'1,2,4..256' -> 1 2 4 8 ... 256 (geometric when the last two values given double or
    multiply evenly, else arithmetic); '16,8,4' -> the values as given."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        if parts and ".." in parts[-1]:
            last, stop = parts[-1].split("..")
            given = [cast(p) for p in parts[:-1]] + [cast(last)]
            stop = cast(stop)
            if len(given) < 2:
                raise ValueError
            a, b = given[-2], given[-1]
            geometric = a > 0 and b % a == 0 and b // a >= 2 if cast is int else False
            values = list(given)
            while True:
                nxt = values[-1] * (b // a) if geometric else values[-1] + (b - a)
                if (b > a and nxt > stop) or (b <= a) or len(values) > 100000:
                    break
                values.append(nxt)
            return values
        return [cast(p) for p in parts]
    except (ValueError, ZeroDivisionError):
        raise typer.BadParameter(f"cannot read the list '{text}': write values like 1,2,4..256") from None


def setting_values(raw: dict[str, Any], allow_lists: bool) -> dict[str, list]:
    """CLI deployment options -> {Settings field: [values]} (one value unless lists are allowed)."""
    from ridgeline.engine.workload import dtype_for_bits

    out: dict[str, list] = {}
    for name, text in raw.items():
        if text is None:
            continue
        field, kind, _help = SETTING_FIELDS[name]
        if field in out:
            raise typer.BadParameter(f"give --{name.replace('_', '-')} or its *-dtype/*-bits twin, not both")
        cast = int if kind == "bits" else kind
        values = parse_values(text, cast) if cast is not str else [v.strip() for v in str(text).split(",")]
        if kind == "bits":
            values = [dtype_for_bits(v, name.split("_")[0]) for v in values]
        if len(values) > 1 and not allow_lists:
            raise typer.BadParameter(
                f"--{name.replace('_', '-')} takes one value here; use 'ridgeline sweep' for lists"
            )
        out[field] = values
    return out


def single_settings(raw: dict[str, Any]) -> dict[str, Any]:
    return {field: values[0] for field, values in setting_values(raw, allow_lists=False).items()}


def deployment(
    model: str | None,
    config: Path | None,
    hardware: str,
    dtype: str | None,
    deploy: dict,
    profile: Path | None = None,
    transfer: bool = False,
):
    """Resolve the command's inputs once (ridgeline.resolve); print the notes it raised."""
    from ridgeline.io.resolve import resolve

    if transfer and profile is None:
        raise typer.BadParameter("--transfer needs --profile")
    d = resolve(
        model_name(model, config), hardware, dtype=dtype, profile=profile, transfer=transfer, **single_settings(deploy)
    )
    for note in d.notes:
        typer.echo(f"warning: {note}", err=True)
    return d


def console():
    from rich.console import Console

    from ridgeline.report import console_width

    return Console(highlight=False, soft_wrap=False, width=console_width())


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
    from ridgeline.io.files import write_atomic

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
@with_deployment
def analyze(
    model: ModelArg = None,
    config: ConfigOpt = None,
    hardware: HardwareOpt = "a6000",
    batch: BatchOpt = 1,
    seq_len: SeqLenOpt = 512,
    generate: GenerateOpt = 0,
    dtype: DtypeOpt = "fp16",
    deploy: dict = None,
    draft: Annotated[Optional[str], typer.Option(help="Draft model for speculative decoding.")] = None,
    draft_tokens: Annotated[int, typer.Option("--draft-tokens", help="Tokens the draft proposes per step (k).")] = 4,
    acceptance: Annotated[float, typer.Option(help="Probability each draft token is accepted (a).")] = 0.7,
    profile: ProfileOpt = None,
    transfer: TransferOpt = False,
    html: Annotated[Optional[Path], typer.Option(help="Also write the charts to one self-contained HTML file.")] = None,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Per-operator roofline of prefill and decode, generation totals and memory."""
    from dataclasses import replace

    from ridgeline.engine.analyze import analyze as run
    from ridgeline.report import render, rich_tables

    check_format(fmt)
    d = deployment(model, config, hardware, dtype, deploy, profile, transfer)
    result = run(d, batch=batch, seq_len=seq_len, generate=generate)
    if draft is not None:
        from ridgeline.api import speculative
        from ridgeline.engine.model import load_model

        spec = speculative(
            d,
            draft=d.with_model(load_model(draft)),
            batch=batch,
            seq_len=seq_len,
            draft_tokens=draft_tokens,
            acceptance=acceptance,
        )
        result = replace(result, extra={**result.extra, "speculative": spec})
    if html is not None:
        write_html(result, html)
    text = render(result, fmt)
    emit(text, rich_tables(result) if text is None else [], output)


def write_html(result, path: Path) -> None:
    """The dashboard's charts for one analysis, in one file (needs the viewer extra)."""
    try:
        from viewer.export import write_html as export
    except ImportError as err:
        from ridgeline.errors import MissingDependencyError

        raise MissingDependencyError("dash and plotly", "viewer") from err
    export(result, path)
    typer.echo(f"wrote {path}", err=True)


def table_or_text(
    frame, fmt: str, output: Path | None, title: str, notes: list[str] = (), mode: str | None = None
) -> None:
    """Print or write a DataFrame as a rich table, CSV or JSON records (with the ceilings'
    ``mode`` when one holds for every row)."""
    import json

    if fmt == "csv":
        emit(frame.to_csv(index=False), [], output)
    elif fmt == "json":
        head = {"mode": mode} if mode else {}
        emit(
            json.dumps(
                {**head, "rows": frame.to_dict(orient="records"), "notes": list(notes)}, indent=2, default=float
            ),
            [],
            output,
        )
    else:
        from ridgeline.report import frame_table

        emit(None, [*frame_table(frame, title), *notes], output)


@app.command()
@with_deployment
def sweep(
    model: ModelArg = None,
    config: ConfigOpt = None,
    hardware: HardwareOpt = "a6000",
    batch: Annotated[str, typer.Option(help="Batch sizes, e.g. 1,2,4..256.")] = "1",
    seq_len: Annotated[str, typer.Option("--seq-len", help="Prompt lengths, e.g. 512,1024..32768.")] = "512",
    generate: GenerateOpt = 0,
    dtype: DtypeOpt = "fp16",
    deploy: dict = None,
    profile: ProfileOpt = None,
    transfer: TransferOpt = False,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Every combination of the listed values, batch x length in one vectorised pass each."""
    import itertools

    from ridgeline.engine.analyze import sweep_each

    check_format(fmt)
    lists = setting_values(deploy, allow_lists=True)
    batches, lengths = parse_values(batch), parse_values(seq_len)
    variants = [dict(zip(lists, values)) for values in itertools.product(*lists.values())]
    d = deployment(model, config, hardware, dtype, {}, profile, transfer)
    with ProgressAfter(1.0) as progress:
        frame = sweep_each(d, variants, batches, lengths, generate, on_step=progress.step)
    table_or_text(
        frame,
        fmt,
        output,
        f"{d.model.name} on {d.device.name} ({d.mode} roofline): {len(batches) * len(lengths) * len(variants)} points",
        basis_notes(d),
        mode=d.mode,
    )


def basis_notes(d) -> list[str]:
    """What a deployment's numbers rest on, as the lines analyze prints (ridgeline.engine.basis)."""
    from ridgeline.engine.analyze import deployment_basis
    from ridgeline.engine.basis import basis_lines

    return basis_lines(deployment_basis(d))


class ProgressAfter:
    """A progress bar that shows only when the work looks set to take over ``seconds``."""

    def __init__(self, seconds: float):
        import time

        self.seconds, self.start, self.bar, self.task = seconds, time.perf_counter(), None, None

    def step(self, done: int, total: int) -> None:
        import time

        if self.bar is None:
            elapsed = time.perf_counter() - self.start
            if done < total and elapsed / done * total > self.seconds:
                from rich.console import Console
                from rich.progress import Progress

                self.bar = Progress(transient=True, console=Console(stderr=True))  # not into the data
                self.bar.start()
                self.task = self.bar.add_task("sweep", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def __enter__(self) -> ProgressAfter:
        return self

    def __exit__(self, *_exc) -> None:
        if self.bar is not None:
            self.bar.stop()


@app.command()
@with_deployment
def compare(
    model: ModelArg = None,
    config: ConfigOpt = None,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Devices, comma-separated.")] = "a6000,h100-sxm",
    batch: BatchOpt = 1,
    seq_len: SeqLenOpt = 512,
    generate: GenerateOpt = 128,
    dtype: DtypeOpt = "fp16",
    deploy: dict = None,
    profile: ProfileOpt = None,
    transfer: TransferOpt = False,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """The same model and workload across devices and settings: one row each."""
    import itertools

    from ridgeline.api import compare as run

    check_format(fmt)
    lists = setting_values(deploy, allow_lists=True)
    base = {"w_dtype": dtype, "a_dtype": dtype, "kv_dtype": dtype}
    variants = [
        {**{k: v for k, v in base.items() if k not in lists}, **dict(zip(lists, values))}
        for values in itertools.product(*lists.values())
    ]
    from ridgeline.io.resolve import resolve_each

    if transfer and profile is None:
        raise typer.BadParameter("--transfer needs --profile")
    devices = [d.strip() for d in hardware.split(",") if d.strip()]
    name = model_name(model, config)
    frame = run(
        resolve_each(name, devices, variants, profile=profile, transfer=transfer),
        batch=batch,
        seq_len=seq_len,
        generate=generate,
    )
    table_or_text(frame, fmt, output, f"{name}: batch {batch}, prompt {seq_len}, generate {generate}")


@app.command()
@with_deployment
def frontier(
    model: ModelArg = None,
    config: ConfigOpt = None,
    hardware: HardwareOpt = "a6000",
    seq_len: SeqLenOpt = 1024,
    generate: GenerateOpt = 256,
    tpot_slo: Annotated[Optional[float], typer.Option("--tpot-slo", help="Largest acceptable TPOT, seconds.")] = None,
    ttft_slo: Annotated[Optional[float], typer.Option("--ttft-slo", help="Largest acceptable TTFT, seconds.")] = None,
    dtype: DtypeOpt = "fp16",
    deploy: dict = None,
    profile: ProfileOpt = None,
    transfer: TransferOpt = False,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Latency against throughput across batch sizes up to the largest that fits, and the
    best throughput meeting --tpot-slo / --ttft-slo."""
    from ridgeline.api import frontier as run
    from ridgeline.engine.units import format_time
    from ridgeline.report import plain_number

    check_format(fmt)
    d = deployment(model, config, hardware, dtype, deploy, profile, transfer)
    frame, best = run(d, seq_len=seq_len, generate=generate, tpot_slo=tpot_slo, ttft_slo=ttft_slo)
    pick = best["best"]
    notes = [
        *basis_notes(d),
        f"largest batch that fits: {best['max_batch']}",
        (
            f"best throughput meeting the targets: batch {pick['batch']}, "
            f"{plain_number(pick['tokens_per_s'], 4)} tokens/s, TPOT {format_time(pick['tpot_s'])}, "
            f"TTFT {format_time(pick['ttft_s'])}"
        )
        if pick
        else "no batch meets the targets",
    ]
    table_or_text(
        frame,
        fmt,
        output,
        f"{d.model.name} on {d.device.name} ({d.mode} roofline): prompt {seq_len}, generate {generate}",
        notes,
        mode=d.mode,
    )


@hardware_app.command("list")
def hardware_list() -> None:
    """One device per line: name, then the key figures."""
    from ridgeline.engine.units import GIB, GIGA, TERA
    from ridgeline.io.hardware import list_devices, load_device

    for name in list_devices():
        d = load_device(name)
        peaks = " ".join(f"{k}={v / TERA:g}T" for k, v in d.matrix_peak.items())
        typer.echo(
            f"{name}\t{d.full_name}\t{d.memory_capacity / GIB:g} GiB\t{d.memory_bandwidth / GIGA:g} GB/s\t{peaks}"
        )


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Catalog name, 'host', or a YAML file.")],
    refresh: Annotated[
        bool, typer.Option("--refresh", help="host: detect and measure again (the result is kept for later runs).")
    ] = False,
) -> None:
    """All fields of one device, in the units of its file."""
    from ridgeline.engine.units import GIB, GIGA, KIB, MIB, TERA
    from ridgeline.io.hardware import detect_host, load_device

    if refresh and name != "host":
        raise typer.BadParameter("--refresh applies to 'host' only")
    d = detect_host(refresh=True) if refresh else load_device(name)
    rows = [
        ("name", d.name),
        ("full name", d.full_name),
        ("vendor", d.vendor),
        ("kind", d.kind),
        ("memory", f"{d.memory_capacity / GIB:g} GiB"),
        ("bandwidth", f"{d.memory_bandwidth / GIGA:g} GB/s"),
    ]
    rows += [(f"matrix {k}", f"{v / TERA:g} TOPS") for k, v in d.matrix_peak.items()]
    rows += [(f"vector {k}", f"{v / TERA:g} TOPS") for k, v in d.vector_peak.items()]
    rows += [
        ("compute units", str(d.compute_units)),
        ("L1/shared per unit", f"{d.l1_bytes_per_unit / KIB:g} KiB"),
        ("L2 / last-level cache", f"{d.l2_bytes / MIB:g} MiB"),
        (
            "interconnect",
            f"{d.interconnect or '-'}"
            + (f", {d.interconnect_bandwidth / GIGA:g} GB/s per direction" if d.interconnect_bandwidth else ""),
        ),
    ]
    if d.interconnect_latency:
        rows.append(("link latency", f"{d.interconnect_latency * 1e6:g} µs per hop"))
    if d.interconnect_link_bandwidth:
        rows.append(("fabric", f"mesh, {d.interconnect_link_bandwidth / GIGA:g} GB/s per peer link"))
    if d.exp_rate:
        rows.append(("exponentials", f"{d.exp_rate / TERA:g} T/s"))
    if d.runtime_reserve:
        rows.append(("runtime reserve", f"{d.runtime_reserve / GIB:g} GiB"))
    rows += [("source", s) for s in d.sources]
    for key, value in rows:
        typer.echo(f"{key:22s} {value}")


@models_app.command("list")
def models_list() -> None:
    """One model per line: name, then its shape."""
    from ridgeline.engine.model import list_models, load_model

    for name in list_models():
        m = load_model(name)
        moe = f"\tMoE {m.num_experts} experts, top-{m.num_experts_per_tok}" if m.is_moe else ""
        typer.echo(
            f"{name}\t{m.model_type}\t{m.num_layers} layers\thidden {m.hidden_size}\t"
            f"{m.attention_kind} {m.num_heads}/{m.num_kv_heads} heads{moe}"
        )


@models_app.command("show")
def models_show(name: Annotated[str, typer.Argument(help="Catalog name or a config.json path.")]) -> None:
    """The parsed ModelConfig and its parameter count."""
    from dataclasses import asdict

    from ridgeline.engine.memory import active_parameters, total_parameters
    from ridgeline.engine.model import load_model

    m = load_model(name)
    for key, value in asdict(m).items():
        typer.echo(f"{key:32s} {value}")
    typer.echo(f"{'parameters':32s} {total_parameters(m) / 1e9:.3f} B")
    if m.is_moe:
        typer.echo(f"{'active parameters':32s} {active_parameters(m) / 1e9:.3f} B")


@app.command()
def e2e(
    model: ModelArg = None,
    config: ConfigOpt = None,
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when torch sees one).")] = None,
    batch: Annotated[list[int], typer.Option(help="Sequences per batch; repeat the option for several.")] = [1],  # noqa: B006
    prompt: Annotated[list[int], typer.Option(help="Prompt tokens; repeat the option for several.")] = [128],  # noqa: B006
    generate: Annotated[int, typer.Option(help="Output tokens: the prefill's token + N-1 decode steps.")] = 16,
    layers: Annotated[
        Optional[int], typer.Option(help="Keep only the first L decoder layers (prediction too).")
    ] = None,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16 for weights, activations and KV cache.")] = "bf16",
    compile: Annotated[
        bool, typer.Option("--compile", help="Also measure under torch.compile (eager is always measured).")
    ] = False,
    execution: Annotated[
        Optional[list[str]],
        typer.Option(
            help="eager, compiled or graph (CUDA graphs of the decode step); repeat for several (default: eager, and compiled with --compile)."
        ),
    ] = None,
    repeats: Annotated[int, typer.Option(help="Timed generations per configuration (median kept).")] = 5,
    threads: Annotated[Optional[int], typer.Option(help="torch CPU threads (default: torch's).")] = None,
    hardware: Annotated[
        str, typer.Option("--hardware", "-H", help="Device for the spec prediction: 'host' or a catalog name.")
    ] = "host",
    profile: ProfileOpt = None,
    output: Annotated[
        Optional[Path],
        typer.Option(
            "--output",
            "-o",
            help="Result JSON (default: <user data folder>/validation/e2e-<device>-<model>-<date>.json, rows of a configuration measured again replaced; with --repredict: ./<stem>-repredicted.json).",
        ),
    ] = None,
    repredict: Annotated[
        Optional[Path],
        typer.Option(help="Measure nothing: recompute the predictions of this e2e result file into a new file."),
    ] = None,
    quiet_wait: Annotated[
        float,
        typer.Option(help="CPU: before each timed run, wait up to this many seconds for other processes to go idle."),
    ] = 0.0,
) -> None:
    """Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions."""
    if repredict is None:  # measuring needs torch; predicting a file again does not
        require_torch("'ridgeline e2e'")
    from kernels.e2e.e2e import run_command

    name = model_name(model, config) if repredict is None else None  # a file names its models
    for line in run_command(
        name,
        device=device,
        batch=batch,
        prompt=prompt,
        generate=generate,
        layers=layers,
        dtype=dtype,
        compile=compile,
        repeats=repeats,
        threads=threads,
        hardware=hardware,
        profile=profile,
        output=output,
        repredict_path=repredict,
        quiet_wait_s=quiet_wait,
        executions=tuple(execution or ()),
        log=lambda msg: typer.echo(msg, err=True),
    ):
        typer.echo(line)


@app.command("decode-profile")
def decode_profile(
    model: ModelArg = None,
    config: ConfigOpt = None,
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when torch sees one).")] = None,
    batch: Annotated[int, typer.Option(help="Sequences per batch.")] = 1,
    prompt: Annotated[int, typer.Option(help="Cached tokens before the first decode step.")] = 512,
    steps: Annotated[int, typer.Option(help="Decode steps per pass.")] = 16,
    layers: Annotated[Optional[int], typer.Option(help="Keep only the first L decoder layers.")] = None,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "bf16",
    ops: Annotated[
        bool, typer.Option("--ops", help="Also time each engine op (profiler ranges) beside its prediction.")
    ] = False,
    threads: Annotated[
        Optional[int],
        typer.Option(help="torch CPU threads (default: torch's); the calibrated profile is the one of this count."),
    ] = None,
) -> None:
    """Split an eager decode step into host dispatch and device work (is it host-bound?)."""
    require_torch("'ridgeline decode-profile'")
    from kernels.e2e.decode_profile import run
    from ridgeline.engine.model import load_model

    for line in run(
        load_model(model_name(model, config)),
        batch=batch,
        prompt=prompt,
        steps=steps,
        layers=layers,
        dtype=dtype,
        device=device,
        ops=ops,
        threads=threads,
    ):
        typer.echo(line)


@app.command()
@with_deployment
def simulate(
    model: ModelArg = None,
    config: ConfigOpt = None,
    hardware: HardwareOpt = "a6000",
    rate: Annotated[float, typer.Option(help="Poisson arrivals, requests per second (start of --search).")] = 1.0,
    requests: Annotated[int, typer.Option(help="Poisson requests to simulate.")] = 1000,
    prompt: Annotated[int, typer.Option(help="Prompt tokens per Poisson request.")] = 512,
    output_tokens: Annotated[int, typer.Option("--output-tokens", help="Output tokens per Poisson request.")] = 128,
    trace: Annotated[
        Optional[Path],
        typer.Option(
            help="CSV/JSONL trace: arrival_s, prompt_tokens, output_tokens (or Azure's TIMESTAMP, ContextTokens, GeneratedTokens)."
        ),
    ] = None,
    time_scale: Annotated[float, typer.Option("--time-scale", help="Replay the trace this many times faster.")] = 1.0,
    max_batch: Annotated[int, typer.Option("--max-batch", help="Sequences per step.")] = 256,
    token_budget: Annotated[
        int, typer.Option("--token-budget", help="Tokens per step (prefill chunks + decodes).")
    ] = 2048,
    chunked_prefill: Annotated[
        bool, typer.Option("--chunked-prefill/--no-chunked-prefill", help="Split prompts to fit the token budget.")
    ] = True,
    prefix_hit: Annotated[
        float, typer.Option("--prefix-hit", help="Fraction of each prompt found in the prefix cache.")
    ] = 0.0,
    kv_blocks: Annotated[
        Optional[int], typer.Option("--kv-blocks", help="Paged KV blocks (default: what memory leaves).")
    ] = None,
    admit_margin: Annotated[
        float,
        typer.Option(
            "--admit-margin", help="New prompts wait below this fraction of free KV blocks (transformers: 0.15)."
        ),
    ] = 0.0,
    step_overhead: Annotated[
        float,
        typer.Option(
            "--step-overhead",
            help="Host seconds per step beyond the forward (measured: simulate-check --fit-overhead).",
        ),
    ] = 0.0,
    request_overhead: Annotated[
        float, typer.Option("--request-overhead", help="Host seconds per request in a step, on top of --step-overhead.")
    ] = 0.0,
    host_overlap: Annotated[
        bool,
        typer.Option(
            "--host-overlap",
            help="The host terms overlap the device's work (a GPU run eager): a step takes the longer of the forward and the host terms, not their sum.",
        ),
    ] = False,
    batch_attention: Annotated[
        str,
        typer.Option(
            "--batch-attention",
            help="varlen: each sequence attends to its own keys (vLLM); masked: one attention over the whole step under a block-diagonal mask; gather: masked as transformers' sdpa path runs it (cache written and read back by index, GQA heads repeated).",
        ),
    ] = "varlen",
    seed: Annotated[int, typer.Option(help="Seed of the Poisson arrivals.")] = 0,
    ttft_slo: Annotated[Optional[float], typer.Option("--ttft-slo", help="TTFT target, seconds.")] = None,
    tpot_slo: Annotated[Optional[float], typer.Option("--tpot-slo", help="TPOT target, seconds.")] = None,
    percentile: Annotated[float, typer.Option(help="Percentile the SLOs apply to.")] = 99.0,
    search: Annotated[bool, typer.Option("--search", help="Find the highest request rate meeting the SLOs.")] = False,
    timeline: Annotated[
        Optional[Path], typer.Option(help="Also write the step timeline (KV use, batch) as CSV.")
    ] = None,
    dtype: DtypeOpt = "fp16",
    deploy: dict = None,
    profile: ProfileOpt = None,
    transfer: TransferOpt = False,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Serve requests with continuous batching: latency percentiles, throughput, KV use."""
    import json

    from ridgeline.io.files import write_atomic
    from ridgeline.io.traces import load_trace, poisson
    from ridgeline.serving.simulator import Scheduler, goodput, max_rate
    from ridgeline.serving.simulator import simulate as run

    check_format(fmt)
    if not 0 < percentile <= 100:
        raise typer.BadParameter(f"--percentile must be in (0, 100], got {percentile}")
    d = deployment(model, config, hardware, dtype, deploy, profile, transfer)
    sched = Scheduler(
        max_batch=max_batch,
        token_budget=token_budget,
        chunked_prefill=chunked_prefill,
        prefix_hit=prefix_hit,
        kv_blocks=kv_blocks,
        admit_margin=admit_margin,
        step_overhead_s=step_overhead,
        request_overhead_s=request_overhead,
        host_overlap=host_overlap,
        batch_attention=batch_attention,
    )
    base = load_trace(trace).scaled(time_scale) if trace is not None else None

    def arrivals(at: float):
        if base is not None:
            return base.scaled(at / base.rate)
        return poisson(at, requests, prompt, output_tokens, seed)

    with simulation_progress(requests if base is None else len(base)) as tick:
        found = None
        if search:
            found = max_rate(
                lambda at: run(d, None, arrivals(at), sched),
                ttft_slo,
                tpot_slo,
                percentile,
                start=base.rate if base is not None else rate,
            )
        first = (
            base
            if base is not None and not search
            else arrivals(found["max_rate"] if found and found["max_rate"] else rate)
        )
        result = run(d, None, first, sched, progress=tick)
    slo = goodput(result, ttft_slo, tpot_slo)
    if timeline is not None:
        write_atomic(timeline, result.timeline_frame.to_csv(index=False))
        typer.echo(f"wrote {timeline}", err=True)
    if fmt == "csv":
        emit(result.frame.to_csv(index=False), [], output)
        return
    if fmt == "json":
        data = {**result.to_dict(), "goodput": slo, "search": found}
        emit(json.dumps(data, indent=1, allow_nan=False, default=float), [], output)
        return
    emit(None, simulation_tables(result, slo, found, percentile), output)


def simulation_progress(total: int):
    """A transient rich progress bar for long runs (more than 20 000 requests)."""
    import contextlib

    if total <= 20000:
        return contextlib.nullcontext(None)
    from rich.progress import Progress

    @contextlib.contextmanager
    def bar():
        with Progress(transient=True) as progress:
            task = progress.add_task("simulating", total=total)
            yield lambda done, _total: progress.update(task, completed=done)

    return bar()


def simulation_tables(result, slo: dict, found: dict | None, percentile: float) -> list:
    from rich.table import Table

    from ridgeline.engine.units import format_time

    s = result.summary
    table = Table(
        title=f"{result.meta['model']} on {result.meta['hardware']} ({result.meta['mode']}): "
        f"{s['requests']} requests, {s['steps']} steps"
    )
    for col in ("", "p50", "p90", "p99", "mean"):
        table.add_column(col, justify="right")
    for key, label in (("queue_s", "queueing"), ("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "latency")):
        table.add_row(label, *(format_time(s[key][q]) for q in ("p50", "p90", "p99", "mean")))
    lines = [
        table,
        f"throughput {s['requests_per_s']:.4g} requests/s, {s['output_tokens_per_s']:.4g} "
        f"output tokens/s over {s['duration_s']:.4g} s",
        f"KV cache {s['kv_blocks']} blocks of {s['kv_block_tokens']} tokens: peak "
        f"{s['kv_peak_fraction']:.1%}, mean {s['kv_mean_fraction']:.1%}; "
        f"{s['preemptions']} preemptions ({s['recomputed_tokens']} tokens recomputed)",
        f"goodput {slo['goodput_rps']:.4g} requests/s ({slo['slo_attainment']:.1%} met the SLOs)",
    ]
    if found is not None:
        lines.append(
            f"highest rate meeting the p{percentile:g} SLOs: {found['max_rate']:.4g} "
            f"requests/s ({len(found['tried'])} runs)"
        )
    return lines


@app.command("simulate-check")
def simulate_check(
    model: Annotated[str, typer.Argument(help="Catalog model (built with random weights).")] = "qwen2-0.5b",
    layers: Annotated[Optional[int], typer.Option(help="Keep only the first L decoder layers.")] = None,
    requests: Annotated[int, typer.Option(help="Requests in the Poisson trace.")] = 48,
    rate: Annotated[float, typer.Option(help="Requests per second.")] = 2.0,
    prompt_range: Annotated[
        tuple[int, int], typer.Option("--prompt-range", help="Prompt tokens, uniform on MIN MAX.")
    ] = CHECK_PROMPT_RANGE,
    output_range: Annotated[
        tuple[int, int], typer.Option("--output-range", help="Output tokens, uniform on MIN MAX.")
    ] = CHECK_OUTPUT_RANGE,
    repeats: Annotated[int, typer.Option(help="Replays of the trace (per-request medians).")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the trace and the prompts.")] = 0,
    dtype: Annotated[
        str, typer.Option(help="Model data type: bf16, or fp32 on a CPU without bf16 kernels (see 'calibrate').")
    ] = "bf16",
    clock: Annotated[
        Optional[str],
        typer.Option(
            help="cpu: step transformers' server here on a clock of CPU seconds (immune to other processes); device (a GPU): the same, each step's wall seconds with the GPU synchronised; wall: its background thread in real time. Default: cpu, or device with --device cuda."
        ),
    ] = None,
    device: Annotated[
        str,
        typer.Option(
            help="cpu, or cuda: transformers on the GPU, eager (no CUDA graphs), simulated in eager execution with the GPU's profile."
        ),
    ] = "cpu",
    overhead_from: Annotated[
        Optional[Path],
        typer.Option(
            "--overhead-from", help="Also simulate with the host terms fitted to this recorded run (another trace)."
        ),
    ] = None,
    fit_overhead: Annotated[
        Optional[Path],
        typer.Option(
            "--fit-overhead",
            help="Measure nothing: fit the host terms (seconds per step, per request) to this recorded run's steps and print them.",
        ),
    ] = None,
    resimulate: Annotated[
        Optional[Path],
        typer.Option(
            help="Measure nothing: simulate this recorded run's trace again with today's engine and print the comparison."
        ),
    ] = None,
    profile: ProfileOpt = None,
    output: OutputOpt = None,
) -> None:
    """Replay a trace on transformers' continuous batching (CPU or GPU) and compare with the simulator."""
    from kernels.servecheck.cb_server import overhead_from as fitted

    overhead = fitted(overhead_from) if overhead_from is not None else None
    if fit_overhead is not None:
        terms = fitted(fit_overhead)
        typer.echo(
            f"--step-overhead {terms['step_overhead_s']:.6f} --request-overhead "
            f"{terms['request_overhead_s']:.6f}"
            + (" --host-overlap" if terms.get("host_overlap") else "")
            + f"  ({terms['steps']} steps of {fit_overhead}: mean {terms['mean_other_s'] * 1e3:.3f} ms "
            + ("a step (a GPU run eager: host-bound steps)" if terms.get("host_overlap") else "beside the forward")
            + ", rms residual "
            f"{terms['rms_residual_s'] * 1e3:.3f} ms)"
        )
        return
    if resimulate is not None:
        from kernels.servecheck.cb_server import report_lines
        from kernels.servecheck.cb_server import resimulate as rerun

        for line in report_lines(rerun(resimulate, overhead, profile=profile)):
            typer.echo(line)
        return
    try:
        import transformers  # noqa: F401
    except ImportError:
        from ridgeline.errors import MissingDependencyError

        raise MissingDependencyError("transformers", "hf") from None
    from kernels.servecheck.cb_server import report_lines, run_check

    gpu = device.startswith("cuda")
    clock = clock or ("device" if gpu else "cpu")
    if requests < 2 or rate <= 0 or repeats < 1 or clock not in ("cpu", "wall", "device"):
        raise typer.BadParameter("--requests must be >= 2, --rate > 0, --repeats >= 1 and --clock cpu, device or wall")
    if (clock == "device") != gpu and clock != "wall":
        raise typer.BadParameter(f"--clock {clock} goes with --device {'cpu' if clock == 'cpu' else 'cuda'}")
    from kernels.e2e.e2e import resolve_device

    device = resolve_device(device)
    if dtype not in ("bf16", "fp32"):
        raise typer.BadParameter(f"--dtype {dtype!r}: transformers' check runs bf16 or fp32")
    if not 1 <= prompt_range[0] <= prompt_range[1] or not 1 <= output_range[0] <= output_range[1]:
        raise typer.BadParameter("--prompt-range and --output-range take MIN MAX with 1 <= MIN <= MAX")
    result, path = run_check(
        model,
        layers=layers,
        requests=requests,
        rate=rate,
        prompt=prompt_range,
        output=output_range,
        repeats=repeats,
        seed=seed,
        clock=clock,
        out=output,
        overhead=overhead,
        dtype=dtype,
        profile=profile,
        device=device,
        log=lambda msg: typer.echo(msg, err=True),
    )
    for line in report_lines(result):
        typer.echo(line)
    typer.echo(f"wrote {path}", err=True)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind; the default keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8050,
    debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, error pop-ups).")] = False,
    waitress: Annotated[
        bool,
        typer.Option(
            "--waitress", help="Serve with waitress, a production WSGI server, instead of Flask's development server."
        ),
    ] = False,
    threads: Annotated[int, typer.Option(min=1, help="waitress: requests served at once.")] = 8,
) -> None:
    """Start the dashboard (Dash) and print its URL."""
    from ridgeline.errors import MissingDependencyError

    if waitress and debug:
        raise typer.BadParameter("--debug runs Flask's development server; drop --debug or --waitress")
    try:
        from viewer.app import create_app
    except ImportError as err:
        raise MissingDependencyError("dash, plotly and dash-cytoscape", "viewer") from err
    if waitress:
        try:
            from waitress import serve as wsgi_serve
        except ImportError as err:
            raise MissingDependencyError("waitress", "viewer") from err
    dashboard = create_app()
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"ridgeline dashboard on http://{shown}:{port}/ (Ctrl+C stops it)")
    try:
        if waitress:
            wsgi_serve(dashboard.server, host=host, port=port, threads=threads)
        else:
            # no version check: it calls plotly.com, and the dashboard works offline
            dashboard.run(host=host, port=port, debug=debug, dev_tools_disable_version_check=True)
    except OSError as err:
        raise RidgelineError(f"cannot listen on {host}:{port} ({err.strerror or err}); pick another --port") from None


MeasureDeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda.")]
QuickOpt = Annotated[bool, typer.Option("--quick", help="Fewer shapes and repetitions (CI: a few minutes on 2 cores).")]
ThreadsOpt = Annotated[
    Optional[int], typer.Option(help="torch CPU threads, fixed for the run (default: all cores this process may use).")
]


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"--device must be cpu or cuda, got '{device}'")


QuietWaitOpt = Annotated[
    float,
    typer.Option(
        "--quiet-wait", help="CPU: before each case, wait up to this many seconds for other processes to go idle."
    ),
]


@app.command()
def calibrate(
    device: MeasureDeviceOpt = "cpu",
    quick: QuickOpt = False,
    threads: ThreadsOpt = None,
    output: Annotated[
        Optional[Path],
        typer.Option(
            "--output",
            "-o",
            help="Profile path (default: <user data folder>/profiles/<device>.yaml; with --refit: ./<stem>.refit.yaml).",
        ),
    ] = None,
    refit: Annotated[
        Optional[Path],
        typer.Option(
            "--refit", help="Measure nothing: fit this profile again from its stored calibration rows into a new file."
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Write nothing: measure the profile's own roofs again (about 20 s) and say whether this machine is still in the state they were measured in; exit 1 if one moved more than 10%.",
        ),
    ] = False,
    profile: ProfileOpt = None,
    quiet_wait: QuietWaitOpt = 0.0,
) -> None:
    """Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile."""
    _check_device(device)
    if profile is not None and not check:
        raise typer.BadParameter("--profile goes with --check (calibrate measures this machine into --output)")
    if check and (refit is not None or output is not None):
        raise typer.BadParameter("--check writes nothing: drop --refit and --output")
    if check:
        require_torch("'ridgeline calibrate --check'")
        from kernels.validate.state import check as run_check

        record = run_check(device, threads, profile, log=lambda msg: typer.echo(msg, err=True))
        raise typer.Exit(1 if record["drifted"] else 0)
    if refit is not None:
        from kernels.calibrate.calibrate import refit as run_refit

        run_refit(refit, output, log=lambda msg: typer.echo(msg, err=True))
        return
    require_torch("'ridgeline calibrate'")
    from kernels.calibrate.calibrate import calibrate as run

    run(
        device,
        quick=quick,
        threads=threads,
        output=output,
        quiet_wait_s=quiet_wait,
        log=lambda msg: typer.echo(msg, err=True),
    )


@app.command()
def validate(
    device: MeasureDeviceOpt = "cpu",
    quick: QuickOpt = False,
    threads: ThreadsOpt = None,
    profile: ProfileOpt = None,
    output_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--output-dir",
            help="Folder for the JSON/CSV/HTML (default: <user data folder>/validation; with --repredict: the current folder).",
        ),
    ] = None,
    repredict: Annotated[
        Optional[Path],
        typer.Option(
            "--repredict",
            help="Measure nothing: predict this snapshot JSON again (with --profile or the profile it used) into <stem>-repredicted.*.",
        ),
    ] = None,
    quiet_wait: QuietWaitOpt = 0.0,
    draw: Annotated[
        Optional[int],
        typer.Option(
            "--draw",
            help="Measure a fresh held-out set drawn with this seed instead of the committed one: two catalog models, batch sizes and context lengths that calibration never uses (written as <stem>-draw<SEED>.*).",
        ),
    ] = None,
) -> None:
    """Measure held-out kernel shapes and compare them with the spec and calibrated predictions."""
    _check_device(device)
    from kernels.validate.validate import failures, rich_summary

    if draw is not None and (draw < 0 or repredict is not None):
        raise typer.BadParameter("--draw takes a seed >= 0 and measures: it does not go with --repredict")
    if repredict is not None:
        from kernels.validate.validate import repredict as rerun

        result, paths = rerun(repredict, profile, output_dir, log=lambda msg: typer.echo(msg, err=True))
    else:
        require_torch("'ridgeline validate'")
        from kernels.validate.validate import validate as run

        result, paths = run(
            device,
            quick=quick,
            threads=threads,
            profile=profile,
            output_dir=output_dir,
            quiet_wait_s=quiet_wait,
            draw=draw,
            log=lambda msg: typer.echo(msg, err=True),
        )
    import pandas as pd

    console().print(
        rich_summary(pd.DataFrame(result["summary"]), f"{result['meta']['device_key']}: |predicted / measured - 1|")
    )
    for path in paths.values():
        typer.echo(f"wrote {path}", err=True)
    problems = failures(result)
    for line in problems:
        typer.echo(f"error: {line}", err=True)
    if problems:
        raise typer.Exit(1)


@predictions_app.command("register")
def predictions_register(
    hardware: HardwareOpt = "h200",
    profile: ProfileOpt = None,
    sizes: Annotated[str, typer.Option(help="The run's sizes preset (kernels/gpu/plan.py): gpu, or cpu-test.")] = "gpu",
    transfer: Annotated[
        bool,
        typer.Option(
            "--transfer",
            help="The profile is another GPU's of the same architecture: its fractions on this GPU's datasheet roofs (for a GPU with no device-time profile of its own).",
        ),
    ] = False,
    output: OutputOpt = None,
) -> None:
    """Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels)."""
    import json

    from kernels.bench.provenance import git_commit
    from kernels.gpu.register import PREDICTIONS_DIR, register
    from ridgeline.io.files import write_atomic

    commit = git_commit()
    if profile is not None and not profile.is_file():
        raise typer.BadParameter(f"--profile {profile}: no such file")
    target = (
        output or PREDICTIONS_DIR / f"{hardware}-{commit[:12] + ('-dirty' if commit.endswith('+dirty') else '')}.json"
    )
    if target.exists():
        raise typer.BadParameter(f"{target} exists: registered predictions are never written over; pass -o NEW.json")
    data = register(hardware, profile, sizes, commit, transfer)
    write_atomic(target, json.dumps(data, indent=1, allow_nan=False) + "\n")
    typer.echo(
        f"registered {len(data['e2e'])} e2e, {len(data['hf'])} transformers, "
        f"{len(data['serving'])} serving and {len(data['draw']['cases'])} draw predictions: {target}"
    )


@predictions_app.command("compare")
def predictions_compare(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="A run's OUT/results.tar.gz, or the folder it unpacks to; several for stages run again later (a later file of the same name replaces an earlier)."
        ),
    ],
    predictions: Annotated[Path, typer.Option(help="The registered predictions (reports/predictions/*.json).")],
    output: OutputOpt = None,
) -> None:
    """After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o)."""
    import json

    from kernels.gpu.register import compare, markdown
    from ridgeline.io.files import write_atomic

    table = compare(results, predictions)
    text = markdown(table)
    if output is None:
        typer.echo(text, nl=False)
        return
    write_atomic(output, text)
    write_atomic(output.with_suffix(".json"), json.dumps(table, indent=1, default=float) + "\n")
    typer.echo(f"wrote {output} and {output.with_suffix('.json')}")


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
