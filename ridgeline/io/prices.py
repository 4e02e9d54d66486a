"""Prices per GPU-hour: the one dated public price list shipped in ``hardware/prices/``, and
a user's overrides (``--price DEVICE=USD``) on top."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ridgeline.errors import InvalidSpecError, InvalidWorkloadError
from ridgeline.io.catalog import HARDWARE_DIR
from ridgeline.io.files import read_yaml

PRICE_LIST = HARDWARE_DIR / "prices" / "crusoe-2026-09-20.yaml"


@dataclass(frozen=True)
class Price:
    """USD per GPU-hour of one device, and where the figure comes from."""

    usd_per_gpu_hour: float
    source: str  # the list's name, URL and date, or "--price"


def price_list() -> dict[str, Any]:
    """The shipped list as its file says: name, url, read date and the prices."""
    raw = read_yaml(PRICE_LIST)
    where = f"hardware/prices/{PRICE_LIST.name}"
    if not isinstance(raw, dict) or not isinstance(raw.get("usd_per_gpu_hour"), dict):
        raise InvalidSpecError(where, "expected 'usd_per_gpu_hour': a mapping of device names to prices")
    for key in ("list", "url", "read"):
        if not raw.get(key):
            raise InvalidSpecError(where, f"missing '{key}': a price list names its source and the date it was read")
    return raw


def _positive(device: str, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InvalidWorkloadError(
            f"{where}: the price of {device} must be a positive number of USD per GPU-hour, got {value!r}"
        )
    return float(value)


def prices_for(devices: list[str], overrides: dict[str, float] | None = None) -> dict[str, Price]:
    """Each device's price: ``overrides`` first, else the shipped list. A device with
    neither is refused, naming the fix."""
    raw = price_list()
    listed = raw["usd_per_gpu_hour"]
    cited = f"{raw['list']} ({raw['url']}, read {raw['read']})"
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(devices))
    if unknown:
        raise InvalidWorkloadError(f"--price names {', '.join(unknown)}, which is not among the devices searched")
    out = {}
    for name in devices:
        if name in overrides:
            out[name] = Price(_positive(name, overrides[name], "--price"), "--price")
        elif name in listed:
            out[name] = Price(_positive(name, listed[name], f"hardware/prices/{PRICE_LIST.name}"), cited)
        else:
            raise InvalidWorkloadError(
                f"no price for {name} in {raw['list']}; give one with --price {name}=USD_PER_GPU_HOUR"
            )
    return out
