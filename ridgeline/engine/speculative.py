"""Speculative decoding on the engine (Leviathan et al., 2023, arXiv:2211.17192): a draft model
proposes k tokens, the target verifies them in one pass over k + 1 tokens, and each draft
token is accepted with probability a until the first rejection. Its figures against plain
decoding: tokens per step, step times, speed-up, break-even acceptance and memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from ridgeline.engine.analyze import decode_total, memory_totals, plain, stage_totals, verify_activation_peak
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.intervals import analysis_intervals
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.workload import Workload

Number = Any


def expected_tokens(k: Number, acceptance: Number) -> Number:
    """Tokens a verification step yields when each of k draft tokens is accepted with
    probability a, independently, stopping at the first rejection (plus the target's own
    token): (1 - a^(k+1)) / (1 - a); k + 1 when a = 1 (Leviathan et al., 2023, Eq. 1)."""
    k, a = np.asarray(k, dtype=float), np.asarray(acceptance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a >= 1.0, k + 1, (1 - a ** (k + 1)) / (1 - a))


def mean_step(d: Deployment, batch, lo, hi, q_len=1) -> Number:
    """Mean decode-step time over cached lengths lo..hi, ``q_len`` new tokens a step: the
    engine's closed-form sum (as for plain TPOT) over the number of steps."""
    return decode_total(d.model, batch, lo, hi, d.plan, d.ceilings, q_len=q_len) / (hi - lo + 1)


def break_even_acceptance(k: Number, draft_s: float, verify_s: Number, target_s: float) -> Number:
    """Acceptance rate below which speculation is slower than plain decoding, by bisection
    on the monotone speed-up (60 halvings; NaN where even a = 1 does not pay)."""
    k = np.asarray(k, dtype=float)
    cost = k * draft_s + np.asarray(verify_s)
    lo, hi = np.zeros_like(k), np.ones_like(k)
    for _ in range(60):
        mid = (lo + hi) / 2
        fast = expected_tokens(k, mid) * target_s >= cost
        hi, lo = np.where(fast, mid, hi), np.where(fast, lo, mid)
    return np.where(expected_tokens(k, 1.0) * target_s >= cost, hi, np.nan)


def prefill_and_memory(d: Deployment, batch, seq_len, cached) -> tuple:
    """Prefill seconds of ``seq_len`` prompt tokens and the memory table with ``cached``
    tokens per sequence in the cache."""
    ops = stage_ops(d.model, "prefill", batch, seq_len, d.plan)
    totals, _ = stage_totals(ops, d.ceilings, d.plan, "prefill")
    mem = memory_totals(d.model, d.device, Workload(batch, seq_len, cached - seq_len + 1), d.plan, ops)
    return totals["time_s"], mem


def together(target: dict, draft: dict) -> dict:
    """Target and draft on one device: weights and caches add up, activations do not
    (the two models run one after the other)."""
    out = {k: target[k] + draft[k] for k in ("weights_bytes", "kv_cache_bytes")}
    out["activations_peak_bytes"] = np.maximum(target["activations_peak_bytes"], draft["activations_peak_bytes"])
    out["peak_bytes"] = sum(out.values())
    usable = target["usable_bytes"]
    out.update(
        capacity_bytes=target["capacity_bytes"],
        usable_bytes=usable,
        fits=out["peak_bytes"] <= usable,
        shortfall_bytes=np.maximum(out["peak_bytes"] - usable, 0),
    )
    return out


