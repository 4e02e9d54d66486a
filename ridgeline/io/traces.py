"""Request arrivals for the serving simulator from a trace file (Poisson arrivals and the
:class:`Arrivals` record are :mod:`ridgeline.serving.arrivals`').

A trace is CSV or JSONL with one request per row; its header says which of these it is:

- **generic**: an arrival time, prompt tokens and output tokens, column names matched
  case-insensitively against the aliases below. The public Azure LLM inference traces of
  2023 and 2024 (``TIMESTAMP``, ``ContextTokens``, ``GeneratedTokens``; Patel et al.,
  "Splitwise", ISCA 2024) load as they are: their timestamps are dates.
- **BurstGPT** (Wang et al., KDD 2025; github.com/HPMLL/BurstGPT): ``Timestamp`` (seconds),
  ``Request tokens``, ``Response tokens``, ``Log Type`` (and ``Session ID``, ``Elapsed
  time``, ``Model``, ``Total tokens``, unused). A row with 0 response tokens is a failed
  request: skipped and counted. ``log_type`` keeps the rows of one Log Type.
- **Mooncake** JSONL (Qin et al., FAST 2025; github.com/kvcache-ai/Mooncake,
  FAST25-release): ``timestamp`` (milliseconds), ``input_length``, ``output_length`` and
  ``hash_ids``, one id per 512-token block of the prompt, the last block partial; the ids
  travel on the arrivals for the prefix cache.

Readers stream: CSV in chunks of ``CHUNK_ROWS`` rows (only the columns used), JSONL a line
at a time; only the selected requests' numbers are kept. ``window`` (START, END seconds
from the trace's first request) keeps the requests arriving in [START, END). Requests are
sorted by arrival (the count of rows out of order is reported) and their times start at 0
at the first one kept. A bad row raises one line naming it (``file:line: what is wrong``).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ridgeline.errors import InvalidWorkloadError, RidgelineError
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.files import read_yaml
from ridgeline.serving.arrivals import Arrivals, check_requests

ARRIVAL_NAMES = ("arrival_s", "arrival", "arrival_time", "timestamp", "time_s", "time")
PROMPT_NAMES = ("prompt_tokens", "prompt", "input_tokens", "contexttokens", "context_tokens")
OUTPUT_NAMES = ("output_tokens", "output", "generated_tokens", "generatedtokens", "completion_tokens")
# ``simulate-check``'s Poisson trace: prompt and output tokens, uniform on these ranges (the
# GPU run's registered serving predictions simulate the same trace)
CHECK_PROMPT_RANGE = (32, 192)
CHECK_OUTPUT_RANGE = (16, 48)
CHUNK_ROWS = 1 << 16  # rows read at a time
MAX_REQUESTS = 5_000_000  # a selection past this is refused as soon as it is reached
MOONCAKE_BLOCK = 512  # tokens per Mooncake hash id (FAST25-release/README.md)
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass(frozen=True)
class TraceFormat:
    """How one file's columns map to a request: names as the file spells them."""

    name: str
    time: str
    prompt: str
    output: str
    seconds_per_unit: float = 1.0  # numeric times; dates are nanoseconds
    log_type: str | None = None
    hash_ids: str | None = None
    failed_when_no_output: bool = False  # BurstGPT: 0 response tokens is a failed request
    times_from_zero: bool = False  # times count from the trace's start: negative is an error

    @property
    def columns(self) -> list[str]:
        extra = [c for c in (self.log_type, self.hash_ids) if c is not None]
        return [self.time, self.prompt, self.output, *extra]


def trace_format(columns: list[str], path: Path) -> TraceFormat:
    """The format a header names (module docstring)."""
    named = {str(c).strip().lower(): str(c) for c in columns}
    if {"timestamp", "input_length", "output_length"} <= named.keys():
        return TraceFormat(
            "mooncake",
            named["timestamp"],
            named["input_length"],
            named["output_length"],
            seconds_per_unit=1e-3,
            hash_ids=named.get("hash_ids"),
            times_from_zero=True,
        )
    if {"timestamp", "request tokens", "response tokens"} <= named.keys():
        return TraceFormat(
            "burstgpt",
            named["timestamp"],
            named["request tokens"],
            named["response tokens"],
            log_type=named.get("log type"),
            failed_when_no_output=True,
            times_from_zero=True,
        )
    roles = ((ARRIVAL_NAMES, "arrival time"), (PROMPT_NAMES, "prompt tokens"), (OUTPUT_NAMES, "output tokens"))
    return TraceFormat("generic", *(_column(named, names, what, path) for names, what in roles))


def _column(named: dict[str, str], names: tuple[str, ...], what: str, path: Path) -> str:
    for name in names:
        if name in named:
            return named[name]
    raise RidgelineError(
        f"{path}: no {what} column; name it one of: {', '.join(names)} (found: {', '.join(named.values())})"
    )


