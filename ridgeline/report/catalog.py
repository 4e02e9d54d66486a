"""The catalogs' listings (``hardware``, ``models``: a line per entry, or every field of
one) and what ``predictions register`` wrote."""

from __future__ import annotations

from dataclasses import asdict

from ridgeline.engine.collectives import LABELS as COLLECTIVE_LABELS
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.memory import active_parameters, total_parameters
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.units import GIB, GIGA, KIB, MIB, TERA

DEVICE_HEADER = "name\tdevice\tmemory\tbandwidth\tmatrix peaks (ops/s)"
MODEL_HEADER = "name\ttype\tlayers\thidden\tattention and heads (query/KV)\tMoE"


def device_line(name: str, d: DeviceSpec) -> str:
    """One catalog device: name, then the key figures."""
    peaks = " ".join(f"{k}={v / TERA:g}T" for k, v in d.matrix_peak.items())
    return f"{name}\t{d.full_name}\t{d.memory_capacity / GIB:g} GiB\t{d.memory_bandwidth / GIGA:g} GB/s\t{peaks}"


def device_rows(d: DeviceSpec) -> list[str]:
    """All fields of one device, in the units of its file."""
    link = f", {d.interconnect_bandwidth / GIGA:g} GB/s per direction" if d.interconnect_bandwidth else ""
    rows = [
        ("name", d.name),
        ("full name", d.full_name),
        ("vendor", d.vendor),
        ("kind", d.kind),
        ("memory", f"{d.memory_capacity / GIB:g} GiB"),
        ("bandwidth", f"{d.memory_bandwidth / GIGA:g} GB/s"),
        *((f"matrix {k}", f"{v / TERA:g} TOPS") for k, v in d.matrix_peak.items()),
        *((f"vector {k}", f"{v / TERA:g} TOPS") for k, v in d.vector_peak.items()),
        ("compute units", str(d.compute_units)),
        ("L1/shared per unit", f"{d.l1_bytes_per_unit / KIB:g} KiB"),
        ("L2 / last-level cache", f"{d.l2_bytes / MIB:g} MiB"),
        ("interconnect", f"{d.interconnect or '-'}{link}"),
    ]
    if d.interconnect_latency:
        rows.append(("link latency", f"{d.interconnect_latency * 1e6:g} µs per hop"))
    if d.collective_model:
        rows.append(("collectives", f"{COLLECTIVE_LABELS[d.collective_model]} (ring/tree x LL/LL128/Simple)"))
    if d.interconnect_link_bandwidth:
        rows.append(("fabric", f"mesh, {d.interconnect_link_bandwidth / GIGA:g} GB/s per peer link"))
    if d.exp_rate:
        rows.append(("exponentials", f"{d.exp_rate / TERA:g} T/s"))
    if d.runtime_reserve:
        rows.append(("runtime reserve", f"{d.runtime_reserve / GIB:g} GiB"))
    rows += [("source", s) for s in d.sources]
    return [f"{key:22s} {value}" for key, value in rows]


def model_line(name: str, m: ModelConfig) -> str:
    """One catalog model: name, then its shape."""
    moe = f"\tMoE {m.num_experts} experts, top-{m.num_experts_per_tok}" if m.is_moe else ""
    kinds = "\t" + ", ".join(f"{g.count} {g.label}" for g in m.layer_groups) if m.layer_groups else ""
    return (
        f"{name}\t{m.model_type}\t{m.num_layers} layers\thidden {m.hidden_size}\t"
        f"{m.attention_kind} {m.num_heads}/{m.num_kv_heads} heads{moe}{kinds}"
    )


def model_rows(m: ModelConfig) -> list[str]:
    """The parsed ModelConfig and its parameter count."""
    rows = [f"{key:32s} {value}" for key, value in asdict(m).items()]
    rows.append(f"{'parameters':32s} {total_parameters(m) / 1e9:.3f} B")
    if m.is_moe:
        rows.append(f"{'active parameters':32s} {active_parameters(m) / 1e9:.3f} B")
    return rows


def registered_line(data: dict, path) -> str:
    """What ``ridgeline predictions register`` wrote."""
    return (
        f"registered {len(data['e2e'])} e2e, {len(data['hf'])} transformers, "
        f"{len(data['serving'])} serving and {len(data['draw']['cases'])} draw predictions: {path}"
    )
