"""Which data type the arithmetic runs in, given the operand types and the device.

An op runs in the lowest-precision type both operands are in and the device runs in
hardware; otherwise operands are converted up: integers climb int1 -> int2 -> int4 -> int8
and then to the activation's float type, fp8 climbs to fp16/bf16. A float type the device
cannot run at all (fp16 on a TPU, bf16 on a V100) is an error, not a silent change.
"""
from __future__ import annotations

from .errors import UnsupportedDtypeError
from .hardware import DeviceSpec
from .layers import Precision
from .units import DTYPE_BITS, FLOAT_DTYPES, dtype_bytes
from .workload import Settings

_INT_LADDER = ("int1", "int2", "int4", "int8")


def _is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def _operand_type(w: str, a: str) -> str:
    """The narrowest type both operands can be expressed in."""
    if _is_float(w) != _is_float(a):
        return a if _is_float(a) else w
    if DTYPE_BITS[w] == DTYPE_BITS[a]:
        return a
    return w if DTYPE_BITS[w] > DTYPE_BITS[a] else a


def _supported(dtype: str, device: DeviceSpec) -> bool:
    if dtype.startswith("fp8"):
        return "fp8" in device.matrix_peak or dtype in device.matrix_peak
    return dtype in device.matrix_peak


def _float_fallback(a: str, device: DeviceSpec) -> str:
    for dtype in ((a,) if _is_float(a) and not a.startswith("fp8") else ()) + ("fp16", "bf16", "fp32"):
        if dtype in device.matrix_peak:
            return dtype
    raise UnsupportedDtypeError(a, device.name, sorted(device.matrix_peak))


def matrix_dtype(w: str, a: str, device: DeviceSpec) -> str:
    """The compute type of a matrix op with weights in ``w`` and activations in ``a``."""
    dtype = _operand_type(w, a)
    if _supported(dtype, device):
        return "fp8" if dtype.startswith("fp8") and "fp8" in device.matrix_peak else dtype
    if dtype in _INT_LADDER:
        for wider in _INT_LADDER[_INT_LADDER.index(dtype) + 1:]:
            if wider in device.matrix_peak:
                return wider
        return _float_fallback(a, device)
    if dtype.startswith("fp8"):
        return _float_fallback(a, device)
    raise UnsupportedDtypeError(dtype, device.name, sorted(device.matrix_peak))


def vector_dtype(a: str) -> str:
    """Element-wise ops run in the activation type, or fp16 when activations are integers."""
    return a if _is_float(a) and not a.startswith("fp8") else "fp16"


def resolve(settings: Settings, device: DeviceSpec) -> Precision:
    return Precision(
        wb=dtype_bytes(settings.w_dtype),
        ab=dtype_bytes(settings.a_dtype),
        kvb=dtype_bytes(settings.kv_dtype),
        matrix_dtype=matrix_dtype(settings.w_dtype, settings.a_dtype, device),
        vector_dtype=vector_dtype(settings.a_dtype),
    )
