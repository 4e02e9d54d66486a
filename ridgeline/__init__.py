"""ridgeline: roofline performance analysis for large language model inference.

The names below are loaded when first used (PEP 562), so that ``import ridgeline`` and every
``import ridgeline.<module>`` (the CLI's, the engine's) cost only what they use."""

from importlib import import_module

from ridgeline.version import __version__ as __version__

HOMES = {
    "analyze": "ridgeline.api",
    "compare": "ridgeline.api",
    "frontier": "ridgeline.api",
    "max_batch": "ridgeline.api",
    "speculative": "ridgeline.api",
    "sweep": "ridgeline.api",
    "Analysis": "ridgeline.engine.analyze",
    "Deployment": "ridgeline.engine.deployment",
    "DeviceSpec": "ridgeline.engine.device",
    "ModelConfig": "ridgeline.engine.model",
    "Settings": "ridgeline.engine.workload",
    "Workload": "ridgeline.engine.workload",
    "RidgelineError": "ridgeline.errors",
    "list_devices": "ridgeline.io.resolve",
    "list_models": "ridgeline.io.resolve",
    "load_device": "ridgeline.io.resolve",
    "load_model": "ridgeline.io.resolve",
    "resolve": "ridgeline.io.resolve",
}

__all__ = sorted(HOMES)


def __getattr__(name: str):
    """A public name, imported from its home module on first use."""
    if name not in HOMES:
        raise AttributeError(f"module 'ridgeline' has no attribute {name!r}")
    value = getattr(import_module(HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *HOMES])
