"""Outputs: JSON, CSV, rich tables, and atomic file writes."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from rich.console import Console
from rich.table import Table
from typing_extensions import Doc

from ridgeline.engine.analyze import deployment_basis, largest_batch
from ridgeline.engine.basis import basis_lines as basis_text
from ridgeline.engine.collectives import LABELS as COLLECTIVE_LABELS
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.memory import active_parameters, total_parameters
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.units import GIB, GIGA, KIB, MIB, TERA, format_bytes, format_si, format_time
from ridgeline.errors import InvalidOptionError
from ridgeline.io.files import write_atomic
from ridgeline.io.resolve import Deployment

if TYPE_CHECKING:  # pragma: no cover
    from ridgeline.engine.analyze import Analysis


def to_json(analysis: Analysis) -> str:
    return json.dumps({**analysis.to_dict(), "verdict": verdict_fields(analysis)}, indent=2)


TOTAL_KIND = "total"  # the ``kind`` that marks a totals row in the analyze CSV


def ops_csv_frame(analysis: Analysis):
    """Both stages' per-op rows with a leading ``stage`` column, then the totals, marked
    ``kind = total``: a row per stage (``name = total``: the whole pass, count applied) and,
    with generation, ``stage = generation`` rows named ``ttft``, ``tpot`` and ``total``
    whose ``time_s`` is that time."""
    import pandas as pd

    frames, totals = [], []
    for stage in ("prefill", "decode"):
        frame = getattr(analysis, stage).ops.copy()
        frame.insert(0, "stage", stage)
        frames.append(frame)
        total = getattr(analysis, stage).total
        totals.append(
            {
                "stage": stage,
                "name": "total",
                "kind": TOTAL_KIND,
                **{k: v for k, v in total.items() if k in frame.columns},
            }
        )
    gen = analysis.generation or {}
    totals += [
        {"stage": "generation", "name": key[:-2], "kind": TOTAL_KIND, "time_s": gen[key]}
        for key in ("ttft_s", "tpot_s", "total_s")
        if gen.get(key) is not None
    ]
    out = pd.concat([*frames, pd.DataFrame(totals, columns=frames[0].columns)], ignore_index=True)
    out["count"] = out["count"].astype("Int64")  # whole instances, as in the JSON (empty on totals)
    return with_interval_columns(out, analysis.extra.get("intervals") or {})


INTERVAL_TOTALS = {
    ("generation", "ttft"): "ttft_s",
    ("generation", "tpot"): "tpot_s",
    ("generation", "total"): "total_s",
}


def with_interval_columns(frame, intervals: dict):
    """``time_lo80_s`` ... ``time_hi50_s``: each op's and each headline time's central
    intervals (empty where there is no measured interval)."""
    factors = [f for stage in ("prefill", "decode") for f in intervals.get("ops", {}).get(stage, [])]
    for c in ("80", "50"):
        lo, hi = [None] * len(frame), [None] * len(frame)
        for i, f in enumerate(factors):
            lo[i], hi[i] = frame["time_s"].iat[i] * f[c][0], frame["time_s"].iat[i] * f[c][1]
        for i, (stage, name) in enumerate(zip(frame["stage"], frame["name"])):
            key = INTERVAL_TOTALS.get((stage, name)) or (f"{stage}_s" if name == "total" else None)
            if key in intervals:
                lo[i], hi[i] = intervals[key][c]
        frame[f"time_lo{c}_s"], frame[f"time_hi{c}_s"] = lo, hi
    return frame


def to_csv(analysis: Analysis) -> str:
    buffer = io.StringIO()
    ops_csv_frame(analysis).to_csv(buffer, index=False)
    return buffer.getvalue()


def render(analysis: Analysis, fmt: str) -> str | None:
    """Text for ``--format json|csv``; None for ``table`` (printed with rich instead)."""
    return {"json": to_json, "csv": to_csv}.get(fmt, lambda _a: None)(analysis)


# --- terminal tables: units in the headers, numbers without exponents --------------------

TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
BYTE_UNITS = ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB"), (1.0, "B"))


def plain_number(value: float, digits: int = 3) -> str:
    """``digits`` significant digits, never an exponent for the sizes a table shows (digits
    3: 1690 -> '1690', 12.64 -> '12.6', 0.0505 -> '0.0505'; digits 4: 376.31 -> '376.3')."""
    if value is None or not math.isfinite(value):
        return "-"
    size = abs(value)
    if size >= 10 ** (digits - 1) or size == 0:
        return f"{value:.0f}"
    if size >= 1e-3:
        return f"{value:.{digits}g}"
    return f"{value:.2e}"


def si_number(value: float) -> str:
    """Decimal SI prefix, no unit (the header has it): 1.37e11 -> '137G', 1370 -> '1.37K'."""
    return format_si(value) if value else "0"


def column_unit(values, units) -> tuple[float, str]:
    """The unit (scale, name) that shows a column's largest value at 1 or more."""
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    return next(((scale, name) for scale, name in units if top >= scale), units[-1])


