"""The viewer's computation layer: state dict -> engine calls -> Analysis / DataFrames.

No Dash here: callbacks call these, figures draw what they return.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import ridgeline as rl
from ridgeline.api import sweep_bands
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import TIMINGS
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import REPORTS_DIR, VALIDATION_DIR, user_data_dir
from ridgeline.io.files import MAX_FILE_BYTES
from ridgeline.io.resolve import (
    Deployment,
    ceilings_where_measured,
    device_from_dict,
    device_upload,
    list_devices,
    list_models,
    model_upload,
    profile_named,
    recorded_timing,
    resolve,
)
from ridgeline.io.resolve import catalog_device as resolve_catalog_device
from ridgeline.io.resolve import catalog_model as resolve_catalog_model
from ridgeline.io.resolve import (
    list_profiles as profiles,
)
from viewer.state import UPLOAD_PREFIX, settings_of

MAX_UPLOAD_BYTES = MAX_FILE_BYTES  # 1 MB, as the CLI reads: a config.json or device YAML is a few KB
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SWEEP_SEQ_LENS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
# Work budgets per page view (issue 30): past one, the page says the limit and names the CLI.
MOST_SWEEP_LINES = 6  # weight types on the Sweep page: one engine sweep of 9 points each
BISECTION_POINTS = 64  # prompt lengths per bisection step of ``largest_fitting``
MOST_SWEEP_POINTS = MOST_SWEEP_LINES * (len(SWEEP_BATCHES) + 3 * BISECTION_POINTS)  # 3 steps: 16384 -> 1
MOST_COMPARE_DEVICES = 8  # analyses on the Compare page


def check_count(what: str, count: int, most: int, command: str) -> None:
    """Refuse a view asking for more than ``most`` of ``what`` before any work."""
    if count > most:
        raise RidgelineError(
            f"this view asks for {count} {what}; the dashboard draws at most {most}: choose fewer, "
            f"or run '{command}', which has no such bound"
        )


def view_memo(maxsize: int = 16) -> Callable:
    """A memo for a pure ``fn(state, uploads)``, keyed on both as JSON: a page reloaded,
    revisited or shared computes once. Results are shared: callers must not change them.
    Errors are not kept; uploads JSON cannot hold (a YAML date) are computed every time.
    A view asked for while another request computes it waits for that result (a page whose
    callbacks share a view, or reloaded meanwhile, computes it once).
    ``peek(state, uploads)``: the kept result, or None, computing nothing."""

    def wrap(fn: Callable) -> Callable:
        kept: OrderedDict[str, Any] = OrderedDict()  # the most recently used last
        lock = threading.Lock()  # the server answers requests in threads
        running: dict[str, threading.Event] = {}  # views being computed, set when done

        def key_of(state: Mapping[str, Any], uploads: Mapping[str, Any] | None) -> str | None:
            try:
                return json.dumps([dict(state), dict(uploads or {})], sort_keys=True, allow_nan=False)
            except (TypeError, ValueError):
                return None

        @functools.wraps(fn)
        def call(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None) -> Any:
            key = key_of(state, uploads)
            if key is None:
                return fn(state, uploads)
            with lock:
                if key in kept:
                    kept.move_to_end(key)
                    return kept[key]
                done = running.get(key)
                if done is None:
                    running[key] = threading.Event()
            if done is not None:  # another request computes this view: wait for its result
                done.wait()
                return call(state, uploads)
            try:
                value = fn(*json.loads(key))  # outside the lock: other views go on meanwhile
                with lock:
                    kept[key] = value
                    while len(kept) > maxsize:
                        kept.popitem(last=False)
            finally:
                with lock:
                    running.pop(key).set()
            return value

        def peek(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None) -> Any:
            return kept.get(key_of(state, uploads) or "")

        call.cache_clear = kept.clear  # type: ignore[attr-defined]
        call.peek = peek  # type: ignore[attr-defined]
        return call

    return wrap


# --- uploads --------------------------------------------------------------------------


def decode_upload(contents: str, filename: str) -> str:
    """A dcc.Upload data URL -> text; files over 1 MB or not text are refused."""
    try:
        payload = contents.split(",", 1)[1]
        size = len(payload) * 3 // 4 - payload.count("=", -2)
        if size > MAX_UPLOAD_BYTES:
            raise RidgelineError(f"{filename}: file is {size / 1e6:.1f} MB; the limit is 1 MB")
        return base64.b64decode(payload, validate=True).decode("utf-8")
    except (IndexError, binascii.Error, UnicodeDecodeError):
        raise RidgelineError(f"{filename}: not a readable text file") from None


def parse_model_upload(contents: str, filename: str) -> tuple[str, dict]:
    """An uploaded config.json -> (name, raw mapping), checked by the engine's parser."""
    return model_upload(decode_upload(contents, filename), filename)


