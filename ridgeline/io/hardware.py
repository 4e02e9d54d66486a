"""Devices: the ``DeviceSpec`` record, YAML loading with validation, and ``host`` detection."""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ridgeline.engine.units import DTYPE_BITS, GIB, GIGA, KIB, MIB, TERA
from ridgeline.errors import InvalidSpecError, UnknownDeviceError, UnsupportedDtypeError
from ridgeline.io.catalog import HARDWARE_DIR, list_names, looks_like_path
from ridgeline.io.files import read_yaml

KINDS = ("gpu", "cpu", "accelerator")
TOPOLOGIES = ("switch", "mesh")
REQUIRED = ("name", "vendor", "kind", "memory_capacity_gib", "memory_bandwidth_gb_s", "matrix_peak_tops", "sources")


@dataclass(frozen=True)
class DeviceSpec:
    """One device. Peaks are dense (no structured-sparsity doubling), in SI units."""

    name: str
    full_name: str
    vendor: str
    kind: str  # gpu | cpu | accelerator
    memory_capacity: float  # bytes
    memory_bandwidth: float  # bytes/s, datasheet peak
    matrix_peak: Mapping[str, float]  # ops/s per data type, matrix units
    vector_peak: Mapping[str, float]  # ops/s per data type, element-wise units
    compute_units: int = 0  # SMs / CUs / cores
    l1_bytes_per_unit: float = 0.0  # shared memory / L1 per unit
    l2_bytes: float = 0.0  # L2 (GPU) or last-level cache (CPU)
    interconnect: str | None = None
    interconnect_bandwidth: float | None = None  # bytes/s per direction per device
    interconnect_latency: float | None = None  # seconds per hop
    interconnect_topology: str = "switch"  # switch (every pair at full bandwidth) | mesh
    interconnect_link_bandwidth: float | None = None  # mesh: bytes/s per direction per peer link
    exp_rate: float | None = None  # exponentials/s on the special-function units
    runtime_reserve: float = 0.0  # bytes the runtime holds (CUDA context, workspaces)
    sources: tuple[str, ...] = ()
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    architecture: str = ""  # chip family: a profile transfers only within one
    driver_names: tuple[str, ...] = ()  # substrings of the name the driver reports

    @property
    def on_chip_bytes(self) -> float:
        """Total fast on-chip memory a tiled kernel can hold (sum of per-unit L1/shared)."""
        return self.l1_bytes_per_unit * max(self.compute_units, 1)

    def matrix_peak_for(self, dtype: str) -> float:
        if dtype not in self.matrix_peak:
            raise UnsupportedDtypeError(dtype, self.name, sorted(self.matrix_peak))
        return self.matrix_peak[dtype]

    def vector_peak_for(self, dtype: str) -> float:
        """Element-wise peak; types without their own vector rate run at the fp32 rate."""
        if dtype in self.vector_peak:
            return self.vector_peak[dtype]
        if "fp32" in self.vector_peak:
            return self.vector_peak["fp32"]
        return min(self.matrix_peak.values())


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
    exp_rate = _number(raw, "exp_rate_tera_s", where, required=False)
    reserve = _optional(raw, "runtime_reserve_gib", where)
    return DeviceSpec(
        name=str(raw["name"]),
        full_name=str(raw.get("full_name", raw["name"])),
        vendor=str(raw["vendor"]),
        kind=raw["kind"],
        memory_capacity=_number(raw, "memory_capacity_gib", where) * GIB,
        memory_bandwidth=_number(raw, "memory_bandwidth_gb_s", where) * GIGA,
        matrix_peak=matrix,
        vector_peak=_peaks(raw, "vector_peak_tops", where),
        compute_units=int(_optional(raw, "compute_units", where)),
        l1_bytes_per_unit=_optional(raw, "l1_kib_per_unit", where) * KIB,
        l2_bytes=_optional(raw, "l2_cache_mib", where) * MIB,
        interconnect=raw.get("interconnect"),
        interconnect_bandwidth=link_bw * GIGA if link_bw else None,
        interconnect_latency=latency * 1e-6 if latency else None,
        interconnect_topology=topology,
        interconnect_link_bandwidth=per_link * GIGA if topology == "mesh" else None,
        exp_rate=exp_rate * TERA if exp_rate else None,
        runtime_reserve=reserve * GIB,
        sources=tuple(str(s) for s in sources),
        notes=str(raw.get("notes") or ""),
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
    if device.interconnect_bandwidth:
        out["interconnect_bandwidth_gb_s"] = device.interconnect_bandwidth / GIGA
    if device.interconnect_latency:
        out["interconnect_latency_us"] = device.interconnect_latency * 1e6
    if device.interconnect_topology == "mesh":
        out["interconnect_topology"] = "mesh"
        out["interconnect_link_gb_s"] = device.interconnect_link_bandwidth / GIGA
    if device.exp_rate:
        out["exp_rate_tera_s"] = device.exp_rate / TERA
    if device.runtime_reserve:
        out["runtime_reserve_gib"] = device.runtime_reserve / GIB
    return out


def list_devices() -> list[str]:
    return list_names(HARDWARE_DIR, ".yaml")


def load_device(name: str) -> DeviceSpec:
    """A catalog name (``h100-sxm``), ``host``, or a path to a device YAML file."""
    if isinstance(name, DeviceSpec):
        return name
    if name == "host":
        return detect_host()
    if looks_like_path(name):
        path = Path(name)
        if not path.exists():
            raise InvalidSpecError(name, "no such device file")
        return device_from_dict(read_yaml(path), str(path))
    path = HARDWARE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownDeviceError(name, list_devices() + ["host"])
    return device_from_dict(read_yaml(path), f"hardware/{name}.yaml")


# --- host detection -------------------------------------------------------------------


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def _max_clock_hz(info: Mapping[str, str]) -> float:
    try:
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        return float(khz) * 1e3
    except (OSError, ValueError):
        return float(info.get("cpu MHz", 2000.0)) * 1e6


def cpu_flops_per_cycle(flags: set[str], vendor: str, family: int = 0) -> dict[str, float]:
    """Dense ops per cycle per core for each data type the SIMD units run natively.

    fp32: 2 FMA pipes x lanes x 2 ops. AVX-512 on AMD Zen 4 (family 25) runs on 256-bit
    pipes (double-pumped), so it keeps AVX2's width; Zen 5 (family 26) and Intel server
    cores have two full 512-bit pipes.
    bf16 (VDPBF16PS) and fp16 (AVX512-FP16) double the fp32 rate, int8 VNNI quadruples it;
    AMX tiles give 1024 bf16 and 2048 int8 ops per cycle (Intel's optimisation manual).
    """
    wide = "avx512f" in flags and (vendor != "AuthenticAMD" or family >= 26)
    lanes = 16 if wide else (8 if "avx2" in flags or "avx" in flags else 4)
    fp32 = 2 * lanes * 2 if "fma" in flags or "avx2" in flags else lanes * 2
    rates = {"fp32": float(fp32)}
    if "avx512_bf16" in flags:
        rates["bf16"] = 2.0 * fp32
    if "avx512_fp16" in flags:
        rates["fp16"] = 2.0 * fp32
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        rates["int8"] = 4.0 * fp32
    if "amx_bf16" in flags:
        rates["bf16"] = 1024.0
    if "amx_int8" in flags:
        rates["int8"] = 2048.0
    return rates


def measure_copy_bandwidth(mib: int = 256, repeats: int = 5) -> float:
    """Host memory bandwidth from a large numpy copy (bytes read + written), median of repeats."""
    import time

    import numpy as np

    src = np.ones(mib * MIB // 8)
    dst = np.empty_like(src)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return 2 * src.nbytes / float(np.median(times))


def _physical_cores(cpus: set[int] | None = None, root: Path = Path("/sys/devices/system/cpu")) -> int:
    """Physical cores among the CPUs this process may run on: SMT siblings share a
    (package, core) pair in sysfs topology, and share that core's SIMD units, so they are
    counted once. Falls back to the logical count when sysfs has no topology."""
    if cpus is None:
        try:
            cpus = os.sched_getaffinity(0)
        except AttributeError:  # pragma: no cover - non-Linux
            return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        try:
            topo = root / f"cpu{cpu}" / "topology"
            cores.add(((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip()))
        except OSError:
            return len(cpus)
    return len(cores) or len(cpus)


def _nvidia_host() -> DeviceSpec | None:
    """The first NVIDIA GPU via pynvml, matched to the catalog by name; None when absent."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        gpu = pynvml.nvmlDeviceGetName(handle)
        gpu = gpu.decode() if isinstance(gpu, bytes) else gpu
        total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
    except Exception:  # noqa: BLE001 - no driver, no device: the host is a CPU
        return None
    from dataclasses import replace

    from ridgeline.io.names import catalog_name_for_gpu

    match = catalog_name_for_gpu(gpu)
    if match is None:
        return None
    return replace(
        load_device(match),
        name="host",
        full_name=f"{gpu} (host, as {match})",
        memory_capacity=float(total),
        extra={"catalog": match},
    )


_HOSTS: dict[tuple, DeviceSpec] = {}  # this process's detections, by fingerprint


def detect_host(measure: bool = True, *, gpu: bool = True, refresh: bool = False) -> DeviceSpec:
    """The machine ridgeline runs on: an NVIDIA GPU when pynvml sees one (``gpu=False``
    skips the probe and describes the CPU), else the CPU.

    The CPU's bandwidth is a copy measured once per machine: the result is kept for this
    process and on disk (``host_cache_path``, with its date and version), so ``host`` gives
    the same numbers run after run; ``refresh`` measures again. ``measure=False`` skips the
    copy (a 10 GB/s placeholder) and the cache."""
    found = _nvidia_host() if gpu else None
    if found is not None:
        return found
    info = _cpuinfo()
    if not measure:
        return _cpu_host(info, 10 * GIGA, "bandwidth: a 10 GB/s placeholder (not measured)")
    key = _fingerprint(info)
    if refresh or key not in _HOSTS:
        cached = None if refresh else _read_host_cache(key)
        _HOSTS[key] = cached or _write_host_cache(
            key, _cpu_host(info, measure_copy_bandwidth(), "bandwidth: numpy copy (read + write), median of 5")
        )
    return _HOSTS[key]


def _cpu_host(info: Mapping[str, str], bandwidth: float, how: str) -> DeviceSpec:
    flags = set(info.get("flags", "").split())
    vendor = info.get("vendor_id", platform.processor() or "unknown")
    cores = _physical_cores()
    clock = _max_clock_hz(info)
    per_cycle = cpu_flops_per_cycle(flags, vendor, int(info.get("cpu family", 0) or 0))
    peaks = {dtype: rate * cores * clock for dtype, rate in per_cycle.items()}
    try:
        total_mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        total_mem = 8 * GIB
    return DeviceSpec(
        name="host",
        full_name=f"{cpu_name(info)} ({cores} cores)",
        vendor=vendor,
        kind="cpu",
        memory_capacity=float(total_mem),
        memory_bandwidth=bandwidth,
        matrix_peak=MappingProxyType(peaks),
        vector_peak=MappingProxyType({"fp32": peaks["fp32"]}),
        compute_units=cores,
        l2_bytes=_llc_bytes(),
        sources=(f"detected: /proc/cpuinfo flags x cores x max clock; {how}",),
        extra={
            "clock_hz": clock,
            "flags_used": sorted(set(per_cycle)),
            "cpu": cpu_name(info),
            "cpu_signature": cpu_signature(info),
        },
    )


def cpu_name(info: Mapping[str, str] | None = None) -> str:
    """The CPU's marketing name ('AMD EPYC 9J14 96-Core Processor')."""
    info = _cpuinfo() if info is None else info
    return info.get("model name") or platform.processor() or platform.machine()


# The vector extensions PyTorch's CPU kernels (oneDNN, its own) dispatch on: two CPUs that
# differ in any of them run other kernels (bf16 matmul is ~90x slower without avx512_bf16).
KERNEL_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "avx_vnni",
    "amx_bf16",
    "amx_int8",
)


def cpu_signature(info: Mapping[str, str] | None = None) -> str:
    """What decides which kernels a CPU runs and how fast: vendor, family/model and the
    vector extensions of KERNEL_FLAGS ('AuthenticAMD 25/1: avx2 fma'). A VM may show two
    different CPUs under one marketing name ('AMD EPYC'); their signatures differ."""
    info = _cpuinfo() if info is None else info
    flags = set(info.get("flags", "").split())
    isa = " ".join(f for f in KERNEL_FLAGS if f in flags) or "no vector extensions"
    return f"{info.get('vendor_id', 'unknown')} {info.get('cpu family', '?')}/{info.get('model', '?')}: {isa}"


def cpu_key_name(info: Mapping[str, str] | None = None) -> str:
    """The name a measured CPU's files are keyed by: its marketing name and family/model
    ('AMD EPYC f25m1'), so that two CPUs a VM shows under one name keep apart."""
    info = _cpuinfo() if info is None else info
    return f"{cpu_name(info)} f{info.get('cpu family', '?')}m{info.get('model', '?')}"


def _fingerprint(info: Mapping[str, str]) -> tuple:
    """What the detected figures depend on: the CPU, its flags, the cores this process may
    use, the clock and the memory size. A change of any of them is another host."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        pages = 0
    return (platform.node(), cpu_name(info), info.get("flags", ""), _physical_cores(), _max_clock_hz(info), pages)


def host_cache_path(key: tuple | None = None) -> Path:
    """The on-disk record of this machine's detected host."""
    import hashlib

    from ridgeline.io.catalog import user_cache_dir

    key = _fingerprint(_cpuinfo()) if key is None else key
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    return user_cache_dir() / f"host-{digest}.json"


def _read_host_cache(key: tuple) -> DeviceSpec | None:
    import json

    try:
        raw = json.loads(host_cache_path(key).read_text())
        if raw.get("fingerprint") != repr(key):
            return None
        if "cpu_signature" not in (raw.get("extra") or {}):
            return None  # written before signatures were recorded: detect again
        device = device_from_dict(raw["device"], "host cache")
        return _replace_extra(device, raw["extra"])
    except (OSError, ValueError, KeyError, TypeError, InvalidSpecError):
        return None  # no cache, or one written by another version: detect again


def _write_host_cache(key: tuple, device: DeviceSpec) -> DeviceSpec:
    """Record the detection (with its date and version) and return the device as it will
    be read back, so the first run and every later one give the same numbers."""
    import datetime as _dt
    import json

    from ridgeline import __version__
    from ridgeline.io.files import write_atomic

    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    path = host_cache_path(key)
    sources = (
        *device.sources,
        f"detected {date} by ridgeline {__version__}; kept in {path} "
        "('ridgeline hardware show host --refresh' measures again)",
    )
    from dataclasses import replace

    device = replace(device, sources=sources)
    record = {
        "fingerprint": repr(key),
        "detected": date,
        "ridgeline": __version__,
        "device": device_to_dict(device),
        "extra": dict(device.extra),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record, indent=1) + "\n")
    except OSError:
        pass  # a read-only home: this process keeps its detection, the next one measures again
    return _replace_extra(device_from_dict(record["device"], "host cache"), record["extra"])


def _replace_extra(device: DeviceSpec, extra: Mapping[str, Any]) -> DeviceSpec:
    from dataclasses import replace

    return replace(device, extra=dict(extra))


def _llc_bytes() -> float:
    for index in (3, 2):
        path = Path(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size")
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        scale = {"K": KIB, "M": MIB}.get(text[-1], 1)
        return float(text.rstrip("KM")) * scale
    return 0.0
