"""Stage and generation totals: the public ``analyze`` entry point and ``sweep``."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

import numpy as np

from . import memory as M
from .hardware import DeviceSpec, load_device
from .layers import Precision, head_ops, layer_ops, stage_ops
from .model import ModelConfig, load_model
from .ops import BYTE_FIELDS, Op
from .precision import resolve
from .roofline import Ceilings, evaluate, spec_ceilings, stage_time
from .workload import Settings, Workload

OP_COLUMNS = ["name", "kind", "count", "flops", "bytes", *BYTE_FIELDS, "intensity", "bound",
              "perf", "time_s", "dtype"]
TOTAL_FIELDS = ("flops", "bytes", "weight_bytes", "act_read_bytes", "act_write_bytes",
                "kv_read_bytes", "kv_write_bytes")


def stage_totals(ops: Sequence[Op], ceilings: Ceilings) -> tuple[dict[str, Any], dict]:
    """Whole-pass sums (count applied), and the per-op table they came from.

    Values are arrays shaped like the workload when it is an array (sweeps)."""
    table = evaluate(ops, ceilings)
    totals = {f: np.sum(table["count"] * table[f], axis=0) for f in (*TOTAL_FIELDS, "time_s")}
    return totals, table


@dataclass(frozen=True)
class Stage:
    """One forward pass: the per-op table (one instance each) and whole-pass totals."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    dtypes: tuple[str, ...]
    table: dict[str, np.ndarray]
    total: dict[str, float]

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
            rows.append(row)
        return rows

    @cached_property
    def ops(self) -> pd.DataFrame:
        """The per-op table as a DataFrame (pandas is imported only when asked for)."""
        import pandas as pd

        return pd.DataFrame(self.records(), columns=OP_COLUMNS)

    def to_dict(self) -> dict[str, Any]:
        return {"ops": self.records(), "total": dict(self.total)}


def build_stage(ops: Sequence[Op], ceilings: Ceilings) -> Stage:
    totals, table = stage_totals(ops, ceilings)
    return Stage(tuple(op.name for op in ops), tuple(op.kind for op in ops),
                 tuple(op.dtype for op in ops), table, {k: float(v) for k, v in totals.items()})


def _affine_sum(y_lo, y_hi, n):
    """Sum of an affine sequence of n terms from y_lo to y_hi."""
    return n * (y_lo + y_hi) / 2


def _positive_part_sum(w_lo, w_hi, lo, hi):
    """Sum over integers s in [lo, hi] of max(w(s), 0), w affine with w(lo)=w_lo, w(hi)=w_hi."""
    n = hi - lo + 1
    span = np.maximum(hi - lo, 1)
    slope = (w_hi - w_lo) / span
    with np.errstate(divide="ignore", invalid="ignore"):
        root = lo - w_lo / np.where(slope == 0, np.inf, slope)  # where w crosses 0
    # rising through zero: positive on [ceil(root'), hi]; falling: on [lo, floor(root')]
    start = np.where(w_lo > 0, lo, np.clip(np.floor(root) + 1, lo, hi + 1))
    stop = np.where(w_lo > 0, np.clip(np.ceil(root) - 1, lo - 1, hi), hi)
    count = np.maximum(stop - start + 1, 0)
    partial = _affine_sum(w_lo + slope * (start - lo), w_lo + slope * (stop - lo), count)
    both_pos = (w_lo >= 0) & (w_hi >= 0)
    both_neg = (w_lo <= 0) & (w_hi <= 0)
    return np.where(both_pos, _affine_sum(w_lo, w_hi, n), np.where(both_neg, 0.0, partial))


def decode_time_sum(model: ModelConfig, batch, lo, hi, p: Precision, ceilings: Ceilings):
    """Exact sum of decode-step times for cached lengths s = lo..hi (0 where hi < lo).

    Each op's operations and bytes are affine in s on the range, so its time per step is
    the max of two affine functions: the sum splits at their crossing into two
    arithmetic series. One evaluation at each end replaces a loop over the steps.
    """
    hi_safe = np.maximum(hi, lo)
    at_lo = evaluate(stage_ops(model, "decode", batch, lo, p), ceilings)
    at_hi = evaluate(stage_ops(model, "decode", batch, hi_safe, p), ceilings)
    n = hi_safe - lo + 1
    memory = _affine_sum(at_lo["memory_s"], at_hi["memory_s"], n)
    excess = _positive_part_sum(at_lo["compute_s"] - at_lo["memory_s"],
                                at_hi["compute_s"] - at_hi["memory_s"], lo, hi_safe)
    per_op = at_lo["count"] * (memory + excess + n * at_lo["overhead_s"])
    return np.where(hi >= lo, np.sum(per_op, axis=0), 0.0)


def decode_ranges(model: ModelConfig, lo, hi) -> list[tuple]:
    """Ranges of cached length on which every op is affine: a sliding window splits at
    the step whose KV length reaches the window."""
    window = model.sliding_window
    if not window:
        return [(lo, hi)]
    return [(lo, np.minimum(hi, window - 1)), (np.maximum(lo, window), hi)]


def generation_totals(model: ModelConfig, workload: Workload, p: Precision,
                      ceilings: Ceilings, ttft) -> dict[str, Any]:
    """TTFT, TPOT, total and tokens/s over ``generate`` output tokens per sequence.

    The prefill yields the first token; output token j = 2..N costs one decode step with
    P + j - 2 tokens cached, so the steps cover cached lengths P .. P + N - 2.
    """
    n = np.asarray(workload.generate)
    lo = np.asarray(workload.seq_len)
    hi = lo + n - 2
    decode_total = sum(decode_time_sum(model, workload.batch, a, b, p, ceilings)
                       for a, b in decode_ranges(model, lo, hi))
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n > 1, decode_total / np.maximum(n - 1, 1), np.nan)
    total = ttft + decode_total
    return {"prompt": workload.seq_len, "generate": n, "ttft_s": ttft, "tpot_s": tpot,
            "total_s": total, "tokens_per_s": np.asarray(workload.batch) * n / total}