def parse_window(text: str) -> tuple[float, float]:
    """``--trace-window START,END``: seconds from the trace's first request, 0 <= START < END."""
    try:
        start, end = (float(v) for v in text.split(","))
    except ValueError:
        start = end = math.nan
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
        raise RidgelineError(
            f"--trace-window takes START,END in seconds from the trace's first request, "
            f"0 <= START < END (e.g. 0,3600); got {text!r}"
        )
    return start, end


def parse_prefix(text: str) -> tuple[int, int]:
    """``--prefix shared:system=TOKENS,fanout=N``: (system prompt tokens, requests sharing one)."""
    fields = dict(part.partition("=")[::2] for part in text.removeprefix("shared:").split(","))
    try:
        system, fanout = int(fields.pop("system")), int(fields.pop("fanout"))
    except (KeyError, ValueError):
        system = fanout = 0
    if not text.startswith("shared:") or fields or system < 1 or fanout < 1:
        raise RidgelineError(
            "--prefix takes shared:system=TOKENS,fanout=N (a system prompt of TOKENS tokens "
            f"shared by each N requests in a row, both >= 1), e.g. shared:system=1024,fanout=8; got {text!r}"
        )
    return system, fanout


def load_trace(path: str | Path, window: tuple[float, float] | None = None, log_type: str | None = None) -> Arrivals:
    """The requests of a trace file (module docstring) as ``Arrivals``, sorted by arrival."""
    path = Path(path)
    if not path.is_file():
        raise RidgelineError(f"no trace file at {path}")
    fmt = trace_format(_header(path), path)
    if log_type is not None and fmt.log_type is None:
        raise RidgelineError(f"{path}: --trace-log-type needs a BurstGPT trace with a 'Log Type' column")
    picked = _Selection(fmt, window, log_type)
    for chunk in _chunks(path, fmt):
        picked.add(chunk, path)
        check_requests(picked.kept, f"{path}'s first {picked.kept} requests")  # a chunk at a time
    if picked.rerun:  # an earlier first request turned up late: select again from it
        origin = picked.origin
        picked = _Selection(fmt, window, log_type, origin)
        for chunk in _chunks(path, fmt):
            picked.add(chunk, path)
    return picked.arrivals(path)


def trace_arrivals(trace, window=None, log_type: str | None = None, time_scale: float = 1.0) -> Arrivals | None:
    """A trace file's requests (None without one): ``window`` "START,END" or a pair."""
    if trace is None:
        if window is not None or log_type is not None:
            raise InvalidWorkloadError("--trace-window and --trace-log-type select from a --trace; give one")
        return None
    window = parse_window(window) if isinstance(window, str) else window
    return load_trace(trace, window, log_type).scaled(time_scale)


MLPERF_LENGTHS = REPORTS_DIR / "mlperf" / "openorca-llama2-70b.yaml"


def mlperf_lengths() -> dict[str, Any]:
    """The cited length percentiles of MLPerf's Llama 2 70B data set (OpenOrca)."""
    return read_yaml(MLPERF_LENGTHS)


def _header(path: Path) -> list[str]:
    """The column names: a CSV's first line, or the keys of a JSONL file's first record."""
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    break
            else:
                raise RidgelineError(f"{path}: empty file, no requests")
    except UnicodeDecodeError:
        raise RidgelineError(f"{path}: not a text file (CSV or JSONL)") from None
    if path.suffix.lower() not in JSONL_SUFFIXES:
        import pandas as pd

        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    record = _record(line, path, 1)
    return list(record)


def _record(line: str, path: Path, number: int) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise RidgelineError(f"{path}:{number}: not JSON ({err.msg})") from None
    if not isinstance(record, dict):
        raise RidgelineError(f"{path}:{number}: not a JSON object")
    return record


def _chunks(path: Path, fmt: TraceFormat) -> Iterator[dict]:
    """The file's rows, validated, a chunk at a time: numpy arrays per role and ``line``."""
    rows = _jsonl_rows(path, fmt) if path.suffix.lower() in JSONL_SUFFIXES else _csv_rows(path, fmt)
    dates = None
    for frame, lines in rows:
        if dates is None:  # the first chunk decides: numbers are seconds, text a date
            dates = fmt.name == "generic" and _is_text(frame[fmt.time])
        yield _checked(frame, lines, fmt, dates, path)


def _is_text(column) -> bool:
    import pandas as pd

    values = column.dropna()
    return not pd.api.types.is_numeric_dtype(column) and pd.to_numeric(values, errors="coerce").isna().all()