def parse_device_upload(contents: str, filename: str) -> tuple[str, dict]:
    """An uploaded device YAML -> (name, raw mapping), checked by the engine's loader."""
    return device_upload(decode_upload(contents, filename), filename)


# --- resolving names ------------------------------------------------------------------


@lru_cache(maxsize=64)
def catalog_model(name: str) -> ModelConfig:
    """Catalog names only: a URL must not name server files."""
    return resolve_catalog_model(name)


@lru_cache(maxsize=64)
def catalog_device(name: str) -> DeviceSpec:
    """Catalog names and ``host`` (detected once per machine)."""
    return resolve_catalog_device(name)


def resolve_model(name: str, uploads: Mapping[str, Any] | None) -> ModelConfig:
    if name.startswith(UPLOAD_PREFIX):
        key = name[len(UPLOAD_PREFIX) :]
        raw = ((uploads or {}).get("models") or {}).get(key)
        if raw is None:
            raise RidgelineError(f"uploaded model '{key}' is not in this browser session; upload its config.json again")
        return ModelConfig.from_hf_config(raw, name=key, where=f"uploaded {key}")
    return catalog_model(name)


def resolve_device(name: str, uploads: Mapping[str, Any] | None) -> DeviceSpec:
    if name.startswith(UPLOAD_PREFIX):
        key = name[len(UPLOAD_PREFIX) :]
        raw = ((uploads or {}).get("devices") or {}).get(key)
        if raw is None:
            raise RidgelineError(f"uploaded device '{key}' is not in this browser session; upload its YAML again")
        return device_from_dict(raw, f"uploaded {key}")
    return catalog_device(name)


def list_profiles() -> list[str]:
    """Measured device profiles (user's and committed) the roofline can use."""
    return profiles()


def profile_file(key: str) -> Path | None:
    """``spec`` -> None (datasheet roofs); a profile key -> its file."""
    return profile_named(key)


def deployment_for(
    state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None, device: str | None = None
) -> Deployment:
    """The state's model on its device (or ``device``), with its settings and profile."""
    return resolve(
        resolve_model(state["model"], uploads),
        resolve_device(device or state["device"], uploads),
        settings=settings_of(state),
        profile=profile_file(state["profile"]),
    )


def model_options(uploads: Mapping[str, Any] | None) -> list[str]:
    return list_models() + [UPLOAD_PREFIX + k for k in ((uploads or {}).get("models") or {})]


def device_options(uploads: Mapping[str, Any] | None) -> list[str]:
    return list_devices() + ["host"] + [UPLOAD_PREFIX + k for k in ((uploads or {}).get("devices") or {})]


# --- computations ---------------------------------------------------------------------


def analysis_for(state: Mapping[str, Any], d: Deployment) -> rl.Analysis:
    """The Analyze page's one engine call (``analysis.mode`` names its roofline)."""
    return rl.analyze(d, batch=state["batch"], seq_len=state["seq_len"], generate=state["generate"])


