"""Discrete-event simulation of an LLM inference server with continuous batching.

Requests arrive (Poisson or a trace, :mod:`ridgeline.serving.arrivals`), wait in a FIFO queue and are
served in steps. Before each step a scheduler policy chooses its work (the tokens each
running request computes, preemptions, admissions); by default vLLM V1's chunked-prefill
scheduler (:mod:`ridgeline.serving.policies.vllm_v1`): every running request gets its next
tokens (one for a decode; the next chunk of a prompt) in admission order, then waiting
requests are admitted while the step has sequences, tokens and KV blocks to spare; when the
paged KV cache runs out, the request admitted last is preempted and later recomputed.

The policy is ``Scheduler.policy``, a name registered in :mod:`ridgeline.serving.policies`
(one module each):

- ``vllm-v1`` (the default, and what the CLI runs): vLLM V1's chunked prefill;
- ``transformers``: transformers' continuous-batching server as it runs (its FIFO
  scheduler; with ``admit_margin=0.15`` and ``batch_attention="gather"`` as
  ``kernels/servecheck/cb_server.matching_scheduler`` sets them);
- ``sarathi``: Sarathi-Serve's stall-free batching, decodes before prompt chunks;
- ``static``: static batching, first come first served: a batch runs to completion before
  the next is admitted.

Only the default has a CLI name today; the others are reached from Python, e.g.
``ridgeline.api.simulate("llama-3-8b", "h100-sxm", arrivals, Scheduler(policy="static"))``. An unknown
name fails with the list of known ones.

Each step costs what the engine says for its mix of sequences (:mod:`ridgeline.serving.step_cost`,
and :mod:`ridgeline.serving.transformers_sdpa` for transformers' attention path), read from
tables built with a few vectorised engine calls before the first step, so one step is a
handful of numpy operations; a run of steps in which every request decodes and nobody
waits, up to the next arrival or finish, is computed at once (:func:`run_decodes`), to the
bit what step after step gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.analyze import memory_totals, plain
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.layers import Plan
from ridgeline.engine.memory import kv_bytes_per_token
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.workload import Workload
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving import policies  # noqa: F401  (each policy registers itself on import)
from ridgeline.serving.arrivals import Arrivals, check_requests
from ridgeline.serving.policy import Policy, attention_note, policy
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.server import FEWEST_AT_ONCE, MOST_AT_ONCE, ServerState
from ridgeline.serving.step_cost import StepCost, build_step_cost

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PERCENTILES = (50, 90, 99)


# --- KV capacity ---------------------------------------------------------------------


def kv_capacity_bytes(config: ModelConfig, device, p: Plan, token_budget: int) -> float:
    """Bytes left for the paged KV cache on one device: what the runtime may use
    (``memory_utilization`` x capacity less the runtime's reserve) less the weights and the
    activation peak of the largest step, a prefill of ``token_budget`` tokens
    (``analyze.memory_totals``' ``kv_capacity_bytes``)."""
    mem = memory_totals(config, device, Workload(p.micro_batches, int(token_budget), 0), p)
    return float(mem["kv_capacity_bytes"])


def kv_block_count(config: ModelConfig, device, p: Plan, scheduler: Scheduler) -> int:
    if scheduler.kv_blocks is not None:
        return int(scheduler.kv_blocks)
    room = kv_capacity_bytes(config, device, p, scheduler.token_budget)
    blocks = int(room // (p.kv_block * kv_bytes_per_token(config, p)))
    if blocks < 1:
        raise InvalidWorkloadError(
            f"no room for a KV cache: {config.name} leaves {room / 2**30:.3g} GiB of "
            f"{device.name}'s usable memory after weights and activations; use more --tp, "
            "lower precision, a smaller --token-budget or a higher --memory-utilization"
        )
    return blocks


# --- the simulation --------------------------------------------------------------------


@dataclass(frozen=True)
class SimResult:
    """Per request times, the step timeline and the summary of one simulated run."""

    requests: dict[str, np.ndarray]  # one array per column, one row per request
    timeline: dict[str, np.ndarray]  # one row per step: start, seconds, KV blocks used, ...
    summary: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.requests)

    @property
    def timeline_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.timeline)

    def to_dict(self, rows: bool = True) -> dict[str, Any]:
        out = {"meta": self.meta, "summary": self.summary}
        if rows:
            out["requests"] = self.frame.to_dict(orient="list")
            out["timeline"] = {k: v.tolist() for k, v in self.timeline.items()}
        return plain(out)


class _Server(ServerState):
    """A run's state and the policy that schedules it (kept inside ``simulate``; never returned)."""

    def __init__(self, arrivals: Arrivals, scheduler: Scheduler, cost: StepCost, blocks: int, block: int, rule: Policy):
        super().__init__(arrivals, scheduler, cost, blocks, block)
        self.policy = rule
        self.step_scale = (1.0, 1.0)  # (prefill, decode) factors on the forward's seconds

    def forward_of(self, chunk: np.ndarray) -> float:
        """The forward's seconds, scaled between the prefill and the decode factor by the
        step's share of prompt tokens (``serving.intervals``); the host terms stay as they are."""
        seconds = super().forward_of(chunk)
        prefill, decode = self.step_scale
        if prefill == decode or self.pure:  # a pure step only decodes
            return seconds * decode
        tokens = int(chunk.sum())
        decodes = int(np.count_nonzero((chunk == 1) & (self.run[4] > 0)))
        return seconds * (decode + (prefill - decode) * (tokens - decodes) / max(tokens, 1))

    def decode_forwards(self, n: int, cached: np.ndarray) -> np.ndarray:
        return super().decode_forwards(n, cached) * self.step_scale[1]  # as forward_of scales a pure step

    def schedule(self, now: float) -> np.ndarray:
        """The step starting at ``now``, as the policy chooses it (:meth:`Policy.schedule`)."""
        return self.policy.schedule(self, now)


def simulate_deployment(
    d: Deployment,
    arrivals: Arrivals,
    scheduler: Scheduler | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    step_scale: tuple[float, float] = (1.0, 1.0),
    cost: StepCost | None = None,
) -> SimResult:
    """Serve ``arrivals`` on ``d`` with continuous batching; every step costs what the engine
    says (``ridgeline.api.simulate`` takes names), its forward scaled by ``step_scale``
    (prefill, decode; :mod:`ridgeline.serving.intervals`), from ``cost`` where given
    (:func:`step_cost_of`). ``progress(finished, total)`` is called every few thousand steps.
    """
    check_requests(len(arrivals))
    s = scheduler or Scheduler()
    server = server_maker(d, arrivals, s, cost=cost)()
    server.step_scale = step_scale
    times = _run(server, arrivals, progress)
    return result_of(server, times, d, s)


def server_maker(
    d: Deployment,
    arrivals: Arrivals,
    s: Scheduler,
    kind: type[_Server] | None = None,
    blocks: int | None = None,
    cost: StepCost | None = None,
) -> Callable[[], _Server]:
    """Check that ``arrivals`` can run on ``d`` and tabulate its step costs once (unless
    ``cost`` gives them); returns a maker of fresh servers (of class ``kind``; ``blocks`` KV
    blocks, default what the memory leaves) that share the tables: one per replica of a fleet."""
    rule = policy(s.policy)
    config, device, p = d.model, d.device, d.plan
    if p.micro_batches > 1:
        raise InvalidWorkloadError("the simulator runs one micro-batch per step; use --micro-batches 1")
    redo = rule.evicts  # a policy that preempts recomputes prompt and output at once
    longest = int(np.max(arrivals.prompt + (arrivals.output - 1 if redo else 0)))
    if not s.chunked_prefill and longest > s.token_budget:
        what = "prompt + output - 1, as a recomputation needs" if redo else "its prompt"
        raise InvalidWorkloadError(
            f"without chunked prefill a request of {longest} tokens ({what}) does not fit "
            f"--token-budget {s.token_budget}; raise it or allow chunked prefill"
        )
    cost = cost or step_cost_of(d, s)
    blocks = kv_block_count(config, device, p, s) if blocks is None else blocks
    block = p.kv_block
    longest = arrivals.prompt + arrivals.output - 1
    if cost.spans is not None:  # each kind of layer keeps its own span (StepCost.kv_kept)
        largest = int(np.max(np.ceil(cost.kv_kept(longest) / block)))
    else:
        largest = int(np.max(-(-np.minimum(longest, config.sliding_window or np.inf) // block)))
    if largest > blocks:
        raise InvalidWorkloadError(
            f"one request needs {largest} KV blocks of {block} tokens but the cache holds "
            f"{blocks}; shorten the requests or give the cache more memory"
        )
    if s.prefix_cache and arrivals.hash_ids is not None:  # prompts without ids share nothing: no hits
        check_prefix_cache(config, arrivals, block)
    return lambda: (kind or _Server)(arrivals, s, cost, blocks, block, rule)


def new_line() -> dict[str, list]:
    """An empty step timeline."""
    return {k: [] for k in ("start_s", "step_s", "kv_blocks", "running", "waiting", "tokens")}


def run_step(server: _Server, now: float, line: dict[str, list]) -> tuple[float, int]:
    """One step of ``server`` starting at ``now``, recorded in ``line``; returns when it
    ends and how many requests it finished."""
    chunk = server.schedule(now)
    if server.cache is not None:  # the step's new blocks evict cached units if they must
        server.cache.fit(server.blocks - server.used)
    dt = server.cost_of(chunk)
    line["start_s"].append(now)
    line["step_s"].append(dt)
    line["kv_blocks"].append(server.used)
    line["running"].append(len(chunk))
    line["waiting"].append(len(server.waiting))
    line["tokens"].append(server.tokens)
    before = len(server.run[0])
    server.advance(chunk, now + dt)
    return now + dt, before - len(server.run[0])


def run_decodes(server: _Server, now: float, until: float, line: dict[str, list]) -> tuple[float, int, int]:
    """The pure decode steps of ``server`` from ``now`` that start before ``until`` (nobody
    arrives in them), computed at once where the policy and the server allow
    (``ServerState.decode_run``: the same numbers as step after step) and recorded in
    ``line``; returns when they end, how many ran (0: run the next step alone) and how
    many requests they finished."""
    if not (server.policy.steady_runs and server.decodes_next()):
        return now, 0, 0
    last = line["step_s"][-1]  # a step takes at least as long as the last: its requests cache more
    most = MOST_AT_ONCE if until - now >= MOST_AT_ONCE * last else int((until - now) / last) + 1
    if most < FEWEST_AT_ONCE:
        return now, 0, 0
    n = len(server.run[0])
    starts, seconds, used = server.decode_run(now, until, most)
    k = len(seconds)
    line["start_s"] += starts[:-1].tolist()
    line["step_s"] += seconds.tolist()
    line["kv_blocks"] += used.tolist()
    line["running"] += [n] * k
    line["waiting"] += [0] * k
    line["tokens"] += [n] * k
    return float(starts[-1]), k, n - len(server.run[0])


def check_prefix_cache(config: ModelConfig, arrivals: Arrivals, block: int) -> None:
    """What the prefix cache needs of prompts with block ids: units of whole KV blocks, full attention."""
    if arrivals.hash_block % block:
        raise InvalidWorkloadError(
            f"the trace's blocks of {arrivals.hash_block} tokens are not whole KV blocks of "
            f"{block}; pick a --kv-block that divides {arrivals.hash_block}"
        )
    if config.windows:
        raise InvalidWorkloadError(
            f"the prefix cache is modelled for full attention; {config.name} attends to a sliding window"
        )


def step_cost_of(d: Deployment, s: Scheduler) -> StepCost:
    """The engine's step times for ``d`` under ``s``, tabulated (runs of one deployment share them)."""
    return build_step_cost(d.model, d.plan, d.ceilings, s.token_budget, s.max_batch, s.batch_attention)


def deployment_runs(d: Deployment, s: Scheduler) -> Callable[..., SimResult]:
    """:func:`simulate_deployment` of ``d`` under ``s`` for any arrivals (and its keywords),
    every run sharing one table of step costs, built at the first run: a rate search's runs,
    an interval's four. ``serves`` names the pair it runs (callers check it: a runner of
    another deployment would price the wrong steps)."""
    table = functools.cache(lambda: step_cost_of(d, s))

    def runs(arrivals: Arrivals, **keys) -> SimResult:
        return simulate_deployment(d, arrivals, s, cost=table(), **keys)

    runs.serves = (d, s)  # type: ignore[attr-defined]
    return runs


def _run(server: _Server, arrivals: Arrivals, progress) -> dict[str, list]:
    n = len(arrivals)
    arrival = arrivals.time_s
    now, nxt, finished, steps = 0.0, 0, 0, 0
    line = new_line()
    while finished < n:
        if not len(server.run[0]) and not server.waiting:
            now = max(now, float(arrival[nxt]))
        while nxt < n and arrival[nxt] <= now:
            server.waiting.append(nxt)
            nxt += 1
        now, ran, done = run_decodes(server, now, float(arrival[nxt]) if nxt < n else np.inf, line)
        if not ran:
            (now, done), ran = run_step(server, now, line), 1
        finished += done
        if progress is not None and (steps + ran) // 2000 > steps // 2000:
            progress(finished, n)
        steps += ran
    if progress is not None:
        progress(finished, n)
    return line


def percentiles(values: np.ndarray) -> dict[str, float]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return {f"p{q}": float("nan") for q in PERCENTILES} | {"mean": float("nan")}
    out = {f"p{q}": float(np.percentile(finite, q)) for q in PERCENTILES}
    out["mean"] = float(finite.mean())
    return out


def result_of(server, line, d: Deployment, s: Scheduler) -> SimResult:
    """The result of a finished run: ``server``'s per-request times (a server, or any record
    with its arrays), the step timeline ``line``."""
    arrival, out = server.arrival, server.output
    blocks, block = server.blocks, server.block
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (server.finish - server.first) / np.maximum(out - 1, 1), np.nan)
    requests = {
        "arrival_s": arrival,
        "prompt": server.prompt,
        "output": out,
        "queue_s": server.admitted - arrival,
        "ttft_s": server.first - arrival,
        "tpot_s": tpot,
        "latency_s": server.finish - arrival,
        "finish_s": server.finish,
        "preemptions": server.preempted,
        "prefix_hit_tokens": server.hit_tokens,
    }
    timeline = {k: np.asarray(v) for k, v in line.items()}
    timeline["kv_fraction"] = timeline["kv_blocks"] / blocks
    span = float(np.max(server.finish) - arrival[0])
    summary = {
        "requests": len(arrival),
        "steps": len(timeline["start_s"]),
        "duration_s": span,
        "offered_rate": (len(arrival) - 1) / float(arrival[-1] - arrival[0]) if arrival[-1] > arrival[0] else None,
        "requests_per_s": len(arrival) / span,
        "output_tokens_per_s": float(out.sum()) / span,
        "prompt_tokens": int(server.prompt.sum()),
        "output_tokens": int(out.sum()),
        "computed_tokens": server.computed,
        "recomputed_tokens": server.recomputed,
        "prefix_hit_tokens": int(server.hit_tokens.sum()),
        # of the prefill tokens admissions asked for (prompts, and what preempted requests redo)
        "prefix_hit_rate": float(server.hit_tokens.sum() / (server.prompt.sum() + server.recomputed)),
        "preemptions": int(server.preempted.sum()),
        "kv_blocks": blocks,
        "kv_block_tokens": block,
        "kv_peak_fraction": float(timeline["kv_fraction"].max()),
        "kv_mean_fraction": float(
            np.sum(timeline["kv_fraction"] * timeline["step_s"]) / max(np.sum(timeline["step_s"]), 1e-300)
        ),
        "mean_running": float(
            np.sum(timeline["running"] * timeline["step_s"]) / max(np.sum(timeline["step_s"]), 1e-300)
        ),
    }
    for key in ("queue_s", "ttft_s", "tpot_s", "latency_s"):
        summary[key] = percentiles(requests[key])
    meta = {
        "model": d.model.name,
        "hardware": d.device.name,
        "mode": d.ceilings.mode,
        "settings": d.settings.__dict__.copy(),
        "scheduler": s.__dict__.copy(),
        "attention": attention_note(s.policy, d.settings.attention),
    }
    return SimResult(requests, timeline, plain(summary), plain(meta))


# --- service-level objectives ------------------------------------------------------------


def goodput(result: SimResult, ttft_slo: float | None = None, tpot_slo: float | None = None) -> dict[str, float]:
    """Requests per second that met every given SLO, and the fraction that did."""
    r = result.requests
    ok = np.ones(len(r["arrival_s"]), dtype=bool)
    if ttft_slo is not None:
        ok &= r["ttft_s"] <= ttft_slo
    if tpot_slo is not None:
        ok &= ~(r["tpot_s"] > tpot_slo)  # one-token requests have no TPOT: they pass it
    return {"goodput_rps": float(ok.sum() / result.summary["duration_s"]), "slo_attainment": float(ok.mean())}


def meets(result: SimResult, ttft_slo: float | None, tpot_slo: float | None, percentile: float = 99) -> bool:
    """Whether the ``percentile`` of TTFT and of TPOT are within their SLOs."""
    r = result.requests
    for key, slo in (("ttft_s", ttft_slo), ("tpot_s", tpot_slo)):
        values = r[key][np.isfinite(r[key])]
        if slo is not None and values.size and np.percentile(values, percentile) > slo:
            return False
    return True


def max_rate(
    run: Callable[[float], SimResult],
    ttft_slo: float | None,
    tpot_slo: float | None,
    percentile: float = 99,
    start: float = 1.0,
    tolerance: float = 0.02,
    most_runs: int = 40,
) -> dict[str, Any]:
    """The highest request rate whose ``percentile`` TTFT and TPOT meet the SLOs: double
    (or halve) from ``start`` to bracket it, then bisect on a log scale to ``tolerance``.
    ``run(rate)`` simulates at one rate (same seed each time: common random numbers)."""
    if ttft_slo is None and tpot_slo is None:
        raise InvalidWorkloadError("the rate search needs --ttft-slo and/or --tpot-slo")
    tried = []

    def ok(rate: float) -> bool:
        good = meets(run(rate), ttft_slo, tpot_slo, percentile)
        tried.append({"rate": rate, "meets": good})
        return good

    lo, hi = None, None
    rate = start
    while len(tried) < most_runs and (lo is None or hi is None):
        if ok(rate):
            lo, rate = rate, rate * 2
        else:
            hi, rate = rate, rate / 2
        if lo is None and rate < start * 2.0**-20:
            return {"max_rate": 0.0, "tried": tried}
    while lo is not None and hi is not None and hi / lo > 1 + tolerance and len(tried) < most_runs:
        mid = float(np.sqrt(lo * hi))
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return {"max_rate": lo, "tried": tried}