def speculative_figures(
    d: Deployment,
    small: Deployment,
    batch: int,
    seq_len: int,
    generate: int,
    draft_tokens: int,
    acceptance: float,
    max_k: int,
) -> dict:
    """Predicted speed-up of speculative decoding with the draft ``small`` over plain decoding
    of ``d``, on plain decoding's basis: each step runs k draft decode steps and one target
    pass over k+1 tokens, and yields ``expected_tokens(k, a)`` tokens. Step times are means
    over the cached lengths the generation passes through, P .. P + N - 2 for N =
    ``generate`` output tokens (one step at P when N < 2), the range plain TPOT averages
    over; TPOT = mean step / expected tokens; tokens/s = batch x N / (TTFT + (N - 1) x TPOT),
    as plain decoding's (None without a generation). Also the speed-up and break-even
    acceptance for every k from 0 to ``max_k`` (k = 0 is plain decoding: speed-up exactly 1).

    Both models live on the device: ``memory`` adds the draft's weights and KV cache to
    the target's at the last step (P + N - 2 cached and k + 1 written), and ``ttft_s`` runs
    both prefills over the prompt."""
    Workload(batch, seq_len, generate)
    ks = np.arange(max(max_k, draft_tokens) + 1)
    last = seq_len + max(generate - 2, 0)  # cached length at the last step
    target_s = float(mean_step(d, batch, seq_len, last))
    draft_s = float(mean_step(small, batch, seq_len, last))
    verify_s = mean_step(d, batch, seq_len, last, ks + 1)
    tokens = expected_tokens(ks, acceptance)
    speedup = tokens * target_s / (ks * draft_s + verify_s)
    even = break_even_acceptance(ks, draft_s, verify_s, target_s)
    even[0] = np.nan  # k = 0 is plain decoding: no acceptance rate to break even at
    k = draft_tokens
    cached = last + k + 1  # the last verify pass writes k + 1 positions
    target_pre, target_mem = prefill_and_memory(d, batch, seq_len, cached)
    verify = verify_activation_peak(d.model, batch, last, k + 1, d.plan)  # the verify pass's logits
    target_mem["activations_peak_bytes"] = np.maximum(target_mem["activations_peak_bytes"], verify)
    draft_pre, draft_mem = prefill_and_memory(small, batch, seq_len, cached)
    tpot = (k * draft_s + verify_s[k]) / tokens[k]
    ttft = target_pre + draft_pre
    rate = batch * generate / (ttft + max(generate - 1, 0) * tpot) if generate > 0 else None
    points = {"ttft_s": ttft, "tpot_s": tpot, "total_s": ttft + max(generate - 1, 0) * tpot, "tokens": batch * generate}
    bands = speculative_intervals(d, small, batch, seq_len, (seq_len + last) // 2, k, points) if rate else None
    return plain(
        {
            "draft": small.model.name,
            "mode": d.mode,
            "draft_tokens": k,
            "acceptance": acceptance,
            "expected_tokens_per_step": tokens[k],
            "target_step_s": target_s,
            "draft_step_s": draft_s,
            "verify_s": verify_s[k],
            "tpot_s": tpot,
            "tokens_per_s": rate,
            "ttft_s": ttft,
            "speedup": speedup[k],
            "break_even_acceptance": even[k],
            "memory": together(target_mem, draft_mem),
            **({"intervals": bands} if bands is not None else {}),
            "by_draft_tokens": [
                {"draft_tokens": int(i), "speedup": speedup[i], "break_even_acceptance": even[i]} for i in ks
            ],
        }
    )


def speculative_intervals(d: Deployment, small: Deployment, batch: int, seq_len: int, mid: int, k: int, points):
    """The central intervals of speculative decoding's TTFT, TPOT and tokens/s from ``d``'s
    residual table, as a plain analysis's (:func:`ridgeline.engine.intervals.analysis_intervals`):
    the TTFT's ops are both prefills, the TPOT's a step's, k draft decodes and the target's
    verify of k + 1 tokens at the middle cached length ``mid``, each op weighted by its
    share of that time; or why there is none. (Without a generation, none: its figures
    are per step.)"""
    if d.intervals is None:
        return {"none": d.no_interval or "no measured residuals for these ceilings"}
    passes = {
        "prefill": [(d, "prefill", seq_len, 1, 1), (small, "prefill", seq_len, 1, 1)],
        "decode": [(small, "decode", mid, 1, k), (d, "decode", mid, k + 1, 1)],
    }
    ops, weights = {}, {}
    for stage, parts in passes.items():
        built = [(stage_ops(m.model, kind, batch, n, m.plan, q), m, kind, times) for m, kind, n, q, times in parts]
        tables = [stage_totals(o, m.ceilings, m.plan, kind)[1] for o, m, kind, _ in built]
        ops[stage] = [op for o, *_ in built for op in o]
        weights[stage] = np.concatenate([times * t["count"] * t["time_s"] for (*_, times), t in zip(built, tables)])
    out = analysis_intervals(ops, weights, d.ceilings, d.intervals, points)
    out.pop("ops")
    return out