def _table(title: str):
    from rich import box
    from rich.table import Table

    # no vertical rules, two spaces between columns: wide tables fit 100 columns
    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1)
    )


def _add_column(table, header: str, text: bool = False) -> None:
    table.add_column(header, justify="left" if text else "right", overflow="fold")


def longest_word(text: str) -> int:
    return max(map(len, text.split()), default=0)


def fit_columns(table, cells: list[list[str]], width: int) -> None:
    """Headers wrap at spaces, never truncated: when the table is wider than ``width``, fix
    each column at its longest header word or number, so headers and text break between
    words (rich would otherwise cut them short or break inside words)."""
    natural = [max(len(c.header), *map(len, col)) for c, col in zip(table.columns, cells)]
    if sum(natural) + 2 * len(natural) <= width:
        return
    for column, col in zip(table.columns, cells):
        cell = longest_word if column.justify == "left" else len  # text may wrap, numbers not
        column.width = max([longest_word(column.header), *map(cell, col)])


def to_terminal() -> bool:
    """Whether output goes to a terminal (or $COLUMNS says how wide one is)."""
    import os

    return sys.stdout.isatty() or "COLUMNS" in os.environ


def console_width() -> int:
    """A terminal's width or $COLUMNS; piped into a file, wide enough for every table."""
    from rich.console import Console

    return Console().width if to_terminal() else 160


STAGE_COLUMNS = (
    ("op", True),
    ("count", False),
    ("ops", False),
    ("bytes moved (B)", False),
    ("ops/byte", False),
    ("perf (ops/s)", False),
    ("bound", True),
    ("time each", False),
    ("dtype", True),
)


def _stage_table(analysis: Analysis, stage: str):
    workload = analysis.workload
    title = f"{stage}: batch {workload.batch}, " + (
        f"{workload.seq_len} prompt tokens" if stage == "prefill" else f"1 new token, {workload.seq_len} cached"
    )
    table = _table(title)
    for header, text in STAGE_COLUMNS:
        _add_column(table, header, text)
    rows = [
        [
            row["name"],
            str(row["count"]),
            si_number(row["flops"]),
            si_number(row["bytes"]),
            plain_number(row["intensity"]),
            si_number(row["perf"]),
            row["bound"],
            format_time(row["time_s"]),
            row["dtype"],
        ]
        for row in getattr(analysis, stage).records()
    ]
    total = getattr(analysis, stage).total
    rows.append(
        [
            "total (x count)",
            "",
            si_number(total["flops"]),
            si_number(total["bytes"]),
            "",
            "",
            "",
            format_time(total["time_s"]),
            "",
        ]
    )
    for row in rows:
        table.add_row(*row, style="bold" if row is rows[-1] else None)
    fit_columns(table, [list(col) for col in zip(*rows)], console_width())
    return table


BYTE_TERMS = (
    ("weights", ("weight_bytes",)),
    ("activations", ("act_read_bytes", "act_write_bytes")),
    ("the KV cache", ("kv_read_bytes", "kv_write_bytes")),
    ("communication", ("comm_bytes",)),
)


def sum_by(records: list[dict], key: str, value: str) -> dict[str, float]:
    """count x ``value`` summed per distinct ``key`` (a whole pass)."""
    out: dict[str, float] = {}
    for r in records:
        out[r[key]] = out.get(r[key], 0.0) + r["count"] * r[value]
    return out


def stage_bound(analysis: Analysis, stage: str) -> str:
    """The bound ('compute', 'memory', ...) that most of a stage's time is spent against."""
    spent = sum_by(getattr(analysis, stage).records(), "bound", "time_s")
    return max(spent, key=spent.get)


