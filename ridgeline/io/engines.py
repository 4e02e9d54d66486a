"""Serving engines from files: ``hardware/engines/NAME.yaml`` -> :class:`ServingEngine`,
checked once, and the Settings an engine sets where the user set none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from types import MappingProxyType
from typing import Any

from ridgeline.engine.serving_engine import CONTEXTS, ServingEngine
from ridgeline.engine.workload import SETTING_NAMES, Settings
from ridgeline.errors import InvalidSpecError, UnknownEngineError
from ridgeline.io.catalog import ENGINES_DIR, list_names
from ridgeline.io.files import read_yaml

DEFAULT_ENGINE = "pytorch"
REQUIRED = ("name", "full_name", "version", "settings", "scheduler", "sources")
MEMORY_RULES = ("utilization", "free_fraction", "sglang")


def engine_names() -> list[str]:
    return list_names(ENGINES_DIR, ".yaml")


@cache
def load_engine(name: str) -> ServingEngine:
    """The engine called exactly ``name`` (its YAML checked: every Settings field it sets
    exists and is valid, its memory rule is known, it cites sources)."""
    names = engine_names()
    if name not in names:
        raise UnknownEngineError(name, names)
    where = str(ENGINES_DIR / f"{name}.yaml")
    raw = read_yaml(ENGINES_DIR / f"{name}.yaml")
    missing = [k for k in REQUIRED if k not in (raw or {})]
    if missing:
        raise InvalidSpecError(where, f"missing {', '.join(missing)} (required: {', '.join(REQUIRED)})")
    settings = dict(raw["settings"] or {})
    unknown = sorted(set(settings) - set(SETTING_NAMES))
    if unknown:
        raise InvalidSpecError(where, f"'settings' names no Settings field {unknown[0]!r}")
    Settings(**settings)  # each value valid (one-line errors name the field)
    scheduler = scheduler_of(raw["scheduler"] or {})
    unknown = sorted(set(scheduler.get("limits") or {}) - set(CONTEXTS))
    if unknown:
        raise InvalidSpecError(where, f"'scheduler.limits' names no context {unknown[0]!r}; use {', '.join(CONTEXTS)}")
    if scheduler.get("memory", "utilization") not in MEMORY_RULES:
        raise InvalidSpecError(where, f"'scheduler.memory' must be one of {', '.join(MEMORY_RULES)}")
    if not raw["sources"]:
        raise InvalidSpecError(where, "'sources' must cite where each fact was read")
    frozen = lambda m: MappingProxyType(dict(m or {}))  # noqa: E731
    return ServingEngine(
        name=str(raw["name"]),
        full_name=str(raw["full_name"]),
        version=str(raw["version"]),
        settings=frozen(settings),
        scheduler=frozen(scheduler),
        host=frozen(raw.get("host")),
        graphs=frozen(raw.get("graphs")),
        sources=frozen(raw["sources"]),
    )


def scheduler_of(raw: Mapping[str, Any]) -> dict[str, Any]:
    """An engine's scheduler facts; ``defaults: NAME`` takes engine NAME's scheduler under
    its own keys (``of`` then names whose defaults they are)."""
    own = dict(raw)
    base = own.pop("defaults", None)
    if base is None:
        return own
    other = load_engine(str(base))
    return {**other.scheduler, "of": other.full_name, **own}


def with_engine_defaults(settings: Settings) -> Settings:
    """``settings`` with each field its engine sets, where it is still at its plain default,
    set as the engine sets it (a Settings object holds every field: one left at its default
    is one nobody chose)."""
    plain = Settings()
    chosen = {
        k: v for k, v in load_engine(settings.engine).settings.items() if getattr(settings, k) == getattr(plain, k)
    }
    return replace(settings, **chosen) if chosen else settings


def engine_settings(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` (Settings fields the user gave) over the defaults of the engine they name
    (``engine``; pytorch when none): what the deployment's Settings are made of."""
    name = str(options.get("engine") or DEFAULT_ENGINE)
    return {**load_engine(name).settings, **options}


def engine_notes(name: str) -> tuple[str, ...]:
    """What an engine's prediction leaves out, said once (its ``host.note``)."""
    note = (load_engine(name).host or {}).get("note") if name != DEFAULT_ENGINE else ""
    return (f"{name}: {note}",) if note else ()
