"""Tables of DataFrames (sweep, compare, frontier): readable headers, one unit per column,
shown as a rich table with its notes or written as CSV or JSON; a progress bar for long sweeps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from ridgeline.engine.analyze import context_warnings, deployment_basis
from ridgeline.engine.basis import basis_lines as basis_text
from ridgeline.engine.sweeps import BAND_COLUMNS
from ridgeline.engine.units import format_time
from ridgeline.engine.workload import Workload
from ridgeline.io.resolve import Deployment
from ridgeline.report.analysis import interval_basis
from ridgeline.report.terminal import (
    BYTE_UNITS,
    TIME_UNITS,
    add_column,
    choose_columns,
    column_unit,
    compact_table,
    console_width,
    emit,
    fit_columns,
    left_out_line,
    plain_number,
)

# sweep / compare / frontier columns: header and the kind of unit its numbers get
FRAME_HEADERS = {
    "batch": "batch",
    "seq_len": "prompt tokens",
    "prefill_s": "prefill",
    "decode_step_s": "decode step",
    "ttft_s": "TTFT",
    "tpot_s": "TPOT",
    "total_s": "total",
    "tokens_per_s": "tokens/s",
    "weights_bytes": "weights",
    "kv_cache_bytes": "KV cache",
    "activations_peak_bytes": "act. peak",
    "peak_bytes": "peak memory",
    "capacity_bytes": "capacity",
    "fits": "fits",
    "meets_slo": "meets SLO",
    "matrix_dtype": "matrix dtype",
}


# the columns a narrow terminal leaves out first (headers with units): the stage times that
# TTFT and TPOT already say, the activations, the totals; then the rightmost
FRAME_DROP_FIRST = ("prefill (s)", "prefill (ms)", "decode step (ms)", "decode step (s)", "act. peak (GiB)")
FRAME_DROP_FIRST += ("act. peak (MiB)", "total (s)", "total (ms)", "capacity (GiB)", "weights (GiB)", "matrix dtype")
FRAME_DROP_FIRST += ("tokens/s 80 %", "TTFT 80 % (s)", "TTFT 80 % (ms)", "TPOT 80 % (ms)", "TPOT 80 % (s)")
FRAME_DROP_FIRST += ("prefill 80 % (s)", "prefill 80 % (ms)", "decode step 80 % (ms)", "decode step 80 % (s)")


def frame_column(values, column: str) -> tuple[str, str, list[str]]:
    """(name, unit, cells) for one DataFrame column; the unit is '' for text and counts."""
    name = FRAME_HEADERS.get(column, column.replace("_", " "))
    if column in ("fits", "meets_slo") or all(isinstance(v, (bool, np.bool_)) for v in values):
        return name, "", ["yes" if v else "no" for v in values]
    if not all(isinstance(v, (int, float, np.number)) or v is None for v in values):
        return name, "", ["-" if v is None else str(v) for v in values]
    units = (
        TIME_UNITS
        if column.endswith("_s") and column != "tokens_per_s"
        else BYTE_UNITS
        if column.endswith("_bytes")
        else None
    )
    if units is None:
        return name, "", [str(int(v)) if float(v).is_integer() else plain_number(v) for v in values]
    scale, unit = column_unit(values, units)
    return name, unit, [plain_number(v / scale if v is not None else None) for v in values]


def band_column(frame, key: str) -> tuple[str, str, list[str]]:
    """(name, unit, cells) of a figure's 80 % intervals ('89.1–116'), in its own column's unit."""
    values = frame[key].tolist()
    name, unit, _ = frame_column(values, key)
    scale = column_unit(values, TIME_UNITS)[0] if key != "tokens_per_s" else 1.0
    ends = zip(frame[f"{key}_lo80"].tolist(), frame[f"{key}_hi80"].tolist())
    cells = [f"{plain_number(lo / scale)}–{plain_number(hi / scale)}" if lo == lo and lo else "-" for lo, hi in ends]
    return f"{name} 80 %", unit, cells


def frame_columns(frame) -> list[tuple[str, str, list[str]]]:
    """Each column's (name, unit, cells), a figure's 80 % intervals in one column beside it."""
    banded = [k for k in BAND_COLUMNS if f"{k}_lo80" in frame]
    plain = [c for c in frame.columns if not any(c in (f"{k}_lo80", f"{k}_hi80") for k in banded)]
    out = []
    for c in plain:
        out += [frame_column(frame[c].tolist(), c)] + ([band_column(frame, c)] if c in banded else [])
    return out


def interval_notes(frame) -> list[str]:
    """What a frame's rows rest on (``attrs``: ``basis`` and ``intervals``, by device for
    compare's rows), in analyze's words; a line all devices share is said once."""
    bands, basis = frame.attrs.get("intervals"), frame.attrs.get("basis") or {}
    if not bands:
        return []
    if "basis" in bands or "none" in bands:
        return [interval_basis(bands)]
    per = {device: [*basis.get(device, []), interval_basis(b)] for device, b in bands.items()}
    out = []
    for line in dict.fromkeys(line for device_lines in per.values() for line in device_lines):
        holders = [device for device, device_lines in per.items() if line in device_lines]
        out.append(line if len(holders) == len(per) else f"{', '.join(holders)}: {line}")
    return out


def frame_table(frame, title: str) -> list:
    """A DataFrame as a rich table: readable headers with their units, one unit per column;
    columns equal in every row are said once, under the table."""
    columns = frame_columns(frame)
    same = [(name, unit, cells[0]) for name, unit, cells in columns if len(frame) > 1 and len(set(cells)) == 1]
    shown = [c for c in columns if (c[0], c[1], c[2][0]) not in same] or columns
    cols = [(f"{n} ({u})" if u else n, cells, not any(ch.isdigit() for ch in "".join(cells))) for n, u, cells in shown]
    keep, left_out = choose_columns(cols, console_width(), FRAME_DROP_FIRST)
    table = compact_table(title)
    for header, _, text in (cols[i] for i in keep):
        add_column(table, header, text=text)
    for row in zip(*(cols[i][1] for i in keep)):
        table.add_row(*row)
    fit_columns(table, [cols[i][1] for i in keep], console_width())
    note = ", ".join(f"{name} {value}{' ' + unit if unit else ''}" for name, unit, value in same)
    return [table] + ([f"the same in every row: {note}"] if same else []) + left_out_line(left_out)


def frame_text(frame, fmt: str, notes=(), mode: str | None = None) -> str | None:
    """A DataFrame for ``--format csv|json`` (JSON records, with the ceilings' ``mode`` when
    one holds for every row); None for ``table``."""
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        head = {"mode": mode} if mode else {}
        rows = frame.to_dict(orient="records")
        return json.dumps({**head, "rows": rows, "notes": list(notes)}, indent=2, default=float)
    return None


def frame_view(frame, title: str, notes=()) -> list:
    return [*frame_table(frame, title), *notes]


def show_frame(frame, fmt: str, output: Path | None, title: str, notes=(), mode: str | None = None) -> None:
    """A DataFrame as a rich table, CSV or JSON records (with the ceilings' ``mode``), with its
    notes and what its intervals rest on."""
    notes = list(notes)  # what the intervals rest on, after the basis lines (the last lines stay the answer)
    at = max((i + 1 for i, line in enumerate(notes) if line.startswith("basis")), default=0)
    notes[at:at] = interval_notes(frame)
    text = frame_text(frame, fmt, notes, mode)
    emit(text, frame_view(frame, title, notes) if text is None else [], output)


def show_deployment_frame(frame, d: Deployment, what: str, notes, fmt: str, output: Path | None) -> None:
    """One deployment's table (sweep, frontier), titled with its model, device and roofline, then ``what``."""
    show_frame(frame, fmt, output, f"{d.model.name} on {d.device.name} ({d.mode} roofline): {what}", notes, d.mode)


def deployment_notes(d: Deployment, batch=1, seq_len=512, generate=0) -> list[str]:
    """What a deployment's numbers rest on over a grid of (batch, seq_len), as the lines analyze
    prints (ridgeline.engine.basis), and analyze's warning past the model's positions."""
    lengths = Workload(1, np.asarray(seq_len), generate)
    warnings = [f"warning: {w}" for w in context_warnings(d.model, lengths)]
    return basis_text(deployment_basis(d, batch, seq_len)) + warnings


def frontier_notes(d: Deployment, best: dict, batch=1, seq_len=512, generate=0) -> list[str]:
    """What frontier prints under its table: the basis (over its batches) and any warning, the
    largest batch, the best pick."""
    pick = best["best"]
    found = "no batch meets the targets"
    if pick:
        found = (
            f"best throughput meeting the targets: batch {pick['batch']}, "
            f"{plain_number(pick['tokens_per_s'], 4)} tokens/s, TPOT {format_time(pick['tpot_s'])}, "
            f"TTFT {format_time(pick['ttft_s'])}"
        )
    return [*deployment_notes(d, batch, seq_len, generate), f"largest batch that fits: {best['max_batch']}", found]


class ProgressAfter:
    """A progress bar (on stderr, not into the data) that shows only when the work looks set
    to take over ``seconds``."""

    def __init__(self, seconds: float):
        self.seconds, self.start, self.bar, self.task = seconds, time.perf_counter(), None, None

    def step(self, done: int, total: int) -> None:
        if self.bar is None:
            elapsed = time.perf_counter() - self.start
            if done < total and elapsed / done * total > self.seconds:
                from rich.progress import Progress  # here: a bar is rare, and its import costs every command

                self.bar = Progress(transient=True, console=Console(stderr=True))
                self.bar.start()
                self.task = self.bar.add_task("sweep", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def __enter__(self) -> ProgressAfter:
        return self

    def __exit__(self, *_exc) -> None:
        if self.bar is not None:
            self.bar.stop()