def _csv_rows(path: Path, fmt: TraceFormat):
    import pandas as pd

    first = 2  # line of the first data row (the header is line 1)
    try:
        # every column read (a row with more fields than the header is an error, which
        # usecols would hide); blank lines kept as empty rows, so a row's index gives its line
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            # only an empty cell is missing: a cell holding 'nan' or 'NA' is reported as it reads
            empty = {"na_values": [""], "keep_default_na": False}
            reader = pd.read_csv(path, chunksize=CHUNK_ROWS, skip_blank_lines=False, index_col=False, **empty)
            for frame in reader:
                lines = np.arange(first, first + len(frame))
                first += len(frame)
                blank = frame.isna().all(axis=1).to_numpy()
                yield frame.loc[~blank, fmt.columns], lines[~blank]
    except pd.errors.ParserWarning:
        raise RidgelineError(f"{path}:2: more fields than the header names") from None
    except pd.errors.ParserError as err:
        found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(err))
        if found:
            want, line, saw = found.groups()
            raise RidgelineError(f"{path}:{line}: {saw} fields where the header has {want}") from None
        raise RidgelineError(f"{path}: not a CSV trace ({str(err).strip().splitlines()[0]})") from None
    except UnicodeDecodeError:
        raise RidgelineError(f"{path}: not a text file (CSV or JSONL)") from None


def _jsonl_rows(path: Path, fmt: TraceFormat):
    import pandas as pd

    records, lines = [], []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = _record(line, path, number)
            records.append([record.get(c) for c in fmt.columns])
            lines.append(number)
            if len(records) == CHUNK_ROWS:
                yield pd.DataFrame(records, columns=fmt.columns), np.array(lines)
                records, lines = [], []
    if records:
        yield pd.DataFrame(records, columns=fmt.columns), np.array(lines)


def _checked(frame, lines: np.ndarray, fmt: TraceFormat, dates: bool, path: Path) -> dict:
    """One chunk's columns as numbers, every row checked (module docstring)."""
    where = _Rows(path, lines, frame)
    time = _dates(frame[fmt.time], where) if dates else where.numbers(fmt.time, fmt.seconds_per_unit)
    if fmt.times_from_zero:
        where.fail_if(time < 0, fmt.time, "is negative; times count from the trace's start")
    prompt = where.tokens(fmt.prompt)
    where.fail_if(prompt < 1, fmt.prompt, "is below 1: prompt tokens < 1; every request needs a prompt token")
    output = where.tokens(fmt.output)
    if not fmt.failed_when_no_output:
        where.fail_if(output < 1, fmt.output, "is below 1: output tokens < 1; every request needs an output token")
    chunk = {"line": lines, "time": time, "prompt": prompt, "output": output}
    if fmt.log_type is not None:
        chunk["log_type"] = frame[fmt.log_type].astype(str).str.strip().to_numpy()
    if fmt.hash_ids is not None:
        chunk["hash_ids"] = [where.hash_ids(i, ids, n) for i, (ids, n) in enumerate(zip(frame[fmt.hash_ids], prompt))]
    return chunk


def _seconds(times: np.ndarray) -> float:
    """Seconds per unit of a chunk's times: dates are integer nanoseconds, numbers seconds."""
    return 1e-9 if times.dtype == np.int64 else 1.0


def _dates(column, where: _Rows) -> np.ndarray:
    """Dates (Azure's TIMESTAMP) as integer nanoseconds after the epoch (exact differences)."""
    import pandas as pd

    stamps = pd.to_datetime(column, format="mixed", errors="coerce")
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert(None)
    where.fail_if(stamps.isna().to_numpy(), column.name, "is not a date or a number of seconds")
    return stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)


