"""Measured device profiles -> ``calibrated`` ceilings.

A profile is what ``ridgeline calibrate`` writes to ``reports/profiles/<device>.yaml``:

    meta: {device, torch, threads, date, commit, ...}     # provenance
    bandwidth_gb_s: 21.3                                  # achievable (copy, read + write)
    matrix_peak_tops: {fp32: 0.9, bf16: 2.8}              # large-GEMM rate per data type
    vector_peak_tops: {fp32: 0.05}                        # element-wise rate
    efficiency: {linear: {compute: 0.93, memory: 0.88}}   # per op kind, on calibration shapes
                                  # (+ rows_half: tile fill; gemv / gemv_memory: one-row products)
    overhead_us: {default: 6.0, attention: 20.0}          # fixed cost per kernel
    row_curves: {linear@fp32: [{k: 896, n: 4864, rows: [1, ...], fraction: [0.31, ...]}]}
                                  # skinny products: fraction of the bound per measured shape

Types the profile did not measure keep their datasheet peak.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .catalog import REPORTS_DIR
from .errors import InvalidSpecError, RidgelineError
from .hardware import DeviceSpec, read_yaml
from .roofline import Ceilings, Curve, RowTable
from .units import GIGA, TERA

PROFILES_DIR = REPORTS_DIR / "profiles"


def profile_path(device: str) -> Path:
    return PROFILES_DIR / f"{device}.yaml"


def _positive_table(raw: Mapping[str, Any], key: str, where: str, scale: float) -> dict[str, float]:
    table = raw.get(key) or {}
    if not isinstance(table, Mapping):
        raise InvalidSpecError(where, f"'{key}' must be a mapping")
    out = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InvalidSpecError(where, f"'{key}.{name}' must be a positive number, got {value!r}")
        out[str(name)] = float(value) * scale
    return out


def load_profile(path: str | Path) -> dict[str, Any]:
    """Read and check a profile YAML; raise one-line errors for anything malformed."""
    path = Path(path)
    if not path.is_file():
        raise RidgelineError(f"no device profile at {path}; run 'ridgeline calibrate' first")
    raw = read_yaml(path)
    where = str(path)
    if not isinstance(raw, Mapping) or "bandwidth_gb_s" not in raw:
        raise InvalidSpecError(where, "not a device profile (no 'bandwidth_gb_s')")
    _positive_table(raw, "matrix_peak_tops", where, 1.0)
    return dict(raw)


def calibrated_ceilings(profile: Mapping[str, Any], device: DeviceSpec) -> Ceilings:
    """The roofline with measured roofs, per-kind efficiencies and per-kernel overheads."""
    where = str(profile.get("meta", {}).get("device", device.name))
    matrix = dict(device.matrix_peak)
    matrix.update(_positive_table(profile, "matrix_peak_tops", where, TERA))
    vector = dict(device.vector_peak)
    vector.update(_positive_table(profile, "vector_peak_tops", where, TERA))
    efficiency = {kind: MappingProxyType({k: float(v) for k, v in terms.items()})
                  for kind, terms in (profile.get("efficiency") or {}).items()}
    overhead = {kind: float(us) * 1e-6 for kind, us in (profile.get("overhead_us") or {}).items()}
    return Ceilings(
        "calibrated", float(profile["bandwidth_gb_s"]) * GIGA, MappingProxyType(matrix),
        MappingProxyType(vector), MappingProxyType(efficiency), MappingProxyType(overhead),
        device=device.name, link_bandwidth=device.interconnect_bandwidth,
        link_latency=device.interconnect_latency or 0.0,
        row_curves=MappingProxyType({k: _row_table(v, f"{where}: row_curves.{k}")
                                     for k, v in (profile.get("row_curves") or {}).items()}))


def _row_table(raw: Any, where: str) -> RowTable:
    """One curve per measured (k, n) shape: [{k, n, rows: [...], fraction: [...]}, ...]."""
    if not isinstance(raw, list) or not raw or not all(isinstance(e, Mapping) for e in raw):
        raise InvalidSpecError(where, "must be a list of {k, n, rows, fraction} shapes")
    shapes = []
    for entry in raw:
        k, n = entry.get("k"), entry.get("n")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (k, n)):
            raise InvalidSpecError(where, f"each shape needs positive 'k' and 'n', got {k!r}, {n!r}")
        shapes.append((float(k), float(n)))
    return RowTable(tuple(shapes), tuple(_curve(e, where, "rows", "fraction", at_most=1.0)
                                         for e in raw))


def _curve(raw: Any, where: str, x: str, y: str, at_most: float | None = None) -> Curve:
    """A measured curve: increasing positive knots ``x`` and positive values ``y`` (at most
    ``at_most``: a fraction of a measured roof is never above 1)."""
    xs, ys = (raw or {}).get(x), (raw or {}).get(y)
    if not isinstance(xs, list) or not isinstance(ys, list) or not xs or len(xs) != len(ys):
        raise InvalidSpecError(where, f"needs lists '{x}' and '{y}' of the same length")
    try:
        xs, ys = [float(v) for v in xs], [float(v) for v in ys]
    except (TypeError, ValueError):
        raise InvalidSpecError(where, f"'{x}' and '{y}' must hold numbers") from None
    if any(v <= 0 for v in xs) or any(b <= a for a, b in zip(xs, xs[1:])):
        raise InvalidSpecError(where, f"'{x}' must be positive and increasing")
    if any(v <= 0 or (at_most is not None and v > at_most) for v in ys):
        bound = f" and at most {at_most:g}" if at_most is not None else ""
        raise InvalidSpecError(where, f"every '{y}' must be positive{bound}")
    return Curve(tuple(xs), tuple(ys))


def slug(text: str) -> str:
    """'AMD EPYC 9J14 96-Core Processor' -> 'amd-epyc-9j14-96-core-processor'."""
    import re

    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def device_key(kind: str, name: str, threads: int | None = None) -> str:
    """File stem of a measured device: 'cuda-nvidia-h100-80gb-hbm3', 'cpu-<model>-2t'."""
    key = f"{kind}-{slug(name)}"
    return f"{key}-{threads}t" if kind == "cpu" and threads else key
