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
ProfileOpt = Annotated[Optional[Path], typer.Option("--profile", help="Measured device profile (reports/profiles/*.yaml): calibrated roofline.")]

# Deployment settings (ridgeline.workload.Settings), shared by analyze, sweep, compare and
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
}


def with_deployment(fn):
    """Add the deployment options (SETTING_FIELDS) to a command's signature and hand them
    to it as one ``deploy`` dict, so each command declares them once."""
    import functools
    import inspect
    import typing

    hints = {name: Annotated[Optional[str], typer.Option(f"--{name.replace('_', '-')}", help=text)]
             for name, (_field, _kind, text) in SETTING_FIELDS.items()}
    signature = inspect.signature(fn)
    own = [p for p in signature.parameters.values() if p.name != "deploy"]
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=h)
             for n, h in hints.items()]

    @functools.wraps(fn)
    def command(**kwargs):
        deploy = {name: kwargs.pop(name) for name in SETTING_FIELDS}
        return fn(deploy=deploy, **kwargs)

    evaluated = typing.get_type_hints(fn, include_extras=True)  # annotations are strings here
    own_kw = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=evaluated[p.name])
              for p in own]
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
    from .workload import dtype_for_bits

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
            raise typer.BadParameter(f"--{name.replace('_', '-')} takes one value here; use 'ridgeline sweep' for lists")
        out[field] = values
    return out


def single_settings(raw: dict[str, Any]) -> dict[str, Any]:
    return {field: values[0] for field, values in setting_values(raw, allow_lists=False).items()}


def ceilings_for(profile: Path | None, hardware: str):
    """Calibrated ceilings from a measured profile, or None (the spec roofline)."""
    if profile is None:
        return None
    from .hardware import load_device
    from .profile import calibrated_ceilings, load_profile

    return calibrated_ceilings(load_profile(profile), load_device(hardware))


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
@with_deployment
def analyze(model: ModelArg = None, config: ConfigOpt = None, hardware: HardwareOpt = "a6000",
            batch: BatchOpt = 1, seq_len: SeqLenOpt = 512, generate: GenerateOpt = 0,
            dtype: DtypeOpt = "fp16", deploy: dict = None,
            draft: Annotated[Optional[str], typer.Option(help="Draft model for speculative decoding.")] = None,
            draft_tokens: Annotated[int, typer.Option("--draft-tokens", help="Tokens the draft proposes per step (k).")] = 4,
            acceptance: Annotated[float, typer.Option(help="Probability each draft token is accepted (a).")] = 0.7,
            profile: ProfileOpt = None,
            html: Annotated[Optional[Path], typer.Option(help="Also write the charts to one self-contained HTML file.")] = None,
            fmt: FormatOpt = "table", output: OutputOpt = None) -> None:
    """Per-operator roofline of prefill and decode, generation totals and memory."""
    from dataclasses import replace

    from .analyze import analyze as run
    from .report import render, rich_tables

    check_format(fmt)
    options = single_settings(deploy)
    name = model_name(model, config)
    result = run(name, hardware, batch=batch, seq_len=seq_len, generate=generate, dtype=dtype,
                 ceilings=ceilings_for(profile, hardware), **options)
    if draft is not None:
        from .serving import speculative

        spec = speculative(name, hardware, draft, batch=batch, seq_len=seq_len,
                           draft_tokens=draft_tokens, acceptance=acceptance,
                           settings=result.settings)
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
        from .errors import MissingDependencyError

        raise MissingDependencyError("dash and plotly", "viewer") from err
    export(result, path)
    typer.echo(f"wrote {path}", err=True)


def table_or_text(frame, fmt: str, output: Path | None, title: str, notes: list[str] = ()) -> None:
    """Print or write a DataFrame as a rich table, CSV or JSON records."""
    import json

    if fmt == "csv":
        emit(frame.to_csv(index=False), [], output)
    elif fmt == "json":
        emit(json.dumps({"rows": frame.to_dict(orient="records"), "notes": list(notes)}, indent=2,
                        default=float), [], output)
    else:
        from .report import frame_table

        emit(None, [frame_table(frame, title), *notes], output)