def sweep_frame(
    state: Mapping[str, Any],
    uploads: Mapping[str, Any] | None = None,
    axis: str | None = None,
    w_dtypes: Sequence[str] | None = None,
) -> pd.DataFrame:
    """TTFT, TPOT, tokens/s and peak memory over batch or prompt length, per weight type.

    The other size stays at the state's value; one ``ridgeline.sweep`` call per weight type.
    With no generation (generate = 0) TTFT is the prefill and TPOT one decode step.
    """
    axis = axis or state["sweep_x"]
    w_dtypes = list(w_dtypes or state["sweep_dtypes"])
    check_count("weight types", len(w_dtypes), MOST_SWEEP_LINES, "ridgeline sweep")
    d = deployment_for(state, uploads)
    xs = np.array(SWEEP_BATCHES if axis == "batch" else SWEEP_SEQ_LENS)
    batch = xs if axis == "batch" else np.array([state["batch"]])
    seq_len = xs if axis == "seq_len" else np.array([state["seq_len"]])
    frames, intervals = [], {}
    for w in w_dtypes:
        variant = d.with_settings(dataclasses.replace(d.settings, w_dtype=w))
        frame = rl.sweep(variant, batch=batch, seq_len=seq_len, generate=state["generate"], bands=False)
        if state["generate"] <= 0:
            frame["ttft_s"] = frame["prefill_s"]
            frame["tpot_s"] = frame["decode_step_s"]
            frame["tokens_per_s"] = frame["batch"] / frame["decode_step_s"]
        frame.insert(0, "w_dtype", w)
        frame.insert(1, "x", frame[axis])
        frame["capacity_bytes"] = d.device.memory_capacity
        frame["max_x"] = largest_fitting(variant, axis, state, frame)
        intervals = with_bands(frame, sweep_bands(variant, frame, state["generate"]))
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    out.attrs.update(axis=axis, device=d.device.name, model=d.model.name, mode=d.mode, intervals=intervals)
    return out


def with_bands(frame: pd.DataFrame, bands: dict[str, Any]) -> dict[str, Any]:
    """``bands`` (``ridgeline.api.sweep_bands``) as columns of ``frame`` ('ttft_s_lo80' ...);
    returns what they rest on ({'basis': ...} or {'none': why})."""
    for key, ends in bands.items():
        if isinstance(ends, dict):
            for end, values in ends.items():
                frame[f"{key}_{end}"] = values
    return {k: bands[k] for k in ("basis", "none") if k in bands}


def largest_fitting(d: Deployment, axis: str, state: Mapping[str, Any], frame: pd.DataFrame) -> int:
    """The exact largest batch (ridgeline.api.max_batch) or prompt length that fits, the
    other size at the state's value; 0 when nothing does. Prompt lengths: bisection between
    the last grid point that fits and the first that does not, 64 lengths per sweep call."""
    if axis == "batch":
        from ridgeline.api import max_batch

        return max_batch(d, seq_len=state["seq_len"], generate=state["generate"])
    fits = frame["fits"].to_numpy(bool)
    xs = frame["x"].to_numpy(int)
    if fits.all() or not fits[0]:
        return int(xs[-1]) if fits.all() else 0
    lo, hi = int(xs[np.argmax(~fits) - 1]), int(xs[np.argmax(~fits)])  # fits, does not
    while hi - lo > 1:
        probe = np.unique(np.linspace(lo, hi, BISECTION_POINTS + 2).astype(int)[1:-1])
        grid = rl.sweep(d, batch=np.array([state["batch"]]), seq_len=probe, generate=state["generate"], bands=False)
        ok = grid["fits"].to_numpy(bool)
        lo, hi = (int(probe[ok][-1]) if ok.any() else lo), int(probe[~ok][0]) if (~ok).any() else hi
    return lo


def compare_frame(
    state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None, devices: Sequence[str] | None = None
) -> pd.DataFrame:
    """One row per device for the same model, workload and settings, with the state's
    profile where it was measured (``mode`` says calibrated or spec per row); a failing
    device (say, a data type it cannot run) gets its one-line error instead of numbers."""
    devices = list(devices or state["devices"])
    check_count("devices", len(devices), MOST_COMPARE_DEVICES, "ridgeline analyze")
    model = resolve_model(state["model"], uploads)
    profile = profile_file(state["profile"])
    rows = []
    for name in devices:
        row: dict[str, Any] = {"device": name, "error": ""}
        try:
            device = resolve_device(name, uploads)
            ceilings, _ = ceilings_where_measured(device, profile)  # another device's: datasheet roofs
            d = resolve(model, device, settings=settings_of(state), ceilings=ceilings)
            a = rl.analyze(d, batch=state["batch"], seq_len=state["seq_len"], generate=max(state["generate"], 2))
            row["mode"] = a.mode
            row.update({k: a.generation[k] for k in ("ttft_s", "tpot_s", "tokens_per_s")})
            row.update({k: a.memory[k] for k in ("peak_bytes", "capacity_bytes", "fits")})
        except RidgelineError as err:
            row["error"] = str(err)
        rows.append(row)
    columns = ["device", "mode", "ttft_s", "tpot_s", "tokens_per_s", "peak_bytes", "capacity_bytes", "fits", "error"]
    return pd.DataFrame(rows).reindex(columns=columns)


