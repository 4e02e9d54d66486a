"""MLPerf Inference's LoadGen scenarios for Llama 2 70B: Server, Interactive and Offline.

The rules come from LoadGen's ``mlperf.conf`` (mlcommons/inference, ``loadgen/mlperf.conf``):

- **Server**: Poisson arrivals; a run is valid when the 99th percentile of time to first
  token is at most 2 s and the 99th percentile of time per output token at most 200 ms
  (``llama2-70b.Server.ttft_latency = 2000``, ``tpot_latency = 200``,
  ``*.Server.target_latency_percentile = 99``). The submitter picks the rate; the result is
  the completed tokens per second. Here the rate is searched: the highest meeting both.
- **Interactive**: the Server scenario with 450 ms and 40 ms
  (``llama2-70b-interactive.Server.ttft_latency = 450``, ``tpot_latency = 40``).
- **Offline**: every sample issued at once; the result is tokens per second.

LoadGen's percentile is an order statistic, not an interpolation: the sorted latencies'
element at index ``floor(n * p)`` (``loadgen/results.cc``, ``ProcessTokenLatencies``).
A run of LoadGen lasts at least ``min_duration`` (600 s) and ``min_query_count`` queries
(100 for Server, 24,576 samples for Offline); a simulation may be shorter, and then says so.

Prompt and output lengths are drawn from the percentiles of the benchmark's data set (the
OpenOrca subset, ``reports/mlperf/openorca-llama2-70b.yaml``, read by
:func:`ridgeline.io.traces.mlperf_lengths`): inverse transform sampling on the
piecewise-linear quantile function, prompt and output drawn independently. LoadGen counts the tokens the model generates, so outputs are rescaled to
the generated tokens per sample of the reference run and capped at ``max_new_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ridgeline.engine.deployment import Deployment
from ridgeline.errors import InvalidSettingError, InvalidWorkloadError, RidgelineError, _did_you_mean
from ridgeline.serving.arrivals import Arrivals, check_requests, poisson
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import SimResult, deployment_runs


@dataclass(frozen=True)
class Scenario:
    """One LoadGen scenario: its latency bounds (None: no bound) and its minimum run."""

    name: str
    ttft_s: float | None  # bound on the percentile of time to first token
    tpot_s: float | None  # bound on the percentile of time per output token
    percentile: float  # LoadGen's target_latency_percentile, as a fraction
    min_duration_s: float  # *.min_duration
    min_queries: int  # min_query_count (Offline: samples)


SCENARIOS = {
    "server": Scenario("server", 2.0, 0.2, 0.99, 600.0, 100),
    "interactive": Scenario("interactive", 0.45, 0.04, 0.99, 600.0, 100),
    "offline": Scenario("offline", None, None, 0.90, 600.0, 24576),
}


class UnknownScenarioError(RidgelineError):
    def __init__(self, name: str):
        self.name = name
        hint = _did_you_mean(name, SCENARIOS) or ""
        super().__init__(f"unknown scenario '{name}'; choose one of: {', '.join(SCENARIOS)}.{hint}")


def scenario(name: str) -> Scenario:
    """The scenario of that name, exactly (see ``SCENARIOS``)."""
    if name not in SCENARIOS:
        raise UnknownScenarioError(name)
    return SCENARIOS[name]


def loadgen_percentile(values: np.ndarray, fraction: float) -> float:
    """LoadGen's percentile of the finite ``values``: sorted[floor(n x fraction)]."""
    finite = np.sort(values[np.isfinite(values)])
    if not finite.size:
        return float("nan")
    return float(finite[min(int(finite.size * fraction), finite.size - 1)])


def latency_percentiles(requests: Mapping[str, np.ndarray], sc: Scenario) -> dict[str, float]:
    """The scenario's percentile of TTFT and of TPOT over one run's requests."""
    return {key: loadgen_percentile(np.asarray(requests[key]), sc.percentile) for key in ("ttft_s", "tpot_s")}


