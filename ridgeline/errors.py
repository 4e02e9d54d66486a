"""Domain errors. Each carries the offending value and a fix; the CLI prints one line, exit 2."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class RidgelineError(Exception):
    """Base class: str(err) is the one line a user sees."""


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    starts = [c for c in choices if c.startswith(name.lower())]
    close = (starts + [c for c in difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5)
                       if c not in starts])[:3]
    return f" Did you mean: {', '.join(close)}?" if close else ""


class UnknownModelError(RidgelineError):
    def __init__(self, name: str, choices: Iterable[str]):
        self.name = name
        super().__init__(
            f"unknown model '{name}'.{_did_you_mean(name, choices)} "
            "Run 'ridgeline models list', or pass --config path/to/config.json."
        )


class UnknownDeviceError(RidgelineError):
    def __init__(self, name: str, choices: Iterable[str]):
        self.name = name
        super().__init__(
            f"unknown hardware '{name}'.{_did_you_mean(name, choices)} "
            "Run 'ridgeline hardware list', or pass --hardware path/to/device.yaml."
        )


class InvalidSpecError(RidgelineError):
    """A hardware YAML or profile that is malformed or misses a field."""

    def __init__(self, where: str, problem: str):
        self.where = where
        super().__init__(f"{where}: {problem}")


class InvalidConfigError(RidgelineError):
    """A model config.json that is malformed or misses a field."""

    def __init__(self, where: str, problem: str):
        self.where = where
        super().__init__(f"{where}: {problem}")


class UnwritableOutputError(RidgelineError):
    """An output path that cannot be written (no permission, not a folder, a read-only or
    virtual file system, a full disk)."""

    def __init__(self, path, reason: str):
        self.path = path
        super().__init__(f"cannot write {path}: {reason}; choose another output path")


class UnsupportedArchitectureError(RidgelineError):
    def __init__(self, model_type: str, supported: Iterable[str]):
        self.model_type = model_type
        super().__init__(
            f"unsupported model_type '{model_type}'; supported: {', '.join(sorted(supported))}."
        )


class InvalidWorkloadError(RidgelineError):
    """Zero or negative sizes, impossible combinations of settings."""


class UnsupportedDtypeError(RidgelineError):
    def __init__(self, dtype: str, device: str, supported: Iterable[str], what: str = "matrix"):
        self.dtype = dtype
        super().__init__(
            f"{device} has no {what} units for {dtype}; choose one of: {', '.join(supported)}."
        )


class MissingDependencyError(RidgelineError):
    def __init__(self, package: str, extra: str):
        super().__init__(
            f"this command needs {package}: pip install 'ridgeline[{extra}]'"
        )
