"""Stage and generation totals of a :class:`Deployment`: one workload point
(``analyze_deployment``) or a grid of them (``sweep_deployment``); ``ridgeline.api`` takes names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine import memory as M
from ridgeline.engine.basis import basis
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.grid import describe, outside_range, outside_spans
from ridgeline.engine.intervals import analysis_intervals, memory_risk
from ridgeline.engine.layers import (
    Plan,
    bubble_fraction,
    engine_chunks,
    forward_masks,
    head_ops,
    pipeline_factors,
    pipeline_round,
    stage_ops,
)
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.ops import BYTE_FIELDS, Op
from ridgeline.engine.roofline import (
    Ceilings,
    composed_time,
    decode_row_tails,
    evaluate,
    execution_terms,
    has_execution_terms,
    roofline_time,
)
from ridgeline.engine.workload import Settings, Workload, make_settings
from ridgeline.errors import InvalidSettingError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

OP_COLUMNS = [
    "name",
    "kind",
    "count",
    "flops",
    "bytes",
    *BYTE_FIELDS,
    "vector_flops",
    "comm_bytes",
    "intensity",
    "bound",
    "perf",
    "time_s",
    "dtype",
]
TOTAL_FIELDS = (
    "flops",
    "vector_flops",
    "bytes",
    "weight_bytes",
    "act_read_bytes",
    "act_write_bytes",
    "kv_read_bytes",
    "kv_write_bytes",
    "comm_bytes",
)


def stage_totals(
    ops: Sequence[Op], ceilings: Ceilings, p: Plan | None = None, stage: str | None = None
) -> tuple[dict[str, Any], dict]:
    """Whole-pass sums on one device (count applied; with a plan, its ``stage``'s pipeline
    micro-batches and stage-steps applied), and the per-op table they came from. Arrays
    when the workload is."""
    table = evaluate(ops, ceilings)
    time_factor, amount = pipeline_factors(p, stage) if p else (1.0, 1.0)
    totals = {f: amount * np.sum(table["count"] * table[f], axis=0) for f in TOTAL_FIELDS}
    totals["time_s"] = time_factor * np.sum(table["count"] * table["time_s"], axis=0)
    if p is not None and stage == "decode" and p.pp > 1:  # the stages in turn (pipeline_round)
        totals["time_s"] = pipeline_round([op.name for op in ops], table["count"] * table["time_s"], p)
    if has_execution_terms(ceilings):  # a device-time profile: compose device and host
        composed = composed_time(ops, table, ceilings, ceilings.execution, ceilings.serial)
        totals.update({k: time_factor * v for k, v in composed.items()})
    return totals, table


@dataclass(frozen=True)
class Stage:
    """One forward pass: the per-op table (one instance each) and whole-pass totals."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    dtypes: tuple[str, ...]
    table: dict[str, np.ndarray]
    total: dict[str, float]
    extrapolated: tuple[str, ...] = ()  # per op: what lies past the measured grid ("" inside)

    def records(self) -> list[dict[str, Any]]:
        """One plain dict per op, in ``OP_COLUMNS`` order (the JSON rows)."""
        rows = []
        for i, name in enumerate(self.names):
            row: dict[str, Any] = {"name": name, "kind": self.kinds[i]}
            for col in OP_COLUMNS[2:-1]:
                value = self.table[col][i]
                row[col] = str(value) if col == "bound" else float(value)
            row["count"] = int(row["count"])
            row["dtype"] = self.dtypes[i]
            if self.extrapolated and self.extrapolated[i]:
                row["extrapolated"] = self.extrapolated[i]
            rows.append(row)
        return rows

    @cached_property
    def ops(self) -> pd.DataFrame:
        """The per-op table as a DataFrame (pandas is imported only when asked for)."""
        import pandas as pd

        return pd.DataFrame(self.records(), columns=OP_COLUMNS)

    def to_dict(self) -> dict[str, Any]:
        return {"ops": self.records(), "total": dict(self.total)}


def build_stage(ops: Sequence[Op], ceilings: Ceilings, p: Plan, stage: str) -> Stage:
    totals, table = stage_totals(ops, ceilings, p, stage)
    return Stage(
        tuple(op.name for op in ops),
        tuple(op.kind for op in ops),
        tuple(op.dtype for op in ops),
        table,
        {k: float(v) for k, v in totals.items()},
        tuple(op_extrapolation(op, ceilings) for op in ops),
    )


