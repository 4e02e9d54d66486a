"""Request arrivals for the serving simulator: Poisson at a rate, or a trace file.

A trace is CSV or JSONL with one request per row: its arrival time in seconds, its prompt
tokens and its output tokens. Column names are matched case-insensitively against the
aliases below, so the public Azure LLM inference traces (``TIMESTAMP``, ``ContextTokens``,
``GeneratedTokens``; Patel et al., "Splitwise", ISCA 2024) load as they are: their
timestamps are dates, turned into seconds after the first request.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ridgeline.errors import RidgelineError

ARRIVAL_NAMES = ("arrival_s", "arrival", "arrival_time", "timestamp", "time_s", "time")
PROMPT_NAMES = ("prompt_tokens", "prompt", "input_tokens", "contexttokens", "context_tokens")
OUTPUT_NAMES = ("output_tokens", "output", "generated_tokens", "generatedtokens", "completion_tokens")
# ``simulate-check``'s Poisson trace: prompt and output tokens, uniform on these ranges (the
# GPU run's registered serving predictions simulate the same trace)
CHECK_PROMPT_RANGE = (32, 192)
CHECK_OUTPUT_RANGE = (16, 48)


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


def _column(columns: dict[str, str], names: tuple[str, ...], what: str, path: Path) -> str:
    for name in names:
        if name in columns:
            return columns[name]
    raise RidgelineError(
        f"{path}: no {what} column; name it one of: {', '.join(names)} (found: {', '.join(columns.values())})"
    )


def load_trace(path: str | Path) -> Arrivals:
    """A CSV or JSONL trace (see the module docstring) as ``Arrivals``, sorted by arrival."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise RidgelineError(f"no trace file at {path}")
    try:
        if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
            frame = pd.read_json(path, lines=True)
        else:
            frame = pd.read_csv(path)
    except (ValueError, pd.errors.ParserError) as err:
        raise RidgelineError(f"{path}: not a CSV or JSONL trace ({str(err).splitlines()[0]})") from None
    columns = {str(c).strip().lower(): c for c in frame.columns}
    arrival = frame[_column(columns, ARRIVAL_NAMES, "arrival time", path)]
    prompt = frame[_column(columns, PROMPT_NAMES, "prompt tokens", path)]
    output = frame[_column(columns, OUTPUT_NAMES, "output tokens", path)]
    seconds = _seconds(arrival, path)
    order = np.argsort(seconds, kind="stable")
    tokens = [_whole(col, path)[order] for col in (prompt, output)]
    return Arrivals(seconds[order] - seconds[order][0] if len(seconds) else seconds, tokens[0], tokens[1], str(path))


def _seconds(column, path: Path) -> np.ndarray:
    """Numbers are seconds; text is a date/time (Azure's TIMESTAMP), turned into seconds."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(column):
        return column.to_numpy(dtype=float)
    try:
        stamps = pd.to_datetime(column, format="mixed")
    except (ValueError, TypeError):
        raise RidgelineError(f"{path}: arrival times must be seconds or dates, got e.g. {column.iloc[0]!r}") from None
    return (stamps - stamps.min()).dt.total_seconds().to_numpy(dtype=float)


def _whole(column, path: Path) -> np.ndarray:
    import pandas as pd

    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
    if np.any(~np.isfinite(values)) or np.any(values != np.floor(values)):
        raise RidgelineError(f"{path}: column '{column.name}' must hold whole token counts")
    return values.astype(np.int64)
