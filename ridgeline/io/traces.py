"""Request arrivals for the serving simulator from a trace file (Poisson arrivals and the
:class:`Arrivals` record are :mod:`ridgeline.serving.arrivals`').

A trace is CSV or JSONL with one request per row: its arrival time in seconds, its prompt
tokens and its output tokens. Column names are matched case-insensitively against the
aliases below, so the public Azure LLM inference traces (``TIMESTAMP``, ``ContextTokens``,
``GeneratedTokens``; Patel et al., "Splitwise", ISCA 2024) load as they are: their
timestamps are dates, turned into seconds after the first request.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ridgeline.errors import RidgelineError
from ridgeline.serving.arrivals import Arrivals

ARRIVAL_NAMES = ("arrival_s", "arrival", "arrival_time", "timestamp", "time_s", "time")
PROMPT_NAMES = ("prompt_tokens", "prompt", "input_tokens", "contexttokens", "context_tokens")
OUTPUT_NAMES = ("output_tokens", "output", "generated_tokens", "generatedtokens", "completion_tokens")
# ``simulate-check``'s Poisson trace: prompt and output tokens, uniform on these ranges (the
# GPU run's registered serving predictions simulate the same trace)
CHECK_PROMPT_RANGE = (32, 192)
CHECK_OUTPUT_RANGE = (16, 48)


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
