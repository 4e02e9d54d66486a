"""The edge: names, paths, ``host``, uploads' parsed configs and measured profiles become one
frozen :class:`Deployment`. This is the only place that turns a name or a file into a model,
a device, a profile or ceilings; ``analyze``, ``sweep``, ``speculative``, ``max_batch``,
``frontier`` and ``compare`` take a Deployment and compute.

    d = resolve("llama-2-7b", "h100-sxm", dtype="bf16", tp=2,
                profile="reports/profiles/cuda-nvidia-h100-80gb-hbm3.yaml")
    d.mode          # 'calibrated'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ridgeline.engine.deployment import TYPES, Deployment, default_dtype, on_threads
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.intervals import IntervalTable
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import Ceilings, spec_ceilings, with_links
from ridgeline.engine.workload import SETTING_NAMES, Settings, make_settings
from ridgeline.errors import (
    InvalidOptionError,
    InvalidSettingError,
    ProfileMismatchError,
    RidgelineError,
    UnknownDeviceError,
    UnknownModelError,
    takes_keywords,
    yes_or_no,
)
from ridgeline.io import host
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.engines import engine_notes, engine_settings, with_engine_defaults
from ridgeline.io.files import parse_json, parse_yaml
from ridgeline.io.hardware import (
    catalog_name_for_gpu,
    device_from_dict,
    device_to_dict,
    list_devices,
    load_catalog_device,
)
from ridgeline.io.host import detect_host
from ridgeline.io.models import list_models, load_model
from ridgeline.io.profile import (
    METHOD_TIMING,
    intervals_for,
    list_profiles,
    load_profile,
    measured_peaks,
    profile_ceilings,
    profile_path,
    recorded_device,
    timing_of,
)

__all__ = [  # what the layers above may use; also this module's own functions below
    "Deployment",
    "detect_host",
    "device_from_dict",
    "device_to_dict",
    "list_devices",
    "list_models",
    "list_profiles",
    "load_device",
    "load_model",
    "load_profile",
    "make_settings",
    "on_threads",
    "profile_path",
    "with_links",
]


def load_device(name: str | DeviceSpec, *, refresh: bool = False) -> DeviceSpec:
    """A catalog name (``h100-sxm``), ``host`` (this machine, detected; ``refresh``: detected
    and measured again, the result kept for later runs), or a path to a device YAML file."""
    if refresh and name != "host":
        raise InvalidOptionError("--refresh applies to 'host' only")
    if isinstance(name, DeviceSpec):
        return name
    if name == "host":
        return host.detect_host(refresh=refresh)
    return load_catalog_device(name)


ProfileLike = str | Path | Mapping[str, Any] | None


def read_profile(profile: ProfileLike) -> tuple[Mapping[str, Any] | None, str]:
    """A profile path (or an already-read mapping) -> (its contents, how to name it)."""
    if profile is None or isinstance(profile, Mapping):
        return profile, "given profile"
    return load_profile(profile), str(profile)


def resolve_ceilings(
    device: DeviceSpec, profile: ProfileLike = None, *, transfer: bool = False, where: str | None = None
) -> tuple[Ceilings, tuple[str, ...]]:
    """The ceilings for ``device``: its datasheet roofs, or a measured profile's (checked
    against the device it was measured on; ``transfer`` allows another GPU of one
    architecture). Returns the notes the profile check raised as well."""
    raw, read_as = read_profile(profile)
    if raw is None:
        return spec_ceilings(device), ()
    return profile_ceilings(raw, device, transfer=transfer, where=where or read_as)


@takes_keywords(*SETTING_NAMES)
def resolve(
    model: str | Path | ModelConfig,
    hardware: str | Path | DeviceSpec = "a6000",
    *,
    dtype: str | None = None,
    settings: Settings | None = None,
    profile: ProfileLike = None,
    transfer: bool = False,
    ceilings: Ceilings | None = None,
    intervals: tuple[IntervalTable | None, str] | None = None,
    **options: Any,
) -> Deployment:
    """Load the model and the device, and the ceilings (``ceilings`` as given, else the
    profile's, else the datasheet's: :func:`target`); then build the settings and their plan
    (:func:`deploy`).

    Deployment options are :class:`Settings` fields as keywords (``w_dtype="int4"``,
    ``attention="flash"``, ``tp=2`` ...); ``dtype`` sets the three types at once. The types
    that neither sets take the device's default: fp16, or the type it runs where it has no
    fp16 matrix units (said in a note)."""
    named = target(model, hardware, profile=profile, transfer=transfer, ceilings=ceilings, intervals=intervals)
    return deploy(named, dtype, settings, options)


class Target(NamedTuple):
    """What a deployment's names resolve to, before its settings: the model, the device, the
    ceilings, the notes they raised and the residual table behind the intervals (or why none)."""

    model: ModelConfig
    device: DeviceSpec
    ceilings: Ceilings
    notes: tuple[str, ...]
    intervals: IntervalTable | None
    no_interval: str


def target(
    model: str | Path | ModelConfig,
    hardware: str | Path | DeviceSpec,
    *,
    profile: ProfileLike = None,
    transfer: bool = False,
    ceilings: Ceilings | None = None,
    intervals: tuple[IntervalTable | None, str] | None = None,
) -> Target:
    """The model, the device and the ceilings a deployment is named by: ``ceilings`` as given,
    else the profile's (checked against the device), else the datasheet's."""
    config = model if isinstance(model, ModelConfig) else load_model(str(model))
    device = hardware if isinstance(hardware, DeviceSpec) else load_device(str(hardware))
    if ceilings is not None and profile is not None:
        raise RidgelineError("give ceilings or a profile, not both")
    if intervals is not None and not (isinstance(intervals, tuple) and len(intervals) == 2):
        raise InvalidSettingError("intervals", f"intervals must be a pair (table or None, why), got {intervals!r}")
    raw, where = read_profile(profile)
    notes: tuple[str, ...] = ()
    if ceilings is None:
        ceilings, notes = resolve_ceilings(device, raw, transfer=yes_or_no("transfer", transfer), where=where)
    table, why = intervals if intervals is not None else (intervals_for(ceilings, device, raw, where))
    return Target(config, device, ceilings, config.defaults + notes, table, why)


def deploy(named: Target, dtype: str | None, settings: Settings | None, options: Mapping[str, Any]) -> Deployment:
    """``named`` under the settings: ``dtype`` for the three types, ``settings`` as given, and
    ``options`` (Settings fields) over them; types neither sets take the device's default."""
    notes: tuple[str, ...] = ()
    if dtype is None and settings is None:
        dtype, note = default_dtype(named.device)
        notes = (note,) if note and not set(TYPES) <= options.keys() else ()
    if settings is None:  # the engine's settings where the options set none
        options = engine_settings(options)
    else:  # where the given settings keep their plain defaults
        settings = with_engine_defaults(settings)
    chosen = make_settings(dtype, settings, options)
    notes += engine_notes(chosen.engine)
    peaks = measured_peaks("cpu" if named.device.kind == "cpu" else "gpu")
    rest = (notes + named.notes, named.intervals, named.no_interval, peaks)
    return Deployment.of(named.model, named.device, chosen, named.ceilings, *rest)


