"""Requests in arrival order, the serving simulator's input: the :class:`Arrivals` record,
Poisson arrivals at a rate, and shared system prompts for the prefix cache (trace files are
read by :mod:`ridgeline.io.traces`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ridgeline.errors import RidgelineError


@dataclass(frozen=True)
class Arrivals:
    """Requests in arrival order: seconds from the start, prompt and output tokens."""

    time_s: np.ndarray  # [n] float, non-decreasing
    prompt: np.ndarray  # [n] int >= 1
    output: np.ndarray  # [n] int >= 1: the prefill's token + output - 1 decode steps
    source: str = ""
    # per request, the ids of its prompt's blocks of hash_block tokens, in order (Mooncake's
    # hash_ids); two prompts with the same first k ids share their first k blocks
    hash_ids: tuple[np.ndarray, ...] | None = None
    hash_block: int = 0  # tokens per id
    about: dict = field(default_factory=dict, compare=False)  # what the trace reader did

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
        if self.hash_ids is not None:
            self._check_hash_ids()

    def _check_hash_ids(self) -> None:
        where = self.source or "arrivals"
        if len(self.hash_ids) != len(self.time_s) or self.hash_block < 1:
            raise RidgelineError(f"{where}: block ids need one list per request and a block size >= 1 token")
        counts = np.fromiter((len(ids) for ids in self.hash_ids), dtype=np.int64, count=len(self.hash_ids))
        over = np.flatnonzero(counts > -(-self.prompt // self.hash_block))
        if over.size:
            r = over[0]
            raise RidgelineError(
                f"{where}: request {r + 1} has {counts[r]} block ids for a prompt of {self.prompt[r]} "
                f"tokens in blocks of {self.hash_block}; at most one id per block"
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
        return replace(self, time_s=self.time_s / factor)


# The most requests one run serves (docs/limits.md): a run holds about REQUEST_BYTES a request
# (its arrival, lengths, times and record; measured as the growth of the resident memory
# from 20,000 to 100,000 requests of llama-3.2-1b on h100-sxm), so this cap is about 2.5 GB.
MAX_REQUESTS = 1_000_000
REQUEST_BYTES = 2500


def check_requests(n: int, what: str = "") -> None:
    """Refuse, before anything is drawn, a run past MAX_REQUESTS, naming the memory it would
    need; ``what`` names where the requests come from (default: ``--requests N``)."""
    if n > MAX_REQUESTS:
        need = n * REQUEST_BYTES / 1e9
        raise RidgelineError(
            f"{what or f'--requests {n}'} would need about {need:.3g} GB of memory ({REQUEST_BYTES / 1e3:g} KB a request); "
            f"the limit is {MAX_REQUESTS} requests (docs/limits.md)"
        )


def poisson(rate: float, n: int, prompt, output, seed: int = 0) -> Arrivals:
    """``n`` requests with exponential gaps of mean 1/rate (the first at its first gap);
    ``prompt``/``output`` are one length for all or an array of n."""
    if not rate > 0 or not np.isfinite(rate):
        raise RidgelineError(f"--rate must be a positive number of requests per second, got {rate}")
    if n < 1:
        raise RidgelineError(f"--requests must be at least 1, got {n}")
    check_requests(n)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
    return Arrivals(
        np.cumsum(gaps),
        np.broadcast_to(np.asarray(prompt, dtype=np.int64), n).copy(),
        np.broadcast_to(np.asarray(output, dtype=np.int64), n).copy(),
        f"poisson {rate:g}/s",
    )


def shared_prefix(arrivals: Arrivals, system: int, fanout: int, block: int) -> Arrivals:
    """``arrivals`` whose prompts share system prompts: requests in arrival order form groups
    of ``fanout``, and the first ``system`` tokens of each prompt (the whole prompt if
    shorter) are its group's. Block ids per ``block`` tokens: a block wholly inside the
    system prompt has its group's id, every other block an id of its own."""
    if system < 1 or fanout < 1 or block < 1:
        raise RidgelineError(f"--prefix shared: system and fanout must be >= 1, got system={system}, fanout={fanout}")
    per_group = system // block
    unique = (len(arrivals) // fanout + 1) * per_group  # the first id no group uses
    ids = []
    for r, prompt in enumerate(arrivals.prompt.tolist()):
        shared = min(system, prompt) // block
        own = -(-prompt // block) - shared
        ids.append(np.concatenate([(r // fanout) * per_group + np.arange(shared), unique + np.arange(own)]))
        unique += own
    source = f"{arrivals.source}, shared system prompt of {system} tokens x {fanout}"
    return replace(arrivals, hash_ids=tuple(ids), hash_block=block, source=source)
