"""The view state: one table of controls, and the URL query string <-> state dict.

Every setting of every page lives in the URL (``?model=llama-2-7b&batch=8...``), so a view
can be shared and reloaded. Deployment settings are generated from the fields of
``ridgeline.engine.workload.Settings``: a new field there becomes a new control here, with choices
from ``SETTING_CHOICES`` when it has a fixed set of values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, urlencode

from ridgeline.engine import workload
from ridgeline.engine.units import DTYPE_BITS
from ridgeline.engine.workload import Settings
from ridgeline.io.engines import engine_names
from ridgeline.io.prices import price_list
from ridgeline.io.resolve import list_devices, list_models
from ridgeline.serving.bounds import KV_DTYPES as PLAN_KV_DTYPES
from ridgeline.serving.bounds import W_DTYPES as PLAN_W_DTYPES

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
    # numbers: the largest value the dashboard serves (the CLI has no such bound); lists:
    # the most items. Every number and list has one (issue 30: bounded work per URL).
    maximum: float | None = None


# Settings fields with a fixed set of values: field -> (label, choices). Fields not named
# here get a control from their default's type (``*_dtype`` fields: a data-type menu).
SETTING_CHOICES: dict[str, tuple[str, Sequence[Any]]] = {
    "w_dtype": ("weights", DTYPES),
    "a_dtype": ("activations", DTYPES),
    "kv_dtype": ("KV cache", DTYPES),
    "attention": ("attention kernel", workload.ATTENTION_KERNELS),
    "execution": ("execution", workload.EXECUTION_CHOICES),
    "zero_points": ("zero points", workload.ZERO_POINTS),
    "engine": ("serving engine", tuple(engine_names())),
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


# Numeric Settings fields: (least, most) the dashboard accepts. A field not named here gets
# GENERIC_RANGE (ints from min(default, 1)).
SETTING_RANGES: dict[str, tuple[float, float]] = {
    "group_size": (0, 65_536),
    "kv_block": (1, 4096),
    "tp": (1, 1024),
    "pp": (1, 1024),
    "ep": (1, 1024),
    "micro_batches": (1, 1024),
    "link_bw_gb_s": (0, 100_000),
    "link_latency_us": (-1, 1_000_000),
    "memory_utilization": (0.01, 1),
}
GENERIC_RANGE = (-1_000_000, 1_000_000)


def number_range(name: str, default: float) -> tuple[float, float]:
    if name in SETTING_RANGES:
        return SETTING_RANGES[name]
    low = min(default, 1) if isinstance(default, int) else GENERIC_RANGE[0]
    return low, GENERIC_RANGE[1]


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
    if isinstance(default, (int, float)):
        low, high = number_range(f.name, default)
        kind = "int" if isinstance(default, int) else "float"
        return Control(f.name, label, kind, default, section="settings", minimum=low, maximum=high, help=hint)
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
    Control("batch", "batch", "int", 1, minimum=1, maximum=65_536),
    Control("seq_len", "prompt tokens", "int", 512, minimum=1, maximum=4_194_304),
    Control("generate", "generated tokens", "int", 128, minimum=0, maximum=1_048_576),
)
SERVING_HELP = "Poisson arrival rates to simulate, comma-separated"
PAGE_CONTROLS = (
    Control("stage", "stage", "choice", "decode", ("prefill", "decode"), "layer"),
    Control("sweep_x", "sweep over", "choice", "batch", ("batch", "seq_len"), "sweep"),
    Control("sweep_dtypes", "weight types", "multi", ("fp16", "int8", "int4"), DTYPES, "sweep", maximum=6),
    Control("devices", "devices", "multi", ("a6000", "a100-80gb", "h100-sxm", "l40s"), section="compare", maximum=8),
    Control(
        "runs",
        "measured on",
        "choice",
        "all",
        section="validation",
        help="one device's validation and e2e results, or all of them",
    ),
    Control("serving_rates", "request rates (/s)", "text", "1,2,4,8,16", section="serving", help=SERVING_HELP),
    Control("serving_requests", "requests per rate", "int", 300, section="serving", minimum=1, maximum=100_000),
    Control(
        "serving_max_batch",
        "max batch",
        "int",
        256,
        section="serving",
        minimum=1,
        maximum=4096,
        help="sequences per step",
    ),
    Control(
        "serving_budget",
        "token budget",
        "int",
        2048,
        section="serving",
        minimum=1,
        maximum=65_536,
        help="tokens per step (prefill chunks + decodes)",
    ),
    Control(
        "plan_devices",
        "devices to price",
        "multi",
        ("a100-80gb", "h100-sxm"),
        section="plan",
        maximum=4,
        help="devices with a price in the shipped price list",
    ),
    Control("plan_counts", "devices per deployment", "multi", ("1", "2"), ("1", "2", "4", "8"), "plan", maximum=4),
    Control(
        "plan_w_dtypes",
        "weight types",
        "multi",
        ("fp16", "int8", "int4"),
        PLAN_W_DTYPES,
        "plan",
        help="fp8 and fp4 (weights and activations) where a device to price has the matrix rate",
    ),
    Control(
        "plan_kv_dtypes",
        "KV cache types",
        "multi",
        ("fp16",),
        PLAN_KV_DTYPES,
        "plan",
        help="fp8 where a device to price has the matrix rate",
    ),
    Control("plan_rate", "request rate (/s)", "float", 4.0, section="plan", minimum=0.01, maximum=1000),
    Control("plan_requests", "requests", "int", 200, section="plan", minimum=2, maximum=10_000),
    Control("plan_ttft", "TTFT SLO (s)", "float", 0.5, section="plan", minimum=0.001, maximum=600),
    Control("plan_tpot", "TPOT SLO (s)", "float", 0.05, section="plan", minimum=0.0001, maximum=60),
)
MOST_TEXT = 200  # characters of a text field (the rates: 12 numbers at most)


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


UPLOADABLE = ("model", "device", "devices")


@lru_cache(maxsize=1)
def _catalog() -> dict[str, tuple[str, ...]]:
    devices = (*list_devices(), "host")
    priced = tuple(price_list()["usd_per_gpu_hour"])
    return {"model": tuple(list_models()), "device": devices, "devices": devices, "plan_devices": priced}


def allowed(c: Control, value: str) -> bool:
    """Whether a choice is one of the control's options; models and devices: a catalog name
    or an upload (which is checked where it is resolved)."""
    names = c.options or _catalog().get(c.key)
    return not names or value in names or (c.key in UPLOADABLE and value.startswith(UPLOAD_PREFIX))


def within(c: Control, value: float) -> bool:
    """Whether a number is finite and inside the control's range."""
    low = -math.inf if c.minimum is None else c.minimum
    high = math.inf if c.maximum is None else c.maximum
    return math.isfinite(value) and low <= value <= high


