"""What a prediction rests on: the ceilings' kind, how their profile was timed, the execution
mode priced, and every term priced without a measurement of its own (named, never silent).

    basis(ops_by_stage, ceilings, device, "auto")
    # {"ceilings": "calibrated", "timing": "device", "execution": "graph", ...,
    #  "unmeasured": [{"op": "softmax", "term": "eager host", "priced_by": "default"}], "notes": [...]}

A device-side term is measured when a class of the op's own data type priced it (``kind:name@
dtype`` or ``kind@dtype``; a stand-in type of the same datasheet rate counts, and is noted);
a pooled class fitted over every type, or none at all (datasheet roofs), is named. A host or
kernel-count term is measured when the table names the op (engine op names: fused SDPA is
``attention``, the unfused qk_matmul, softmax and sv_matmul are ops of their own); 'default'
is named. An activation or norm of another kind than SiLU x up or RMSNorm priced by a class
that is not of its kind (a profile that measured no such kind) is named too. Pure: no files,
no printing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ridgeline.engine.collectives import LABELS, MODELLED
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.grid import describe, outside_range, outside_spans
from ridgeline.engine.ops import DEFAULT_VARIANTS, Op, base_name, op_variant
from ridgeline.engine.roofline import FUSED, TIMINGS, Ceilings, execution_key, kernels_table
from ridgeline.engine.units import format_bytes, format_time

# ops that run a kernel of their own, unlike their kind's other ops: priced by a class fitted
# to other kernels they are named (transformers' SDPA paths, docs/model.md "Attention
# settings": on a CPU many times the folded kernel's time; on CUDA ``enable_gqa`` goes to the
# backend SDPA's dispatch picks, cuDNN on the H100 (its calibration's gqa rows match the cudnn
# rows), not the flash backend a GPU profile's ``attention`` class forces)
OWN_CLASS = frozenset({"sdpa_gqa", "sdpa_repeat_kv"})


def device_key(ceilings: Ceilings, op: Op) -> str | None:
    """The class key that prices ``op``'s device time (None: datasheet roofs, the profile's
    'default' overhead)."""
    tables = (
        ceilings.efficiency,
        ceilings.row_curves,
        ceilings.size_curves,
        ceilings.attention_tables,
        ceilings.overhead_s,
    )
    return next((k for k in ceilings.keys(op) if any(k in t for t in tables)), None)


def _distinct(ops: Iterable[Op]) -> list[Op]:
    seen, out = set(), []
    for op in ops:
        if (op.name, op.kind, op.dtype) not in seen:
            seen.add((op.name, op.kind, op.dtype))
            out.append(op)
    return out


def unmeasured(ops: Sequence[Op], ceilings: Ceilings) -> list[dict[str, Any]]:
    """Each op (name, type) whose device, host or kernel-count term no measurement of its own
    priced, with what priced it instead. Datasheet ceilings measure nothing: none listed."""
    if ceilings.mode == "spec":
        return []
    out = []
    for op in _distinct(ops):
        key = device_key(ceilings, op)
        dtype = ceilings.class_dtype(op.dtype)
        if key is None or "@" not in key:
            out.append({"op": op.name, "dtype": op.dtype, "term": "device", "priced_by": key or "datasheet roofs"})
        elif not key.endswith(f"@{dtype}"):  # no class of its own type: the nearest measured type's
            out.append({"op": op.name, "dtype": op.dtype, "term": "type", "priced_by": key})
        elif base_name(op.name) in OWN_CLASS and not key.startswith(f"{op.kind}:{base_name(op.name)}"):
            out.append({"op": op.name, "dtype": op.dtype, "term": "kernel", "priced_by": key})
        elif other_kind(op, key):
            out.append({"op": op.name, "dtype": op.dtype, "term": f"kind {op_variant(op)}", "priced_by": key})
        if op.matrix and ceilings.measured_peaks and op.dtype not in ceilings.measured_peaks:
            near = ceilings.peak_as.get(op.dtype)
            by = f"{near}'s measured peak x the datasheet's {op.dtype}/{near} ratio" if near else "datasheet peak"
            out.append({"op": op.name, "dtype": op.dtype, "term": "matrix peak", "priced_by": by})
    execution = ceilings.execution
    host = ceilings.host_s.get(execution) or {} if execution != "graph" else {}
    counts = kernels_table(ceilings, execution) if ceilings.launch_gap_s else {}
    for term, table in ((f"{execution} host", host), ("kernels per op", counts)):
        if set(table) <= {"default"}:  # one measured mean per call (compiled), or none
            continue
        for op in _distinct(ops):
            key = execution_key(table, op)
            if key != base_name(op.name):
                out.append({"op": op.name, "dtype": op.dtype, "term": term, "priced_by": key or "none"})
    return out


def _unmeasured_notes(entries: list[dict[str, Any]], ceilings: Ceilings) -> list[str]:
    """One line per (term, what priced it): the ops it priced, named."""
    groups: dict[tuple[str, str], list[str]] = {}
    for e in entries:
        typed = e["term"] in ("device", "type", "matrix peak") or e["term"].startswith("kind ")
        name = f"{e['op']}@{e['dtype']}" if typed else e["op"]
        groups.setdefault((e["term"], e["priced_by"]), [])
        if name not in groups[(e["term"], e["priced_by"])]:
            groups[(e["term"], e["priced_by"])].append(name)
    lines = []
    for (term, by), names in groups.items():
        ops = ", ".join(names)
        if term.startswith("kind "):
            kind = term.removeprefix("kind ")
            lines.append(
                f"{ops} ({kind}) priced from the '{by}' class of other kinds: the profile measured no {kind} class"
            )
        elif term == "kernel":
            lines.append(
                f"no measured class for {ops}, a kernel of its own: priced by the '{by}' class, "
                "other kernels' rate (a profile from today's calibrate measures it)"
            )
        elif term == "matrix peak":
            where = f"{ceilings.device}'s datasheet peak" if by == "datasheet peak" else by
            lines.append(f"no measured matrix peak for {ops}: priced at {where}")
        elif term == "type":
            lines.append(
                f"no measured class of their own type for {ops}: priced by the nearest measured type's "
                f"'{by}' class, its measured fractions on their own type's roofs (calibrate that type to measure it)"
            )
        elif term == "device":
            how = (
                "datasheet roofs and the profile's default overhead"
                if by == "datasheet roofs"
                else f"the pooled '{by}' class, fitted over every type"
            )
            lines.append(f"no measured class for {ops}: priced by {how}")
        elif term == "kernels per op":
            value = kernels_table(ceilings, ceilings.execution).get(by, 1.0)
            where = (
                f"the profile's {by} ({value:g} per call)"
                if by != "none"
                else "one kernel per call, as the table gives no default"
            )
            lines.append(f"no measured kernel count for {ops}: priced at {where}")
        else:
            value = (ceilings.host_s.get(ceilings.execution) or {}).get(by, 0.0)
            where = (
                f"the profile's {by} ({format_time(value)} per call)"
                if by != "none"
                else "no host time, as the table gives no default"
            )
            lines.append(f"no measured {term} term for {ops}: priced at {where}")
    return lines


def other_kind(op: Op, key: str) -> bool:
    """An activation or norm of another kind than SiLU x up or RMSNorm whose pricing class
    ``key`` is not of its kind (the profile measured none: ``class_keys`` fell back)."""
    variant = op_variant(op)
    fused = op.dims.get("kernel") == FUSED  # priced as one kernel on purpose (one_kernel_notes)
    return bool(variant) and not fused and variant not in DEFAULT_VARIANTS and f".{variant}@" not in key


def execution_notes(ceilings: Ceilings, device: DeviceSpec, requested: str) -> list[str]:
    """How the execution mode was priced, where the ceilings lack its own terms."""
    execution, notes = ceilings.execution, []
    if requested == "auto" and ceilings.timing == "eager" and device.kind != "cpu":
        notes.append(
            f"execution eager (auto): the profile was timed by {TIMINGS['eager']}, so "
            "it holds no device times for graph"
        )
    if execution != "graph" and not ceilings.host_s.get(execution):
        if ceilings.timing == "" and device.kind != "cpu":
            notes.append(f"datasheet roofs hold no host time: {execution} is priced as device time only, as graph is")
        elif ceilings.timing in ("cpu", "eager") and execution == "compiled":
            notes.append(
                f"compiled priced as eager: the profile was timed by "
                f"{TIMINGS[ceilings.timing]} and holds no compiled terms"
            )
    table = ceilings.host_s.get(execution) or {}
    if execution != "graph" and set(table) == {"default"}:
        notes.append(f"{execution} host: one measured mean per call for every op ({format_time(table['default'])})")
    return notes


def stand_in_notes(ops: Sequence[Op], ceilings: Ceilings, device: DeviceSpec) -> list[str]:
    """Each data type priced with another measured type's classes, and why that holds."""
    notes = []
    for dtype in sorted({op.dtype for op in ops}):
        other = ceilings.class_dtype(dtype)
        if other == dtype:
            continue
        rate, near = device.matrix_peak.get(dtype, 0.0), device.matrix_peak.get(other, 0.0)
        why = (
            f"and {device.name}'s datasheet gives both {rate / 1e12:.4g} TFLOP/s"
            if rate == near
            else f"{other} is the nearest type it measured: its fractions on {dtype}'s own roofs"
        )
        notes.append(
            f"{dtype} priced with the profile's measured {other} classes: it measured no {dtype} classes, {why}"
        )
    return notes


