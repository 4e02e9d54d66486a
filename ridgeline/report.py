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
    lines = []
    gen = analysis.generation
    if gen:
        tpot = format_time(gen["tpot_s"]) if gen["tpot_s"] is not None else "- (1 token)"
        lines.append(f"TTFT {format_time(gen['ttft_s'])}   TPOT {tpot}   "
                     f"total {format_time(gen['total_s'])}   {gen['tokens_per_s']:.4g} tokens/s")
    mem = analysis.memory
    verdict = "fits" if mem["fits"] else f"does NOT fit: {format_bytes(mem['shortfall_bytes'])} short"
    lines.append(f"memory: weights {format_bytes(mem['weights_bytes'])} + KV cache "
                 f"{format_bytes(mem['kv_cache_bytes'])} + activations "
                 f"{format_bytes(mem['activations_peak_bytes'])} = {format_bytes(mem['peak_bytes'])}"
                 f" of {format_bytes(mem['capacity_bytes'])}: {verdict}")
    return lines


def rich_tables(analysis: Analysis) -> list[Any]:
    header = (f"{analysis.model.name} on {analysis.device.name} ({analysis.mode} roofline), "
              f"weights {analysis.settings.w_dtype}, activations {analysis.settings.a_dtype}, "
              f"KV {analysis.settings.kv_dtype}")
    return [header, _stage_table(analysis, "prefill"), _stage_table(analysis, "decode"),
            *summary_lines(analysis)]
