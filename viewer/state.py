"""The view state: one table of controls, and the URL query string <-> state dict.

Every setting of every page lives in the URL (``?model=llama-2-7b&batch=8...``), so a view
can be shared and reloaded. Deployment settings are generated from the fields of
``ridgeline.engine.workload.Settings``: a new field there becomes a new control here, with choices
from ``SETTING_CHOICES`` when it has a fixed set of values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, urlencode

from ridgeline.engine import workload
from ridgeline.engine.units import DTYPE_BITS
from ridgeline.engine.workload import Settings
from ridgeline.io.resolve import list_devices, list_models

DTYPES = tuple(d for d in DTYPE_BITS if d != "tf32")
PAGES = ("analyze", "layer", "sweep", "compare", "validation", "serving")
PAGE_TITLES = {
    "analyze": "Analyze",
    "layer": "Layer view",
    "sweep": "Sweep",
    "compare": "Compare",
    "validation": "Validation",
    "serving": "Serving",
}


@dataclass(frozen=True)
class Control:
    """One control whose value lives in the URL."""

    key: str
    label: str
    kind: str  # choice | multi | int | float | bool | text
    default: Any
    options: tuple = ()  # choice/multi; empty: filled at run time (model, device)
    section: str = "workload"  # workload | settings | layer | sweep | compare
    minimum: float | None = None
    help: str = ""


# Settings fields with a fixed set of values: field -> (label, choices). Fields not named
# here get a control from their default's type (``*_dtype`` fields: a data-type menu).
SETTING_CHOICES: dict[str, tuple[str, Sequence[Any]]] = {
    "w_dtype": ("weights", DTYPES),
    "a_dtype": ("activations", DTYPES),
    "kv_dtype": ("KV cache", DTYPES),
    "attention": ("attention kernel", workload.ATTENTION_KERNELS),
    "execution": ("execution", workload.EXECUTION_CHOICES),
    "zero_points": ("zero points", workload.ZERO_POINTS),
}
# Labels for fields whose name reads badly as a label; others: the name with spaces.
SETTING_LABELS = {
    "group_size": "quant group size",
    "kv_block": "KV block tokens",
    "tp": "tensor parallel",
    "pp": "pipeline parallel",
    "ep": "expert parallel",
    "micro_batches": "micro-batches",
    "link_bw_gb_s": "link GB/s (0: spec)",
    "link_latency_us": "link latency µs (<0: spec)",
}


def setting_control(f: dataclasses.Field) -> Control:
    """The control for one field of ``Settings``."""
    default = f.default if f.default is not dataclasses.MISSING else None
    hint = f.metadata.get("help", "")
    if f.name in SETTING_CHOICES:
        label, choices = SETTING_CHOICES[f.name]
        return Control(f.name, label, "choice", default, tuple(choices), "settings", help=hint)
    label = SETTING_LABELS.get(f.name, f.name.replace("_", " "))
    if f.name.endswith("dtype"):
        return Control(f.name, label, "choice", default, DTYPES, "settings", help=hint)
    if isinstance(default, bool):
        return Control(f.name, label, "bool", default, section="settings", help=hint)
    if isinstance(default, int):
        return Control(f.name, label, "int", default, section="settings", minimum=min(default, 1), help=hint)
    if isinstance(default, float):
        return Control(f.name, label, "float", default, section="settings", help=hint)
    return Control(f.name, label, "text", default, section="settings", help=hint)


def setting_controls() -> list[Control]:
    return [setting_control(f) for f in dataclasses.fields(Settings) if f.init]


BASE_CONTROLS = (
    Control("model", "model", "choice", "llama-2-7b"),
    Control("device", "device", "choice", "a6000"),
    Control(
        "profile",
        "roofline",
        "choice",
        "spec",
        help="spec: datasheet peaks; a profile: ceilings measured by 'ridgeline calibrate'",
    ),
    Control("batch", "batch", "int", 1, minimum=1),
    Control("seq_len", "prompt tokens", "int", 512, minimum=1),
    Control("generate", "generated tokens", "int", 128, minimum=0),
)
PAGE_CONTROLS = (
    Control("stage", "stage", "choice", "decode", ("prefill", "decode"), "layer"),
    Control("sweep_x", "sweep over", "choice", "batch", ("batch", "seq_len"), "sweep"),
    Control("sweep_dtypes", "weight types", "multi", ("fp16", "int8", "int4"), DTYPES, "sweep"),
    Control("devices", "devices", "multi", ("a6000", "a100-80gb", "h100-sxm", "l40s"), section="compare"),
    Control(
        "runs",
        "measured on",
        "choice",
        "all",
        section="validation",
        help="one device's validation and e2e results, or all of them",
    ),
    Control(
        "serving_rates",
        "request rates (/s)",
        "text",
        "1,2,4,8,16",
        section="serving",
        help="Poisson arrival rates to simulate, comma-separated",
    ),
    Control("serving_requests", "requests per rate", "int", 300, section="serving", minimum=1),
    Control("serving_max_batch", "max batch", "int", 256, section="serving", minimum=1, help="sequences per step"),
    Control(
        "serving_budget",
        "token budget",
        "int",
        2048,
        section="serving",
        minimum=1,
        help="tokens per step (prefill chunks + decodes)",
    ),
)


@lru_cache(maxsize=1)
def controls() -> tuple[Control, ...]:
    """Every URL-state control, in display order (Settings' fields are read once)."""
    return (*BASE_CONTROLS, *setting_controls(), *PAGE_CONTROLS)


def control(key: str) -> Control:
    return _by_key()[key]


@lru_cache(maxsize=1)
def _by_key() -> dict[str, Control]:
    return {c.key: c for c in controls()}


def defaults() -> dict[str, Any]:
    return {c.key: c.default for c in controls()}


UPLOAD_PREFIX = "upload:"  # a model or device uploaded in this browser session
QUERY_ALIASES = {"hardware": "device"}  # the CLI's word for it


@lru_cache(maxsize=1)
def _catalog() -> dict[str, tuple[str, ...]]:
    devices = (*list_devices(), "host")
    return {"model": tuple(list_models()), "device": devices, "devices": devices}


def allowed(c: Control, value: str) -> bool:
    """Whether a choice is one of the control's options; models and devices: a catalog name
    or an upload (which is checked where it is resolved)."""
    names = c.options or _catalog().get(c.key)
    return not names or value in names or (c.key in _catalog() and value.startswith(UPLOAD_PREFIX))


def coerce(c: Control, raw: Any) -> Any:
    """A raw value (URL text or a component's value) -> the state value, or the default."""
    if raw is None or raw == "":
        return c.default
    try:
        if c.kind == "multi":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            items = tuple(i for i in items if i and allowed(c, i))
            return items or c.default
        if c.kind == "bool":
            if isinstance(raw, (list, tuple)):
                return c.key in raw or True in raw
            return str(raw).lower() in ("1", "true", "yes", "on")
        if c.kind in ("int", "float"):
            value = float(raw)
            if c.kind == "int":
                if value != int(value):
                    return c.default
                value = int(value)
            return value if c.minimum is None or value >= c.minimum else c.default
        value = str(raw)
        return value if c.kind != "choice" or allowed(c, value) else c.default
    except (TypeError, ValueError):
        return c.default


def read_query(search: str | None) -> dict[str, str]:
    """``?batch=8&hardware=h100-sxm`` -> {key: last raw text}, aliases under their key."""
    query = {k: v[-1] for k, v in parse_qs((search or "").lstrip("?")).items()}
    for alias, key in QUERY_ALIASES.items():
        if alias in query:
            query.setdefault(key, query.pop(alias))
    return query


def parse_query(search: str | None) -> dict[str, Any]:
    """``?batch=8&w_dtype=int4`` -> a full state dict (defaults for what is missing or bad)."""
    query = read_query(search)
    return {c.key: coerce(c, query[c.key]) if c.key in query else c.default for c in controls()}


def expected(c: Control) -> str:
    """What a control's URL value must be, for the message about a bad one."""
    if c.key == "model":
        return "a catalog model or one uploaded in this session"
    if c.key == "device":
        return "a catalog device, host, or one uploaded in this session"
    if c.key == "devices":
        return "catalog devices, host, or ones uploaded in this session"
    if c.kind == "int":
        return f"a whole number of at least {c.minimum:g}" if c.minimum is not None else "a whole number"
    if c.kind == "float":
        return "a number"
    shown = ", ".join(map(str, c.options[:16])) + (", ..." if len(c.options) > 16 else "")
    return f"{'items' if c.kind == 'multi' else 'one'} of {shown}"


def is_bad(c: Control, raw: str) -> bool:
    """Whether ``coerce`` had to drop or replace (part of) a non-empty URL value."""
    value = coerce(c, raw)
    if c.kind == "multi":
        return any(i not in value for i in raw.split(",") if i)
    if c.kind == "bool" or raw == "" or value != c.default:
        return False
    try:
        return float(raw) != c.default if c.kind in ("int", "float") else raw != str(c.default)
    except ValueError:
        return True


def query_problems(search: str | None) -> list[str]:
    """One phrase per URL value that was not understood (its default is shown instead)."""
    query = read_query(search)
    return [
        f"{c.key}={query[c.key]!r} (expected {expected(c)})"
        for c in controls()
        if c.key in query and is_bad(c, query[c.key])
    ]


def to_query(state: Mapping[str, Any]) -> str:
    """A state dict -> ``?key=value&...`` (lists comma-joined), every control in order."""
    pairs = []
    for c in controls():
        value = state.get(c.key, c.default)
        if c.kind == "multi":
            value = ",".join(value)
        elif c.kind == "bool":
            value = "true" if value else "false"
        pairs.append((c.key, value))
    return "?" + urlencode(pairs)


def page_from_path(pathname: str | None) -> str:
    name = (pathname or "/").strip("/").split("/")[-1]
    return name if name in PAGES else "analyze"


def settings_of(state: Mapping[str, Any]) -> Settings:
    """The engine's ``Settings`` from a state dict (raises InvalidWorkloadError if bad)."""
    names = [f.name for f in dataclasses.fields(Settings) if f.init]
    return Settings(**{n: state[n] for n in names if n in state})


def component_value(c: Control, value: Any) -> Any:
    """A state value -> what the Dash component holds (checklists hold lists)."""
    if c.kind == "bool":
        return [c.key] if value else []
    if c.kind == "multi":
        return list(value)
    return value
