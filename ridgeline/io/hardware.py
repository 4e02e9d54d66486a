"""Devices from files: YAML loading with validation (to :class:`DeviceSpec`, SI units), the
catalog's names, and the catalog device a driver's GPU name stands for."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ridgeline.engine.collectives import MODELS
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.units import DTYPE_BITS, GIB, GIGA, KIB, MIB, TERA
from ridgeline.errors import InvalidSpecError, UnknownDeviceError
from ridgeline.io.catalog import HARDWARE_DIR, list_names, looks_like_path
from ridgeline.io.files import read_yaml

KINDS = ("gpu", "cpu", "accelerator")
TOPOLOGIES = ("switch", "mesh")
REQUIRED = ("name", "vendor", "kind", "memory_capacity_gib", "memory_bandwidth_gb_s", "matrix_peak_tops", "sources")


def _number(raw: Mapping[str, Any], key: str, where: str, required: bool = True) -> float | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise InvalidSpecError(where, f"missing '{key}'")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidSpecError(where, f"'{key}' must be a positive number, got {value!r}")
    return float(value)


def _optional(raw: Mapping[str, Any], key: str, where: str) -> float:
    """A positive number when present, 0 when absent or null."""
    return 0.0 if raw.get(key) in (None, 0) else _number(raw, key, where)


def _peaks(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, float]:
    table = raw.get(key) or {}
    if not isinstance(table, Mapping):
        raise InvalidSpecError(where, f"'{key}' must map data types to tera-ops/s")
    unknown = sorted(set(table) - set(DTYPE_BITS))
    if unknown:
        raise InvalidSpecError(where, f"'{key}' has unknown data types {unknown}; known: {', '.join(DTYPE_BITS)}")
    return MappingProxyType({d: _number(table, d, f"{where} {key}") * TERA for d in table})


def _whole(raw: Mapping[str, Any], key: str, where: str) -> int:
    """An optional count (0 when absent): a positive whole number."""
    value = _optional(raw, key, where)
    if value != int(value):
        raise InvalidSpecError(where, f"'{key}' must be a whole number, got {value:g}")
    return int(value)


def device_from_dict(raw: Mapping[str, Any], where: str = "device") -> DeviceSpec:
    """Validate a parsed YAML mapping and convert it to SI units."""
    if not isinstance(raw, Mapping):
        raise InvalidSpecError(where, "expected a mapping of fields at the top level")
    for key in REQUIRED:
        if key not in raw:
            raise InvalidSpecError(where, f"missing '{key}' (required: {', '.join(REQUIRED)})")
    if raw["kind"] not in KINDS:
        raise InvalidSpecError(where, f"'kind' must be one of {KINDS}, got {raw['kind']!r}")
    matrix = _peaks(raw, "matrix_peak_tops", where)
    if not matrix:
        raise InvalidSpecError(where, "'matrix_peak_tops' needs at least one data type")
    sources = raw["sources"]
    if not isinstance(sources, list) or not sources:
        raise InvalidSpecError(where, "'sources' must be a non-empty list of URLs")
    derived = tuple(str(d) for d in raw.get("derived_rates") or ())
    if set(derived) - set(matrix):
        unknown = ", ".join(sorted(set(derived) - set(matrix)))
        raise InvalidSpecError(where, f"'derived_rates' names {unknown}, not in 'matrix_peak_tops'")
    latency = _number(raw, "interconnect_latency_us", where, required=False)
    link_bw = _number(raw, "interconnect_bandwidth_gb_s", where, required=False)
    per_link = _number(raw, "interconnect_link_gb_s", where, required=False)
    topology = raw.get("interconnect_topology") or "switch"
    if topology not in TOPOLOGIES:
        raise InvalidSpecError(where, f"'interconnect_topology' must be one of {TOPOLOGIES}, got {topology!r}")
    if topology == "mesh" and not (per_link and link_bw):
        raise InvalidSpecError(
            where,
            "a mesh interconnect needs 'interconnect_link_gb_s' (per peer "
            "link) and 'interconnect_bandwidth_gb_s' (all links)",
        )
    nccl_bus = _number(raw, "nccl_bus_bandwidth_gb_s", where, required=False)
    nccl_ll = _number(raw, "nccl_ll_max_gb_s", where, required=False)
    collectives = str(raw.get("collective_model") or "")
    if collectives and collectives not in MODELS:
        raise InvalidSpecError(where, f"'collective_model' must be one of {tuple(MODELS)}, got {collectives!r}")
    exp_rate = _number(raw, "exp_rate_tera_s", where, required=False)
    reserve = _optional(raw, "runtime_reserve_gib", where)
    capacity = _number(raw, "memory_capacity_gib", where)
    if reserve >= capacity:
        raise InvalidSpecError(
            where, f"'runtime_reserve_gib' ({reserve:g}) must be below 'memory_capacity_gib' ({capacity:g})"
        )
    units, domain = _whole(raw, "compute_units", where), _whole(raw, "interconnect_domain_devices", where)
    return DeviceSpec(
        name=str(raw["name"]),
        full_name=str(raw.get("full_name", raw["name"])),
        vendor=str(raw["vendor"]),
        kind=raw["kind"],
        memory_capacity=capacity * GIB,
        memory_bandwidth=_number(raw, "memory_bandwidth_gb_s", where) * GIGA,
        matrix_peak=matrix,
        vector_peak=_peaks(raw, "vector_peak_tops", where),
        compute_units=units,
        l1_bytes_per_unit=_optional(raw, "l1_kib_per_unit", where) * KIB,
        l2_bytes=_optional(raw, "l2_cache_mib", where) * MIB,
        interconnect=raw.get("interconnect"),
        interconnect_bandwidth=link_bw * GIGA if link_bw else None,
        interconnect_latency=latency * 1e-6 if latency else None,
        interconnect_topology=topology,
        interconnect_link_bandwidth=per_link * GIGA if topology == "mesh" else None,
        interconnect_domain=domain,
        collective_model=collectives,
        nccl_bus_bandwidth=nccl_bus * GIGA if nccl_bus else None,
        nccl_ll_max=nccl_ll * GIGA if nccl_ll else None,
        exp_rate=exp_rate * TERA if exp_rate else None,
        runtime_reserve=reserve * GIB,
        sources=tuple(str(s) for s in sources),
        notes=str(raw.get("notes") or ""),
        derived_rates=derived,
        architecture=str(raw.get("architecture") or ""),
        driver_names=tuple(str(n) for n in raw.get("driver_names") or ()),
    )


def device_to_dict(device: DeviceSpec) -> dict[str, Any]:
    """A device as the fields of its YAML file (what ``device_from_dict`` reads back):
    profiles and result files record the datasheet they were predicted with."""

    def tops(peaks: Mapping[str, float]) -> dict[str, float]:
        return {k: v / TERA for k, v in peaks.items()}

    out: dict[str, Any] = {
        "name": device.name,
        "full_name": device.full_name,
        "vendor": device.vendor,
        "kind": device.kind,
        "memory_capacity_gib": device.memory_capacity / GIB,
        "memory_bandwidth_gb_s": device.memory_bandwidth / GIGA,
        "matrix_peak_tops": tops(device.matrix_peak),
        "vector_peak_tops": tops(device.vector_peak),
        "compute_units": device.compute_units,
        "l1_kib_per_unit": device.l1_bytes_per_unit / KIB,
        "l2_cache_mib": device.l2_bytes / MIB,
        "interconnect": device.interconnect,
        "sources": list(device.sources),
        "architecture": device.architecture,
    }
    if device.derived_rates:
        out["derived_rates"] = list(device.derived_rates)
    if device.interconnect_bandwidth:
        out["interconnect_bandwidth_gb_s"] = device.interconnect_bandwidth / GIGA
    if device.interconnect_latency:
        out["interconnect_latency_us"] = device.interconnect_latency * 1e6
    if device.interconnect_topology == "mesh":
        out["interconnect_topology"] = "mesh"
        out["interconnect_link_gb_s"] = device.interconnect_link_bandwidth / GIGA
    if device.interconnect_domain:
        out["interconnect_domain_devices"] = device.interconnect_domain
    if device.collective_model:
        out["collective_model"] = device.collective_model
    for key, value in (
        ("nccl_bus_bandwidth_gb_s", device.nccl_bus_bandwidth),
        ("nccl_ll_max_gb_s", device.nccl_ll_max),
    ):
        if value:
            out[key] = value / GIGA
    if device.exp_rate:
        out["exp_rate_tera_s"] = device.exp_rate / TERA
    if device.runtime_reserve:
        out["runtime_reserve_gib"] = device.runtime_reserve / GIB
    return out


def list_devices() -> list[str]:
    return list_names(HARDWARE_DIR, ".yaml")


def load_catalog_device(name: str | DeviceSpec) -> DeviceSpec:
    """A catalog name (``h100-sxm``) or a path to a device YAML file (``host`` is
    :func:`ridgeline.io.resolve.load_device`'s: it detects this machine)."""
    if isinstance(name, DeviceSpec):
        return name
    if looks_like_path(name):
        path = Path(name)
        if not path.exists():
            raise InvalidSpecError(name, "no such device file")
        return device_from_dict(read_yaml(path), str(path))
    path = HARDWARE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownDeviceError(name, list_devices() + ["host"])
    return _catalog_device(path, path.stat().st_mtime_ns)


@lru_cache(maxsize=128)
def _catalog_device(path: Path, version: int) -> DeviceSpec:
    """A catalog device, read once per version of its file (a command resolves its device,
    then the spec interval's pool names the measured ones again)."""
    return device_from_dict(read_yaml(path), f"hardware/{path.stem}.yaml")


@lru_cache(maxsize=1)
def _driver_patterns() -> tuple[tuple[str, str], ...]:
    """(substring of a driver's name, catalog name), longest substring first: 'H100 PCIe'
    before 'H100', 'GH200' before 'H200', 'L40S' before 'L4', 'A100' before 'A10'."""
    pairs = [(pattern, name) for name in list_devices() for pattern in load_catalog_device(name).driver_names]
    return tuple(sorted(pairs, key=lambda pair: -len(pair[0])))


def catalog_name_for_gpu(driver_name: str) -> str | None:
    """The catalog device whose ``driver_names`` match what a driver reports; None if none."""
    for pattern, name in _driver_patterns():
        if pattern in driver_name:
            return name
    return None