@app.command()
@with_deployment
def sweep(model: ModelArg = None, config: ConfigOpt = None, hardware: HardwareOpt = "a6000",
          batch: Annotated[str, typer.Option(help="Batch sizes, e.g. 1,2,4..256.")] = "1",
          seq_len: Annotated[str, typer.Option("--seq-len", help="Prompt lengths, e.g. 512,1024..32768.")] = "512",
          generate: GenerateOpt = 0, dtype: DtypeOpt = "fp16", deploy: dict = None,
          profile: ProfileOpt = None,
          fmt: FormatOpt = "table", output: OutputOpt = None) -> None:
    """Every combination of the listed values, batch x length in one vectorised pass each."""
    import itertools
    import time

    import pandas as pd

    from .analyze import sweep as run

    check_format(fmt)
    lists = setting_values(deploy,
        allow_lists=True)
    batches, lengths = parse_values(batch), parse_values(seq_len)
    combos = [dict(zip(lists, values)) for values in itertools.product(*lists.values())]
    name, roofs = model_name(model, config), ceilings_for(profile, hardware)
    frames, start = [], time.perf_counter()
    progress = None
    for i, options in enumerate(combos):
        frame = run(name, hardware, batches, lengths, generate, dtype=dtype, ceilings=roofs, **options)
        for key, value in options.items():
            frame.insert(0, key, value)
        frames.append(frame)
        elapsed = time.perf_counter() - start
        if progress is None and elapsed / (i + 1) * len(combos) > 1.0 and i + 1 < len(combos):
            from rich.progress import Progress

            progress = Progress(transient=True)
            progress.start()
            task = progress.add_task("sweep", total=len(combos), completed=i + 1)
        elif progress is not None:
            progress.update(task, completed=i + 1)
    if progress is not None:
        progress.stop()
    table_or_text(pd.concat(frames, ignore_index=True), fmt, output,
                  f"{name} on {hardware}: {len(batches) * len(lengths) * len(combos)} points")


@app.command()
@with_deployment
def compare(model: ModelArg = None, config: ConfigOpt = None,
            hardware: Annotated[str, typer.Option("--hardware", "-H", help="Devices, comma-separated.")] = "a6000,h100-sxm",
            batch: BatchOpt = 1, seq_len: SeqLenOpt = 512, generate: GenerateOpt = 128,
            dtype: DtypeOpt = "fp16", deploy: dict = None,
            fmt: FormatOpt = "table", output: OutputOpt = None) -> None:
    """The same model and workload across devices and settings: one row each."""
    import itertools

    from .serving import compare as run

    check_format(fmt)
    lists = setting_values(deploy,
        allow_lists=True)
    base = {"w_dtype": dtype, "a_dtype": dtype, "kv_dtype": dtype}
    variants = [{**{k: v for k, v in base.items() if k not in lists}, **dict(zip(lists, values))}
                for values in itertools.product(*lists.values())]
    devices = [d.strip() for d in hardware.split(",") if d.strip()]
    name = model_name(model, config)
    frame = run(name, devices, variants, batch=batch, seq_len=seq_len, generate=generate)
    table_or_text(frame, fmt, output, f"{name}: batch {batch}, prompt {seq_len}, generate {generate}")


@app.command()
@with_deployment
def frontier(model: ModelArg = None, config: ConfigOpt = None, hardware: HardwareOpt = "a6000",
             seq_len: SeqLenOpt = 1024, generate: GenerateOpt = 256,
             tpot_slo: Annotated[Optional[float], typer.Option("--tpot-slo", help="Largest acceptable TPOT, seconds.")] = None,
             ttft_slo: Annotated[Optional[float], typer.Option("--ttft-slo", help="Largest acceptable TTFT, seconds.")] = None,
             dtype: DtypeOpt = "fp16", deploy: dict = None,
             fmt: FormatOpt = "table", output: OutputOpt = None) -> None:
    """Latency against throughput across batch sizes up to the largest that fits, and the
    best throughput meeting --tpot-slo / --ttft-slo."""
    from .serving import frontier as run

    check_format(fmt)
    options = single_settings(deploy)
    name = model_name(model, config)
    frame, best = run(name, hardware, seq_len, generate, tpot_slo=tpot_slo, ttft_slo=ttft_slo,
                      dtype=dtype, **options)
    pick = best["best"]
    notes = [f"largest batch that fits: {best['max_batch']}",
             (f"best throughput meeting the targets: batch {pick['batch']}, "
              f"{pick['tokens_per_s']:.4g} tokens/s, TPOT {pick['tpot_s'] * 1e3:.3g} ms, "
              f"TTFT {pick['ttft_s'] * 1e3:.3g} ms") if pick else "no batch meets the targets"]
    table_or_text(frame, fmt, output, f"{name} on {hardware}: prompt {seq_len}, generate {generate}", notes)


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

    from .layers import Plan
    from .memory import weight_bytes
    from .model import load_model

    m = load_model(name)
    for key, value in asdict(m).items():
        typer.echo(f"{key:32s} {value}")
    params = weight_bytes(m, Plan(1, 1, 1, "fp16", "fp16"))
    typer.echo(f"{'parameters':32s} {params / 1e9:.3f} B")