def as_deployment(target: Deployment | str | Path | ModelConfig, hardware=None, **kwargs: Any) -> Deployment:
    """A Deployment as given, or one resolved from names (the public API's convenience:
    ``analyze("llama-2-7b", "a6000", ...)``)."""
    if isinstance(target, Deployment):
        if hardware is not None or any(v is not None and v is not False for v in kwargs.values()):
            raise RidgelineError(
                "a Deployment already holds the device, settings and ceilings; pass only the workload with it"
            )
        return target
    return resolve(target, "a6000" if hardware is None else hardware, **kwargs)


def ceilings_where_measured(
    device: DeviceSpec, profile: ProfileLike = None, *, transfer: bool = False
) -> tuple[Ceilings, tuple[str, ...]]:
    """The profile's ceilings on the device it was measured on (or transferred to, when
    asked), else the device's datasheet roofs: the one rule for a profile shown beside
    devices it was not measured on (``mode`` says which each got)."""
    try:
        return resolve_ceilings(device, profile, transfer=transfer)
    except ProfileMismatchError:
        return spec_ceilings(device), ()


def resolve_each(
    model: str | Path | ModelConfig, devices, variants, *, profile: ProfileLike = None, transfer: bool = False
) -> list[Deployment]:
    """Every device under every settings variant (a dict of resolve's keywords each). A
    profile applies where it was measured (or is transferred, when asked); the other
    devices keep their datasheet roofs, and each deployment's ``mode`` says which."""
    config = model if isinstance(model, ModelConfig) else load_model(str(model))
    transfer = yes_or_no("transfer", transfer)
    raw, _ = read_profile(profile)
    out = []
    for name in devices:
        device = name if isinstance(name, DeviceSpec) else load_device(str(name))
        ceilings, notes = ceilings_where_measured(device, raw, transfer=transfer)
        for options in variants:
            d = resolve(config, device, ceilings=ceilings, **options)
            out.append(replace(d, notes=d.notes + notes))
    return out


