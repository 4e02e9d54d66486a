"""Domain errors. Each carries the offending value and a fix; the CLI prints one line, exit 2.
Also the check that turns a misspelt keyword into one (``takes_keywords``)."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from numbers import Real
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class RidgelineError(Exception):
    """Base class: str(err) is the one line a user sees."""


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    starts = [c for c in choices if c.startswith(name.lower())]
    close = (
        starts + [c for c in difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5) if c not in starts]
    )[:3]
    return f" Did you mean: {', '.join(close)}?" if close else ""


class UnknownModelError(RidgelineError):
    def __init__(self, name: str, choices: Iterable[str]):
        self.name = name
        super().__init__(f"unknown model '{name}'.{_did_you_mean(name, choices)}")


class UnknownDeviceError(RidgelineError):
    def __init__(self, name: str, choices: Iterable[str]):
        self.name = name
        super().__init__(f"unknown hardware '{name}'.{_did_you_mean(name, choices)}")


class UnknownEngineError(RidgelineError):
    def __init__(self, name: str, choices: Iterable[str]):
        self.name = name
        choices = list(choices)
        hint = _did_you_mean(name, choices) or ""
        super().__init__(f"unknown engine '{name}'; choose one of: {', '.join(choices)} (set with --engine).{hint}")


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
    """A ``model_type`` no reader knows; ``nearest`` the closest supported one and ``missing``
    the first field its reader needs that the config lacks ("" when it has them all)."""

    def __init__(self, model_type: str, supported: Iterable[str], nearest: str = "", missing: str = ""):
        self.model_type = model_type
        text = f"unsupported model_type '{model_type}'; supported: {', '.join(sorted(supported))}."
        if missing:
            text += f" Nearest: '{nearest}', whose reader needs '{missing}', which this config lacks."
        elif nearest:
            text += (
                f" Nearest: '{nearest}': this config has every field its reader needs, but "
                f"{model_type}'s layers may differ from {nearest}'s, so it is not priced as one."
            )
        super().__init__(text)


class InvalidWorkloadError(RidgelineError):
    """Zero or negative sizes, impossible combinations of settings."""


class InvalidOptionError(InvalidWorkloadError):
    """A value given as text (an option) that cannot be read; it reads as the command line's
    own usage errors do ("Invalid value: ...")."""

    def __str__(self) -> str:
        return f"Invalid value: {super().__str__()}"


class UnknownKeywordError(InvalidWorkloadError):
    """A keyword that ``where`` (a function, ``Settings``) does not take: a misspelt
    ``w_dtpye=``. Names the closest valid one and all of them, as Python's own
    TypeError does not."""

    def __init__(self, name: str, choices: Iterable[str], where: str):
        self.name = name
        choices = list(choices)
        close = difflib.get_close_matches(name.lower(), choices, n=1)
        hint = f": did you mean '{close[0]}'?" if close else "."
        super().__init__(f"unknown keyword '{name}' for {where}{hint} Valid names: {', '.join(choices)}")


def check_keywords(where: str, given: Iterable[str], valid: Sequence[str]) -> None:
    """Each of the ``given`` keyword names is one of ``valid``, else UnknownKeywordError."""
    for name in given:
        if name not in valid:
            raise UnknownKeywordError(name, valid, where)


def keyword_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The parameters of ``fn`` a caller may name (not ``*args`` or ``**kwargs``)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in inspect.signature(fn).parameters.values() if p.kind in kinds)


def takes_keywords(*extra: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Refuse, with :class:`UnknownKeywordError`, a keyword that is neither a parameter of
    the decorated function nor one of ``extra`` (what its ``**kwargs`` pass on)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        valid = (*keyword_names(fn), *extra)

        @functools.wraps(fn)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            check_keywords(fn.__name__, kwargs, valid)
            return fn(*args, **kwargs)

        return checked

    return wrap


class InvalidSettingError(InvalidWorkloadError):
    """A value that cannot work here; ``setting`` names the ``Settings`` field or workload
    size it came from, so that an edge can name its own way to change it (the CLI: --tp)."""

    def __init__(self, setting: str, problem: str):
        self.setting = setting
        super().__init__(problem)


def in_percent(what: str, value: Any, error: type[RidgelineError] = InvalidWorkloadError) -> float:
    """``value`` as a percentile in (0, 100]; NaN, a bool or text is refused naming ``what``."""
    if isinstance(value, Real) and not isinstance(value, bool) and 0 < value <= 100:
        return float(value)
    raise error(f"{what} must be in (0, 100], got {value!r}")


def yes_or_no(name: str, value: Any) -> bool:
    """``value`` of the yes/no keyword ``name``: True or False (a numpy bool too); anything
    else is refused, never read as its truth."""
    if isinstance(value, bool) or str(getattr(value, "dtype", "")) == "bool":
        return bool(value)
    raise InvalidSettingError(name, f"{name} must be True or False, got {value!r}")


class ProfileMismatchError(RidgelineError):
    """A measured profile applied to a device it was not measured on. ``home`` is the
    device to use it with: a catalog name, or 'host' on the CPU it was measured on."""

    def __init__(self, profile: str, measured_on: str, device: str, home: str, transferable: bool, why: str = ""):
        self.home, self.device = home, device
        self.transferable = transferable
        fix = (
            f"analyse {home} with it, or transfer its fractions to {device} (same architecture)"
            if transferable
            else f"analyse {home} with it, or calibrate {device}"
        )
        why = f" ({why})" if why else ""
        super().__init__(f"profile {profile} was measured on {measured_on}, not {device}{why}; {fix}")


class UnsupportedDtypeError(RidgelineError):
    def __init__(self, dtype: str, device: str, supported: Iterable[str], what: str = "matrix"):
        self.dtype = dtype
        super().__init__(f"{device} has no {what} units for {dtype}; choose one of: {', '.join(supported)}.")


class UnmeasuredDtypeError(RidgelineError):
    """A data type a profile measured no classes of, with no measured type of the same
    datasheet rate to stand in for it."""

    def __init__(self, dtype: str, device: str, measured: Iterable[str]):
        self.dtype = dtype
        measured = ", ".join(measured)
        super().__init__(
            f"the profile of {device} measured no {dtype} classes, and none of the types it "
            f"measured ({measured}) has {dtype}'s datasheet rate; use one of those types, or "
            f"calibrate {dtype}"
        )


class MissingDependencyError(RidgelineError):
    def __init__(self, package: str, extra: str, what: str = "this command"):
        super().__init__(f"{what} needs {package}: pip install 'ridgeline[{extra}]'")


def require_torch(what: str = "this command"):
    """torch, or the one error every measuring command gives when it is missing."""
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("PyTorch", "bench", what) from None
    return torch