def stage_verdict(analysis: Analysis, stage: str) -> str:
    """What bounds one stage and by how much: 'memory-bound (98% of decode time; weights are
    87% of the bytes moved)'; compute-bound: which op kind does the work."""
    ops = getattr(analysis, stage).records()  # not the DataFrame: the table view needs no pandas
    spent = sum_by(ops, "bound", "time_s")
    bound = max(spent, key=spent.get)  # as stage_bound, on the records already summed
    share = f"{spent[bound] / sum(spent.values()):.0%} of {stage} time"
    if bound == "compute":
        work = sum_by(ops, "kind", "flops")
        kind = max(work, key=work.get)
        return f"{bound}-bound ({share}; {kind} ops do {work[kind] / sum(work.values()):.0%} of the operations)"
    total = getattr(analysis, stage).total
    moved = {name: sum(total.get(k, 0.0) for k in keys) for name, keys in BYTE_TERMS}
    name = max(moved, key=moved.get)
    verb = "is" if name in ("the KV cache", "communication") else "are"
    return f"{bound}-bound ({share}; {name} {verb} {moved[name] / sum(moved.values()):.0%} of the bytes moved)"


def analysis_largest_batch(analysis: Analysis) -> int:
    """The largest batch that fits, for the analysis's own model, device and plan."""
    w = analysis.workload
    return largest_batch(analysis.model, analysis.device, analysis.plan, w.seq_len, w.generate)


def verdict(analysis: Analysis, largest: int | None = None) -> str:
    """One line: what bounds TTFT and TPOT and by how much, and the largest batch that fits
    (``largest``, when the caller has it already)."""
    w = analysis.workload
    step = "TPOT" if analysis.generation else "a decode step"
    largest = analysis_largest_batch(analysis) if largest is None else largest
    fits = f"largest batch that fits: {largest}" if largest else "not even batch 1 fits"
    return (
        f"verdict: TTFT is {stage_verdict(analysis, 'prefill')}, {step} is "
        f"{stage_verdict(analysis, 'decode')}; {fits} ({w.seq_len} + {w.generate} tokens each)"
    )


def verdict_fields(analysis: Analysis) -> dict:
    """The verdict line and its parts, for the JSON: each stage's bound, the largest batch."""
    largest = int(analysis_largest_batch(analysis))  # one search, for the line and the field
    return {
        "text": verdict(analysis, largest).removeprefix("verdict: "),
        "prefill_bound": stage_bound(analysis, "prefill"),
        "decode_bound": stage_bound(analysis, "decode"),
        "largest_batch": largest,
    }


def band_text(intervals: dict, key: str, point: float | None, rate: bool = False) -> str:
    """' (80 %: 5.9–6.8)' for a headline figure with an interval, in the point's unit; else ''."""
    pair = (intervals.get(key) or {}).get("80")
    if not pair or pair[0] is None or not point:
        return ""
    if rate:
        return f" (80 %: {plain_number(pair[0], 3)}–{plain_number(pair[1], 3)})"
    unit = format_time(point).split(" ")[1]
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]
    return f" (80 %: {plain_number(pair[0] / scale, 3)}–{plain_number(pair[1] / scale, 3)})"


def interval_basis(intervals: dict) -> str:
    """What the intervals rest on, in one line (or why there are none)."""
    if "none" in intervals:
        return f"intervals: none ({intervals['none']})"
    far = intervals.get("widened_past_grid", 0)
    wider = f"; {far} ops past the measured grid, their spread widened" if far else ""
    return f"intervals: {intervals.get('basis', '')}{wider}"


def outside_note(intervals: dict, gen: dict) -> str:
    """Why a headline point lies outside its own 80 % interval ('' when none does): the spec
    roofline is a bound that the measured kernels did not reach, or the residuals lean."""
    out = [
        f"{name} {'below' if point < pair[0] else 'above'}"
        for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
        if (pair := (intervals.get(key) or {}).get("80"))
        and pair[0] is not None
        and (point := gen.get(key))
        and not pair[0] <= point <= pair[1]
    ]
    if not out:
        return ""
    spec_below = intervals.get("basis", "").startswith("spec") and all(o.endswith("below") for o in out)
    why = (
        "the datasheet roofline is a bound that the measured devices' kernels did not reach"
        if spec_below
        else "the held-out residuals lean to one side"
    )
    return f"; points outside their 80 % interval ({', '.join(out)}): {why}"


