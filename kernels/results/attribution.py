"""The waterfall of every committed end-to-end and serving check (``kernels.e2e.waterfall``),
predicted and simulated again with today's engine and the committed profiles; measures
nothing and writes nothing. ``kernels.results.generate`` writes them to
``reports/results/waterfalls.json`` (the dashboard's Validation page reads it) and RESULTS.md.

The e2e checks: ``reports/validation/e2e-*.json`` and the e2e files inside the GPU runs'
archives (``gpu-runs/<run>/<part>/results.tar.gz``); the serving checks:
``reports/validation/serving/*.json``.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from kernels.e2e.e2e import e2e_files, repredicted, row_execution
from kernels.servecheck.cb_server import recorded_waterfall
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.resolve import recorded_profile

SNAPSHOTS = REPORTS_DIR / "validation"
WATERFALLS = REPORTS_DIR / "results" / "waterfalls.json"


def committed_profile(meta: dict[str, Any]) -> Path | None:
    """The committed profile a run used (never the user's): the one it names, else its
    device key's in reports/profiles, else None."""
    named = recorded_profile(meta)
    if named is not None:
        return named
    path = REPORTS_DIR / "profiles" / f"{meta.get('device_key')}.yaml"
    return path if path.is_file() else None


def case_label(row: dict[str, Any]) -> str:
    return f"{row['model']} batch {row['batch']} prompt {row['prompt']} {row_execution(row)}" + (
        f" ({row['client']})" if row.get("client") else ""
    )


def e2e_entries(name: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per row and metric of an e2e result, predicted again."""
    meta = data["meta"]
    _, rows, _ = repredicted(data, name, profile=committed_profile(meta))
    return [
        {"run": name, "kind": "e2e", "device": meta["device_key"], "case": case_label(row), "metric": metric, **fall}
        for row in rows
        for metric, fall in row["waterfall"].items()
    ]


def serving_entries(path: Path, name: str) -> list[dict[str, Any]]:
    """One entry per metric (mean TTFT, mean latency) of a serving run, simulated again."""
    data = json.loads(path.read_text())
    meta, trace = data["meta"], data["trace"]
    falls = recorded_waterfall(path, committed_profile(meta))
    case = f"{data['model']} {trace['requests']} requests at {trace['rate']:g}/s (mean over requests)"
    return [
        {"run": name, "kind": "serving", "device": meta["device_key"], "case": case, "metric": metric, **fall}
        for metric, fall in falls.items()
    ]


def committed_waterfalls(folder: Path = SNAPSHOTS) -> list[dict[str, Any]]:
    """Every committed check's waterfalls, e2e then serving, in file order (a fresh copy of
    one computation per folder and set of files in a process: they are pure functions of
    those files, and RESULTS.md, its check and the dashboard all ask)."""
    files = tuple((str(p), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file())
    return copy.deepcopy(_waterfalls(folder, files))


@functools.lru_cache(maxsize=4)
def _waterfalls(folder: Path, files: tuple) -> list[dict[str, Any]]:
    del files  # part of the cache key only: a changed file computes again
    out = [entry for name, data in e2e_files(folder) for entry in e2e_entries(name, data)]
    for path in sorted((folder / "serving").glob("*.json")):
        out += serving_entries(path, str(path.relative_to(folder)))
    return out
