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
OpenOrca subset, ``reports/mlperf/openorca-llama2-70b.yaml``, read by the API): inverse
transform sampling on the piecewise-linear quantile function, prompt and output drawn
independently. LoadGen counts the tokens the model generates, so outputs are rescaled to
the generated tokens per sample of the reference run and capped at ``max_new_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ridgeline.errors import RidgelineError, _did_you_mean
from ridgeline.serving.arrivals import Arrivals, poisson


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