def fit_text(mem: dict, usable: float) -> str:
    """'fits', or 'at risk' with the measured peak that would not fit."""
    if mem.get("fit") != "at risk":
        return "fits"
    high = mem["peak_interval_bytes"][1]
    return f"at risk: fits as predicted, but at the largest measured peak ratio {format_bytes(high)} of {format_bytes(usable)} usable ({mem['peak_basis']})"


def summary_lines(analysis: Analysis) -> list[str]:
    """Key numbers as short lines: generation and memory."""
    lines = [f"warning: {w}" for w in analysis.extra.get("warnings", [])]
    gen = analysis.generation
    if gen:
        tpot = format_time(gen["tpot_s"]) if gen["tpot_s"] is not None else "- (1 token)"
        bands = analysis.extra.get("intervals") or {}
        lines.append(
            interval_basis(bands) + outside_note(bands, gen)
        )  # before the headline: `| tail -2` keeps TTFT and memory
        lines.append(
            f"TTFT {format_time(gen['ttft_s'])}{band_text(bands, 'ttft_s', gen['ttft_s'])}   TPOT {tpot}{band_text(bands, 'tpot_s', gen['tpot_s'])}   "
            f"total {format_time(gen['total_s'])}   "
            f"{plain_number(gen['tokens_per_s'], 4)} tokens/s{band_text(bands, 'tokens_per_s', gen['tokens_per_s'], rate=True)}"
        )
    spec = analysis.extra.get("speculative")
    if spec:
        even = spec["break_even_acceptance"]
        smem = spec["memory"]
        fits = (
            "fits"
            if smem["fits"]
            else (
                f"does NOT fit: {format_bytes(smem['shortfall_bytes'])} over "
                f"the {format_bytes(smem['usable_bytes'])} usable"
            )
        )
        rate = spec["tokens_per_s"]
        lines.append(
            f"speculative ({spec['draft']}, k={spec['draft_tokens']}, a={spec['acceptance']}): "
            f"TTFT {format_time(spec['ttft_s'])}   TPOT {format_time(spec['tpot_s'])}   "
            f"{'-' if rate is None else plain_number(rate, 4)} tokens/s   ({spec['expected_tokens_per_step']:.3g} "
            f"tokens/step, speed-up {spec['speedup']:.3g}x, break-even acceptance "
            f"{'-' if even is None else format(even, '.3g')})"
        )
        lines.append(
            f"memory with the draft: {format_bytes(smem['peak_bytes'])} of "
            f"{format_bytes(smem['capacity_bytes'])}: {fits}"
        )
    pipe = analysis.extra.get("pipeline")
    if pipe:
        lines.append(
            f"pipeline: {pipe['stages']} stages, {pipe['micro_batches']} micro-batches, "
            f"bubble {pipe['bubble_fraction']:.1%} in prefill, {pipe['decode_bubble_fraction']:.1%} in decode"
        )
    mem = analysis.memory
    usable = mem.get("usable_bytes", mem["capacity_bytes"])
    fits = (
        fit_text(mem, usable)
        if mem["fits"]
        else (
            f"does NOT fit: {format_bytes(mem['shortfall_bytes'])} over the {format_bytes(usable)} usable "
            "(memory utilization x capacity - runtime reserve)"
        )
    )
    per = f" per device (x{mem['devices']})" if mem.get("devices", 1) > 1 else ""
    lines.append(
        f"memory{per}: weights {format_bytes(mem['weights_bytes'])} + KV cache "
        f"{format_bytes(mem['kv_cache_bytes'])} + activations "
        f"{format_bytes(mem['activations_peak_bytes'])} = {format_bytes(mem['peak_bytes'])}"
        f" of {format_bytes(mem['capacity_bytes'])}: {fits}"
    )
    return lines


def attention_label(setting: str, resolved: str) -> str:
    """'sdpa-gqa attention (auto: ...)': the attention priced, and why where ``auto`` chose it."""
    if setting != "auto":
        return f"{resolved} attention"
    return f"{resolved} attention (auto: transformers' sdpa path)"