def derived_notes(ops: Sequence[Op], ceilings: Ceilings, device: DeviceSpec) -> list[str]:
    """The matrix types priced on a datasheet rate no vendor publishes (``derived_rates``)."""
    if ceilings.mode == "calibrated":
        return []
    derived = sorted({op.dtype for op in ops} & set(device.derived_rates))
    return (
        [
            f"{device.name}'s {', '.join(derived)} rate{'s are' if len(derived) > 1 else ' is'} derived, "
            f"not published (its hardware file's notes say how)"
        ]
        if derived
        else []
    )


def one_kernel_notes(ops: Sequence[Op], ceilings: Ceilings) -> list[str]:
    """Which class priced the engine's one-kernel ops (``fusion``, "pointwise"), where a
    profile did: the kernel itself was not measured."""
    fused = [op for op in _distinct(ops) if op.dims.get("kernel") == FUSED]
    if not fused or ceilings.mode == "spec":
        return []
    key = device_key(ceilings, fused[0])
    names = ", ".join(dict.fromkeys(op.name for op in fused))
    return [
        f"{names}: one fused kernel each (the engine's), priced by the measured one-kernel class "
        f"'{key}' (the kernels themselves were not measured)"
    ]


def collective_notes(ops: Sequence[Op], ceilings: Ceilings) -> list[str]:
    """Which cost model priced the collectives, where there are any."""
    kinds = {op.dims.get("collective") for op in ops if op.kind == "comm"}
    if not kinds & set(MODELLED):
        return []
    if not ceilings.collectives:
        return ["collectives priced as hops x link latency + bytes / link bandwidth (no base latency)"]
    return [f"collectives: {LABELS[ceilings.collectives]} (the cheapest of ring/tree x LL/LL128/Simple)"]