class _Rows:
    """One chunk's rows, for messages naming the row: ``file:line: column ... what``."""

    def __init__(self, path: Path, lines: np.ndarray, frame):
        self.path, self.lines, self.frame = path, lines, frame

    def fail_if(self, bad: np.ndarray, column: str, what: str) -> None:
        hit = np.flatnonzero(bad)
        if hit.size:
            i = hit[0]
            value = self.frame[column].iloc[i]
            if value is None or (isinstance(value, float) and math.isnan(value)):
                shown = "empty"
            else:
                shown = repr(value) if isinstance(value, str) else str(value)
            raise RidgelineError(f"{self.path}:{self.lines[i]}: {column} {what} (got {shown})")

    def numbers(self, column: str, scale: float = 1.0) -> np.ndarray:
        import pandas as pd

        values = pd.to_numeric(self.frame[column], errors="coerce").to_numpy(dtype=float)
        self.fail_if(~np.isfinite(values), column, "is not a finite number")
        return values * scale if scale != 1.0 else values

    def tokens(self, column: str) -> np.ndarray:
        values = self.numbers(column)
        self.fail_if(values != np.floor(values), column, "must hold whole token counts")
        self.fail_if(values < 0, column, "is negative; token counts are >= 0")
        return values.astype(np.int64)

    def hash_ids(self, i: int, ids, prompt: int) -> np.ndarray:
        """Mooncake's ids of row ``i``: whole numbers >= 0, one per 512-token block."""
        line = f"{self.path}:{self.lines[i]}"
        if not isinstance(ids, list) or not all(type(v) is int and v >= 0 for v in ids):
            raise RidgelineError(f"{line}: hash_ids must be a list of whole numbers >= 0")
        want = -(-prompt // MOONCAKE_BLOCK)
        if len(ids) != want:
            raise RidgelineError(
                f"{line}: {len(ids)} hash_ids for {prompt} input tokens; Mooncake has one per "
                f"{MOONCAKE_BLOCK}-token block, {want} here"
            )
        return np.array(ids, dtype=np.int64)


class _Selection:
    """The requests kept while the chunks stream by: the window, the log type, failures."""

    def __init__(self, fmt: TraceFormat, window, log_type: str | None, origin=None):
        self.fmt, self.window, self.log_type = fmt, window, log_type
        self.origin = origin  # the first request's time (the earliest so far, if not given)
        self.fixed = origin is not None
        self.rerun = False  # an earlier request came late: the window moves, select again
        self.parts: list[dict] = []
        self.kept = self.failed = self.rows = self.out_of_order = 0
        self.last = None
        self.types: set[str] = set()
        self.latest = None

    def add(self, chunk: dict, path: Path) -> None:
        time = chunk["time"]
        if not len(time):
            return
        self.rows += len(time)
        sequence = time if self.last is None else np.concatenate([[self.last], time])
        self.out_of_order += int(np.sum(np.diff(sequence) < 0))
        self.last, low, high = time[-1], time.min(), time.max()
        self.latest = high if self.latest is None else max(self.latest, high)
        if not self.fixed and (self.origin is None or low < self.origin):
            # the window counts from the earliest request: a later chunk that has one selects again
            self.rerun = self.window is not None and self.origin is not None
            self.origin = low
        if self.rerun:
            return
        keep = np.ones(len(time), dtype=bool)
        if self.window is not None:
            since = (time - self.origin) * _seconds(time)
            keep &= (since >= self.window[0]) & (since < self.window[1])
        if self.log_type is not None:
            self.types.update(np.unique(chunk["log_type"]).tolist())
            keep &= chunk["log_type"] == self.log_type
        if self.fmt.failed_when_no_output:
            failed = keep & (chunk["output"] == 0)
            self.failed += int(failed.sum())
            keep &= ~failed
        self.kept += int(keep.sum())
        if self.kept > MAX_REQUESTS:
            raise RidgelineError(
                f"{path}: more than {MAX_REQUESTS:,} requests selected; simulate a slice with "
                "--trace-window START,END (seconds from the first request)"
            )
        part = {k: v[keep] for k, v in chunk.items() if k not in ("hash_ids", "log_type", "line")}
        if "hash_ids" in chunk:
            part["hash_ids"] = [ids for ids, k in zip(chunk["hash_ids"], keep) if k]
        self.parts.append(part)

    def arrivals(self, path: Path) -> Arrivals:
        if not self.kept:
            raise RidgelineError(self._nothing(path))
        time = np.concatenate([p["time"] for p in self.parts])
        order = np.argsort(time, kind="stable")
        seconds = (time[order] - time[order][0]) * _seconds(time)
        prompt, output = (np.concatenate([p[k] for p in self.parts])[order] for k in ("prompt", "output"))
        about = {"format": self.fmt.name, "rows": self.rows, "requests": self.kept}
        if self.window is not None:
            about["window_s"] = list(self.window)
        if self.log_type is not None:
            about["log_type"] = self.log_type
        if self.fmt.failed_when_no_output:
            about["failed_skipped"] = self.failed
        if self.out_of_order:
            about["out_of_order_sorted"] = self.out_of_order
        hashes = {}
        if self.fmt.hash_ids is not None:
            ids = [i for p in self.parts for i in p["hash_ids"]]
            hashes = {"hash_ids": tuple(ids[i] for i in order), "hash_block": MOONCAKE_BLOCK}
        return Arrivals(seconds, prompt, output, str(path), **hashes, about=about)

    def _nothing(self, path: Path) -> str:
        if not self.rows:
            return f"{path}: no requests"
        if self.log_type is not None and self.log_type not in self.types:
            found = ", ".join(repr(t) for t in sorted(self.types))
            return f"{path}: no requests with Log Type {self.log_type!r} (the trace has {found})"
        if self.failed:
            return f"{path}: no requests left: the {self.failed} selected are failed ones (0 response tokens)"
        span = (self.latest - self.origin) * _seconds(np.asarray(self.latest))
        start, end = self.window
        return f"{path}: no requests in --trace-window {start:g},{end:g} (the trace's requests span 0 to {span:.6g} s)"
