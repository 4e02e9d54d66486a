"""Requests in arrival order, the serving simulator's input: the :class:`Arrivals` record and
Poisson arrivals at a rate (trace files are read by :mod:`ridgeline.io.traces`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ridgeline.errors import RidgelineError


@dataclass(frozen=True)
class Arrivals:
    """Requests in arrival order: seconds from the start, prompt and output tokens."""

    time_s: np.ndarray  # [n] float, non-decreasing
    prompt: np.ndarray  # [n] int >= 1
    output: np.ndarray  # [n] int >= 1: the prefill's token + output - 1 decode steps
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.time_s)
        if n == 0:
            raise RidgelineError(f"{self.source or 'arrivals'}: no requests")
        if len(self.prompt) != n or len(self.output) != n:
            raise RidgelineError("arrival times, prompt and output tokens differ in length")
        if np.any(~np.isfinite(self.time_s)) or np.any(np.diff(self.time_s) < 0) or self.time_s[0] < 0:
            raise RidgelineError(f"{self.source or 'arrivals'}: arrival times must be finite, >= 0 and in order")
        for name, values in (("prompt", self.prompt), ("output", self.output)):
            bad = np.flatnonzero(values < 1)
            if bad.size:
                raise RidgelineError(
                    f"{self.source or 'arrivals'}: {bad.size} request(s) have "
                    f"{name} tokens < 1 (first at row {bad[0] + 1}); every "
                    "request needs at least one prompt and one output token"
                )

    def __len__(self) -> int:
        return len(self.time_s)

    @property
    def rate(self) -> float:
        """Mean requests per second over the trace (n - 1 gaps over its span)."""
        span = float(self.time_s[-1] - self.time_s[0])
        return (len(self) - 1) / span if span > 0 else float("inf")

    def scaled(self, factor: float) -> Arrivals:
        """The same requests arriving ``factor`` times as fast."""
        if not factor > 0:
            raise RidgelineError(f"the time scale factor must be positive, got {factor}")
        return Arrivals(self.time_s / factor, self.prompt, self.output, self.source)


def poisson(rate: float, n: int, prompt, output, seed: int = 0) -> Arrivals:
    """``n`` requests with exponential gaps of mean 1/rate (the first at its first gap);
    ``prompt``/``output`` are one length for all or an array of n."""
    if not rate > 0 or not np.isfinite(rate):
        raise RidgelineError(f"--rate must be a positive number of requests per second, got {rate}")
    if n < 1:
        raise RidgelineError(f"--requests must be at least 1, got {n}")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
    return Arrivals(
        np.cumsum(gaps),
        np.broadcast_to(np.asarray(prompt, dtype=np.int64), n).copy(),
        np.broadcast_to(np.asarray(output, dtype=np.int64), n).copy(),
        f"poisson {rate:g}/s",
    )