def meets(requests: Mapping[str, np.ndarray], sc: Scenario) -> bool:
    """Whether a run satisfies the scenario's latency constraints (both bounds, if any).
    One-token requests have no TPOT and do not count towards it."""
    got = latency_percentiles(requests, sc)
    return all(bound is None or not got[key] > bound for key, bound in (("ttft_s", sc.ttft_s), ("tpot_s", sc.tpot_s)))


def highest_rate(
    passes: Callable[[float], bool], start: float = 1.0, tolerance: float = 0.02, most_runs: int = 40
) -> dict[str, Any]:
    """The highest rate at which ``passes(rate)`` holds, within ``tolerance``: double (or
    halve) from ``start`` until a passing and a failing rate bracket it, then bisect the
    bracket geometrically. The answer is a rate that passed (0 if none did)."""
    tried: list[dict[str, Any]] = []
    good, bad = 0.0, math.inf
    rate = start
    while len(tried) < most_runs:
        ok = passes(rate)
        tried.append({"rate": rate, "meets": ok})
        good, bad = (rate, bad) if ok else (good, rate)
        if good and bad <= good * (1 + tolerance):
            break
        if not good and rate < start * 2.0**-20:
            break
        rate = math.sqrt(good * bad) if good and bad < math.inf else (rate * 2 if ok else rate / 2)
    return {"max_rate": good, "tried": tried}


# --- the data set's lengths ------------------------------------------------------------------


def draw(percentiles, u: np.ndarray) -> np.ndarray:
    """Whole lengths at the uniform draws ``u`` (in [0, 1)) by inverse transform sampling of
    the quantile function through the given percentiles (0, ..., 100 evenly spaced), linear
    in between."""
    q = np.asarray(percentiles, dtype=float)
    return np.rint(np.interp(u, np.linspace(0.0, 1.0, q.size), q)).astype(np.int64)


def dataset_lengths(summary: Mapping[str, Any], n: int, seed: int = 0, generated: bool = True):
    """Prompt and output lengths of ``n`` samples like the data set's (``summary``: the
    YAML's fields), drawn independently; the first k of n samples are the k samples of the
    same seed. ``generated``: outputs scaled from the reference answers' mean to the tokens
    the model generates per sample, at most ``max_new_tokens``."""
    if n < 1:
        raise RidgelineError(f"--requests must be at least 1, got {n}")
    u = np.random.default_rng(seed).uniform(size=(n, 2))  # [n, (prompt, output)]
    prompt = draw(summary["prompt_tokens"]["percentiles"], u[:, 0])
    output = draw(summary["reference_output_tokens"]["percentiles"], u[:, 1])
    if generated:
        scale = summary["generated_tokens_per_sample"] / summary["reference_output_tokens"]["mean"]
        output = np.clip(np.rint(output * scale), 1, summary["max_new_tokens"]).astype(np.int64)
    return prompt, output


def offline_arrivals(prompt: np.ndarray, output: np.ndarray) -> Arrivals:
    """Offline: every sample issued at time 0."""
    return Arrivals(np.zeros(len(prompt)), prompt, output, "offline: all at once")


def server_arrivals(rate: float, prompt: np.ndarray, output: np.ndarray, seed: int = 0) -> Arrivals:
    """Server: Poisson arrivals at ``rate`` of the given samples, in order."""
    return poisson(rate, len(prompt), prompt, output, seed)


def shortfall(sc: Scenario, requests: int, span_s: float) -> str | None:
    """How a simulated run (``requests``: the whole system's) falls short of LoadGen's
    minimum run, or None."""
    short = []
    if requests < sc.min_queries:
        short.append(f"{requests} of {sc.min_queries} {'samples' if sc.name == 'offline' else 'queries'}")
    if span_s < sc.min_duration_s:
        short.append(f"{span_s:.4g} s of {sc.min_duration_s:g} s")
    return None if not short else "shorter than LoadGen's minimum run: " + ", ".join(short)


# --- a scenario's run ----------------------------------------------------------------------