COPIED_HEAD_DTYPES = ("bf16",)  # lm_head types whose weight PyTorch's CPU bmm copies (torch 2.13; not fp16, fp32)


def generate_notes(ops_by_stage: Mapping[str, Sequence[Op]], device: DeviceSpec) -> list[str]:
    """What transformers' ``generate`` adds on a CPU to the first token (not priced here): it
    hands lm_head a [B, 1, H] slice of the prompt's [B, S, H] last hidden state; ``matmul``
    cannot fold that strided slice into a matrix, so it runs ``bmm`` against the transposed
    weight expanded over the batch, which PyTorch's CPU ``bmm`` copies in bf16: the
    whole lm_head weight, once per sequence (``kernels.e2e.hf_client`` measures the copy)."""
    head = next((op for op in ops_by_stage.get("prefill", ()) if op.name == "lm_head"), None)
    if device.kind != "cpu" or head is None or head.dtype not in COPIED_HEAD_DTYPES:
        return []
    return [
        f"transformers' generate adds to TTFT what this does not price: it computes the first token's lm_head "
        f"through a batched path that copies the {head.dtype} lm_head weight ({format_bytes(head.weight_bytes)}) "
        "once per sequence (ridgeline's decoder and serving engines do not); "
        "'python -m kernels.e2e.hf_client MODEL --device cpu' measures that copy"
    ]


