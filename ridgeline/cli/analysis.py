"""analyze, sweep, compare, frontier: the roofline of one deployment, of many, across devices."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from ridgeline.api import analyze_with_draft, compare_settings, sweep_settings
from ridgeline.api import frontier as run_frontier
from ridgeline.cli import options as opt
from ridgeline.cli.app import (
    DeploymentCommand,
    app,
    check_format,
    check_transfer,
    deployment,
    emit,
    model_name,
    show_frame,
    values,
)
from ridgeline.cli.options import parse_values, setting_lists
from ridgeline.errors import MissingDependencyError
from ridgeline.report import ProgressAfter, deployment_notes, frontier_notes, render, rich_tables


@app.command(cls=DeploymentCommand)
def analyze(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    hardware: opt.Hardware = "a6000",
    batch: opt.Batch = 1,
    seq_len: opt.SeqLen = 512,
    generate: opt.Generate = 0,
    dtype: opt.Dtype = None,
    draft: opt.Draft = None,
    draft_tokens: opt.DraftTokens = 4,
    acceptance: opt.Acceptance = 0.7,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    html: Annotated[Path | None, typer.Option(help="Also write the charts to one self-contained HTML file.")] = None,
    fmt: opt.Format = "table",
    output: opt.Output = None,
) -> None:
    """Per-operator roofline of prefill and decode, generation totals and memory."""
    check_format(fmt)
    d = deployment(values(ctx))
    workload = {"batch": batch, "seq_len": seq_len, "generate": generate}
    result = analyze_with_draft(d, **workload, draft=draft, draft_tokens=draft_tokens, acceptance=acceptance)
    if html is not None:
        write_html(result, html)
    text = render(result, fmt)
    emit(text, rich_tables(result) if text is None else [], output)


def write_html(result, path) -> None:
    """The dashboard's charts for one analysis, in one file (needs the viewer extra)."""
    try:
        from viewer.export import write_html as export
    except ImportError as err:
        raise MissingDependencyError("dash and plotly", "viewer") from err
    export(result, path)
    typer.echo(f"wrote {path}", err=True)


@app.command(cls=DeploymentCommand)
def sweep(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    hardware: opt.Hardware = "a6000",
    batch: Annotated[str, typer.Option(help="Batch sizes, e.g. 1,2,4..256.")] = "1",
    seq_len: Annotated[str, typer.Option(help="Prompt lengths, e.g. 512,1024..32768.")] = "512",
    generate: opt.Generate = 0,
    dtype: opt.Dtype = None,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    fmt: opt.Format = "table",
    output: opt.Output = None,
) -> None:
    """Every combination of the listed values, batch x length in one vectorised pass each."""
    check_format(fmt)
    lists, batches, lengths = setting_lists(values(ctx)), parse_values(batch), parse_values(seq_len)
    d = deployment(ctx.params, settings={})
    with ProgressAfter(1.0) as progress:
        frame = sweep_settings(d, lists, batches, lengths, generate, on_step=progress.step)
    points = len(batches) * len(lengths) * math.prod(map(len, lists.values()))
    title = f"{d.model.name} on {d.device.name} ({d.mode} roofline): {points} points"
    show_frame(frame, fmt, output, title, deployment_notes(d, batches, lengths), mode=d.mode)


@app.command(cls=DeploymentCommand)
def compare(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Devices, comma-separated.")] = "a6000,h100-sxm",
    batch: opt.Batch = 1,
    seq_len: opt.SeqLen = 512,
    generate: opt.Generate = 128,
    dtype: opt.Dtype = None,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    fmt: opt.Format = "table",
    output: opt.Output = None,
) -> None:
    """The same model and workload across devices and settings: one row each."""
    check_format(fmt)
    lists = setting_lists(values(ctx))
    check_transfer(profile, transfer)
    devices = [x.strip() for x in hardware.split(",") if x.strip()]
    name = model_name(model, config)
    workload = {"batch": batch, "seq_len": seq_len, "generate": generate}
    frame = compare_settings(name, devices, lists, dtype, **workload, profile=profile, transfer=transfer)
    show_frame(frame, fmt, output, f"{name}: batch {batch}, prompt {seq_len}, generate {generate}")


@app.command(cls=DeploymentCommand)
def frontier(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    hardware: opt.Hardware = "a6000",
    seq_len: opt.SeqLen = 1024,
    generate: opt.Generate = 256,
    tpot_slo: Annotated[float | None, typer.Option(help="Largest acceptable TPOT, seconds.")] = None,
    ttft_slo: Annotated[float | None, typer.Option(help="Largest acceptable TTFT, seconds.")] = None,
    dtype: opt.Dtype = None,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    fmt: opt.Format = "table",
    output: opt.Output = None,
) -> None:
    """Latency against throughput across batch sizes up to the largest that fits, and the
    best throughput meeting --tpot-slo / --ttft-slo."""
    check_format(fmt)
    d = deployment(values(ctx))
    frame, best = run_frontier(d, seq_len=seq_len, generate=generate, tpot_slo=tpot_slo, ttft_slo=ttft_slo)
    title = f"{d.model.name} on {d.device.name} ({d.mode} roofline): prompt {seq_len}, generate {generate}"
    notes = frontier_notes(d, best, frame["batch"].to_numpy(), seq_len)
    show_frame(frame, fmt, output, title, notes, mode=d.mode)