def op_extrapolation(op: Op, ceilings: Ceilings) -> str:
    """What of ``op`` lies past the grid its profile measured ("" where nothing does)."""
    spans = outside_spans(op, ceilings)
    return "; ".join(describe(s.dimension, outside_range(s), (s.low, s.high)) for s in spans)


def _affine_sum(y_lo, y_hi, n):
    """Sum of an affine sequence of n terms from y_lo to y_hi."""
    return n * (y_lo + y_hi) / 2


def _positive_part_sum(w_lo, w_hi, lo, hi):
    """Sum over integers s in [lo, hi] of max(w(s), 0), w affine with w(lo)=w_lo, w(hi)=w_hi."""
    n = hi - lo + 1
    both_pos = (w_lo >= 0) & (w_hi >= 0)
    both_neg = (w_lo <= 0) & (w_hi <= 0)
    if np.all(both_pos | both_neg):  # no op crosses zero inside the range (most analyses)
        return np.where(both_pos, _affine_sum(w_lo, w_hi, n), 0.0)
    span = np.maximum(hi - lo, 1)
    slope = (w_hi - w_lo) / span
    with np.errstate(divide="ignore", invalid="ignore"):
        root = lo - w_lo / np.where(slope == 0, np.inf, slope)  # where w crosses 0
    # rising through zero: positive on [floor(root)+1, hi]; falling: on [lo, ceil(root)-1]
    start = np.where(w_lo > 0, lo, np.clip(np.floor(root) + 1, lo, hi + 1))
    stop = np.where(w_lo > 0, np.clip(np.ceil(root) - 1, lo - 1, hi), hi)
    count = np.maximum(stop - start + 1, 0)
    partial = _affine_sum(w_lo + slope * (start - lo), w_lo + slope * (stop - lo), count)
    return np.where(both_pos, _affine_sum(w_lo, w_hi, n), np.where(both_neg, 0.0, partial))


def _sides(table: dict) -> tuple:
    """(arithmetic, transfer) seconds of each op: the roofs that do work (matrix/vector,
    exponentials) and those that move bytes (memory, interconnect). Each is affine in the
    cached length: an op moves bytes through memory or over the link, never both, and its
    exponentials and operations both grow with the pairs attended."""
    zero = 0 * table["memory_s"]
    return (
        roofline_time(table["compute_s"], zero, zero, table["exp_s"]),
        roofline_time(zero, table["memory_s"], table["network_s"]),
    )


def _number(value):
    """A numpy scalar or 0-d array as the Python number it holds (the ops' arithmetic on numpy
    scalars is several times slower, with the same results); anything else as it is."""
    return value.item() if isinstance(value, (np.ndarray, np.generic)) and value.ndim == 0 else value


def decode_time_sum(model: ModelConfig, batch, lo, hi, p: Plan, ceilings: Ceilings, at_lo: dict | None = None, q_len=1):
    """Exact sum of decode-step times for cached lengths s = lo..hi (0 where hi < lo), each
    step over ``q_len`` new tokens per sequence (a speculative verify pass: k + 1).

    Each op's operations and bytes are affine in s on the range, so its time per step is
    the max of two affine functions: the sum splits at their crossing into two
    arithmetic series. One evaluation at each end replaces a loop over the steps.
    """
    hi_safe = np.maximum(hi, lo)
    # the ops at each end, each built once (the first's only where something reads them)
    wants_lo = at_lo is None or bool(ceilings.row_tails) or has_execution_terms(ceilings)
    ops_lo = stage_ops(model, "decode", batch, _number(lo), p, q_len) if wants_lo else []
    ops_hi = stage_ops(model, "decode", batch, _number(hi_safe), p, q_len)
    if at_lo is None:
        at_lo = evaluate(ops_lo, ceilings)
    at_hi = evaluate(ops_hi, ceilings)
    n = hi_safe - lo + 1
    work_lo, move_lo = _sides(at_lo)
    work_hi, move_hi = _sides(at_hi)
    memory = _affine_sum(move_lo, move_hi, n)
    excess = _positive_part_sum(work_lo - move_lo, work_hi - move_hi, lo, hi_safe)
    # first touch (a CPU's fresh pages): 0 or proportional to the bytes at each end, so the
    # mean of the ends, exact unless an allocation crosses the mmap threshold inside the range
    touch = (at_lo["first_touch_s"] + at_hi["first_touch_s"]) / 2
    per_op = at_lo["count"] * (memory + excess + n * (at_lo["overhead_s"] + touch))
    if ceilings.row_tails:  # a CPU softmax's vector tail: by its keys' remainder at each step
        per_op = per_op + at_lo["count"] * decode_row_tails(ops_lo, ops_hi, ceilings, n, per_op.shape)
    if has_execution_terms(ceilings):  # launch gaps and host dispatch: constant per step
        device, host = execution_terms(ops_lo, at_lo, ceilings, ceilings.execution)
        per_op = per_op + at_lo["count"] * n * (device - at_lo["time_s"] + host)
    time_factor, _ = pipeline_factors(p, "decode")
    steps = time_factor * np.sum(per_op, axis=0)
    if p.pp > 1:  # the stages in turn (pipeline_round)
        steps = pipeline_round([op.name for op in ops_hi], per_op, p)
    return np.where(hi >= lo, steps, 0.0)