def coerce(c: Control, raw: Any) -> Any:
    """A raw value (URL text or a component's value) -> the state value, or the default."""
    if raw is None or raw == "":
        return c.default
    try:
        if c.kind == "multi":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            items = tuple(dict.fromkeys(i for i in items if i and allowed(c, i)))  # once each, in order
            return items[: int(c.maximum)] if c.maximum and items else items or c.default
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
            return value if within(c, value) else c.default
        value = str(raw)
        if c.kind == "text":
            return value if len(value) <= MOST_TEXT else c.default
        return value if allowed(c, value) else c.default
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


def plain(value: float) -> str:
    """1000000 -> '1,000,000', 0.001 -> '0.001': never an exponent."""
    return f"{value:,.0f}" if value == int(value) else f"{value:.6f}".rstrip("0")


def expected(c: Control) -> str:
    """What a control's URL value must be, for the message about a bad one."""
    if c.key == "model":
        return "a catalog model or one uploaded in this session"
    if c.key == "device":
        return "a catalog device, host, or one uploaded in this session"
    if c.key == "devices":
        return f"at most {c.maximum:g} catalog devices, host, or ones uploaded in this session; the CLI takes more"
    if c.key == "plan_devices":
        return f"at most {c.maximum:g} of {', '.join(_catalog()['plan_devices'])} (the priced devices)"
    if c.kind in ("int", "float"):
        what = "a whole number" if c.kind == "int" else "a number"
        return f"{what} from {plain(c.minimum)} to {plain(c.maximum)}; the CLI takes more"
    if c.kind == "text":
        return f"at most {MOST_TEXT} characters"
    shown = ", ".join(map(str, c.options[:16])) + (", ..." if len(c.options) > 16 else "")
    if c.kind == "multi":
        return f"{f'at most {c.maximum:g} ' if c.maximum else ''}items of {shown}"
    return f"one of {shown}"


def is_bad(c: Control, raw: str) -> bool:
    """Whether ``coerce`` had to drop or replace (part of) a non-empty URL value."""
    value = coerce(c, raw)
    if c.kind == "multi":
        items = [i for i in raw.split(",") if i]
        return any(i not in value for i in items)
    if c.kind == "bool" or raw == "" or value != c.default:
        return False
    try:
        return float(raw) != c.default if c.kind in ("int", "float") else raw != str(c.default)
    except ValueError:
        return True


def shortened(raw: str, most: int = 60) -> str:
    """A URL value as the error line quotes it: at most ``most`` characters."""
    return raw if len(raw) <= most else raw[: most - 3] + "..."


def query_problems(search: str | None) -> list[str]:
    """One phrase per URL value that was not understood: what was expected, what is shown."""
    query = read_query(search)
    return [
        f"{c.key}={shortened(query[c.key])!r} (expected {expected(c)}; {shown_for(c, query[c.key])})"
        for c in controls()
        if c.key in query and is_bad(c, query[c.key])
    ]


def shown_for(c: Control, raw: str) -> str:
    """What the page shows for a URL value not understood: the default, or of a list the
    items understood (the first ``c.maximum`` of them where it names more)."""
    value = coerce(c, raw)
    if c.kind != "multi":
        return f"shown: the default, {plain(value) if isinstance(value, float) else value}"
    understood = [i for i in dict.fromkeys(raw.split(",")) if i and allowed(c, i)]
    listed = ", ".join(value)
    if not understood:
        return f"shown: the default, {listed}"
    if c.maximum and len(understood) > c.maximum:
        return f"shown: the first {c.maximum:g}, {listed}"
    return f"shown: {listed}"


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


NOT_FOUND = "not-found"  # what page_from_path calls a path that is no page


def page_from_path(pathname: str | None) -> str:
    """'/sweep' -> 'sweep', '/' -> 'analyze', a path that is no page -> NOT_FOUND."""
    name = (pathname or "/").strip("/").split("/")[-1]
    return name if name in PAGES else "analyze" if name == "" else NOT_FOUND


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
