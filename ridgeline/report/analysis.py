"""``ridgeline analyze``'s output: JSON, CSV (a row per op, then the totals) and the table
view: the per-op tables of both stages, the verdict and the summary lines."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

from ridgeline.engine.analyze import largest_batch
from ridgeline.engine.units import format_bytes, format_time
from ridgeline.report.terminal import add_column, compact_table, console_width, fit_columns, plain_number, si_number

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


def stage_table(analysis: Analysis, stage: str):
    workload = analysis.workload
    title = f"{stage}: batch {workload.batch}, " + (
        f"{workload.seq_len} prompt tokens" if stage == "prefill" else f"1 new token, {workload.seq_len} cached"
    )
    table = compact_table(title)
    for header, text in STAGE_COLUMNS:
        add_column(table, header, text)
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
    unmeasured = f"; {intervals['unmeasured']}" if intervals.get("unmeasured") else ""
    return f"intervals: {intervals.get('basis', '')}{wider}{unmeasured}"


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
    lines += [f"model: {note}" for note in analysis.extra.get("model_notes", [])]
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
        rate, sb = spec["tokens_per_s"], spec.get("intervals") or {}
        lines.append(
            f"speculative ({spec['draft']}, k={spec['draft_tokens']}, a={spec['acceptance']}): "
            f"TTFT {format_time(spec['ttft_s'])}{band_text(sb, 'ttft_s', spec['ttft_s'])}   "
            f"TPOT {format_time(spec['tpot_s'])}{band_text(sb, 'tpot_s', spec['tpot_s'])}   "
            f"{'-' if rate is None else plain_number(rate, 4)} tokens/s{band_text(sb, 'tokens_per_s', rate, rate=True)}   ({spec['expected_tokens_per_step']:.3g} "
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
    if resolved == "eager":
        return "eager attention (auto: transformers' eager path; the model's class runs no SDPA)"
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
        stage_table(analysis, "prefill"),
        stage_table(analysis, "decode"),
        verdict(analysis),
        *summary_lines(analysis),
    ]


def basis_lines(analysis: Analysis) -> list[str]:
    """What the numbers rest on (ridgeline.engine.basis): the ceilings, how their profile was
    timed, the execution priced; then each note (a stand-in type, an unmeasured term)."""
    from ridgeline.engine.basis import basis_lines as lines

    return lines(analysis.extra.get("basis"))
