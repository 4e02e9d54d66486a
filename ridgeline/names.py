"""Map the names drivers report to catalog names."""
from __future__ import annotations

_GPU_PATTERNS = [  # (substring in the driver's name, catalog name), most specific first
    ("GH200", "gh200"), ("H200", "h200"), ("B200", "b200"),
    ("H100 PCIe", "h100-pcie"), ("H100", "h100-sxm"),
    ("A100-SXM4-40GB", "a100-40gb"), ("A100-PCIE-40GB", "a100-40gb"), ("A100", "a100-80gb"),
    ("L40S", "l40s"), ("L4", "l4"), ("A6000", "a6000"), ("A10", "a10"),
    ("RTX 4090", "rtx-4090"), ("RTX 3090", "rtx-3090"), ("V100", "v100"), ("T4", "t4"),
]


def catalog_name_for_gpu(driver_name: str) -> str | None:
    for pattern, name in _GPU_PATTERNS:
        if pattern in driver_name:
            return name
    return None
