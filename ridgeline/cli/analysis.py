"""analyze, sweep, compare, frontier: the roofline of one deployment, of many, across devices."""

from __future__ import annotations

import math

import typer

from ridgeline.api import analyze_with_draft, compare_settings, sweep_settings
from ridgeline.api import frontier as run_frontier
from ridgeline.cli.app import app, command, deployment, echo_err, pick, values
from ridgeline.io.settings import check_transfer, model_name, parse_values, setting_lists
from ridgeline.report import ProgressAfter, deployment_notes, emit, frontier_notes, render, rich_tables, show_frame

SHARED = "dtype profile transfer fmt output deployment"
ANALYZE = "model config hardware batch seq_len generate dtype draft draft_tokens acceptance profile transfer html fmt output deployment"


@command(app, ANALYZE)
def analyze(ctx: typer.Context) -> None:
    """Per-operator roofline of prefill and decode, generation totals and memory."""
    v = values(ctx)
    workload = {key: v[key] for key in ("batch", "seq_len", "generate", "draft", "draft_tokens", "acceptance")}
    result = analyze_with_draft(deployment(v), **workload)
    if v["html"] is not None:
        from viewer.entry import write_html

        write_html(result, v["html"], echo_err)
    text = render(result, v["fmt"])
    emit(text, rich_tables(result) if text is None else [], v["output"])


@command(app, f"model config hardware batch__sweep seq_len__sweep generate {SHARED}")
def sweep(ctx: typer.Context) -> None:
    """Every combination of the listed values, batch x length in one vectorised pass each."""
    v = values(ctx)
    lists, batches, lengths = setting_lists(v), parse_values(v["batch"]), parse_values(v["seq_len"])
    d = deployment(v, settings={})
    with ProgressAfter(1.0) as progress:
        frame = sweep_settings(d, lists, batches, lengths, v["generate"], on_step=progress.step)
    points = len(batches) * len(lengths) * math.prod(map(len, lists.values()))
    title = f"{d.model.name} on {d.device.name} ({d.mode} roofline): {points} points"
    show_frame(frame, v["fmt"], v["output"], title, deployment_notes(d, batches, lengths), mode=d.mode)


@command(app, f"model config hardware__compare batch seq_len generate__compare {SHARED}")
def compare(ctx: typer.Context) -> None:
    """The same model and workload across devices and settings: one row each."""
    v, lists = values(ctx), setting_lists(values(ctx))
    check_transfer(v["profile"], v["transfer"])
    devices = [x.strip() for x in v["hardware"].split(",") if x.strip()]
    name, workload = model_name(v["model"], v["config"]), pick(v, "batch seq_len generate profile transfer")
    frame = compare_settings(name, devices, lists, v["dtype"], **workload)
    title = f"{name}: batch {v['batch']}, prompt {v['seq_len']}, generate {v['generate']}"
    show_frame(frame, v["fmt"], v["output"], title)


@command(app, f"model config hardware seq_len__frontier generate__frontier tpot_slo ttft_slo {SHARED}")
def frontier(ctx: typer.Context) -> None:
    """Latency against throughput across batch sizes up to the largest that fits, and the
    best throughput meeting --tpot-slo / --ttft-slo."""
    v = values(ctx)
    d = deployment(v)
    frame, best = run_frontier(d, **pick(v, "seq_len generate tpot_slo ttft_slo"))
    title = f"{d.model.name} on {d.device.name} ({d.mode} roofline): prompt {v['seq_len']}, generate {v['generate']}"
    notes = frontier_notes(d, best, frame["batch"].to_numpy(), v["seq_len"])
    show_frame(frame, v["fmt"], v["output"], title, notes, mode=d.mode)