VALIDATION_COLUMNS = ("case", "kind", "measured_s", "predicted_spec_s", "predicted_calibrated_s")


CASE_FIELDS = ("model", "op", "shape", "batch", "prompt", "seq_len", "generate", "dtype", "compile")
WIDE_METRIC = re.compile(r"^measured_(\w+?)_s$")


def _rows_of(raw: Any) -> list[dict]:
    """Rows from a validation JSON: a list of rows, or a mapping holding one."""
    if isinstance(raw, list):
        return [r for r in raw if isinstance(r, dict)]
    if isinstance(raw, dict):
        for key in ("rows", "results", "cases", "ops", "records"):
            if isinstance(raw.get(key), list):
                return _rows_of(raw[key])
    return []


def long_rows(row: Mapping[str, Any]) -> list[dict]:
    """One row per measured quantity. Rows already in the long shape (``measured_s``) pass
    through; wide rows (``measured_ttft_s`` + ``predicted_spec_ttft_s`` ...) split by metric."""
    if row.get("status", "ok") != "ok":  # skipped or failed cases carry no measurement
        return []
    if "measured_s" in row:  # kernel cases: 'name' and 'op_class' are accepted too
        return [
            {
                **row,
                "case": row.get("case") or row.get("name"),
                "kind": row.get("kind") or row.get("op_class") or row.get("op_kind"),
            }
        ]
    out = []
    label = row.get("case") or " ".join(f"{k}={row[k]}" for k in CASE_FIELDS if k in row)
    for key in row:
        match = WIDE_METRIC.match(key)
        metric = match and match.group(1)
        if metric and f"predicted_spec_{metric}_s" in row:
            out.append(
                {
                    **{k: v for k, v in row.items() if not k.startswith(("measured_", "predicted_", "error_"))},
                    "case": f"{label} {metric}",
                    "kind": row.get("kind") or f"e2e {metric}",
                    "measured_s": row[key],
                    "predicted_spec_s": row.get(f"predicted_spec_{metric}_s"),
                    "predicted_calibrated_s": row.get(f"predicted_calibrated_{metric}_s"),
                }
            )
    return out


def measured_on(raw: Any, path: Path) -> str:
    """The device key a result file names in its provenance (else the file's name)."""
    meta = raw.get("meta") if isinstance(raw, dict) else None
    key = meta.get("device_key") if isinstance(meta, dict) else None
    return str(key) if key else path.stem


def validation_folders() -> tuple[Path, ...]:
    """Where the Validation page reads results: the committed baselines, then the user's
    own runs (what 'ridgeline validate' and 'ridgeline e2e' write by default)."""
    return VALIDATION_DIR, user_data_dir() / "validation"


def shown_path(path: Path | str) -> str:
    """A server path as the page may show it: relative to the repository
    ('reports/validation'), else to the home folder ('~/...'), else its name only."""
    path = Path(path)
    for base, shown in ((REPORTS_DIR.parent, ""), (Path.home(), "~/")):
        if path.is_relative_to(base):
            return shown + str(path.relative_to(base))
    return path.name


def hide_paths(text: str) -> str:
    """``text`` with the repository's and the home folder's absolute paths made relative."""
    return text.replace(str(REPORTS_DIR.parent) + "/", "").replace(str(Path.home()), "~")


def shown_folders() -> str:
    """The folders, as the page names them (no server's absolute path)."""
    return ", ".join(shown_path(f) for f in validation_folders())


def timing_label(device_key: str) -> str:
    """How a device's measurements were timed, in words (``ridgeline.engine.roofline.TIMINGS``),
    from its profile (the user's, else the committed one); '' where it has none."""
    timing = recorded_timing(device_key)
    return TIMINGS[timing] if timing else ""


def method_labels(methods) -> list[str]:
    """The words for how rows were timed (``roofline.TIMINGS``), from their ``method``s, in
    the order eager, device, cpu; rows with no method (end to end) say nothing."""
    from ridgeline.io.resolve import timings_of_methods

    return [TIMINGS[t] for t in timings_of_methods(methods.dropna())]


def validation_devices(folder: Path | None = None) -> list[str]:
    """'all' and every device key with results in ``reports/validation``."""
    frame, _ = load_validation(folder)
    return ["all", *sorted(frame["device"].unique())] if len(frame) else ["all"]


