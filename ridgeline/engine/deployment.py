"""A deployment: the frozen record of what is deployed where (model, device, settings, the plan
they make and the ceilings ops are timed against), and the pure steps that build its parts.
Names and files become one in :mod:`ridgeline.io.resolve`; the engine takes it as it is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.intervals import IntervalTable
from ridgeline.engine.layers import Plan
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.precision import make_plan
from ridgeline.engine.roofline import Ceilings, with_links
from ridgeline.engine.workload import Settings


def model_plan(settings: Settings, device: DeviceSpec, model: ModelConfig) -> Plan:
    """``settings``' plan on ``device`` for ``model``: its head size, its experts' stored
    format, and whether its transformers class runs SDPA (what ``auto`` attention stands for)."""
    return make_plan(settings, device, model.head_dim, model.expert_format, model.transformers_sdpa)


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
    # held-out residual quantiles behind the predictions' intervals (None: no measured
    # interval, for ``no_interval``'s reason)
    intervals: IntervalTable | None = None
    no_interval: str = ""
    # measured / predicted peak memory of committed e2e runs on this kind of device
    # ('low', 'high', 'basis'), None where none were measured
    peaks: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, model: ModelConfig, device: DeviceSpec, settings: Settings, ceilings: Ceilings, *rest) -> Deployment:
        """The deployment of ``settings``: their plan on ``device`` and ``ceilings`` with the
        links and execution they ask for (``rest``: the notes, intervals and peaks fields)."""
        plan = model_plan(settings, device, model)
        return cls(model, device, settings, plan, with_links(ceilings, device, settings), *rest)

    @property
    def mode(self) -> str:
        """spec | calibrated | transferred."""
        return self.ceilings.mode

    def with_model(self, model: ModelConfig) -> Deployment:
        """The same device, settings and ceilings for another model (a draft model)."""
        return replace(self, model=model, plan=model_plan(self.settings, self.device, model))

    def with_settings(self, settings: Settings) -> Deployment:
        """The same model, device and profile under other settings."""
        return replace(
            self,
            settings=settings,
            plan=model_plan(settings, self.device, self.model),
            ceilings=with_links(self.ceilings, self.device, settings),
        )


TYPES = ("w_dtype", "a_dtype", "kv_dtype")


def default_dtype(device: DeviceSpec) -> tuple[str, str | None]:
    """fp16 where the device has fp16 matrix units (the default everywhere else in the tool);
    else bf16, else fp32, with a note saying so. A CPU without fp16 units runs bf16 or fp32."""
    for dtype in ("fp16", "bf16", "fp32"):
        if dtype in device.matrix_peak:
            if dtype == "fp16":
                return dtype, None
            return (
                dtype,
                f"dtype {dtype}: {device.name} has no fp16 matrix units, so {dtype} is its default (set with --dtype)",
            )
    return "fp16", None


def on_threads(host: DeviceSpec, threads: int | None) -> DeviceSpec:
    """The detected CPU as seen by ``threads`` threads: compute peaks scale with the cores
    used; bandwidth stays (one core keeps most of a small machine's memory bus busy)."""
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