def measured_profile(device: str, key: str, path: str | Path | None) -> tuple[Path, dict[str, Any]]:
    """The profile a measurement here is checked against: ``path``, else this device's
    (``key``: ``ridgeline.io.profile.device_key``), with what it holds."""
    target = Path(path) if path else profile_path(key)
    if not target.is_file():
        raise RidgelineError(
            f"no device profile at {target}; run 'ridgeline calibrate --device {device}' first (or pass --profile PATH)"
        )
    return target, load_profile(target)


def recorded_ceilings(path: str | Path) -> tuple[DeviceSpec, dict[str, Any], Ceilings]:
    """A profile file's datasheet device (the one it records, never this machine), what the
    file holds, and its ceilings on that device."""
    raw = load_profile(path)
    device = recorded_device(raw, str(path))
    return device, raw, resolve_ceilings(device, raw)[0]


def timings_of_methods(methods: Iterable[Any]) -> list[str]:
    """How rows were timed (keys of ``roofline.TIMINGS``, in the order eager, device, cpu),
    from the ``method`` each records; rows without one (end to end) say nothing."""
    found = {METHOD_TIMING.get(str(m).split("/")[0]) for m in methods}
    return [t for t in ("eager", "device", "cpu") if t in found]


def recorded_timing(key: str) -> str | None:
    """How device ``key``'s profile (the user's, else the committed one) was timed (a key of
    ``ridgeline.engine.roofline.TIMINGS``); None where it has none or it cannot be read."""
    path = profile_path(key)
    if not path.is_file():
        return None
    try:
        return timing_of(load_profile(path), str(path))
    except RidgelineError:
        return None


# --- what a measurement is predicted with: this device's profile, a result file's records ---


def calibrated_for(
    key: str, spec: DeviceSpec, profile: Path | None, log: Callable[[str], None] = lambda _m: None
) -> tuple[Ceilings | None, Path, str]:
    """The calibrated ceilings of the measured device (its profile, checked against
    ``spec``), or None and a note saying why."""
    given, profile = profile is not None, Path(profile or profile_path(key))
    if given and not profile.is_file():
        raise RidgelineError(
            f"--profile {profile}: no such file (ridgeline calibrate writes one; "
            "reports/profiles holds the committed ones)"
        )
    if not profile.is_file():
        return (
            None,
            profile,
            (
                f"calibrated: no measured profile at {profile} (run 'ridgeline "
                "calibrate' on this device); calibrated predictions are empty"
            ),
        )
    try:
        ceilings, notes = resolve_ceilings(spec, profile)
    except ProfileMismatchError as err:
        if given:  # asked for by name: say no
            raise
        return None, profile, f"calibrated: empty, this device's profile does not apply: {err}"
    for line in notes:
        log(f"warning: {line}")
    return ceilings, profile, f"calibrated: {profile}"