def simulate_scenario(
    d: Deployment,
    scheduler: Scheduler,
    sc: Scenario,
    lengths: Mapping[str, Any],
    *,
    requests: int = 1000,
    seed: int = 0,
    instances: int = 1,
    rate: float = 1.0,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """The scenario ``sc`` on ``instances`` copies of ``d``, each serving its share of
    ``requests`` samples drawn like the data set's (``lengths``: its YAML's fields): Offline
    issues them at once; Server and Interactive search the highest Poisson rate (from
    ``rate``, the whole system's) whose p99 TTFT and TPOT meet the bounds. A random split of
    a Poisson stream over the copies is a Poisson stream at rate / copies each, so one copy
    is simulated and the system's rate and tokens/s are copies x its own. A run lasts
    LoadGen's minimum duration (600 s; ``duration_s`` scales it down) and holds at least
    ``requests`` samples: Server arrivals span it, Offline adds samples until its makespan
    reaches it."""
    check_requests(requests)
    if instances < 1:
        raise InvalidSettingError("instances", f"--instances must be at least 1, got {instances}")
    span = sc.min_duration_s if duration_s is None else duration_s
    if not span > 0:
        raise InvalidSettingError("duration", f"--duration must be a positive number of seconds, got {span}")
    if sc.name == "offline":
        result = offline_run(d, scheduler, lengths, requests, seed, span)
        summary = scenario_summary(sc, result, result.summary["output_tokens_per_s"], instances, None)
        return {"result": result, "goodput": None, "search": None, "mlperf": summary}
    kept: dict[float, SimResult] = {}
    runs = deployment_runs(d, scheduler)

    def passes(at: float) -> bool:
        n = max(requests, math.ceil(at * span))  # LoadGen runs at least min_duration
        prompt, output = dataset_lengths(lengths, n, seed)
        kept[at] = runs(server_arrivals(at, prompt, output, seed))
        return meets(kept[at].requests, sc)

    found = highest_rate(passes, start=rate / instances)
    if not found["max_rate"]:
        raise InvalidWorkloadError(
            f"no request rate meets the {sc.name} scenario's bounds on {d.device.name}: even one request "
            "alone is too slow; use a faster deployment (more --tp, lower precision)"
        )
    result = kept[found["max_rate"]]
    s = result.summary
    per_copy = found["max_rate"] * s["output_tokens"] / s["requests"]  # the offered tokens/s a long run approaches
    return {
        "result": result,
        "goodput": None,
        "search": None,
        "mlperf": scenario_summary(sc, result, per_copy, instances, found),
    }


def offline_run(d: Deployment, scheduler, lengths, requests: int, seed: int, span: float, most_runs: int = 4):
    """Offline: ``requests`` samples at once, more until they take ``span`` seconds (as
    LoadGen sizes its one query from the expected rate to last min_duration)."""
    n, runs = requests, deployment_runs(d, scheduler)
    for _ in range(most_runs):
        prompt, output = dataset_lengths(lengths, n, seed)
        result = runs(offline_arrivals(prompt, output))
        took = result.summary["duration_s"]
        if took >= span:
            break
        n = math.ceil(n * span / took * 1.02)
    return result


def scenario_summary(sc: Scenario, result: SimResult, per_copy: float, instances: int, found) -> dict[str, Any]:
    s = result.summary
    return {
        "scenario": sc.name,
        "ttft_bound_s": sc.ttft_s,
        "tpot_bound_s": sc.tpot_s,
        "percentile": sc.percentile,
        "instances": instances,
        "tokens_per_s": per_copy * instances,
        "tokens_per_s_per_instance": per_copy,
        "rate_per_instance": found["max_rate"] if found else None,
        "runs": len(found["tried"]) if found else 1,
        "latency": latency_percentiles(result.requests, sc),
        "mean_output_tokens": s["output_tokens"] / s["requests"],
        "short": shortfall(sc, s["requests"] * instances, s["duration_s"]),
    }
