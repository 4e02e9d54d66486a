"""What the user asks for: the workload (sizes) and the deployment settings."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from .errors import InvalidWorkloadError
from .units import DTYPE_BITS

Number = Union[int, float, np.ndarray]


@dataclass(frozen=True)
class Workload:
    """Sizes. ``batch`` and ``seq_len`` may be numpy arrays (a sweep is one array expression)."""

    batch: Number = 1          # sequences processed together
    seq_len: Number = 512      # prompt tokens per sequence (prefill length)
    generate: Number = 0       # output tokens per sequence: 1 from prefill + (generate-1) decode steps

    def __post_init__(self) -> None:
        for field in ("batch", "seq_len"):
            _check_positive(field, getattr(self, field))
        if np.any(np.asarray(self.generate) < 0):
            raise InvalidWorkloadError(f"generate must be >= 0, got {self.generate!r}")


def _check_positive(field: str, value: Number) -> None:
    arr = np.asarray(value)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.number):
        raise InvalidWorkloadError(f"{field} must be a positive whole number, got {value!r}")
    if np.any(arr <= 0) or np.any(arr != np.floor(arr)):
        raise InvalidWorkloadError(f"{field} must be a positive whole number, got {value!r}; "
                                   f"use e.g. --{field.replace('_', '-')} 1")


@dataclass(frozen=True)
class Settings:
    """How the model is deployed. Each field changes named terms of named ops."""

    w_dtype: str = "fp16"      # stored weight type
    a_dtype: str = "fp16"      # activation type
    kv_dtype: str = "fp16"     # KV-cache type

    def __post_init__(self) -> None:
        for field in ("w_dtype", "a_dtype", "kv_dtype"):
            value = getattr(self, field)
            if value not in DTYPE_BITS or value == "tf32":
                known = ", ".join(d for d in DTYPE_BITS if d != "tf32")
                raise InvalidWorkloadError(f"unknown data type {value!r} for {field}; use one of: {known}")
