"""``ridgeline simulate``'s output: the latency table, throughput, the fleet's and the
intervals' lines, an MLPerf scenario's result; and the host terms simulate-check fits."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated

from rich.table import Table
from typing_extensions import Doc

from ridgeline.engine.units import format_time
from ridgeline.report.terminal import emit, write_text


@contextlib.contextmanager
def simulation_progress(total: int):
    """A transient progress bar for long runs (more than 20 000 requests); yields the
    callback to tick it, or None."""
    if total <= 20000:
        yield None
        return
    from rich.progress import Progress  # here, as in ProgressAfter

    with Progress(transient=True) as progress:
        task = progress.add_task("simulating", total=total)
        yield lambda done, _total: progress.update(task, completed=done)


def simulation_output(
    run: dict,
    fmt: str,
    percentile: float,
    output: Path | None,
    timeline: Annotated[Path | None, Doc("Also write the step timeline (KV use, batch) as CSV.")] = None,
) -> None:
    """``simulate``'s result: the step timeline as CSV where asked, then the text or tables."""
    if timeline is not None:
        write_text(timeline, run["result"].timeline_frame.to_csv(index=False))
    text = simulation_text(run, fmt)
    tables = simulation_tables(run, percentile) + scenario_lines(run) if text is None else []
    emit(text, tables, output)


def simulation_text(run: dict, fmt: str) -> str | None:
    """A simulation (ridgeline.api.simulate_serving) for ``--format csv|json``; None for ``table``."""
    if fmt == "csv":
        return run["result"].frame.to_csv(index=False)
    if fmt == "json":
        data = {**run["result"].to_dict(), "goodput": run["goodput"], "search": run["search"]}
        if "mlperf" in run:
            data["mlperf"] = run["mlperf"]
        data["intervals"] = run.get("intervals")
        return json.dumps(data, indent=1, allow_nan=False, default=float)
    return None


def scenario_lines(run: dict) -> list[str]:
    """What an MLPerf scenario run (``simulate --scenario``) reports, in lines."""
    m = run.get("mlperf")
    if m is None:
        return []
    bounds = (
        f"p{m['percentile'] * 100:g} TTFT <= {format_time(m['ttft_bound_s'])}, "
        f"p{m['percentile'] * 100:g} TPOT <= {format_time(m['tpot_bound_s'])}"
        if m["ttft_bound_s"] is not None
        else "all samples issued at once"
    )
    got = m["latency"]
    lines = [
        f"MLPerf {m['scenario']} scenario (LoadGen's rules for Llama 2 70B: {bounds})",
        f"result {m['tokens_per_s']:.5g} tokens/s = {m['instances']} instance(s) x "
        f"{m['tokens_per_s_per_instance']:.5g} tokens/s",
    ]
    if m["rate_per_instance"] is not None:
        lines.append(
            f"highest rate meeting the bounds {m['rate_per_instance']:.4g} requests/s per instance "
            f"({m['runs']} runs): p{m['percentile'] * 100:g} TTFT {format_time(got['ttft_s'])}, "
            f"TPOT {format_time(got['tpot_s'])}; tokens/s = rate x {m['mean_output_tokens']:.4g} "
            "mean output tokens"
        )
    lines.append(
        "lengths drawn from the OpenOrca data set's percentiles, outputs scaled to the tokens "
        "the reference run generated (reports/mlperf/openorca-llama2-70b.yaml)"
    )
    if m["short"]:
        lines.append(f"warning: {m['short']}")
    return lines


def engine_line(meta: dict) -> str:
    """The engine a run priced and the scheduler it ran: 'engine trtllm: policy trtllm, batch
    2048, 8192 tokens a step, ...'."""
    settings, s = meta.get("settings") or {}, meta.get("scheduler") or {}
    chunks = "chunked prefill" if s.get("chunked_prefill") else "whole prompts"
    basis = f"\n  scheduler defaults: {s['basis']}" if s.get("basis") else ""
    return (
        f"engine {settings.get('engine', 'pytorch')}: policy {s.get('policy')}, batch {s.get('max_batch')}, "
        f"{s.get('token_budget')} tokens a step, {chunks}{basis}"
    )


def simulation_tables(run: dict, percentile: float) -> list:
    result, slo, found = run["result"], run["goodput"], run["search"]
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
        *fleet_lines(s),
        f"attention {result.meta['attention']}",
        engine_line(result.meta),
    ]
    if s["prefix_hit_tokens"]:
        lines.insert(
            -1,
            f"prefix cache: {s['prefix_hit_tokens']} prompt tokens hit ({s['prefix_hit_rate']:.1%} of the prefill asked for)",
        )
    elif result.meta["scheduler"].get("prefix_cache"):
        lines.insert(
            -1, "prefix cache: on, no prompt tokens hit (shared blocks need ids: a trace's hash_ids or --prefix)"
        )
    if "trace" in result.meta:
        lines.insert(1, trace_line(result.meta["trace"]))
    if slo is not None:
        lines.insert(-1, f"goodput {slo['goodput_rps']:.4g} requests/s ({slo['slo_attainment']:.1%} met the SLOs)")
    lines += simulation_interval_lines(run.get("intervals"))
    if found is not None:
        lines.append(
            f"highest rate meeting the p{percentile:g} SLOs: {found['max_rate']:.4g} "
            f"requests/s ({len(found['tried'])} runs)"
        )
    if found is not None and found.get("max_rate_prob90") is not None:
        lines.append(
            f"  with probability >= 0.9 (every step at its 90 % factor): {found['max_rate_prob90']:.4g} requests/s"
        )
    return lines


