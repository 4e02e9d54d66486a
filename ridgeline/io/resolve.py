"""The edge: names, paths, ``host``, uploads' parsed configs and measured profiles become one
frozen :class:`Deployment`. This is the only place that loads anything; ``analyze``,
``sweep``, ``speculative``, ``max_batch``, ``frontier`` and ``compare`` take a Deployment
and compute.

    d = resolve("llama-2-7b", "h100-sxm", dtype="bf16", tp=2,
                profile="reports/profiles/cuda-nvidia-h100-80gb-hbm3.yaml")
    d.mode          # 'calibrated'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ridgeline.engine.layers import Plan
from ridgeline.engine.model import ModelConfig, load_model
from ridgeline.engine.precision import make_plan
from ridgeline.engine.roofline import Ceilings, spec_ceilings, with_execution
from ridgeline.engine.units import GIGA
from ridgeline.engine.workload import Settings
from ridgeline.errors import InvalidWorkloadError, RidgelineError
from ridgeline.io.hardware import DeviceSpec, load_device

ProfileLike = str | Path | Mapping[str, Any] | None


@dataclass(frozen=True)
class Deployment:
    """What is deployed where: the model, the device, the settings, the plan they make
    (types, parallel layout, attention kernel) and the ceilings ops are timed against."""

    model: ModelConfig
    device: DeviceSpec
    settings: Settings
    plan: Plan
    ceilings: Ceilings
    notes: tuple[str, ...] = ()  # warnings worth showing (a profile from another CPU)

    @property
    def mode(self) -> str:
        """spec | calibrated | transferred."""
        return self.ceilings.mode

    def with_model(self, model: ModelConfig) -> Deployment:
        """The same device, settings and ceilings for another model (a draft model)."""
        return replace(self, model=model, plan=make_plan(self.settings, self.device, model.head_dim))

    def with_settings(self, settings: Settings) -> Deployment:
        """The same model, device and profile under other settings."""
        return replace(
            self,
            settings=settings,
            plan=make_plan(settings, self.device, self.model.head_dim),
            ceilings=with_links(self.ceilings, self.device, settings),
        )


def make_settings(
    dtype: str | None = None, settings: Settings | None = None, options: Mapping[str, Any] | None = None
) -> Settings:
    """``dtype`` sets weights, activations and KV cache at once; ``options`` any field."""
    options = dict(options or {})
    if settings is None:
        base = {"w_dtype": dtype, "a_dtype": dtype, "kv_dtype": dtype} if dtype else {}
        try:
            return Settings(**{**base, **options})
        except TypeError as err:
            raise InvalidWorkloadError(f"unknown setting: {err}") from None
    try:
        return replace(settings, **options) if options else settings
    except TypeError as err:
        raise InvalidWorkloadError(f"unknown setting: {err}") from None


def with_links(ceilings: Ceilings, device: DeviceSpec, settings: Settings) -> Ceilings:
    """The interconnect the settings ask for: their link bandwidth / latency where given
    (an override is one figure for every group size: no per-peer mesh links), else the
    device's; and the execution mode they ask for (``roofline.with_execution``)."""
    if settings.link_bw_gb_s:
        bandwidth, per_peer = settings.link_bw_gb_s * GIGA, None
    else:
        bandwidth, per_peer = device.interconnect_bandwidth, device.interconnect_link_bandwidth
    latency = settings.link_latency_us * 1e-6 if settings.link_latency_us >= 0 else device.interconnect_latency or 0.0
    linked = replace(ceilings, link_bandwidth=bandwidth, link_latency=latency, link_per_peer=per_peer)
    return with_execution(linked, device, settings.execution)


def read_profile(profile: ProfileLike) -> tuple[Mapping[str, Any] | None, str]:
    """A profile path (or an already-read mapping) -> (its contents, how to name it)."""
    from ridgeline.io.profile import load_profile

    if profile is None or isinstance(profile, Mapping):
        return profile, "given profile"
    return load_profile(profile), str(profile)


