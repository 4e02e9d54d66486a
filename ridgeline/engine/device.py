"""Devices: the ``DeviceSpec`` record the engine computes with (SI units; loading and
validation are :mod:`ridgeline.io.hardware`'s, host detection :mod:`ridgeline.io.host`'s)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ridgeline.errors import UnsupportedDtypeError


@dataclass(frozen=True)
class DeviceSpec:
    """One device. Peaks are dense (no structured-sparsity doubling), in SI units."""

    name: str
    full_name: str
    vendor: str
    kind: str  # gpu | cpu | accelerator
    memory_capacity: float  # bytes
    memory_bandwidth: float  # bytes/s, datasheet peak
    matrix_peak: Mapping[str, float]  # ops/s per data type, matrix units
    vector_peak: Mapping[str, float]  # ops/s per data type, element-wise units
    compute_units: int = 0  # SMs / CUs / cores
    l1_bytes_per_unit: float = 0.0  # shared memory / L1 per unit
    l2_bytes: float = 0.0  # L2 (GPU) or last-level cache (CPU)
    interconnect: str | None = None
    interconnect_bandwidth: float | None = None  # bytes/s per direction per device
    interconnect_latency: float | None = None  # seconds per hop
    interconnect_topology: str = "switch"  # switch (every pair at full bandwidth) | mesh
    interconnect_link_bandwidth: float | None = None  # mesh: bytes/s per direction per peer link
    interconnect_domain: int = 0  # devices one interconnect joins (an HGX board 8, an NVL72 rack 72); 0: unstated
    collective_model: str = ""  # NCCL-style cost model of collectives (engine.collectives.MODELS)
    # NCCL's own bus bandwidth of the node (links x its per-link figure for the architecture,
    # src/graph/topo.h), and its cap on the LL protocol (llMaxBws, src/graph/tuning.cc); bytes/s.
    # None: the datasheet's interconnect bandwidth, uncapped
    nccl_bus_bandwidth: float | None = None
    nccl_ll_max: float | None = None
    exp_rate: float | None = None  # exponentials/s on the special-function units
    runtime_reserve: float = 0.0  # bytes the runtime holds (CUDA context, workspaces)
    sources: tuple[str, ...] = ()
    notes: str = ""
    derived_rates: tuple[str, ...] = ()  # matrix types whose rate no vendor publishes (notes say how it was derived)
    extra: Mapping[str, Any] = field(default_factory=dict)
    architecture: str = ""  # chip family: a profile transfers only within one
    driver_names: tuple[str, ...] = ()  # substrings of the name the driver reports

    @property
    def on_chip_bytes(self) -> float:
        """Total fast on-chip memory a tiled kernel can hold (sum of per-unit L1/shared)."""
        return self.l1_bytes_per_unit * max(self.compute_units, 1)

    def matrix_peak_for(self, dtype: str) -> float:
        if dtype not in self.matrix_peak:
            raise UnsupportedDtypeError(dtype, self.name, sorted(self.matrix_peak))
        return self.matrix_peak[dtype]

    def vector_peak_for(self, dtype: str) -> float:
        """Element-wise peak; types without their own vector rate run at the fp32 rate."""
        if dtype in self.vector_peak:
            return self.vector_peak[dtype]
        if "fp32" in self.vector_peak:
            return self.vector_peak["fp32"]
        return min(self.matrix_peak.values())