def fleet_lines(s: dict) -> list:
    """The KV line of one server, or the replicas' or pools' table; the speculation line."""
    out: list = []
    if "kv_blocks" in s:
        out.append(
            f"KV cache {s['kv_blocks']} blocks of {s['kv_block_tokens']} tokens: peak "
            f"{s['kv_peak_fraction']:.1%}, mean {s['kv_mean_fraction']:.1%}; "
            f"{s['preemptions']} preemptions ({s['recomputed_tokens']} tokens recomputed)"
        )
    if "replicas" in s:
        out.append(_parts_table(f"replicas ({s['route']})", [(str(x["replica"]), x) for x in s["replicas"]]))
    if "pools" in s:
        out.append(_parts_table("pools", [(name, x) for name, x in s["pools"].items() if x is not None]))
        for key, label in (("transfer_s", "KV transfer"), ("decode_queue_s", "decode queueing")):
            out.append(f"{label} p50 {format_time(s[key]['p50'])}, p99 {format_time(s[key]['p99'])}")
    spec = s.get("speculative")
    if spec is not None and spec["verifies"]:
        out.append(
            f"speculative ({spec['draft']}, k={spec['draft_tokens']}, a={spec['acceptance']:g}): "
            f"{spec['tokens_per_verify']:.3g} tokens per verifying step over {spec['verifies']} "
            f"({spec['accepted_tokens']} of {spec['drafted_tokens']} draft tokens accepted)"
        )
    return out


def _parts_table(title: str, parts: list[tuple[str, dict]]) -> Table:
    """One row per replica or pool: requests, TTFT, TPOT and latency percentiles, preemptions."""
    table = Table(title=title)
    for col in ("", "requests", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "latency p99", "preemptions"):
        table.add_column(col, justify="right")
    for name, x in parts:
        if not x.get("requests"):
            table.add_row(name, "0", *[""] * 6)
            continue
        ttft = x.get("ttft_s", {})  # a decode pool emits no first tokens
        times = [format_time(ttft.get("p50")), format_time(ttft.get("p99")), format_time(x["tpot_s"]["p50"])]
        times += [format_time(x["tpot_s"]["p99"]), format_time(x["latency_s"]["p99"])]
        table.add_row(name, str(x["requests"]), *times, str(x["preemptions"]))
    return table


def trace_line(about: dict) -> str:
    """What the trace reader kept: requests of rows, and what it skipped or sorted."""
    parts = [f"trace ({about['format']}): {about['requests']} requests of {about['rows']} rows"]
    if "window_s" in about:
        parts.append("window {:g}-{:g} s".format(*about["window_s"]))
    if "log_type" in about:
        parts.append(f"Log Type {about['log_type']!r}")
    if about.get("failed_skipped"):
        parts.append(f"{about['failed_skipped']} failed requests (0 response tokens) skipped")
    if about.get("out_of_order_sorted"):
        parts.append(f"{about['out_of_order_sorted']} rows out of time order, sorted")
    return "; ".join(parts)


def simulation_interval_lines(bands: dict | None) -> list[str]:
    """The 80 % intervals of the p50 and p99 latencies, and what they rest on (or why none)."""
    if not bands:
        return []
    if "none" in bands:
        return [f"intervals: none ({bands['none']})"]
    parts = []
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "latency")):
        ends = [(q, bands[key][q]["80"]) for q in ("p50", "p99")]
        shown = [f"{q} {format_time(lo)}–{format_time(hi)}" for q, (lo, hi) in ends if lo is not None]
        if shown:
            parts.append(f"{label} {', '.join(shown)}")
    return [f"80 % intervals: {'; '.join(parts)}", f"intervals: {bands['basis']}"]


def overhead_line(terms: dict, path) -> str:
    """The host terms fitted to a recorded run, as the options that reproduce them."""
    overlap = terms.get("host_overlap")
    return (
        f"--step-overhead {terms['step_overhead_s']:.6f} --request-overhead {terms['request_overhead_s']:.6f}"
        + (" --host-overlap" if overlap else "")
        + f"  ({terms['steps']} steps of {path}: mean {terms['mean_other_s'] * 1e3:.3f} ms "
        + ("a step (a GPU run eager: host-bound steps)" if overlap else "beside the forward")
        + f", rms residual {terms['rms_residual_s'] * 1e3:.3f} ms)"
    )
