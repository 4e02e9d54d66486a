"""Measured device profiles -> ``calibrated`` ceilings.

A profile is what ``ridgeline calibrate`` writes to ``reports/profiles/<device>.yaml``:

    meta: {device, torch, threads, date, commit, ...}     # provenance
    bandwidth_gb_s: 21.3                                  # achievable (copy, read + write)
    matrix_peak_tops: {fp32: 0.9, bf16: 2.8}              # large-GEMM rate per data type
    vector_peak_tops: {fp32: 0.05}                        # element-wise rate
    efficiency: {linear: {compute: 0.93, memory: 0.88}}   # per op kind, on calibration shapes
                                  # (+ rows_half: tile fill; gemv / gemv_memory: one-row products)
    overhead_us: {default: 6.0, attention: 20.0}          # fixed cost per kernel

A profile measured from the device's side (``timing: device``) also keeps the host apart:

    launch_gap_us: 1.2                                    # device idle between kernels in a graph
    host_us: {eager: {default: 9.0, rope: 60.0}, compiled: {default: 4.0}}  # dispatch per call
    kernels_per_op: {eager: {rope: 12, attention: 3}, compiled: {default: 0.6}}

(keys: engine op names such as ``rope``, or efficiency keys, then ``default``), and the
engine composes them per execution mode (``ridgeline.roofline.composed_time``).

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
from .roofline import Ceilings
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
        link_per_peer=device.interconnect_link_bandwidth, exp_rate=device.exp_rate,
        **execution_tables(profile, where))


def execution_tables(profile: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The launch gap, host dispatch per call and kernels per op of each execution mode
    (``Ceilings`` keywords; none when the profile has no such terms)."""
    gap = profile.get("launch_gap_us", 0.0)
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or gap < 0:
        raise InvalidSpecError(where, f"'launch_gap_us' must be a number >= 0, got {gap!r}")

    def per_mode(key: str, scale: float) -> dict[str, Any]:
        table = profile.get(key) or {}
        if not isinstance(table, Mapping):
            raise InvalidSpecError(where, f"'{key}' must map an execution mode to a table")
        return {str(mode): MappingProxyType(_nonnegative_table(table, mode, f"{key}.{mode}",
                                                               where, scale))
                for mode in table}

    return {"launch_gap_s": float(gap) * 1e-6,
            "host_s": MappingProxyType(per_mode("host_us", 1e-6)),
            "kernels": MappingProxyType(per_mode("kernels_per_op", 1.0))}


def _nonnegative_table(raw: Mapping[str, Any], key: str, name: str, where: str,
                       scale: float) -> dict[str, float]:
    table = raw.get(key) or {}
    if not isinstance(table, Mapping):
        raise InvalidSpecError(where, f"'{name}' must be a mapping")
    out = {}
    for op, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InvalidSpecError(where, f"'{name}.{op}' must be a number >= 0, got {value!r}")
        out[str(op)] = float(value) * scale
    return out


def slug(text: str) -> str:
    """'AMD EPYC 9J14 96-Core Processor' -> 'amd-epyc-9j14-96-core-processor'."""
    import re

    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def device_key(kind: str, name: str, threads: int | None = None) -> str:
    """File stem of a measured device: 'cuda-nvidia-h100-80gb-hbm3', 'cpu-<model>-2t'."""
    key = f"{kind}-{slug(name)}"
    return f"{key}-{threads}t" if kind == "cpu" and threads else key
