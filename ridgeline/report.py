"""Outputs: JSON, CSV, rich tables, and atomic file writes."""
from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .units import format_bytes, format_si, format_time

if TYPE_CHECKING:  # pragma: no cover
    from .analyze import Analysis


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename: never a half-written file."""
    path = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, mode) as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def to_json(analysis: Analysis) -> str:
    return json.dumps(analysis.to_dict(), indent=2)


def ops_csv_frame(analysis: Analysis):
    """Both stages' per-op rows with a leading ``stage`` column."""
    import pandas as pd

    frames = []
    for stage in ("prefill", "decode"):
        frame = getattr(analysis, stage).ops.copy()
        frame.insert(0, "stage", stage)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def to_csv(analysis: Analysis) -> str:
    buffer = io.StringIO()
    ops_csv_frame(analysis).to_csv(buffer, index=False)
    return buffer.getvalue()


def render(analysis: Analysis, fmt: str) -> str | None:
    """Text for ``--format json|csv``; None for ``table`` (printed with rich instead)."""
    return {"json": to_json, "csv": to_csv}.get(fmt, lambda _a: None)(analysis)


def _stage_table(analysis: Analysis, stage: str):
    from rich.table import Table

    records = getattr(analysis, stage).records()
    workload = analysis.workload
    title = (f"{stage}: batch {workload.batch}, "
             + (f"{workload.seq_len} prompt tokens" if stage == "prefill"
                else f"1 new token, {workload.seq_len} cached"))
    table = Table(title=title, title_justify="left")
    for col in ("op", "count", "OPs", "memory", "intensity", "max perf", "bound", "time", "dtype"):
        table.add_column(col, justify="left" if col in ("op", "bound", "dtype") else "right")
    for row in records:
        table.add_row(row["name"], str(row["count"]), format_si(row["flops"]),
                      format_si(row["bytes"], "B"), f"{row['intensity']:.3g}",
                      format_si(row["perf"]), row["bound"], format_time(row["time_s"]), row["dtype"])
    total = getattr(analysis, stage).total
    table.add_row("total (x count)", "", format_si(total["flops"]), format_si(total["bytes"], "B"),
                  "", "", "", format_time(total["time_s"]), "", style="bold")
    return table


def summary_lines(analysis: Analysis) -> list[str]:
    """Key numbers as short lines: generation and memory."""
    lines = [f"warning: {w}" for w in analysis.extra.get("warnings", [])]
    gen = analysis.generation
    if gen:
        tpot = format_time(gen["tpot_s"]) if gen["tpot_s"] is not None else "- (1 token)"
        lines.append(f"TTFT {format_time(gen['ttft_s'])}   TPOT {tpot}   "
                     f"total {format_time(gen['total_s'])}   {gen['tokens_per_s']:.4g} tokens/s")
    spec = analysis.extra.get("speculative")
    if spec:
        even = spec["break_even_acceptance"]
        smem = spec["memory"]
        fits = "fits" if smem["fits"] else (f"does NOT fit: {format_bytes(smem['shortfall_bytes'])} over "
                                            f"the {format_bytes(smem['usable_bytes'])} usable")
        lines.append(f"speculative ({spec['draft']}, k={spec['draft_tokens']}, a={spec['acceptance']}): "
                     f"TTFT {format_time(spec['ttft_s'])}   TPOT {format_time(spec['tpot_s'])}   "
                     f"{spec['tokens_per_s']:.4g} tokens/s   ({spec['expected_tokens_per_step']:.3g} "
                     f"tokens/step, speed-up {spec['speedup']:.3g}x, break-even acceptance "
                     f"{'-' if even is None else format(even, '.3g')})")
        lines.append(f"memory with the draft: {format_bytes(smem['peak_bytes'])} of "
                     f"{format_bytes(smem['capacity_bytes'])}: {fits}")
    pipe = analysis.extra.get("pipeline")
    if pipe:
        lines.append(f"pipeline: {pipe['stages']} stages, {pipe['micro_batches']} micro-batches, "
                     f"bubble {pipe['bubble_fraction']:.1%}")
    mem = analysis.memory
    usable = mem.get("usable_bytes", mem["capacity_bytes"])
    verdict = "fits" if mem["fits"] else (
        f"does NOT fit: {format_bytes(mem['shortfall_bytes'])} over the {format_bytes(usable)} usable "
        "(memory utilization x capacity - runtime reserve)")
    per = f" per device (x{mem['devices']})" if mem.get("devices", 1) > 1 else ""
    lines.append(f"memory{per}: weights {format_bytes(mem['weights_bytes'])} + KV cache "
                 f"{format_bytes(mem['kv_cache_bytes'])} + activations "
                 f"{format_bytes(mem['activations_peak_bytes'])} = {format_bytes(mem['peak_bytes'])}"
                 f" of {format_bytes(mem['capacity_bytes'])}: {verdict}")
    return lines


def rich_tables(analysis: Analysis) -> list[Any]:
    s = analysis.settings
    header = (f"{analysis.model.name} on {analysis.device.name} ({analysis.mode} roofline), "
              f"weights {s.w_dtype}, activations {s.a_dtype}, KV {s.kv_dtype}, "
              f"matrix ops in {analysis.plan.matrix_dtype}, {s.attention} attention"
              + (f", tp {s.tp}" if s.tp > 1 else "") + (f", pp {s.pp}" if s.pp > 1 else "")
              + (f", ep {s.ep}" if s.ep > 1 else ""))
    return [header, _stage_table(analysis, "prefill"), _stage_table(analysis, "decode"),
            *summary_lines(analysis)]


def _cell(value: Any, column: str) -> str:
    if isinstance(value, (bool,)) or column in ("fits", "meets_slo"):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if value is None:
        return "-"
    if column == "tokens_per_s":
        return f"{value:.4g}"
    if column.endswith("_s"):
        return format_time(value)
    if column.endswith("_bytes"):
        return format_bytes(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def frame_table(frame, title: str):
    """A DataFrame as a rich table, times and bytes formatted for reading."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in frame.columns:
        table.add_column(column, justify="left" if frame[column].dtype == object else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(_cell(v, c) for v, c in zip(row, frame.columns)))
    return table
