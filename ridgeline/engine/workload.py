"""What the user asks for: the workload (sizes) and the deployment settings."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Union

import numpy as np

from ridgeline.engine.units import DTYPE_BITS
from ridgeline.errors import InvalidSettingError, InvalidWorkloadError, check_keywords

Number = Union[int, float, np.ndarray]


@dataclass(frozen=True)
class Workload:
    """Sizes. ``batch`` and ``seq_len`` may be numpy arrays (a sweep is one array expression)."""

    batch: Number = 1  # sequences processed together
    seq_len: Number = 512  # prompt tokens per sequence (prefill length)
    generate: Number = 0  # output tokens per sequence: 1 from prefill + (generate-1) decode steps

    def __post_init__(self) -> None:
        for field in ("batch", "seq_len"):
            _check_positive(field, getattr(self, field))
        generate = self.generate
        if (generate < 0) if type(generate) is int else np.any(np.asarray(generate) < 0):
            raise InvalidWorkloadError(f"generate must be >= 0, got {self.generate!r}")
        _check_limits(self.batch, self.seq_len, generate)


# The largest sizes priced (docs/limits.md), checked before any arithmetic: at these, every
# byte count (batch x tokens x bytes a token) stays far inside the int64 and float64 the
# engine computes in; past them numpy's int64 wrapped to negative bytes and rates.
MAX_BATCH = 2**20  # sequences
MAX_TOKENS = 2**24  # seq_len + generate, a sequence
MAX_BATCH_TOKENS = 2**32  # batch x (seq_len + generate)
LIMITS = " (docs/limits.md)"


def _check_limits(batch: Number, seq_len: Number, generate: Number) -> None:
    top = lambda v: int(max(np.ravel(v).tolist()))  # noqa: E731  (Python ints: 10**20 does not wrap)
    tokens = top(seq_len) + top(generate)
    if top(batch) > MAX_BATCH:
        raise InvalidSettingError("batch", f"batch {top(batch)} is over the limit of {MAX_BATCH} sequences{LIMITS}")
    if tokens > MAX_TOKENS:
        problem = f"seq_len + generate = {tokens} tokens is over the limit of {MAX_TOKENS} a sequence{LIMITS}"
        raise InvalidSettingError("seq_len", problem)
    total = top(np.asarray(batch) * (np.asarray(seq_len) + np.asarray(generate)))  # <= 2**44 here: no wrap
    if total > MAX_BATCH_TOKENS:
        problem = f"batch x (seq_len + generate) = {total} tokens is over the limit of {MAX_BATCH_TOKENS}{LIMITS}"
        raise InvalidSettingError("batch", problem)


def _check_positive(field: str, value: Number) -> None:
    if type(value) is int:  # one analysis's plain number: no array to make
        if value <= 0:
            raise InvalidSettingError(field, f"{field} must be a positive whole number, got {value!r}")
        return
    arr = np.asarray(value)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.number):
        raise InvalidWorkloadError(f"{field} must be a positive whole number, got {value!r}")
    bad = (arr <= 0) | (arr != np.floor(arr))
    if np.any(bad):  # the first bad value, in the list the user gave (a sweep's grid repeats it)
        given = ",".join(f"{v:g}" for v in dict.fromkeys(arr.ravel().tolist()))
        shown = f"{arr[bad].ravel()[0]:g}" + (f" in {given}" if arr.size > 1 else "")
        raise InvalidSettingError(field, f"{field} must be a positive whole number, got {shown}")


# The attention settings (docs/model.md, "Attention settings"): how a framework computes
# attention, each priced as the kernels it runs. ``auto`` is the path transformers' ``sdpa``
# attention takes (``precision.resolve_attention``).
ATTENTION_KERNELS = ("auto", "eager", "sdpa-repeat", "sdpa-gqa", "flash", "flash-decoding", "paged")
ZERO_POINTS = ("fp16", "packed")
EXECUTIONS = ("graph", "eager", "compiled")  # how kernels are launched
EXECUTION_CHOICES = ("auto", *EXECUTIONS)  # the setting: auto picks one per device
FUSIONS = ("qkv", "gate_up", "add_norm", "rope", "pointwise")  # kernels an engine fuses (engine.fusion)


def setting(default, help: str):
    """A ``Settings`` field with its one line of help (the dashboard and the CLI show it)."""
    return dataclasses.field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Settings:
    """How the model is deployed. Each field changes named terms of named ops."""

    w_dtype: str = setting("fp16", "weight type of the linear layers, e.g. fp8_e4m3, bf16, int4 (weights read)")
    a_dtype: str = setting("fp16", "activation type (activations read/written)")
    kv_dtype: str = setting("fp16", "KV-cache type (KV read/written)")
    group_size: int = setting(0, "quantisation group size along k (0: one scale per output channel)")
    attention: str = setting(
        "auto",
        "attention kernel: auto (transformers' own path: sdpa-gqa; gpt-oss eager), eager, sdpa-repeat,"
        " sdpa-gqa, flash, flash-decoding or paged: docs/model.md, Attention settings",
    )
    kv_block: int = setting(16, "tokens per KV block (paged attention)")
    tp: int = setting(1, "tensor-parallel devices")
    pp: int = setting(1, "pipeline-parallel stages")
    ep: int = setting(1, "expert-parallel devices (MoE)")
    micro_batches: int = setting(1, "pipeline micro-batches (batch must divide evenly)")
    link_bw_gb_s: float = setting(0.0, "interconnect GB/s per direction, overriding the catalog's (0: the catalog's)")
    link_latency_us: float = setting(
        -1.0, "interconnect latency per hop, µs, overriding the catalog's (< 0: the catalog's)"
    )
    zero_points: str = setting("fp16", "integer weights' zero points: fp16 or packed (AWQ/GPTQ, at the weight's width)")
    memory_utilization: float = setting(
        0.9, "fraction of device memory the runtime may use (vLLM's gpu_memory_utilization; default 0.9)"
    )
    execution: str = setting(
        "auto",
        "how kernels are launched: graph, eager or compiled (auto: graph on a GPU, eager on a CPU); matters with"
        " a device-time profile",
    )
    engine: str = setting(
        "pytorch",
        "serving engine: pytorch (PyTorch's own kernels, transformers' paths), trtllm, vllm, sglang or gpt-fast;"
        " an engine sets the kernels it fuses, its attention, KV blocks and scheduler (docs/engines.md)",
    )
    fusion: str = setting(
        "",
        "kernels fused, joined by '+': qkv, gate_up, add_norm, rope, pointwise (default: the engine's; none for pytorch)",
    )

    def __new__(cls, *_args: object, **kwargs: object) -> Settings:
        """A misspelt field (``Settings(w_dtpye=...)``) is one line naming the closest field,
        not Python's bare TypeError; ``dataclasses.replace`` comes through here too."""
        if not kwargs.keys() <= cls.__dataclass_fields__.keys():
            check_keywords("Settings", kwargs, SETTING_NAMES)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        known = ", ".join(d for d in DTYPE_BITS if d != "tf32")
        for field in ("w_dtype", "a_dtype", "kv_dtype"):
            value = getattr(self, field)
            if value not in DTYPE_BITS or value == "tf32":
                raise InvalidWorkloadError(f"unknown data type {value!r} for {field}; use one of: {known}")
        if self.attention not in ATTENTION_KERNELS:
            raise InvalidSettingError(
                "attention", f"unknown attention kernel {self.attention!r}; use one of: {', '.join(ATTENTION_KERNELS)}"
            )
        if self.execution not in EXECUTION_CHOICES:
            raise InvalidSettingError(
                "execution", f"unknown execution {self.execution!r}; use one of: {', '.join(EXECUTION_CHOICES)}"
            )
        for field in ("tp", "pp", "ep", "micro_batches", "kv_block"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSettingError(field, f"{field} must be a whole number >= 1, got {value!r}")
        if self.group_size < 0:
            raise InvalidSettingError("group_size", f"group_size must be >= 0 (0: per channel), got {self.group_size}")
        if self.zero_points not in ZERO_POINTS:
            raise InvalidSettingError(
                "zero_points", f"unknown zero-point layout {self.zero_points!r}; use one of: {', '.join(ZERO_POINTS)}"
            )
        unknown = [f for f in fusion_kinds(self.fusion) if f not in FUSIONS]
        if unknown:
            raise InvalidSettingError(
                "fusion", f"unknown fusion {unknown[0]!r}; join some of {', '.join(FUSIONS)} with '+', e.g. qkv+gate_up"
            )
        if not 0 < self.memory_utilization <= 1:
            raise InvalidSettingError(
                "memory_utilization", f"memory utilization must be in (0, 1], got {self.memory_utilization}; e.g. 0.9"
            )
        if not 0 <= self.link_bw_gb_s < math.inf:  # NaN fails too
            raise InvalidSettingError(
                "link_bw_gb_s", f"link bandwidth must be a finite number >= 0, got {self.link_bw_gb_s}"
            )
        if not math.isfinite(self.link_latency_us):
            raise InvalidSettingError(
                "link_latency_us",
                f"link latency must be a finite number (< 0: the catalog's), got {self.link_latency_us}",
            )


SETTING_NAMES = tuple(f.name for f in dataclasses.fields(Settings))


def fusion_kinds(text: str) -> frozenset[str]:
    """'qkv+gate_up' -> {'qkv', 'gate_up'} (the Settings field's text; '' or 'none': none)."""
    return frozenset(t.strip() for t in str(text).split("+") if t.strip() and t.strip() != "none")


def check_slos(**slos: float | None) -> None:
    """Each latency target given (``ttft_slo=0.5``) must be a finite number of seconds
    above 0: NaN, 0 or a negative target would make every request fail or pass silently."""
    for name, value in slos.items():
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        if value is not None and not ok:
            raise InvalidSettingError(name, f"{name} must be a positive number of seconds, got {value!r}; e.g. 0.5")


def make_settings(
    dtype: str | None = None, settings: Settings | None = None, options: Mapping[str, Any] | None = None
) -> Settings:
    """``dtype`` sets weights, activations and KV cache at once; ``options`` any field (a
    misspelt one is refused by ``Settings`` itself, naming the closest)."""
    if settings is None:
        base = {"w_dtype": dtype, "a_dtype": dtype, "kv_dtype": dtype} if dtype else {}
        return Settings(**{**base, **(options or {})})
    return replace(settings, **options) if options else settings
