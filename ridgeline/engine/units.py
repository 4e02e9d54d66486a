"""Units: SI inside the engine, formatting only at display.

Everything the engine computes is in operations, bytes, seconds and bytes/s.
Spec files carry their unit in the key (``memory_bandwidth_gb_s``); the loaders
convert with the constants below, once.
"""

from __future__ import annotations

import math

KILO, MEGA, GIGA, TERA = 1e3, 1e6, 1e9, 1e12
KIB, MIB, GIB = 2**10, 2**20, 2**30

# Bits per stored element of each data type the engine knows.
DTYPE_BITS: dict[str, int] = {
    "fp32": 32,
    "tf32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "fp8_e4m3": 8,
    "fp8_e5m2": 8,
    "fp6": 6,
    "fp4": 4,
    "int8": 8,
    "int4": 4,
    "int2": 2,
    "int1": 1,
}
FLOAT_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp6", "fp4")


def dtype_bytes(dtype: str) -> float:
    """Bytes per element (fractional for sub-byte integers)."""
    return DTYPE_BITS[dtype] / 8


def _scaled(value: float, steps: list[tuple[float, str]], unit: str, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for scale, prefix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{prefix}{unit}"
    return f"{value:.{digits}g}{unit}"


_SI = [(TERA, "T"), (GIGA, "G"), (MEGA, "M"), (KILO, "K")]


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.5e12 -> '1.5T' (decimal prefixes), as in the seed paper's tables."""
    return _scaled(value, _SI, unit, digits)


def format_bytes(value: float, digits: int = 3) -> str:
    """Bytes with binary prefixes: 2**30 -> '1GiB'."""
    return _scaled(value, [(GIB, "Gi"), (MIB, "Mi"), (KIB, "Ki")], "B", digits)


def format_time(seconds: float, digits: int = 3) -> str:
    """Seconds -> 's', 'ms' or 'µs' text."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    for scale, unit in [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs")]:
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds / 1e-9:.{digits}g} ns"