def rich_tables(analysis: Analysis) -> list[Any]:
    s = analysis.settings
    header = (
        f"{analysis.model.name} on {analysis.device.name} ({analysis.mode} roofline), "
        f"weights {s.w_dtype}, activations {s.a_dtype}, KV {s.kv_dtype}, "
        f"matrix ops in {analysis.plan.matrix_dtype}, {attention_label(s.attention, analysis.plan.attention)}"
        + (f", tp {s.tp}" if s.tp > 1 else "")
        + (f", pp {s.pp}" if s.pp > 1 else "")
        + (f", ep {s.ep}" if s.ep > 1 else "")
    )
    return [
        header,
        *basis_lines(analysis),
        _stage_table(analysis, "prefill"),
        _stage_table(analysis, "decode"),
        verdict(analysis),
        *summary_lines(analysis),
    ]


def basis_lines(analysis: Analysis) -> list[str]:
    """What the numbers rest on (ridgeline.engine.basis): the ceilings, how their profile was
    timed, the execution priced; then each note (a stand-in type, an unmeasured term)."""
    from ridgeline.engine.basis import basis_lines as lines

    return lines(analysis.extra.get("basis"))


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


def frame_table(frame, title: str) -> list:
    """A DataFrame as a rich table: readable headers with their units, one unit per column;
    columns equal in every row are said once, under the table."""
    columns = [frame_column(frame[c].tolist(), c) for c in frame.columns]
    same = [(name, unit, cells[0]) for name, unit, cells in columns if len(frame) > 1 and len(set(cells)) == 1]
    shown = [c for c in columns if (c[0], c[1], c[2][0]) not in same] or columns
    table = _table(title)
    for name, unit, cells in shown:
        _add_column(table, f"{name} ({unit})" if unit else name, text=not any(ch.isdigit() for ch in "".join(cells)))
    for row in zip(*(cells for _, _, cells in shown)):
        table.add_row(*row)
    fit_columns(table, [cells for _, _, cells in shown], console_width())
    note = ", ".join(f"{name} {value}{' ' + unit if unit else ''}" for name, unit, value in same)
    return [table] + ([f"the same in every row: {note}"] if same else [])


# --- what the CLI prints beside the tables above ------------------------------------------


def console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=console_width())


def check_format(fmt: str) -> None:
    if fmt not in ("table", "json", "csv"):
        raise InvalidOptionError(f"--format must be one of table, json, csv, got '{fmt}'")


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


def write_text(path: Path, text: str) -> None:
    """Write a result file atomically and say so on stderr."""
    write_atomic(path, text)
    print(f"wrote {path}", file=sys.stderr)


def print_lines(lines) -> None:
    for line in lines:
        print(line)


def show(items: list[Any], whole_lines: bool = True) -> None:
    """Print rich renderables; with ``whole_lines``, a line of text is never wrapped (grep and tail get it whole)."""
    out = console()
    for item in items:
        out.print(item, soft_wrap=whole_lines and isinstance(item, str))


def emit(text: str | None, renderables: list[Any], output: Path | None) -> None:
    """A result: ``text`` (JSON or CSV) to stdout or ``output``; else, the table view's renderables."""
    if text is None:
        if output is not None:
            raise InvalidOptionError("--output needs --format json or csv")
        show(renderables, whole_lines=not to_terminal())
    elif output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        write_text(output, text)


def show_frame(frame, fmt: str, output: Path | None, title: str, notes=(), mode: str | None = None) -> None:
    """A DataFrame as a rich table, CSV or JSON records (with the ceilings' ``mode``)."""
    text = frame_text(frame, fmt, notes, mode)
    emit(text, frame_view(frame, title, notes) if text is None else [], output)


def show_deployment_frame(frame, d: Deployment, what: str, notes, fmt: str, output: Path | None) -> None:
    """One deployment's table (sweep, frontier), titled with its model, device and roofline, then ``what``."""
    show_frame(frame, fmt, output, f"{d.model.name} on {d.device.name} ({d.mode} roofline): {what}", notes, d.mode)


def deployment_notes(d: Deployment, batch=1, seq_len=512) -> list[str]:
    """What a deployment's numbers rest on over a grid of (batch, seq_len), as the lines analyze
    prints (ridgeline.engine.basis)."""
    return basis_text(deployment_basis(d, batch, seq_len))


