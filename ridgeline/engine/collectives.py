"""NCCL's cost model of a collective on one node (src/graph/tuning.cc, ncclTopoTuneModel and
ncclTopoGetAlgoTime): each algorithm x protocol costs a base latency, a per-hop latency for
each of its steps, and the bytes over a bus bandwidth it reaches; NCCL runs the cheapest, so
a small all-reduce takes ring LL and a large one ring Simple.

    time = base + steps x hop + bytes / (link bandwidth x fraction)

Ring all-reduce: 2(n-1) steps and 2(n-1)/n x message; tree all-reduce (one node: a chain):
2(n-1) steps and the message over half the bus bandwidth; ring all-gather: n-1 steps and
(n-1)/n x message. Constants from NCCL master (2026) and RCCL (ROCm/rccl, 2024):
https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc
https://github.com/ROCm/rccl/blob/develop/src/graph/tuning.cc
The bandwidth is NCCL's own bus bandwidth where the device states it (links x the
architecture's per-link figure, src/graph/topo.h: SM90_NVLINK_BW 20.6 GB/s x 18 links =
370.8 GB/s on Hopper, not the datasheet's 450), and ring LL is capped at the architecture's
llMaxBws (141 GB/s on one Hopper node). Not modelled: the per-channel caps (perChMax*), the
tree's size correction factors (they only slow the tree), NVLS/CollNet/PAT (multi-node or
NVSwitch multicast)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

US = 1e-6


@dataclass(frozen=True)
class Protocol:
    """One algorithm x protocol (LL, LL128, Simple) of a collective model."""

    algorithm: str  # ring | tree
    base_s: float  # baseLatencies
    hop_s: float  # hwLatencies of the link class, per step
    fraction: float  # bus bandwidth / link bandwidth (NCCL's busBw refinements)
    protocol: str = ""  # LL | LL128 | Simple


def _nccl(hops: dict[tuple[str, str], float], ll128: bool) -> tuple[Protocol, ...]:
    """NCCL's single-node table: baseLatencies (tree 6.8 / 14.0 / 8.4, ring 6.6 / 14.0 /
    8.4 µs) with the link class's hwLatencies; fractions: ring LL x 0.5, LL128 x 0.92; tree
    x 0.92, then LL x 1/3.8, LL128 x 7/9. LL128 runs over NVLink only (protoEnable)."""
    base = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
    fraction = {"tree": (0.92 / 3.8, 0.92 * 7 / 9, 0.92), "ring": (0.5, 0.92, 1.0)}
    return tuple(
        Protocol(a, base[a][i] * US, hops[a, p] * US, fraction[a][i], p)
        for a in ("ring", "tree")
        for i, p in enumerate(("LL", "LL128", "Simple"))
        if ll128 or p != "LL128"
    )


# hwLatencies (µs per step) of the two link classes on one node: (NVLink, PCI)
HOPS = {
    ("tree", "LL"): (0.6, 1.0),
    ("tree", "LL128"): (1.25, 1.9),
    ("tree", "Simple"): (4.0, 4.0),
    ("ring", "LL"): (0.6, 1.0),
    ("ring", "LL128"): (1.9, 2.5),
    ("ring", "Simple"): (3.4, 5.7),
}
# RCCL: baseLat 12 (LL) and 17 µs (Simple) for ring and tree; hwLat of xGMI (its NVLINK slot)
# in tuning models 0, 3 and 4: ring LL 0.8, Simple 3.6; tree LL 0.8, Simple 2.5. LL128 is off
# (RCCL enables it only on gfx90a with a tuning table); the bandwidth fractions are NCCL's.
RCCL_XGMI = tuple(
    Protocol(a, base * US, hop * US, f, protocol)
    for a, protocol, base, hop, f in (
        ("ring", "LL", 12.0, 0.8, 0.5),
        ("ring", "Simple", 17.0, 3.6, 1.0),
        ("tree", "LL", 12.0, 0.8, 0.92 / 3.8),
        ("tree", "Simple", 17.0, 2.5, 0.92),
    )
)

MODELS = {
    "nccl-nvlink": _nccl({k: v[0] for k, v in HOPS.items()}, ll128=True),
    "nccl-pci": _nccl({k: v[1] for k, v in HOPS.items()}, ll128=False),
    "rccl-xgmi": RCCL_XGMI,
}
LABELS = {
    "nccl-nvlink": "NCCL model, NVLink latencies",
    "nccl-pci": "NCCL model, PCI latencies",
    "rccl-xgmi": "RCCL latencies, NCCL model",
}
MODELLED = ("all_reduce", "all_gather")  # what tuning.cc prices (all-to-all and sends are p2p)


def collective_seconds(model: str, kind: str, sent, devices: int, bandwidth, ll_max: float | None = None):
    """Seconds of one collective under ``model``: the cheapest algorithm x protocol, as NCCL
    picks. ``sent`` is what one device sends on a ring (``ops.collective``'s comm_bytes);
    ``ll_max`` caps ring LL's bus bandwidth (NCCL's llMaxBws)."""
    steps = 2 * (devices - 1) if kind == "all_reduce" else devices - 1
    message = np.asarray(sent, dtype=float) * devices / (2 * (devices - 1))
    best = None
    for p in MODELS[model]:
        if p.algorithm == "tree" and kind != "all_reduce":
            continue
        # tree: the message over half the bus bandwidth (NCCL's algorithm-bandwidth ratio .5)
        bus = bandwidth * p.fraction
        if ll_max and p.algorithm == "ring" and p.protocol == "LL":
            bus = np.minimum(bus, ll_max)
        data = sent / bus if p.algorithm == "ring" else message / (0.5 * bus)
        t = p.base_s + steps * p.hop_s + data
        best = t if best is None else np.minimum(best, t)
    return best
