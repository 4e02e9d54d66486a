"""analyze, sweep, compare, frontier: the roofline of one deployment, of many, across devices."""

from __future__ import annotations

import typer

from ridgeline import api, report
from ridgeline.cli.app import app
from ridgeline.cli.command import command, deployment, echo_err, pick, values, writer
from ridgeline.io.settings import check_transfer, model_name, parse_values, setting_lists

SHARED = "dtype profile transfer fmt output deployment"
ANALYZE = "model config hardware batch seq_len generate dtype draft draft_tokens acceptance profile transfer html fmt output deployment"


@command(app, ANALYZE, declared=(api.analyze_with_draft,))
def analyze(ctx: typer.Context) -> None:
    """Per-operator roofline of prefill and decode, generation totals and memory."""
    v = values(ctx)
    result = api.analyze_with_draft(deployment(v), **pick(v, "batch seq_len generate draft draft_tokens acceptance"))
    if v["html"] is not None:
        writer("html")(result, v["html"], echo_err)
    text = report.render(result, v["fmt"])
    report.emit(text, report.rich_tables(result) if text is None else [], v["output"])


@command(app, f"model config hardware batch__sweep seq_len__sweep generate {SHARED}", declared=(api.sweep_settings,))
def sweep(ctx: typer.Context) -> None:
    """Every combination of the listed values, batch x length in one vectorised pass each."""
    v = values(ctx)
    lists, batches, lengths = setting_lists(v), parse_values(v["batch"]), parse_values(v["seq_len"])
    d = deployment(v, settings={})
    with report.ProgressAfter(1.0) as progress:
        frame = api.sweep_settings(d, lists, batches, lengths, v["generate"], on_step=progress.step)
    notes = report.deployment_notes(d, batches, lengths, v["generate"])  # a row per point: batch x length
    report.show_deployment_frame(frame, d, f"{len(frame)} points", notes, v["fmt"], v["output"])


@command(app, f"model config hardware__compare batch seq_len generate {SHARED}", declared=(api.compare,))
def compare(ctx: typer.Context) -> None:
    """The same model and workload across devices and settings: one row each."""
    v, lists = values(ctx), setting_lists(values(ctx))
    check_transfer(v["profile"], v["transfer"])
    devices = [x.strip() for x in v["hardware"].split(",") if x.strip()]
    name, workload = model_name(v["model"], v["config"]), pick(v, "batch seq_len generate profile transfer")
    frame = api.compare_settings(name, devices, lists, v["dtype"], **workload)
    title = f"{name}: batch {v['batch']}, prompt {v['seq_len']}, generate {v['generate']}"
    report.show_frame(frame, v["fmt"], v["output"], title)


@command(app, f"model config hardware seq_len generate tpot_slo ttft_slo {SHARED}", declared=(api.frontier,))
def frontier(ctx: typer.Context) -> None:
    """Latency against throughput across batch sizes up to the largest that fits, and the
    best throughput meeting --tpot-slo / --ttft-slo."""
    v = values(ctx)
    d = deployment(v)
    frame, best = api.frontier(d, **pick(v, "seq_len generate tpot_slo ttft_slo"))
    notes = report.frontier_notes(d, best, frame["batch"].to_numpy(), v["seq_len"], v["generate"])
    report.show_deployment_frame(
        frame, d, f"prompt {v['seq_len']}, generate {v['generate']}", notes, v["fmt"], v["output"]
    )