def frontier_notes(d: Deployment, best: dict, batch=1, seq_len=512) -> list[str]:
    """What frontier prints under its table: the basis (over its batches), the largest batch,
    the best pick."""
    pick = best["best"]
    found = "no batch meets the targets"
    if pick:
        found = (
            f"best throughput meeting the targets: batch {pick['batch']}, "
            f"{plain_number(pick['tokens_per_s'], 4)} tokens/s, TPOT {format_time(pick['tpot_s'])}, "
            f"TTFT {format_time(pick['ttft_s'])}"
        )
    return [*deployment_notes(d, batch, seq_len), f"largest batch that fits: {best['max_batch']}", found]


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
    return (
        f"engine {settings.get('engine', 'pytorch')}: policy {s.get('policy')}, batch {s.get('max_batch')}, "
        f"{s.get('token_budget')} tokens a step, {chunks}"
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
    if result.meta["scheduler"].get("prefix_cache") or s["prefix_hit_tokens"]:
        lines.insert(
            -1,
            f"prefix cache: {s['prefix_hit_tokens']} prompt tokens hit ({s['prefix_hit_rate']:.1%} of the prefill asked for)",
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


DEVICE_HEADER = "name\tdevice\tmemory\tbandwidth\tmatrix peaks (ops/s)"
MODEL_HEADER = "name\ttype\tlayers\thidden\tattention and heads (query/KV)\tMoE"


def device_line(name: str, d: DeviceSpec) -> str:
    """One catalog device: name, then the key figures."""
    peaks = " ".join(f"{k}={v / TERA:g}T" for k, v in d.matrix_peak.items())
    return f"{name}\t{d.full_name}\t{d.memory_capacity / GIB:g} GiB\t{d.memory_bandwidth / GIGA:g} GB/s\t{peaks}"


def device_rows(d: DeviceSpec) -> list[str]:
    """All fields of one device, in the units of its file."""
    link = f", {d.interconnect_bandwidth / GIGA:g} GB/s per direction" if d.interconnect_bandwidth else ""
    rows = [
        ("name", d.name),
        ("full name", d.full_name),
        ("vendor", d.vendor),
        ("kind", d.kind),
        ("memory", f"{d.memory_capacity / GIB:g} GiB"),
        ("bandwidth", f"{d.memory_bandwidth / GIGA:g} GB/s"),
        *((f"matrix {k}", f"{v / TERA:g} TOPS") for k, v in d.matrix_peak.items()),
        *((f"vector {k}", f"{v / TERA:g} TOPS") for k, v in d.vector_peak.items()),
        ("compute units", str(d.compute_units)),
        ("L1/shared per unit", f"{d.l1_bytes_per_unit / KIB:g} KiB"),
        ("L2 / last-level cache", f"{d.l2_bytes / MIB:g} MiB"),
        ("interconnect", f"{d.interconnect or '-'}{link}"),
    ]
    if d.interconnect_latency:
        rows.append(("link latency", f"{d.interconnect_latency * 1e6:g} µs per hop"))
    if d.collective_model:
        rows.append(("collectives", f"{COLLECTIVE_LABELS[d.collective_model]} (ring/tree x LL/LL128/Simple)"))
    if d.interconnect_link_bandwidth:
        rows.append(("fabric", f"mesh, {d.interconnect_link_bandwidth / GIGA:g} GB/s per peer link"))
    if d.exp_rate:
        rows.append(("exponentials", f"{d.exp_rate / TERA:g} T/s"))
    if d.runtime_reserve:
        rows.append(("runtime reserve", f"{d.runtime_reserve / GIB:g} GiB"))
    rows += [("source", s) for s in d.sources]
    return [f"{key:22s} {value}" for key, value in rows]


def model_line(name: str, m: ModelConfig) -> str:
    """One catalog model: name, then its shape."""
    moe = f"\tMoE {m.num_experts} experts, top-{m.num_experts_per_tok}" if m.is_moe else ""
    return (
        f"{name}\t{m.model_type}\t{m.num_layers} layers\thidden {m.hidden_size}\t"
        f"{m.attention_kind} {m.num_heads}/{m.num_kv_heads} heads{moe}"
    )


def model_rows(m: ModelConfig) -> list[str]:
    """The parsed ModelConfig and its parameter count."""
    rows = [f"{key:32s} {value}" for key, value in asdict(m).items()]
    rows.append(f"{'parameters':32s} {total_parameters(m) / 1e9:.3f} B")
    if m.is_moe:
        rows.append(f"{'active parameters':32s} {active_parameters(m) / 1e9:.3f} B")
    return rows


def registered_line(data: dict, path) -> str:
    """What ``ridgeline predictions register`` wrote."""
    return (
        f"registered {len(data['e2e'])} e2e, {len(data['hf'])} transformers, "
        f"{len(data['serving'])} serving and {len(data['draw']['cases'])} draw predictions: {path}"
    )


PLAN_COLUMNS = {  # the optional ones (fleet, basis, max rate) where the search has them
    "device": ("device", "{}"),
    "fleet": ("fleet", "{}"),
    "gpus": ("gpus", "{}"),
    "tp": ("tp", "{}"),
    "pp": ("pp", "{}"),
    "w_dtype": ("weights", "{}"),
    "kv_dtype": ("kv", "{}"),
    "max_batch": ("max batch", "{}"),
    "token_budget": ("chunk", "{}"),
    "usd_per_hour": ("$/hour", "{:.2f}"),
    "usd_per_million_tokens": ("$/M tokens", "{:.3f}"),
    "goodput_rps": ("goodput req/s", "{:.2f}"),
    "slo_attainment": ("met SLO", "{:.4f}"),
    "ttft_p99_s": ("TTFT p99 s", "{:.3f}"),
    "tpot_p99_s": ("TPOT p99 s", "{:.4f}"),
    "max_rate_rps": ("max rate req/s", "{:.2f}"),
    "basis": ("basis", "{}"),
}


def plan_table(frame, title: str) -> Table:
    """Deployments of a plan, one row each (the columns of PLAN_COLUMNS)."""
    out = Table(title=title)
    shown = {key: how for key, how in PLAN_COLUMNS.items() if key in frame}
    for header, _ in shown.values():
        out.add_column(header, justify="right")
    for _, row in frame.iterrows():
        out.add_row(*(fmt.format(row[key]) for key, (_, fmt) in shown.items()))
    return out


def plan_output(result, top: int, output: Path | None) -> None:
    """``plan``'s result: every deployment, with the search's counts, as JSON to ``output``
    where asked; then the view of the ``top`` cheapest."""
    if output is not None:
        write_text(output, json.dumps(result.to_dict(), indent=1) + "\n")
    show(plan_view(result, top))


def plan_view(result, top: int) -> list[Any]:
    """A plan's search counts, its Pareto set, the ``top`` cheapest simulated, the choice and the
    prices used: lines of text and rich tables, in order."""
    counts, frame, meta = result.counts, result.frame, result.meta
    bounds = {reason: n for reason, n in counts["pruned"].items() if reason != "dominated"}
    pruned = ", ".join(f"{n} {reason}" for reason, n in bounds.items()) or "none"
    view: list[Any] = [
        f"{meta['model']}: {counts['enumerated']} deployments enumerated; {sum(bounds.values())} pruned by the "
        f"bounds ({pruned}); {counts['pruned'].get('dominated', 0)} dominated (they cost more than a simulated "
        f"one that met the SLO for every request); {counts['simulated']} simulated on "
        f"{'datasheet rooflines' if 'roofs' not in meta else meta['basis']} ({meta['executor']} executor)"
    ]
    if result.chosen is None:
        return [*view, "no deployment survived the bounds: none can meet the SLO at this rate"]
    view.append(plan_table(frame.loc[result.pareto], "Pareto set: cost per million output tokens vs goodput"))
    simulated = frame[frame["reason"] == ""].sort_values("rank_cost").head(top)
    view.append(plan_table(simulated, f"The {len(simulated)} cheapest simulated"))
    row = frame.loc[result.chosen]
    fleet = f" as {row['fleet']}" if row.get("fleet") else ""
    view.append(
        f"chosen: {row['gpus']} x {row['device']}{fleet} (tp {row['tp']}, pp {row['pp']}), weights {row['w_dtype']}, KV "
        f"{row['kv_dtype']}, max batch {row['max_batch']}, chunk {row['token_budget']}: "
        f"${row['usd_per_million_tokens']:.3f} per million output tokens, goodput {row['goodput_rps']:.2f} req/s "
        f"({row['slo_attainment']:.4f} of requests met the SLO)"
    )
    prices = meta["prices"].items()
    return view + [f"price of {name}: ${p['usd_per_gpu_hour']:.2f}/GPU-hour, {p['source']}" for name, p in prices]