def extrapolated(ops: Sequence[Op], ceilings: Ceilings) -> list[dict[str, Any]]:
    """Each (op, dimension) past what the profile's tables measured (``ridgeline.engine.grid``):
    the op's least and most values outside and the measured range, over every stage. Datasheet
    roofs and efficiency terms measured no grid: none listed."""
    out: dict[tuple, dict[str, Any]] = {}
    for op in ops:
        for span in outside_spans(op, ceilings):
            lo, hi = outside_range(span)
            key = (op.name, span.dimension, span.low, span.high)
            entry = {"op": op.name, "dimension": span.dimension, "outside": [lo, hi], "measured": [span.low, span.high]}
            seen = out.setdefault(key, entry)
            seen["outside"] = [min(seen["outside"][0], lo), max(seen["outside"][1], hi)]
    return list(out.values())


def extrapolation_notes(entries: list[dict[str, Any]]) -> list[str]:
    """One line naming every op past the grid, grouped by what lies past it: 'extrapolated past
    the measured grid: attention head_dim 256 (measured 64–128); down_proj k 28672 (...)'."""
    groups: dict[str, list[str]] = {}
    for e in entries:
        groups.setdefault(describe(e["dimension"], e["outside"], e["measured"]), []).append(e["op"])
    parts = [f"{', '.join(ops)} {text}" for text, ops in groups.items()]
    return [f"extrapolated past the measured grid: {'; '.join(parts)}"] if parts else []


def basis(
    ops_by_stage: Mapping[str, Sequence[Op]],
    ceilings: Ceilings,
    device: DeviceSpec,
    requested: str = "auto",
    engine: str = "pytorch",
    fusion: str = "",
) -> dict[str, Any]:
    """The basis of an analysis of ``ops_by_stage`` (prefill, decode ...) on ``ceilings``
    (already set to their execution mode; ``requested`` is the setting it came from), for
    the serving ``engine`` with the kernels it fuses (``fusion``)."""
    ops = [op for stage in ops_by_stage.values() for op in stage]
    missing = unmeasured(ops, ceilings)
    outside = extrapolated(ops, ceilings)
    used = {op.dtype: ceilings.class_dtype(op.dtype) for op in ops}
    return {
        "ceilings": ceilings.mode,
        "timing": ceilings.timing or None,
        "timing_label": TIMINGS.get(ceilings.timing, "datasheet peaks"),
        "execution": ceilings.execution,
        "requested_execution": requested,
        "engine": engine,
        "fusion": fusion,
        "dtype_as": {k: v for k, v in used.items() if k != v},
        "unmeasured": missing,
        "extrapolated": outside,
        "notes": [
            *execution_notes(ceilings, device, requested),
            *stand_in_notes(ops, ceilings, device),
            *derived_notes(ops, ceilings, device),
            *one_kernel_notes(ops, ceilings),
            *_unmeasured_notes(missing, ceilings),
            *collective_notes(ops, ceilings),
            *generate_notes(ops_by_stage, device),
            *extrapolation_notes(outside),
        ],
    }


def basis_lines(b: Mapping[str, Any] | None) -> list[str]:
    """A basis as the lines the table view and the dashboard show: 'basis: ...', then each
    note as 'note: ...'."""
    if not b:
        return []
    timing = "" if b["ceilings"] == "spec" else f", timed by {b['timing_label']}"
    fused = f" (fused: {b['fusion'].replace('+', ', ')})" if b.get("fusion") else ""
    engine = f"; engine {b.get('engine', 'pytorch')}{fused}"
    return [f"basis: {b['ceilings']} roofline{timing}; execution {b['execution']}{engine}"] + [
        f"note: {n}" for n in b["notes"]
    ]