def decode_ranges(model: ModelConfig, lo, hi, p: Plan, q_len=1) -> list[tuple]:
    """Ranges of cached length on which every op is affine: each sliding window (or chunk)
    splits at the step whose KV length (cached + q_len) reaches it; a chunk the kernels
    attend within (``engine_chunk``) at every multiple of it, where its keys start over."""
    chunks = set(engine_chunks(model, p).values())
    last = int(np.max(hi)) + q_len
    edges = set(model.windows) | {k * c for c in chunks for k in range(1, -(-last // c) + 1)}
    ranges, start = [], lo
    for edge in sorted(e - q_len for e in edges):
        ranges.append((start, np.minimum(hi, edge)))
        start = np.maximum(lo, edge + 1)
    return [*ranges, (start, hi)]


def mean_in_chunk(lo, hi, chunk: int):
    """Mean of c mod C over the cached lengths c = lo..hi: what precedes a new token in its
    chunk, on average over the steps (a chunk's keys start over at every multiple of C)."""

    def below(n):  # the sum of c mod C over c = 0..n-1
        whole, r = n // chunk, n % chunk
        return whole * chunk * (chunk - 1) / 2 + r * (r - 1) / 2

    return (below(hi + 1) - below(lo)) / (hi - lo + 1)


def steady_decode_ops(model: ModelConfig, batch, lo: int, hi: int, p: Plan) -> list[Op]:
    """The ops of a decode step over requests spread evenly over cached lengths lo..hi (the
    steady state): every op's work is affine in its attended length, so each kind of layer
    is priced at its mean: the mean cached length, or, for a chunk the kernels attend within
    (``engine_chunk``), the mean of c mod C."""
    ops = stage_ops(model, "decode", batch, (lo + hi) / 2, p)
    chunks = engine_chunks(model, p)
    for chunk in set(chunks.values()):
        within = {op.name: op for op in stage_ops(model, "decode", batch, mean_in_chunk(lo, hi, chunk), p)}
        ops = [within[op.name] if chunks.get(op.name.partition("/")[0]) == chunk else op for op in ops]
    return ops


def decode_total(model: ModelConfig, batch, lo, hi, p: Plan, ceilings: Ceilings, at_lo: dict | None = None, q_len=1):
    """Sum of decode-step times over cached lengths lo..hi, ``q_len`` new tokens per
    sequence each; ``at_lo`` reuses the table of the first step when the caller has it."""
    ranges = decode_ranges(model, lo, hi, p, q_len)
    if queued(ceilings):
        return sum(queued_decode_sum(model, batch, a, b, p, ceilings, q_len) for a, b in ranges)
    return sum(
        decode_time_sum(model, batch, a, b, p, ceilings, at_lo if i == 0 else None, q_len)
        for i, (a, b) in enumerate(ranges)
    )


def queued(ceilings: Ceilings) -> bool:
    """Whether a step's time is the host/device queue rather than a sum over ops."""
    return (
        has_execution_terms(ceilings)
        and not ceilings.serial
        and ceilings.execution != "graph"
        and bool(ceilings.host_s.get(ceilings.execution))
    )


def queued_decode_sum(model: ModelConfig, batch, lo, hi, p: Plan, ceilings: Ceilings, q_len=1):
    """Sum of queued decode-step times over cached lengths lo..hi (0 where hi < lo), by
    Simpson's rule on the first, middle and last step: exact where the step time is affine
    in the cached length (the sum of an affine sequence is n times its middle term), and
    within the curvature of the queue's max where one regime hands over to the other."""
    hi_safe = np.maximum(hi, lo)
    n = hi_safe - lo + 1

    def step(length):
        ops = stage_ops(model, "decode", batch, length, p, q_len)
        return stage_totals(ops, ceilings, p, "decode")[0]["time_s"]

    total = n * (step(lo) + 4 * step((lo + hi_safe) / 2) + step(hi_safe)) / 6
    return np.where(hi >= lo, total, 0.0)


def generation_totals(
    model: ModelConfig, workload: Workload, p: Plan, ceilings: Ceilings, ttft, first_step: dict | None = None
) -> dict[str, Any]:
    """TTFT, TPOT, total and tokens/s over ``generate`` output tokens per sequence.

    The prefill yields the first token; output token j = 2..N costs one decode step with
    P + j - 2 tokens cached, so the steps cover cached lengths P .. P + N - 2.
    """
    n = np.asarray(workload.generate)
    lo = np.asarray(workload.seq_len)
    decode = decode_total(model, workload.batch, lo, lo + n - 2, p, ceilings, first_step)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n > 1, decode / np.maximum(n - 1, 1), np.nan)
    total = ttft + decode
    return {
        "prompt": workload.seq_len,
        "generate": n,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "total_s": total,
        "tokens_per_s": np.asarray(workload.batch) * n / total,
    }


def memory_totals(
    model: ModelConfig, device: DeviceSpec, workload: Workload, p: Plan, prefill_ops: Sequence[Op] | None = None
) -> dict[str, Any]:
    """Per device: weights + KV cache at its largest + activation liveness peak (prefill,
    one micro-batch, is the larger stage). It fits when the peak is within what the runtime
    may use: ``memory_utilization`` x capacity - the runtime's fixed reserve
    (:func:`ridgeline.engine.memory.usable_bytes`); ``kv_capacity_bytes`` is what is left there for
    the KV cache after weights and activations."""
    batch, prompt = workload.batch, workload.seq_len
    micro = batch / p.micro_batches
    kv_len = prompt + np.maximum(np.asarray(workload.generate) - 1, 0)
    x_bytes = micro * prompt * model.hidden_size * p.ab
    if prefill_ops is None:
        prefill_ops = stage_ops(model, "prefill", batch, prompt, p)
    activations = pass_activation_peak(model, prefill_ops, x_bytes, p, forward_masks(model, micro, prompt, 0, p))
    weights = M.weight_bytes(model, p)
    kv = M.kv_cache_bytes(model, batch, kv_len, p)
    peak = weights + kv + activations
    usable = M.usable_bytes(device, p)
    return {
        "weights_bytes": weights,
        "kv_cache_bytes": kv,
        "activations_peak_bytes": activations,
        "peak_bytes": peak,
        "capacity_bytes": device.memory_capacity,
        "usable_bytes": usable,
        "runtime_reserve_bytes": device.runtime_reserve,
        "kv_capacity_bytes": M.kv_capacity_bytes(model, device, p, activations),
        "fits": peak <= usable,
        "shortfall_bytes": np.maximum(peak - usable, 0),
        "devices": p.tp * p.pp * p.ep,
    }


def pass_activation_peak(model: ModelConfig, ops: Sequence[Op], x_bytes, p: Plan, masks=0):
    """The liveness peak of one pass's activations: a layer's (its input ``x_bytes`` alive
    from the start, beside the ``masks`` held across the layers: :func:`forward_masks`) or
    the head's (final norm and the logits, after the masks are freed), whichever is larger."""
    head_names = {op.name for op in head_ops(model, 1, 1, p)}
    layer = [op for op in ops if op.name not in head_names]
    head = [op for op in ops if op.name in ("final_norm", "lm_head")]
    return np.maximum(M.activation_peak(layer, x_bytes) + masks, M.activation_peak(head, x_bytes))


def verify_activation_peak(model: ModelConfig, batch, cached, q_len: int, p: Plan):
    """A speculative verify pass's activation peak: ``q_len`` = k + 1 new tokens per
    sequence over ``cached`` ones, its logits batch x (k + 1) x vocabulary wide (issue 57
    item 1: priced for memory as for time)."""
    ops = stage_ops(model, "decode", batch, cached, p, q_len)
    masks = forward_masks(model, batch, q_len, cached, p)
    return pass_activation_peak(model, ops, batch * q_len * model.hidden_size * p.ab, p, masks)


def largest_batch(model: ModelConfig, device: DeviceSpec, p: Plan, seq_len: int, generate: int) -> int:
    """Largest batch whose peak memory fits what the runtime may use on one device
    (``memory_utilization`` x capacity - runtime reserve). Peak memory is weights plus a
    per-sequence amount (KV cache and activations both scale with the batch), so the
    answer is floor((usable - weights) / per-sequence bytes); 0 when nothing fits."""
    m = p.micro_batches
    one = memory_totals(model, device, Workload(m, seq_len, generate), p)
    two = memory_totals(model, device, Workload(2 * m, seq_len, generate), p)
    per_seq = float(two["peak_bytes"] - one["peak_bytes"]) / m
    fixed = float(one["peak_bytes"]) - per_seq * m
    room = float(one["usable_bytes"]) - fixed
    return int(max(room // per_seq // m * m, 0)) if per_seq > 0 else 0


def plain(value: Any) -> Any:
    """numpy scalars -> Python numbers for JSON; NaN -> None."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.item()) if value.ndim == 0 else [plain(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value)
    return value


@dataclass(frozen=True)
class Analysis:
    """Everything ``ridgeline analyze`` reports, for one workload point."""

    model: ModelConfig
    device: DeviceSpec
    workload: Workload
    settings: Settings
    mode: str
    plan: Plan
    prefill: Stage
    decode: Stage
    memory: dict[str, Any]
    generation: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "model": self.model.name,
            "hardware": self.device.name,
            "mode": self.mode,
            "workload": {
                "batch": self.workload.batch,
                "seq_len": self.workload.seq_len,
                "generate": self.workload.generate,
                **asdict(self.settings),
                "matrix_dtype": self.plan.matrix_dtype,
                "attention_priced": self.plan.attention,
            },
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
        }
        if self.generation is not None:
            out["generation"] = self.generation
        out["memory"] = self.memory
        out.update(self.extra)
        return plain(out)


def context_warnings(model: ModelConfig, workload: Workload) -> list[str]:
    """Workloads the model was not trained for: more positions than max_position_embeddings
    (the numbers are still computed; the model's outputs would not be meaningful)."""
    longest = int(np.max(workload.seq_len + np.maximum(np.asarray(workload.generate) - 1, 0)))
    limit = model.max_position_embeddings
    if limit and longest > limit:
        return [f"{longest} positions exceed {model.name}'s max_position_embeddings ({limit})"]
    return []


def check_micro_batches(batch, p: Plan) -> None:
    if np.any(np.asarray(batch) % p.micro_batches):
        raise InvalidSettingError(
            "micro_batches",
            f"batch {batch} does not split into {p.micro_batches} micro-batches; make batch a multiple of it",
        )


def analyze_deployment(d: Deployment, batch: int = 1, seq_len: int = 512, generate: int = 0) -> Analysis:
    """Analyse one workload point of ``d``: per-op tables for prefill and decode, totals,
    memory (``ridgeline.api.analyze`` resolves names into ``d`` first)."""
    config, device, p, roofs = d.model, d.device, d.plan, d.ceilings
    workload = Workload(int(batch), int(seq_len), int(generate))
    check_micro_batches(workload.batch, p)
    ops = {stage: stage_ops(config, stage, workload.batch, workload.seq_len, p) for stage in ("prefill", "decode")}
    stages = {stage: build_stage(ops[stage], roofs, p, stage) for stage in ops}
    generation = None
    if workload.generate > 0:
        gen = generation_totals(config, workload, p, roofs, stages["prefill"].total["time_s"], stages["decode"].table)
        generation = plain(gen)
    mem = plain(memory_totals(config, device, workload, p, ops["prefill"]))
    mem.update(memory_risk(mem["peak_bytes"], mem["usable_bytes"], d.peaks))
    extra: dict[str, Any] = {"basis": basis(ops, roofs, device, *engine_of(d.settings))}
    extra["intervals"] = intervals_of(d, ops, stages, generation, workload)
    warnings = context_warnings(config, workload)
    if warnings:
        extra["warnings"] = warnings
    if config.notes:  # what the config was read with beyond a uniform layer (ModelConfig.notes)
        extra["model_notes"] = list(config.notes)
    if p.pp > 1:
        extra["pipeline"] = {
            "stages": p.pp,
            "micro_batches": p.micro_batches,
            "bubble_fraction": bubble_fraction(p, "prefill"),
            "decode_bubble_fraction": bubble_fraction(p, "decode"),
        }
    return Analysis(
        config, device, workload, d.settings, roofs.mode, p, stages["prefill"], stages["decode"], mem, generation, extra
    )


def intervals_of(d: Deployment, ops: dict, stages: dict, generation: dict | None, workload: Workload) -> dict[str, Any]:
    """The headline figures' central intervals from ``d``'s residual table
    (:mod:`ridgeline.engine.intervals`), or why there is none."""
    if d.intervals is None:
        return {"none": d.no_interval or "no measured residuals for these ceilings"}
    weights = {s: stages[s].table["count"] * stages[s].table["time_s"] for s in ops}
    if generation is not None:
        points = {**generation, "tokens": workload.batch * workload.generate}
    else:
        points = {"prefill_s": stages["prefill"].total["time_s"], "decode_s": stages["decode"].total["time_s"]}
    return analysis_intervals(ops, weights, d.ceilings, d.intervals, points)


def deployment_basis(d: Deployment, batch=1, seq_len=512) -> dict[str, Any]:
    """What ``d``'s numbers rest on (``ridgeline.engine.basis``) over every (batch, seq_len) of
    a grid (lists: a sweep's): the ops' names and types are the same at every point; what
    lies past the profile's measured grid is judged at each."""
    grid_b, grid_s = np.meshgrid(np.asarray(batch).ravel(), np.asarray(seq_len).ravel(), indexing="ij")
    batch, seq_len = (grid_b.ravel(), grid_s.ravel()) if grid_b.size > 1 else (int(grid_b[0, 0]), int(grid_s[0, 0]))
    ops = {stage: stage_ops(d.model, stage, batch, seq_len, d.plan) for stage in ("prefill", "decode")}
    return basis(ops, d.ceilings, d.device, *engine_of(d.settings))


def engine_of(s: Settings) -> tuple[str, str, str]:
    """The settings the basis names: the execution asked for, the engine and its fusion."""
    return s.execution, s.engine, s.fusion


def sweep_deployment(d: Deployment, batch=1, seq_len=512, generate=0) -> pd.DataFrame:
    """Every (batch, seq_len) point of a grid of ``d`` in one array evaluation; a row per point."""
    config, device, p, roofs = d.model, d.device, d.plan, d.ceilings
    grid_b, grid_s = np.meshgrid(np.asarray(batch).ravel(), np.asarray(seq_len).ravel(), indexing="ij")
    workload = Workload(grid_b.ravel(), grid_s.ravel(), generate)
    check_micro_batches(workload.batch, p)
    prefill, _ = stage_totals(stage_ops(config, "prefill", workload.batch, workload.seq_len, p), roofs, p, "prefill")
    decode, _ = stage_totals(stage_ops(config, "decode", workload.batch, workload.seq_len, p), roofs, p, "decode")
    mem = memory_totals(config, device, workload, p)
    import pandas as pd

    frame = pd.DataFrame(
        {
            "batch": workload.batch,
            "seq_len": workload.seq_len,
            "prefill_s": prefill["time_s"],
            "decode_step_s": decode["time_s"],
        }
    )
    if np.max(generate) > 0:
        gen = generation_totals(config, workload, p, roofs, prefill["time_s"])
        for key in ("ttft_s", "tpot_s", "total_s", "tokens_per_s"):
            frame[key] = np.broadcast_to(gen[key], frame.shape[0])
    for key in ("weights_bytes", "kv_cache_bytes", "activations_peak_bytes", "peak_bytes", "fits"):
        frame[key] = np.broadcast_to(mem[key], frame.shape[0])
    return frame


def sweep_each(
    d: Deployment, variants: Sequence[dict[str, Any]], batch, seq_len, generate=0, on_step=None, finish=None
) -> pd.DataFrame:
    """:func:`sweep_deployment` under each variant of ``d``'s settings (a dict of Settings fields), with
    the variant's fields as leading columns; ``on_step(done, total)`` after each; ``finish(variant,
    frame)`` adds to each variant's frame (its intervals) and its ``attrs`` are the whole's."""
    import pandas as pd

    frames = []
    for i, options in enumerate(variants):
        each = d.with_settings(make_settings(None, d.settings, options))
        frame = sweep_deployment(each, batch, seq_len, generate)
        frame = frame if finish is None else finish(each, frame)
        for key, value in options.items():
            frame.insert(0, key, value)
        frames.append(frame)
        if on_step is not None:
            on_step(i + 1, len(variants))
    out = pd.concat(frames, ignore_index=True)
    out.attrs = frames[0].attrs  # one device: the same residuals behind every variant
    return out
