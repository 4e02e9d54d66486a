"""Outputs: JSON, CSV, rich tables, and atomic file writes."""

from __future__ import annotations

import io
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.units import GIB, KIB, MIB, format_bytes, format_si, format_time

if TYPE_CHECKING:  # pragma: no cover
    from ridgeline.engine.analyze import Analysis


def to_json(analysis: Analysis) -> str:
    return json.dumps(analysis.to_dict(), indent=2)


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
    return pd.concat([*frames, pd.DataFrame(totals, columns=frames[0].columns)], ignore_index=True)


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


def console_width() -> int:
    """A terminal's width or $COLUMNS; piped into a file, wide enough for every table."""
    import os
    import sys

    from rich.console import Console

    return Console().width if sys.stdout.isatty() or "COLUMNS" in os.environ else 160


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


def stage_verdict(analysis: Analysis, stage: str) -> str:
    """What bounds one stage and by how much: 'memory-bound (98% of decode time; weights are
    87% of the bytes moved)'; compute-bound: which op kind does the work."""
    ops = getattr(analysis, stage).records()  # not the DataFrame: the table view needs no pandas
    spent = sum_by(ops, "bound", "time_s")
    bound = max(spent, key=spent.get)
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


def verdict(analysis: Analysis) -> str:
    """One line: what bounds TTFT and TPOT and by how much, and the largest batch that fits."""
    from ridgeline.api import max_batch

    w = analysis.workload
    step = "TPOT" if analysis.generation else "a decode step"
    largest = max_batch(analysis.model, analysis.device, w.seq_len, w.generate, settings=analysis.settings)
    fits = f"largest batch that fits: {largest}" if largest else "not even batch 1 fits"
    return (
        f"verdict: TTFT is {stage_verdict(analysis, 'prefill')}, {step} is "
        f"{stage_verdict(analysis, 'decode')}; {fits} ({w.seq_len} + {w.generate} tokens each)"
    )


def summary_lines(analysis: Analysis) -> list[str]:
    """Key numbers as short lines: generation and memory."""
    lines = [f"warning: {w}" for w in analysis.extra.get("warnings", [])]
    gen = analysis.generation
    if gen:
        tpot = format_time(gen["tpot_s"]) if gen["tpot_s"] is not None else "- (1 token)"
        lines.append(
            f"TTFT {format_time(gen['ttft_s'])}   TPOT {tpot}   "
            f"total {format_time(gen['total_s'])}   "
            f"{plain_number(gen['tokens_per_s'], 4)} tokens/s"
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
        lines.append(
            f"speculative ({spec['draft']}, k={spec['draft_tokens']}, a={spec['acceptance']}): "
            f"TTFT {format_time(spec['ttft_s'])}   TPOT {format_time(spec['tpot_s'])}   "
            f"{plain_number(spec['tokens_per_s'], 4)} tokens/s   ({spec['expected_tokens_per_step']:.3g} "
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
            f"bubble {pipe['bubble_fraction']:.1%}"
        )
    mem = analysis.memory
    usable = mem.get("usable_bytes", mem["capacity_bytes"])
    fits = (
        "fits"
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


def rich_tables(analysis: Analysis) -> list[Any]:
    s = analysis.settings
    header = (
        f"{analysis.model.name} on {analysis.device.name} ({analysis.mode} roofline), "
        f"weights {s.w_dtype}, activations {s.a_dtype}, KV {s.kv_dtype}, "
        f"matrix ops in {analysis.plan.matrix_dtype}, {s.attention} attention"
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