def load_validation(folder: Path | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every row of every ``*.json`` in ``folder`` (default: ``validation_folders()``) with
    a measured time, and the files that could not be read (with why). Missing columns become
    NaN; rows keep their file. Read once per set of files (``read_validation``)."""
    frame, problems = read_validation(validation_stamps(folder))
    return frame.copy(), list(problems)


def validation_stamps(folder: Path | None = None) -> tuple[tuple[str, int, int], ...]:
    """``file_stamps`` of every ``*.json`` in ``folder`` (default: ``validation_folders()``)."""
    folders = validation_folders() if folder is None else (folder,)
    return file_stamps([p for f in folders if f.is_dir() for p in sorted(f.glob("*.json"))])


def file_stamps(paths: Sequence[Path]) -> tuple[tuple[str, int, int], ...]:
    """(path, modification time in ns, size) per file: what a memo of their contents keys on."""
    stamps = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            stat = None
        stamps.append((str(path), stat.st_mtime_ns if stat else -1, stat.st_size if stat else -1))
    return tuple(stamps)


@lru_cache(maxsize=8)
def read_validation(stamps: tuple[tuple[str, int, int], ...]) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """``load_validation``'s work for the files ``stamps`` names (``file_stamps``): the
    page's 20 MB of committed runs are parsed once, again only when a file changes."""
    frames, problems = [], []
    for name, *_ in stamps:
        path = Path(name)
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            problems.append(hide_paths(f"{path.name}: {err}"))
            continue
        rows = [r for row in _rows_of(raw) for r in long_rows(row)]
        if rows:
            frame = pd.DataFrame(rows)
            frame["file"] = path.stem
            frame["device"] = measured_on(raw, path)
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*VALIDATION_COLUMNS, "file", "device"]), tuple(problems)
    out = pd.concat(frames, ignore_index=True)
    for col in VALIDATION_COLUMNS:
        if col not in out:
            out[col] = np.nan
    for col in VALIDATION_COLUMNS[2:]:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    out["kind"] = out["kind"].fillna("other").astype(str)
    return out[out["measured_s"] > 0].reset_index(drop=True), tuple(problems)


WATERFALLS_FILE = REPORTS_DIR / "results" / "waterfalls.json"  # python -m kernels.results.generate writes it


def user_waterfalls(folder: Path) -> list[dict]:
    """Waterfalls the user's own runs carry: e2e rows' ``waterfall`` per metric, and a
    serving run's (``simulate-check`` writes them); unreadable files are skipped."""
    paths = sorted([*folder.glob("*.json"), *folder.glob("serving/*.json")])
    return list(read_user_waterfalls(file_stamps(paths)))


@lru_cache(maxsize=8)
def read_user_waterfalls(stamps: tuple[tuple[str, int, int], ...]) -> tuple[dict, ...]:
    """``user_waterfalls``' work for the files ``stamps`` names (``file_stamps``)."""
    out = []
    for name, *_ in stamps:
        path = Path(name)
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(raw, dict):
            continue
        device = measured_on(raw, path)
        for row in _rows_of(raw):
            label = " ".join(f"{k}={row[k]}" for k in CASE_FIELDS if k in row)
            for metric, fall in (row.get("waterfall") or {}).items():
                out.append({"run": path.name, "kind": "e2e", "device": device, "case": label, "metric": metric, **fall})
        for metric, fall in (raw.get("waterfall") or {}).items():
            out.append({"run": path.name, "kind": "serving", "device": device, "case": "", "metric": metric, **fall})
    return tuple(out)


def load_waterfalls(path: Path | None = None) -> list[dict]:
    """Every committed check's waterfall (``reports/results/waterfalls.json``), then the user's own
    runs'. A missing or unreadable generated file gives none."""
    path = path or WATERFALLS_FILE
    return [*read_committed_waterfalls(file_stamps([path])), *user_waterfalls(user_data_dir() / "validation")]


@lru_cache(maxsize=4)
def read_committed_waterfalls(stamps: tuple[tuple[str, int, int], ...]) -> tuple[dict, ...]:
    try:
        return tuple(json.loads(Path(stamps[0][0]).read_text()).get("waterfalls", []))
    except (OSError, json.JSONDecodeError, AttributeError):
        return ()


def waterfall_key(entry: Mapping[str, Any]) -> str:
    """The dropdown value naming one waterfall."""
    return f"{entry['run']} | {entry['case']} | {entry['metric']}"