def memory_totals(model: ModelConfig, device: DeviceSpec, workload: Workload,
                  p: Precision) -> dict[str, Any]:
    """Weights + KV cache at its largest + activation liveness peak (prefill is the larger)."""
    batch, prompt = workload.batch, workload.seq_len
    kv_len = prompt + np.maximum(np.asarray(workload.generate) - 1, 0)
    x_bytes = batch * prompt * model.hidden_size * p.ab
    layer = layer_ops(model, batch, prompt, prompt, p)
    head = head_ops(model, batch, prompt, p)[1:]
    activations = np.maximum(M.activation_peak(layer, x_bytes), M.activation_peak(head, x_bytes))
    weights = M.weight_bytes(model, p)
    kv = M.kv_cache_bytes(model, batch, kv_len, p)
    peak = weights + kv + activations
    return {"weights_bytes": weights, "kv_cache_bytes": kv, "activations_peak_bytes": activations,
            "peak_bytes": peak, "capacity_bytes": device.memory_capacity,
            "fits": peak <= device.memory_capacity,
            "shortfall_bytes": np.maximum(peak - device.memory_capacity, 0)}


def _plain(value: Any) -> Any:
    """numpy scalars -> Python numbers for JSON; NaN -> None."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return _plain(value.item()) if value.ndim == 0 else [_plain(v) for v in value.tolist()]
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
    precision: Precision
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
            "workload": {"batch": self.workload.batch, "seq_len": self.workload.seq_len,
                         "generate": self.workload.generate,
                         "w_dtype": self.settings.w_dtype, "a_dtype": self.settings.a_dtype,
                         "kv_dtype": self.settings.kv_dtype,
                         "matrix_dtype": self.precision.matrix_dtype},
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
        }
        if self.generation is not None:
            out["generation"] = self.generation
        out["memory"] = self.memory
        return _plain(out)


def resolve_inputs(model: str | ModelConfig, hardware: str | DeviceSpec
                   ) -> tuple[ModelConfig, DeviceSpec]:
    return load_model(model), load_device(hardware)


def analyze(model: str | ModelConfig, hardware: str | DeviceSpec, batch: int = 1,
            seq_len: int = 512, generate: int = 0, *, dtype: str | None = None,
            settings: Settings | None = None, ceilings: Ceilings | None = None) -> Analysis:
    """Analyse one workload point: per-op tables for prefill and decode, totals, memory.

    ``dtype`` sets weights, activations and KV cache at once; ``settings`` sets them apart.
    ``ceilings`` defaults to the device's datasheet roofline (``spec``).
    """
    config, device = resolve_inputs(model, hardware)
    if settings is None:
        settings = Settings(*(3 * [dtype])) if dtype else Settings()
    workload = Workload(int(batch), int(seq_len), int(generate))
    p = resolve(settings, device)
    roofs = ceilings or spec_ceilings(device)
    stages = {}
    for stage in ("prefill", "decode"):
        ops = stage_ops(config, stage, workload.batch, workload.seq_len, p)
        stages[stage] = build_stage(ops, roofs)
    generation = None
    if workload.generate > 0:
        gen = generation_totals(config, workload, p, roofs, stages["prefill"].total["time_s"])
        generation = _plain(gen)
    mem = _plain(memory_totals(config, device, workload, p))
    return Analysis(config, device, workload, settings, roofs.mode, p,
                    stages["prefill"], stages["decode"], mem, generation)


def sweep(model: str | ModelConfig, hardware: str | DeviceSpec, batch, seq_len, generate=0,
          *, dtype: str | None = None, settings: Settings | None = None,
          ceilings: Ceilings | None = None) -> pd.DataFrame:
    """Every (batch, seq_len) point of a grid in one array evaluation; a row per point."""
    config, device = resolve_inputs(model, hardware)
    if settings is None:
        settings = Settings(*(3 * [dtype])) if dtype else Settings()
    grid_b, grid_s = np.meshgrid(np.asarray(batch).ravel(), np.asarray(seq_len).ravel(),
                                 indexing="ij")
    workload = Workload(grid_b.ravel(), grid_s.ravel(), generate)
    p = resolve(settings, device)
    roofs = ceilings or spec_ceilings(device)
    prefill, _ = stage_totals(stage_ops(config, "prefill", workload.batch, workload.seq_len, p), roofs)
    decode, _ = stage_totals(stage_ops(config, "decode", workload.batch, workload.seq_len, p), roofs)
    mem = memory_totals(config, device, workload, p)
    import pandas as pd

    frame = pd.DataFrame({"batch": workload.batch, "seq_len": workload.seq_len,
                          "prefill_s": prefill["time_s"], "decode_step_s": decode["time_s"]})
    if np.max(generate) > 0:
        gen = generation_totals(config, workload, p, roofs, prefill["time_s"])
        for key in ("ttft_s", "tpot_s", "total_s", "tokens_per_s"):
            frame[key] = np.broadcast_to(gen[key], frame.shape[0])
    for key in ("weights_bytes", "kv_cache_bytes", "activations_peak_bytes", "peak_bytes", "fits"):
        frame[key] = np.broadcast_to(mem[key], frame.shape[0])
    return frame