@app.command()
def e2e(model: ModelArg = None, config: ConfigOpt = None,
        device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when torch sees one).")] = None,
        batch: Annotated[list[int], typer.Option(help="Sequences per batch; repeat the option for several.")] = [1],  # noqa: B006
        prompt: Annotated[list[int], typer.Option(help="Prompt tokens; repeat the option for several.")] = [128],  # noqa: B006
        generate: Annotated[int, typer.Option(help="Output tokens: the prefill's token + N-1 decode steps.")] = 16,
        layers: Annotated[Optional[int], typer.Option(help="Keep only the first L decoder layers (prediction too).")] = None,
        dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16 for weights, activations and KV cache.")] = "bf16",
        compile: Annotated[bool, typer.Option("--compile", help="Also measure under torch.compile (eager is always measured).")] = False,
        repeats: Annotated[int, typer.Option(help="Timed generations per configuration (median kept).")] = 5,
        threads: Annotated[Optional[int], typer.Option(help="torch CPU threads (default: torch's).")] = None,
        hardware: Annotated[str, typer.Option("--hardware", "-H", help="Device for the spec prediction: 'host' or a catalog name.")] = "host",
        profile: Annotated[Optional[Path], typer.Option(help="Calibrated profile YAML (default: reports/profiles/<device>.yaml).")] = None,
        output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Result JSON (default: reports/validation/e2e-<device>-<model>-<date>.json; rows of a configuration measured again are replaced).")] = None,
        repredict: Annotated[Optional[Path], typer.Option(help="Measure nothing: recompute the predictions of this e2e result file.")] = None,
        quiet_wait: Annotated[float, typer.Option(help="CPU: before each timed run, wait up to this many seconds for other processes to go idle.")] = 0.0) -> None:
    """Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise typer.BadParameter("'ridgeline e2e' needs PyTorch: pip install torch") from None
    from kernels.e2e import Case, report_lines, run_e2e

    from .model import load_model

    if repredict is not None:
        from kernels.e2e import repredict as rerun

        spec = None if hardware == "host" else hardware
        for line in report_lines(rerun(repredict, hardware=spec, profile=profile)):
            typer.echo(line)
        return
    if any(b < 1 for b in batch) or any(p < 1 for p in prompt):
        raise typer.BadParameter("--batch and --prompt must be positive")
    cases = [Case(b, p, generate) for b in batch for p in prompt]
    result = run_e2e(load_model(model_name(model, config)), cases, dtype=dtype, device=device,
                     layers=layers, compile_modes=(False, True) if compile else (False,),
                     repeats=repeats, hardware=hardware, profile=profile, threads=threads,
                     output=output, quiet_wait_s=quiet_wait,
                     log=lambda msg: typer.echo(msg, err=True))
    for line in report_lines(result):
        typer.echo(line)


@app.command("decode-profile")
def decode_profile(model: ModelArg = None, config: ConfigOpt = None,
                   device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when torch sees one).")] = None,
                   batch: Annotated[int, typer.Option(help="Sequences per batch.")] = 1,
                   prompt: Annotated[int, typer.Option(help="Cached tokens before the first decode step.")] = 512,
                   steps: Annotated[int, typer.Option(help="Decode steps per pass.")] = 16,
                   layers: Annotated[Optional[int], typer.Option(help="Keep only the first L decoder layers.")] = None,
                   dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "bf16",
                   ops: Annotated[bool, typer.Option("--ops", help="Also time each engine op (profiler ranges) beside its prediction.")] = False,
                   threads: Annotated[Optional[int], typer.Option(help="torch CPU threads (default: torch's); the calibrated profile is the one of this count.")] = None) -> None:
    """Split an eager decode step into host dispatch and device work (is it host-bound?)."""
    try:
        import torch
    except ImportError:
        raise typer.BadParameter("'ridgeline decode-profile' needs PyTorch: pip install torch") from None
    from kernels import decode_profile as dp
    from kernels.decoder import truncate
    from kernels.e2e import resolve_device

    from .model import load_model

    cfg = truncate(load_model(model_name(model, config)), layers)
    device = resolve_device(device)
    if threads:
        torch.set_num_threads(threads)
    result = dp.profile_decode(cfg, batch=batch, prompt=prompt, steps=steps, dtype=dtype,
                               device=device, ops=ops)
    lines = dp.report_lines(cfg, result["passes"], batch=batch, prompt=prompt, steps=steps,
                            dtype=dtype, device=device)
    if ops:
        predicted, mode = dp.predicted_ops(cfg, batch=batch, seq_len=prompt + steps // 2,
                                           dtype=dtype, device=device)
        lines += dp.breakdown_lines(dp.breakdown_rows(result["ops"], predicted), mode, device)
    for line in lines:
        typer.echo(line)


@app.command()
def serve(host: Annotated[str, typer.Option(help="Interface to bind; the default keeps it on this machine.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8050,
          debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, error pop-ups).")] = False) -> None:
    """Start the dashboard (Dash) and print its URL."""
    try:
        from viewer.app import create_app
    except ImportError as err:
        from .errors import MissingDependencyError

        raise MissingDependencyError("dash, plotly and dash-cytoscape", "viewer") from err
    dashboard = create_app()
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"ridgeline dashboard on http://{shown}:{port}/ (Ctrl+C stops it)")
    try:
        # no version check: it calls plotly.com, and the dashboard works offline
        dashboard.run(host=host, port=port, debug=debug, dev_tools_disable_version_check=True)
    except OSError as err:
        raise RidgelineError(f"cannot listen on {host}:{port} ({err.strerror or err}); "
                             "pick another --port") from None


MeasureDeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda.")]
QuickOpt = Annotated[bool, typer.Option("--quick", help="Fewer shapes and repetitions (CI: a few minutes on 2 cores).")]
ThreadsOpt = Annotated[Optional[int], typer.Option(help="torch CPU threads, fixed for the run (default: all cores this process may use).")]
ProfileOpt = Annotated[Optional[Path], typer.Option("--profile", help="Device profile YAML (default: reports/profiles/<device>.yaml).")]


def _needs_torch(command: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise RidgelineError(f"'ridgeline {command}' measures kernels with PyTorch: "
                             "pip install -e '.[bench]' -c constraints.txt") from None


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"--device must be cpu or cuda, got '{device}'")


QuietWaitOpt = Annotated[float, typer.Option("--quiet-wait", help="CPU: before each case, wait up to this many seconds for other processes to go idle.")]


@app.command()
def calibrate(device: MeasureDeviceOpt = "cpu", quick: QuickOpt = False, threads: ThreadsOpt = None,
              output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Profile path (default: reports/profiles/<device>.yaml).")] = None,
              refit: Annotated[Optional[Path], typer.Option("--refit", help="Measure nothing: fit this profile again from its stored calibration rows.")] = None,
              quiet_wait: QuietWaitOpt = 0.0) -> None:
    """Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile."""
    _check_device(device)
    if refit is not None:
        from kernels.calibrate import refit as run_refit

        run_refit(refit, log=lambda msg: typer.echo(msg, err=True))
        return
    _needs_torch("calibrate")
    from kernels.calibrate import calibrate as run

    run(device, quick=quick, threads=threads, output=output, quiet_wait_s=quiet_wait,
        log=lambda msg: typer.echo(msg, err=True))


@app.command()
def validate(device: MeasureDeviceOpt = "cpu", quick: QuickOpt = False, threads: ThreadsOpt = None,
             profile: ProfileOpt = None,
             output_dir: Annotated[Optional[Path], typer.Option("--output-dir", help="Folder for the JSON/CSV/HTML (default: reports/validation).")] = None,
             repredict: Annotated[Optional[Path], typer.Option("--repredict", help="Measure nothing: predict this snapshot JSON again (with --profile or the profile it used).")] = None,
             quiet_wait: QuietWaitOpt = 0.0) -> None:
    """Measure held-out kernel shapes and compare them with the spec and calibrated predictions."""
    _check_device(device)
    from kernels.validate import failures, rich_summary

    if repredict is not None:
        from kernels.validate import repredict as rerun

        result, paths = rerun(repredict, profile, log=lambda msg: typer.echo(msg, err=True))
    else:
        _needs_torch("validate")
        from kernels.validate import validate as run

        result, paths = run(device, quick=quick, threads=threads, profile=profile,
                            output_dir=output_dir, quiet_wait_s=quiet_wait,
                            log=lambda msg: typer.echo(msg, err=True))
    import pandas as pd

    console().print(rich_summary(pd.DataFrame(result["summary"]),
                                 f"{result['meta']['device_key']}: |predicted / measured - 1|"))
    for path in paths.values():
        typer.echo(f"wrote {path}", err=True)
    problems = failures(result)
    for line in problems:
        typer.echo(f"error: {line}", err=True)
    if problems:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