def resolve_ceilings(
    device: DeviceSpec, profile: ProfileLike = None, *, transfer: bool = False
) -> tuple[Ceilings, tuple[str, ...]]:
    """The ceilings for ``device``: its datasheet roofs, or a measured profile's (checked
    against the device it was measured on; ``transfer`` allows another GPU of one
    architecture). Returns the notes the profile check raised as well."""
    from ridgeline.io.profile import profile_ceilings

    raw, where = read_profile(profile)
    if raw is None:
        return spec_ceilings(device), ()
    return profile_ceilings(raw, device, transfer=transfer, where=where)


def resolve(
    model: str | Path | ModelConfig,
    hardware: str | Path | DeviceSpec = "a6000",
    *,
    dtype: str | None = None,
    settings: Settings | None = None,
    profile: ProfileLike = None,
    transfer: bool = False,
    ceilings: Ceilings | None = None,
    **options: Any,
) -> Deployment:
    """Load the model and the device, build the settings and their plan, and the ceilings:
    ``ceilings`` as given, else the profile's, else the datasheet's.

    Deployment options are :class:`Settings` fields as keywords (``w_dtype="int4"``,
    ``attention="flash"``, ``tp=2`` ...); ``dtype`` sets the three types at once."""
    config = model if isinstance(model, ModelConfig) else load_model(str(model))
    device = hardware if isinstance(hardware, DeviceSpec) else load_device(str(hardware))
    chosen = make_settings(dtype, settings, options)
    notes: tuple[str, ...] = ()
    if ceilings is not None and profile is not None:
        raise RidgelineError("give ceilings or a profile, not both")
    if ceilings is None:
        ceilings, notes = resolve_ceilings(device, profile, transfer=transfer)
    plan = make_plan(chosen, device, config.head_dim)
    return Deployment(config, device, chosen, plan, with_links(ceilings, device, chosen), notes)


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


def resolve_each(
    model: str | Path | ModelConfig, devices, variants, *, profile: ProfileLike = None, transfer: bool = False
) -> list[Deployment]:
    """Every device under every settings variant (a dict of resolve's keywords each). A
    profile applies where it was measured (or is transferred, when asked); the other
    devices keep their datasheet roofs, and each deployment's ``mode`` says which."""
    from ridgeline.errors import ProfileMismatchError

    config = model if isinstance(model, ModelConfig) else load_model(str(model))
    raw, where = read_profile(profile)
    out = []
    for name in devices:
        device = name if isinstance(name, DeviceSpec) else load_device(str(name))
        try:
            ceilings, notes = resolve_ceilings(device, raw, transfer=transfer)
        except ProfileMismatchError:
            ceilings, notes = spec_ceilings(device), ()
        for options in variants:
            d = resolve(config, device, ceilings=ceilings, **options)
            out.append(replace(d, notes=notes))
    return out


# --- the device a measurement on this machine is predicted with --------------------------


def measuring_device(kind: str, threads: int | None = None, gpu_name: str | None = None) -> DeviceSpec:
    """The datasheet device of a measurement made here: on ``cpu`` the detected CPU (its
    compute peaks for the ``threads`` the run uses); on ``cuda`` the catalog GPU whose
    driver names match ``gpu_name`` (what torch reports)."""
    from ridgeline.io.hardware import detect_host

    if kind == "cpu":
        return on_threads(detect_host(gpu=False), threads)
    from ridgeline.io.names import catalog_name_for_gpu

    match = catalog_name_for_gpu(gpu_name or "")
    if match is None:
        raise RidgelineError(
            f"GPU {gpu_name!r} is not in the hardware catalog; add "
            "hardware/<name>.yaml with its name under driver_names"
        )
    return load_device(match)


def on_threads(host: DeviceSpec, threads: int | None) -> DeviceSpec:
    """The detected CPU as seen by ``threads`` threads: compute peaks scale with the cores
    used; bandwidth stays (one core keeps most of a small machine's memory bus busy)."""
    from types import MappingProxyType

    cores = host.compute_units or 1
    if host.kind != "cpu" or not threads or threads >= cores:
        return host
    share = threads / cores

    def scaled(peaks: Mapping[str, float]) -> Mapping[str, float]:
        return MappingProxyType({k: v * share for k, v in peaks.items()})

    return replace(
        host,
        matrix_peak=scaled(host.matrix_peak),
        vector_peak=scaled(host.vector_peak),
        full_name=f"{host.full_name}, compute peaks for {threads} of {cores} cores",
    )
