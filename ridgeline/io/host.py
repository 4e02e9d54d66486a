"""``host``: the machine ridgeline runs on, detected (an NVIDIA GPU via pynvml, else the CPU
from /proc/cpuinfo and sysfs), with the CPU's bandwidth measured once and kept on disk."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.units import GIB, GIGA, KIB, MIB
from ridgeline.errors import InvalidSpecError
from ridgeline.io.catalog import user_cache_dir
from ridgeline.io.files import write_atomic
from ridgeline.io.hardware import catalog_name_for_gpu, device_from_dict, device_to_dict, load_catalog_device
from ridgeline.version import __version__


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
    match = catalog_name_for_gpu(gpu)
    if match is None:
        return None
    return replace(
        load_catalog_device(match),
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
    caches = cache_sizes()
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
        l1_bytes_per_unit=l1_data_bytes(caches),
        l2_bytes=llc_bytes(caches),
        sources=(f"detected: /proc/cpuinfo flags x cores x max clock; caches: sysfs; {how}",),
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
    use, the clock, the memory size and the caches. A change of any of them is another host
    (a record written before the caches were read is too)."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        pages = 0
    cpu = (cpu_name(info), info.get("flags", ""), _physical_cores(), _max_clock_hz(info))
    return (platform.node(), *cpu, pages, tuple(sorted(cache_sizes().items())))


def host_cache_path(key: tuple | None = None) -> Path:
    """The on-disk record of this machine's detected host."""
    key = _fingerprint(_cpuinfo()) if key is None else key
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    return user_cache_dir() / f"host-{digest}.json"


def _read_host_cache(key: tuple) -> DeviceSpec | None:
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
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    path = host_cache_path(key)
    sources = (
        *device.sources,
        f"detected {date} by ridgeline {__version__}; kept in {path} "
        "('ridgeline hardware show host --refresh' measures again)",
    )
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
    return replace(device, extra=dict(extra))


CPU_SYSFS = Path("/sys/devices/system/cpu")
SIZE_UNITS = {"K": KIB, "M": MIB, "G": GIB}


def cache_size_bytes(text: str) -> float | None:
    """A sysfs cache size ('32K', '1024K', '1M', a bare byte count) in bytes; None when
    it is not one."""
    text = text.strip().upper().removesuffix("B")
    scale = SIZE_UNITS.get(text[-1:], 1)
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        return None
    return value if 0 < value < math.inf else None


def cache_sizes(root: Path | None = None) -> dict[tuple[int, str], float]:
    """The caches of CPU 0 by (level, type: 'Data', 'Instruction', 'Unified'), in bytes,
    from sysfs (``cpu0/cache/index*/{level,type,size}``); a cache whose files are missing
    or malformed is left out."""
    root = CPU_SYSFS / "cpu0" / "cache" if root is None else root
    found = {}
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = cache_size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if size is not None:
            found[(level, kind)] = size
    return found


def l1_data_bytes(caches: Mapping[tuple[int, str], float] | None = None) -> float:
    """One core's L1 data cache in bytes (a unified L1 where there is no data cache); 0
    when sysfs does not say."""
    caches = cache_sizes() if caches is None else caches
    return caches.get((1, "Data"), caches.get((1, "Unified"), 0.0))


def llc_bytes(caches: Mapping[tuple[int, str], float] | None = None) -> float:
    """The last-level cache of this CPU in bytes (the highest level's data or unified
    cache in sysfs); 0 when unknown."""
    caches = cache_sizes() if caches is None else caches
    shared = [(level, size) for (level, kind), size in caches.items() if kind != "Instruction" and level > 1]
    return max(shared)[1] if shared else 0.0