def recorded_spec(meta: dict[str, Any], hardware: str | None) -> DeviceSpec:
    """The spec device a result file was predicted with, from the file alone (never this
    machine): ``hardware`` when given, the device it records, or the catalog entry it
    names; a CPU host from before devices were recorded is rebuilt from its recorded
    peaks (a detected CPU's element-wise fp32 rate is its matrix fp32 rate)."""
    name = hardware or meta.get("spec_hardware", "host")
    if hardware or name != "host":
        return load_device(name)
    if isinstance(meta.get("spec_device"), dict):
        return _recorded_cpu(device_from_dict(meta["spec_device"], "recorded spec device"), meta)
    peaks = MappingProxyType({k: v * 1e12 for k, v in meta["spec_matrix_peak_tops"].items()})
    return _recorded_cpu(
        DeviceSpec(
            "host",
            meta.get("spec_full_name", "host"),
            "",
            "cpu",
            0.0,
            float(meta["spec_bandwidth_gb_s"]) * 1e9,
            peaks,
            MappingProxyType({"fp32": peaks["fp32"]}),
        ),
        meta,
    )


def _recorded_cpu(spec: DeviceSpec, meta: dict[str, Any]) -> DeviceSpec:
    """The recorded host with the CPU the file was measured on (name and signature), so
    a profile of another CPU is refused for it as it would be on that CPU."""
    cpu = {k: meta[k] for k in ("cpu", "cpu_signature") if meta.get(k)}
    return replace(spec, extra={**spec.extra, **cpu}) if spec.kind == "cpu" and cpu else spec


def recorded_profile(meta: dict[str, Any]) -> Path | None:
    """The committed profile a run used, in this checkout (a run records the absolute path
    it had where it ran; the part from ``reports/`` on names it here), or None: then the
    device key's profile."""
    parts = Path(str(meta.get("profile") or "")).parts
    if "reports" not in parts:
        return None
    local = REPORTS_DIR.joinpath(*parts[len(parts) - parts[::-1].index("reports") :])
    return local if local.is_file() else None


# --- names a browser sends: catalog names and its own uploads, never a path on the server ---


def catalog_model(name: str) -> ModelConfig:
    """A catalog model by its name only."""
    if name not in list_models():
        raise UnknownModelError(name, list_models())
    return load_model(name)


def catalog_device(name: str) -> DeviceSpec:
    """A catalog device, or ``host``, by its name only."""
    if name != "host" and name not in list_devices():
        raise UnknownDeviceError(name, list_devices() + ["host"])
    return load_device(name)


def model_upload(text: str, filename: str) -> tuple[str, dict]:
    """An uploaded config.json's text -> (its model's name, the mapping), checked by the
    engine's parser: the file's stem, else the config's ``_name_or_path``."""
    raw = parse_json(text, filename)
    name = Path(filename).stem if filename != "config.json" else ""
    name = name or (str(raw.get("_name_or_path", "")).split("/")[-1] if isinstance(raw, dict) else "")
    return ModelConfig.from_hf_config(raw, name=name or None, where=filename).name, raw


def device_upload(text: str, filename: str) -> tuple[str, dict]:
    """An uploaded device YAML's text -> (its name, the mapping), checked by the loader."""
    raw = parse_yaml(text, filename)
    return device_from_dict(raw, filename).name, raw


def profile_named(key: str) -> Path | None:
    """``spec`` (or nothing) -> None, the datasheet roofs; a profile key -> its file."""
    if not key or key == "spec":
        return None
    if key not in list_profiles():
        raise RidgelineError(f"no device profile '{key}'; run 'ridgeline calibrate'")
    return profile_path(key)


# --- the device a measurement on this machine is predicted with --------------------------


def measuring_device(
    kind: str, threads: int | None = None, gpu_name: str | None = None, hardware: str | None = None
) -> DeviceSpec:
    """The datasheet device of a measurement made here: ``hardware`` when it names one
    (not ``host``); else on ``cpu`` the detected CPU (its compute peaks for the
    ``threads`` the run uses); on ``cuda`` the catalog GPU whose driver names match
    ``gpu_name`` (what torch reports)."""
    if hardware not in (None, "host"):
        return load_device(hardware)
    if kind == "cpu":
        return on_threads(host.detect_host(gpu=False), threads)
    match = catalog_name_for_gpu(gpu_name or "")
    if match is None:
        raise RidgelineError(
            f"GPU {gpu_name!r} is not in the hardware catalog; add "
            "hardware/<name>.yaml with its name under driver_names"
        )
    return load_device(match)
