"""Figures over many points at once: the latency/throughput frontier of one deployment across
batch sizes, deployments side by side, every combination of listed settings, and the
intervals of a sweep's points."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.analyze import analyze_deployment, largest_batch, sweep_deployment
from ridgeline.engine.basis import basis_lines
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.intervals import bands, stage_factors, unmeasured_note
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.roofline import evaluate
from ridgeline.engine.workload import MAX_BATCH, Settings
from ridgeline.errors import InvalidWorkloadError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def batch_frontier(
    d: Deployment, seq_len: int, generate: int, batches=None, tpot_slo: float | None = None, ttft_slo=None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """TPOT against throughput across batch sizes up to the largest that fits (powers of
    two and the maximum itself, or ``batches``), and the best throughput meeting the
    latency targets."""
    top = largest_batch(d.model, d.device, d.plan, seq_len, generate)
    if batches is None:
        batches = sorted(
            {b for b in (2 ** np.arange(0, 20)).tolist() if b <= top} | ({min(top, MAX_BATCH)} if top else set())
        )
    if not batches:
        raise InvalidWorkloadError(f"not even batch 1 fits at {seq_len} + {generate} tokens")
    frame = sweep_deployment(d, batches, [seq_len], generate)
    ok = np.ones(len(frame), dtype=bool)
    if tpot_slo is not None:
        ok &= frame["tpot_s"].to_numpy() <= tpot_slo
    if ttft_slo is not None:
        ok &= frame["ttft_s"].to_numpy() <= ttft_slo
    frame["meets_slo"] = ok
    with_bands(d, frame, generate)
    best = None
    if ok.any():
        row = frame[ok].sort_values("tokens_per_s").iloc[-1]
        best = {
            "batch": int(row["batch"]),
            "tokens_per_s": float(row["tokens_per_s"]),
            "tpot_s": float(row["tpot_s"]),
            "ttft_s": float(row["ttft_s"]),
        }
    return frame, {"max_batch": top, "best": best, "mode": d.mode}


def compare_deployments(deployments: Sequence[Deployment], batch: int, seq_len: int, generate: int) -> pd.DataFrame:
    """One row per deployment: the key totals side by side, with the ceilings' mode of each
    row and its settings where they differ from the defaults."""
    import pandas as pd

    rows, basis, bands_of = [], {}, {}
    for d in deployments:
        a = analyze_deployment(d, batch, seq_len, generate)
        gen = a.generation or {}
        label = ", ".join(f"{k}={v}" for k, v in asdict(d.settings).items() if v != getattr(Settings(), k)) or "default"
        rows.append(
            {
                "hardware": a.device.name,
                "settings": label,
                "mode": a.mode,
                "matrix_dtype": a.plan.matrix_dtype,
                "ttft_s": gen.get("ttft_s"),
                "tpot_s": gen.get("tpot_s"),
                "tokens_per_s": gen.get("tokens_per_s"),
                "prefill_s": a.prefill.total["time_s"],
                "decode_step_s": a.decode.total["time_s"],
                "peak_bytes": a.memory["peak_bytes"],
                "fits": a.memory["fits"],
                **row_bands(a.extra.get("intervals") or {}),
            }
        )
        basis[a.device.name] = basis_lines(a.extra.get("basis"))
        bands_of[a.device.name] = {
            k: v for k, v in (a.extra.get("intervals") or {}).items() if k in ("basis", "none", "widened_past_grid")
        }
    frame = pd.DataFrame(rows)
    frame.attrs.update(basis=basis, intervals=bands_of)  # by device: what each row rests on
    return frame


def row_bands(intervals: dict) -> dict[str, float | None]:
    """An analysis's 80 % intervals of TTFT, TPOT and tokens/s as a row's ``<figure>_lo80`` / ``_hi80``."""
    pairs = {key: (intervals.get(key) or {}).get("80") or (None, None) for key in BAND_KEYS}
    return {f"{key}_{end}80": pair[i] for key, pair in pairs.items() for i, end in enumerate(("lo", "hi"))}


def setting_combinations(lists: dict[str, list], base: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """{Settings field: [values]} -> Settings keywords for every combination (itertools.product
    order), each on top of ``base`` for the fields not listed."""
    base = {k: v for k, v in (base or {}).items() if k not in lists}
    return [{**base, **dict(zip(lists, values))} for values in itertools.product(*lists.values())]


BAND_KEYS = ("ttft_s", "tpot_s", "tokens_per_s")  # the figures a table gives an interval
BAND_COLUMNS = (*BAND_KEYS, "prefill_s", "decode_step_s")  # without a generation: the two passes


def with_bands(d: Deployment, frame: pd.DataFrame, generate: int = 0) -> pd.DataFrame:
    """``frame`` (a sweep's rows of ``d``) with each point's 80 % interval (:func:`sweep_bands`)
    as ``<figure>_lo80`` and ``<figure>_hi80`` columns, and in ``frame.attrs["intervals"]``
    what they rest on (or why there are none), as an analysis's ``extra["intervals"]``."""
    found = sweep_bands(d, frame, generate)
    if "none" in found:
        frame.attrs["intervals"] = {"none": found["none"]}
        return frame
    shown = {"ttft_s": "prefill_s", "tpot_s": "decode_step_s"} if generate <= 0 else {}  # no generation: a pass each
    for key in BAND_KEYS:
        if shown.get(key, key) in frame:
            column = shown.get(key, key)
            frame[f"{column}_lo80"], frame[f"{column}_hi80"] = found[key]["lo80"], found[key]["hi80"]
    frame.attrs["intervals"] = {"basis": found["basis"]}
    return frame


def sweep_bands(d: Deployment, frame: pd.DataFrame, generate: int = 0) -> dict[str, Any]:
    """The 80 % and 50 % intervals of a sweep's TTFT, TPOT and tokens/s, every point at once
    (``frame``: :func:`~ridgeline.engine.analyze.sweep_deployment`'s rows): {'ttft_s': {'lo80':
    [points], 'hi80': ...}, ..., 'basis': ...}, or {'none': why}. Each point's prefill and
    decode passes (the decode at the mid-generation context) weigh their ops' class draws
    (``engine.intervals.stage_factors``); without a generation TTFT is the prefill, TPOT one
    decode step and tokens/s batch / step."""
    if d.intervals is None:
        return {"none": d.no_interval or "no measured residuals for these ceilings"}
    batch, seq_len = frame["batch"].to_numpy(), frame["seq_len"].to_numpy()
    ops = {
        "prefill": stage_ops(d.model, "prefill", batch, seq_len, d.plan),
        "decode": stage_ops(d.model, "decode", batch, seq_len + generate // 2, d.plan),
    }
    weights = {}
    for stage, stage_list in ops.items():
        table = evaluate(stage_list, d.ceilings)
        weights[stage] = (table["count"] * table["time_s"]).reshape(len(stage_list), -1)
    f = stage_factors(ops, weights, d.ceilings, d.intervals)
    if generate > 0:
        ttft, tpot, total = (frame[k].to_numpy(float) for k in ("ttft_s", "tpot_s", "total_s"))
        rate = batch * generate / (ttft * f["prefill"] + (total - ttft) * f["decode"])
    else:
        ttft, tpot = frame["prefill_s"].to_numpy(float), frame["decode_step_s"].to_numpy(float)
        rate = batch / (tpot * f["decode"])
    out = {"ttft_s": bands(f["prefill"], ttft), "tpot_s": bands(f["decode"], tpot), "tokens_per_s": bands(rate, 1.0)}
    unmeasured = unmeasured_note(ops, d.ceilings, d.intervals)
    basis = f"{d.intervals.basis}; per point, its passes' ops drawn per class{'; ' + unmeasured if unmeasured else ''}"
    return {**out, "basis": basis}
