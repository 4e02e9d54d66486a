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
    size_curves: {norm:attn_norm@bf16: {bytes: [8960, ...], fraction: [0.02, ...]}}
                                  # element-wise classes: fraction of the bound by bytes
                                  # (softmax:...>1024: rows longer than 1024 columns)
    attention_tables: {attention:sdpa_gqa@bf16: {decode: {axes: [rows, context, head_dim],
                       knots: [[1, 4, 8], [64, ...], [128]], fraction: [[[0.1], ...], ...]}}}
                                  # attention classes: fraction of the bound on a grid
    first_touch_gb_s: 3.6                                 # CPU: fresh pages faulted in, bytes/s
    mmap_threshold_bytes: 33554432                        # allocations mapped fresh from here
    row_tail_ns: {softmax:softmax@bf16: [0.0, 9.1, ...]}  # CPU softmax: ns per row at each
                                  # remainder of its columns mod 32 (the vector loop's tail)

How its kernels were timed is its ``timing`` (``ridgeline.engine.roofline.TIMINGS``): ``device``
(CUDA-graph replay or profiler kernel durations), ``eager`` (CUDA events around eager calls:
each time holds the host's dispatch), ``cpu`` (a CPU timer). A profile that does not write it
has it derived from the methods its measurements record (``timing_of``); one with neither
is refused.

A profile measured from the device's side (``timing: device``) also keeps the host apart:

    launch_gap_us: 1.2                                    # device idle between kernels in a graph
    host_us: {eager: {default: 9.0, rope: 60.0}, compiled: {default: 4.0}}  # dispatch per call
    kernels_per_op: {eager: {rope: 12, attention: 3}, compiled: {default: 0.6}}

(keys: engine op names such as ``rope``, fused SDPA as ``attention``, then ``default``: an
op the table does not name takes ``default``, never another op's, and the answer names it;
``ridgeline.engine.basis``), and the
engine composes them per execution mode (``ridgeline.engine.roofline.composed_time``).

Types the profile did not measure keep their datasheet peak. A type it measured no classes
of is priced with the classes of a measured type of the same datasheet rate, width and kind
(fp16 with bf16's on Hopper: ``dtype_stand_ins``), and refused where there is none.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.intervals import IntervalTable
from ridgeline.engine.roofline import (
    ATTENTION_AXES,
    ROW_TAIL_PERIOD,
    Ceilings,
    Curve,
    GridTable,
    RowTable,
    device_links,
    nearest_dtypes,
)
from ridgeline.engine.units import GIGA, TERA
from ridgeline.errors import InvalidSpecError, ProfileMismatchError, RidgelineError
from ridgeline.io.catalog import PROFILES_DIR, REPORTS_DIR, user_data_dir
from ridgeline.io.files import read_json, read_yaml
from ridgeline.io.hardware import device_from_dict, load_catalog_device


def profile_dirs() -> tuple[Path, Path]:
    """Where profiles are looked up by device key: the user's own (what 'ridgeline
    calibrate' writes by default), then the committed baselines in reports/profiles."""
    return user_data_dir() / "profiles", PROFILES_DIR


def profile_path(device: str) -> Path:
    """The profile of a device key: the user's when there is one, else the committed one;
    a key with neither names the user's (the path calibrate would write)."""
    paths = [folder / f"{device}.yaml" for folder in profile_dirs()]
    return next((p for p in paths if p.is_file()), paths[0])


def list_profiles() -> list[str]:
    """Device keys with a profile in either folder."""
    return sorted({p.stem for folder in profile_dirs() if folder.is_dir() for p in folder.glob("*.yaml")})


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
    if not path.exists():
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
    measured_peak = _positive_table(profile, "matrix_peak_tops", where, TERA)
    peak_as = scaled_peak_types(measured_peak, device)
    matrix = dict(device.matrix_peak)
    matrix.update({d: measured_peak[m] * device.matrix_peak[d] / device.matrix_peak[m] for d, m in peak_as.items()})
    matrix.update(measured_peak)
    vector = dict(device.vector_peak)
    vector.update(_positive_table(profile, "vector_peak_tops", where, TERA))
    efficiency = {
        kind: MappingProxyType({k: float(v) for k, v in terms.items()})
        for kind, terms in (profile.get("efficiency") or {}).items()
    }
    overhead = {kind: float(us) * 1e-6 for kind, us in (profile.get("overhead_us") or {}).items()}
    measured = measured_dtypes(profile)
    return Ceilings(
        "calibrated",
        float(profile["bandwidth_gb_s"]) * GIGA,
        MappingProxyType(matrix),
        MappingProxyType(vector),
        MappingProxyType(efficiency),
        MappingProxyType(overhead),
        device=device.name,
        **device_links(device),
        exp_rate=device.exp_rate,
        row_curves=MappingProxyType(
            {k: _row_table(v, f"{where}: row_curves.{k}") for k, v in (profile.get("row_curves") or {}).items()}
        ),
        attention_tables=_attention_tables(profile.get("attention_tables"), where),
        **size_and_first_touch(profile, where),
        **execution_tables(profile, where),
        timing=timing_of(profile, where),
        measured_dtypes=measured,
        dtype_as=MappingProxyType(dtype_stand_ins(measured, device)),
        measured_peaks=frozenset(profile.get("matrix_peak_tops") or ()),
        peak_as=MappingProxyType(peak_as),
    )


def scaled_peak_types(measured: Mapping[str, float], device: DeviceSpec) -> dict[str, str]:
    """For each datasheet matrix type the profile measured no peak of, the nearest type it
    did (``nearest_dtypes``): its peak is that measured peak times the datasheet's ratio of
    the two, never the bare datasheet figure beside measured ones."""
    known = [m for m in measured if device.matrix_peak.get(m)]
    if not known:
        return {}
    return {d: nearest_dtypes(d, known)[0] for d in device.matrix_peak if d not in measured}


METHOD_TIMING = {"cuda_events": "eager", "cuda_graph": "device", "profiler": "device", "torch.utils.benchmark": "cpu"}


def _methods(node: Any) -> set[str]:
    """Every ``method`` a profile's measurements record (copy, GEMMs, dispatch ...)."""
    if isinstance(node, Mapping):
        found = {str(node["method"])} if isinstance(node.get("method"), str) else set()
        return found.union(*(_methods(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_methods(v) for v in node))
    return set()


def timing_of(profile: Mapping[str, Any], where: str = "profile") -> str:
    """How a profile's kernels were timed (a key of ``roofline.TIMINGS``): its ``timing``;
    else from its measurements' methods (any CUDA events around eager calls: ``eager``, as
    every GPU profile measured before device timing; graph replay or profiler: ``device``;
    a CPU timer: ``cpu``); else a CPU's profile is ``cpu`` and one with host terms apart
    (which only device timing measures) ``device``. None of these: refused."""
    from ridgeline.engine.roofline import TIMINGS

    given = profile.get("timing")
    if given is not None:
        if given not in TIMINGS:
            raise InvalidSpecError(where, f"'timing' must be one of {', '.join(TIMINGS)}, got {given!r}")
        return str(given)
    found = {METHOD_TIMING.get(m.split("/")[0]) for m in _methods(profile.get("measurements"))}
    for timing in ("eager", "device", "cpu"):
        if timing in found:
            return timing
    meta = profile.get("meta") or {}
    if meta.get("device_kind") == "cpu" or meta.get("spec_device") == "host":
        return "cpu"
    if profile.get("host_us") or profile.get("launch_gap_us"):
        return "device"
    raise InvalidSpecError(
        where,
        "does not say how its kernels were timed (no 'timing' and no "
        "measurement methods); add timing: device, eager or cpu",
    )


def measured_dtypes(profile: Mapping[str, Any]) -> frozenset:
    """The data types a profile measured classes of: the '@type' of its class keys."""
    keys = [
        k for table in ("efficiency", "overhead_us", "row_curves", "size_curves") for k in (profile.get(table) or {})
    ]
    return frozenset(str(k).rsplit("@", 1)[1] for k in keys if "@" in str(k))


def dtype_stand_ins(measured: frozenset, device: DeviceSpec) -> dict[str, str]:
    """For each datasheet type the profile measured no classes of, the measured type with
    the same matrix rate on ``device``'s datasheet, the same width and the same kind (float
    or integer): fp16 -> bf16 on Hopper, where both run at one rate."""
    from ridgeline.engine.units import DTYPE_BITS, FLOAT_DTYPES

    def rates(dtype: str) -> tuple:
        return (device.matrix_peak.get(dtype), DTYPE_BITS.get(dtype), dtype in FLOAT_DTYPES)

    out = {}
    for dtype in sorted(set(device.matrix_peak) - measured):
        same = [m for m in sorted(measured) if rates(m) == rates(dtype)]
        if same and DTYPE_BITS.get(dtype):
            out[dtype] = same[0]
    return out


def _attention_tables(raw: Any, where: str) -> Mapping[str, Mapping[str, GridTable]]:
    """{class: {decode|prefill: {axes, knots, fraction}}}: every axis of ``ATTENTION_AXES``
    with positive increasing knots, and a fraction in (0, 1] at every grid point."""
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        raise InvalidSpecError(where, "'attention_tables' must map a class to {decode, prefill}")
    out = {}
    for key, stages in raw.items():
        here = f"{where}: attention_tables.{key}"
        if not isinstance(stages, Mapping) or not stages or set(stages) - {"decode", "prefill"}:
            raise InvalidSpecError(here, "must map 'decode' and/or 'prefill' to a table")
        tables = {}
        for stage, table in stages.items():
            at = f"{here}.{stage}"
            axes, knots = (table or {}).get("axes"), (table or {}).get("knots")
            if axes != list(ATTENTION_AXES) or not isinstance(knots, list) or len(knots) != len(axes):
                raise InvalidSpecError(at, f"needs axes {list(ATTENTION_AXES)} and a list of knots per axis")
            for name, k in zip(axes, knots):
                if (
                    not isinstance(k, list)
                    or not k
                    or any(isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 for v in k)
                    or any(b <= a for a, b in zip(k, k[1:]))
                ):
                    raise InvalidSpecError(at, f"knots of '{name}' must be positive and increasing")
            try:
                values = np.asarray(table.get("fraction"), dtype=float)
            except (TypeError, ValueError):
                raise InvalidSpecError(at, "'fraction' must be a nested list of numbers") from None
            if values.shape != tuple(len(k) for k in knots):
                raise InvalidSpecError(
                    at, f"'fraction' has shape {values.shape}, the knots {tuple(len(k) for k in knots)}"
                )
            if not np.all((values > 0) & (values <= 1)):
                raise InvalidSpecError(at, "every 'fraction' must be in (0, 1]")
            tables[stage] = GridTable.of(axes, knots, values)
        out[str(key)] = MappingProxyType(tables)
    return MappingProxyType(out)


def size_and_first_touch(profile: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The element-wise size curves and a CPU's first-touch rate and mmap threshold
    (``Ceilings`` keywords; none in profiles measured before they were)."""
    curves = profile.get("size_curves") or {}
    if not isinstance(curves, Mapping):
        raise InvalidSpecError(where, "'size_curves' must map a class to {bytes, fraction}")
    out: dict[str, Any] = {
        "size_curves": MappingProxyType(
            {
                str(k): _curve(
                    v, f"{where}: size_curves.{k}", "bytes", "fraction", at_most=_cap(v, f"{where}: size_curves.{k}")
                )
                for k, v in curves.items()
            }
        )
    }
    out["row_tails"] = _row_tails(profile.get("row_tail_ns"), f"{where}: row_tail_ns")
    for key, name, scale in (
        ("first_touch_gb_s", "first_touch_rate", GIGA),
        ("mmap_threshold_bytes", "mmap_threshold", 1.0),
    ):
        value = profile.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InvalidSpecError(where, f"'{key}' must be a positive number, got {value!r}")
        out[name] = float(value) * scale
    return out


def _row_tails(raw: Any, where: str) -> Mapping[str, tuple[float, ...]]:
    """Per softmax class, its ns per row at each remainder of ``ROW_TAIL_PERIOD`` columns,
    as seconds."""
    if not isinstance(raw or {}, Mapping):
        raise InvalidSpecError(where, "must map a softmax class to its ns per row by remainder")
    out = {}
    for key, values in (raw or {}).items():
        numbers = values if isinstance(values, list) and len(values) == ROW_TAIL_PERIOD else None
        if numbers is None or not all(_finite_at_least_zero(v) for v in numbers):
            raise InvalidSpecError(
                f"{where}.{key}",
                f"needs {ROW_TAIL_PERIOD} numbers >= 0 (ns per row at remainders 0..{ROW_TAIL_PERIOD - 1})",
            )
        out[str(key)] = tuple(float(v) * 1e-9 for v in numbers)
    return MappingProxyType(out)


def _finite_at_least_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


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
        return {
            str(mode): MappingProxyType(_nonnegative_table(table, mode, f"{key}.{mode}", where, scale))
            for mode in table
        }

    return {
        "launch_gap_s": float(gap) * 1e-6,
        "host_s": MappingProxyType(per_mode("host_us", 1e-6)),
        "kernels": MappingProxyType(per_mode("kernels_per_op", 1.0)),
    }


def _nonnegative_table(raw: Mapping[str, Any], key: str, name: str, where: str, scale: float) -> dict[str, float]:
    table = raw.get(key) or {}
    if not isinstance(table, Mapping):
        raise InvalidSpecError(where, f"'{name}' must be a mapping")
    out = {}
    for op, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InvalidSpecError(where, f"'{name}.{op}' must be a number >= 0, got {value!r}")
        out[str(op)] = float(value) * scale
    return out


def measured_on(profile: Mapping[str, Any]) -> str:
    """The device a profile was measured on: a catalog name for a GPU ('h100-sxm'), or
    'host CPU <model>' for a CPU."""
    meta = profile.get("meta") or {}
    source = meta.get("spec_device")
    if source and source != "host":
        return str(source)
    return f"the CPU '{meta.get('cpu') or meta.get('device') or 'unknown'}' (host)"


def recorded_device(profile: Mapping[str, Any], where: str = "profile") -> DeviceSpec:
    """The datasheet device a profile was fitted against, from the profile alone (never
    the machine reading it): the ``datasheet`` block it records, else the catalog entry
    its meta names."""
    raw = profile.get("datasheet")
    if isinstance(raw, Mapping):  # a fit reads roofs only: the capacity may be unrecorded
        device = device_from_dict({"memory_capacity_gib": 1.0, **raw}, f"{where} datasheet")
        return device if "memory_capacity_gib" in raw else replace(device, memory_capacity=0.0)
    source = (profile.get("meta") or {}).get("spec_device")
    if not source or source == "host":
        raise InvalidSpecError(
            where,
            "records no datasheet device (a profile written before they were recorded); calibrate again to refit it",
        )
    return load_catalog_device(source)


def profile_ceilings(
    profile: Mapping[str, Any], device: DeviceSpec, *, transfer: bool = False, where: str = "profile"
) -> tuple[Ceilings, tuple[str, ...]]:
    """Ceilings of ``profile`` on ``device``, and notes worth a warning.

    A GPU profile applies to the catalog device it was measured on (or the detected host
    that is one). With ``transfer`` it applies to another GPU of the same architecture as
    the fractions it measured of its own datasheet roofs, on ``device``'s datasheet roofs
    (mode ``transferred``). A CPU profile applies to the detected host; one from another CPU
    model is noted. Anything else raises ProfileMismatchError."""
    meta = profile.get("meta") or {}
    source = meta.get("spec_device")
    if not source and meta.get("device_kind") != "cpu":
        raise InvalidSpecError(
            where,
            "does not say which device it was measured on (meta.spec_device: a catalog name, or 'host' for a CPU)",
        )
    if source and source != "host":
        target = device.extra.get("catalog") if device.name == "host" else device.name
        if target == source:
            return calibrated_ceilings(profile, device), ()
        measured = recorded_device(profile, where)
        same = bool(measured.architecture) and measured.architecture == device.architecture
        if transfer and same:
            return transferred_ceilings(profile, measured, device), ()
        why = "" if same else architectures_differ(measured, device)
        raise ProfileMismatchError(where, source, device.name, source, same, why)
    if device.kind != "cpu" or device.name != "host":
        raise ProfileMismatchError(where, measured_on(profile), device.name, "the host on that CPU", False)
    return calibrated_ceilings(profile, device), cpu_notes(meta, device, where)


def architectures_differ(measured: DeviceSpec, device: DeviceSpec) -> str:
    """Why a profile cannot transfer: a profile moves only within one architecture."""
    return f"architectures differ: {measured.architecture or 'none recorded'}, {device.architecture or 'none recorded'}"


def cpu_notes(meta: Mapping[str, Any], host: DeviceSpec, where: str) -> tuple[str, ...]:
    """Whether a CPU profile was measured on this host's CPU. Another signature (family,
    model or vector extensions: other kernels) is refused; another marketing name with the
    same signature, or a profile that records no signature, is noted."""
    cpu, here = meta.get("cpu") or meta.get("device"), host.extra.get("cpu")
    sig, here_sig = meta.get("cpu_signature"), host.extra.get("cpu_signature")
    if sig and here_sig and sig != here_sig:
        raise ProfileMismatchError(
            where, f"another CPU ('{cpu}', {sig}; this host's: {here_sig})", "this host", "the host on that CPU", False
        )
    if cpu and here and cpu != here:
        return (
            f"profile {where} was measured on the CPU '{cpu}', this host's is '{here}': its roofs may not hold here",
        )
    if not sig and here_sig:
        return (
            f"profile {where} records no CPU signature (calibrated before they were "
            f"recorded), so it cannot be checked against this host's ({here_sig}); "
            "calibrate again to be sure its roofs hold here",
        )
    return ()


def transferred_ceilings(profile: Mapping[str, Any], measured: DeviceSpec, device: DeviceSpec) -> Ceilings:
    """A profile moved to another device of one architecture: each measured roof as the
    fraction of ``measured``'s datasheet roof it reached, times ``device``'s datasheet
    roof; efficiencies and per-kernel overheads as measured. Types the target has no
    datasheet rate for are left out."""
    own = calibrated_ceilings(profile, measured)
    ratio = device.memory_bandwidth / measured.memory_bandwidth

    def moved(
        peaks: Mapping[str, float], datasheet_from: Mapping[str, float], datasheet_to: Mapping[str, float]
    ) -> dict[str, float]:
        out = dict(datasheet_to)
        for dtype, value in peaks.items():
            if dtype in datasheet_to and datasheet_from.get(dtype):
                out[dtype] = value / datasheet_from[dtype] * datasheet_to[dtype]
        return out

    return replace(
        own,
        mode="transferred",
        bandwidth=own.bandwidth * ratio,
        matrix_peak=MappingProxyType(moved(own.matrix_peak, measured.matrix_peak, device.matrix_peak)),
        vector_peak=MappingProxyType(moved(own.vector_peak, measured.vector_peak, device.vector_peak)),
        device=device.name,
        **device_links(device),
        exp_rate=device.exp_rate,
    )


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
    return RowTable(tuple(shapes), tuple(_curve(e, where, "rows", "fraction", at_most=1.0) for e in raw))


def _cap(raw: Any, where: str) -> float:
    """A size curve's most: 1, or up to a CPU class's bytes / read bytes (``write_free``:
    writes into a buffer the cache holds go back beside the reads), never above 3."""
    cap = (raw or {}).get("cap", 1.0) if isinstance(raw, Mapping) else 1.0
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 1.0 <= cap <= 3.0:
        raise InvalidSpecError(where, f"'cap' must be a number from 1 to 3, got {cap!r}")
    return float(cap)


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


# held-out spec residuals pooled over the measured devices of each kind (cpu, gpu), written
# by ``ridgeline validate --fit-intervals`` from the committed validation snapshots
SPEC_INTERVALS = REPORTS_DIR / "intervals" / "spec-residuals.json"


def interval_table(raw: Any, where: str) -> IntervalTable:
    """A stored interval table (a profile's ``intervals``, a kind's spec pool), checked."""
    try:
        table = IntervalTable.from_dict(raw)
        bad = [g for g, (n, q) in table.groups.items() if n < 1 or q.size != 21 or not np.all(np.diff(q) >= 0)]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise RidgelineError(
            f"{where}: malformed intervals ({err}); rewrite them with 'ridgeline validate --fit-intervals'"
        ) from err
    if bad or "*" not in table.groups:
        raise RidgelineError(
            f"{where}: malformed intervals (group {(bad or ['*'])[0]}); rewrite them with 'ridgeline validate --fit-intervals'"
        )
    return table


def profile_intervals(profile: Mapping[str, Any], where: str = "profile") -> tuple[IntervalTable | None, str]:
    """A profile's interval table, or why it has none."""
    if "intervals" not in profile:
        return None, f"{where} holds no intervals (add them: ridgeline validate --fit-intervals --profile {where})"
    return interval_table(profile["intervals"], f"{where}: intervals"), ""


def spec_intervals(device: DeviceSpec) -> tuple[IntervalTable | None, str]:
    """The spec residuals behind ``device``'s intervals, or why none: a CPU takes the pool of
    every measured CPU; a GPU the pool of the measured GPUs of its vendor, its basis saying
    which catalog devices it pools and, where ``device`` is not one of them, so; a device of
    another vendor or kind (an AMD GPU, a TPU, under NVIDIA's residuals) none."""
    kind = "cpu" if device.kind == "cpu" else "gpu"
    table = _spec_table(kind, *_version(SPEC_INTERVALS))
    if table is None:
        return None, f"no measured interval: no {kind} device was measured"
    if kind == "cpu":
        return table, ""
    return _pooled_for((device.name, device.vendor, device.kind, device.architecture), *_version(SPEC_INTERVALS))


@functools.lru_cache(maxsize=64)
def _pooled_for(device: tuple[str, str, str, str], *version) -> tuple[IntervalTable | None, str]:
    """The GPU pool as ``device``'s (name, vendor, kind, architecture): one table per device
    and version of the file (it keeps its draws)."""
    name, vendor, kind, architecture = device
    table = _spec_table("gpu", *version)
    pooled = [load_catalog_device(n) for n in table.extra.get("spec_devices", ())]
    names = ", ".join(f"{d.name} ({d.architecture})" for d in pooled) or "devices of no catalog name"
    if kind != "gpu" or any(d.vendor != vendor for d in pooled) or not pooled:
        return None, f"no measured interval: no {vendor} {kind} was measured; the spec residuals pool {names}"
    if name in {d.name for d in pooled}:
        return table, ""
    basis = f"{table.basis}; {name} ({architecture}) was not measured: pooled from {names}"
    return replace(table, basis=basis), ""


def intervals_for(
    ceilings: Ceilings, device: DeviceSpec, raw: Mapping[str, Any] | None, where: str
) -> tuple[IntervalTable | None, str]:
    """The residual table behind ``ceilings``' intervals: a calibrated profile's own, the
    spec residuals pooled over measured devices of the kind, or none (with why)."""
    if ceilings.mode == "spec":
        return spec_intervals(device)
    if ceilings.mode == "transferred":
        return None, "no measured interval: a transferred profile was not measured on this device"
    if raw is None:
        return None, "no measured interval: ceilings given without their profile"
    return profile_intervals(raw, where)


def measured_peaks(kind: str) -> dict[str, Any] | None:
    """The measured-over-predicted peak memory ratios of ``kind``'s committed e2e runs."""
    peaks = (_spec_pools(*_version(SPEC_INTERVALS)).get("memory") or {}).get(kind)
    return None if peaks is None else dict(peaks)  # the caller's own copy of the kept file


def _version(path: Path) -> tuple[Path, int, int]:
    """A file with what tells its versions apart (modified time and size; 0, 0 when absent)."""
    try:
        stat = path.stat()
    except OSError:
        return path, 0, 0
    return path, stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=2)
def _spec_pools(path: Path, mtime_ns: int, _size: int) -> Mapping[str, Any]:
    """The spec pools file, read once per version. It is JSON: as YAML its 110 KB took 70 ms
    to parse with libyaml, longer than an analysis takes to compute; as JSON, 3 ms."""
    pools = read_json(path) if mtime_ns else {}
    return pools if isinstance(pools, Mapping) else {}


@functools.lru_cache(maxsize=4)
def _spec_table(kind: str, path: Path, mtime_ns: int, size: int) -> IntervalTable | None:
    """``kind``'s pooled table, one object per version of the file (it keeps its draws)."""
    raw = _spec_pools(path, mtime_ns, size).get(kind)
    return None if raw is None else interval_table(raw, f"{path.name}: {kind}")
