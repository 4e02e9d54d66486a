"""Map the names drivers report to catalog names (each device YAML lists its ``driver_names``)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _driver_patterns() -> tuple[tuple[str, str], ...]:
    """(substring of a driver's name, catalog name), longest substring first: 'H100 PCIe'
    before 'H100', 'GH200' before 'H200', 'L40S' before 'L4', 'A100' before 'A10'."""
    from ridgeline.io.hardware import list_devices, load_device

    pairs = [(pattern, name) for name in list_devices() for pattern in load_device(name).driver_names]
    return tuple(sorted(pairs, key=lambda pair: -len(pair[0])))


def catalog_name_for_gpu(driver_name: str) -> str | None:
    for pattern, name in _driver_patterns():
        if pattern in driver_name:
            return name
    return None
