"""Where one eager decode step's time goes: host dispatch against device work.

    ridgeline decode-profile llama-3-8b --device cuda --batch 1 --prompt 512

For each of two passes over the same decode positions it reports, per step (medians):

- ``wall``: enqueue + wait, with a synchronisation after every step;
- ``enqueue``: host time until the step's last call returns (on a GPU the kernels may still
  be running; on a CPU it is the whole step);
- ``device``: kernel time per step from ``torch.profiler`` (CUDA only; a third run over the
  same positions), and the kernels launched per step.

The first pass meets every cache length for the first time (a backend that builds a plan per
shape, like cuDNN attention, pays for it here); the second repeats the same lengths, the
steady state that ``ridgeline e2e`` times after its warm-up. When ``enqueue`` is close to
``wall`` and ``device`` well under it, the step is host-bound: the roofline's device time
is not what limits it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict
from typing import Any

import torch

from kernels.e2e.decoder import Decoder, check_fits
from kernels.e2e.e2e import resolve_device
from ridgeline.errors import RidgelineError

OP_LABELS = (
    "embed",
    "attn_norm",
    "q_proj",
    "k_proj",
    "v_proj",
    "rope",
    "attention",
    "o_proj",
    "attn_add",
    "mlp_norm",
    "gate_proj",
    "up_proj",
    "mlp_act",
    "down_proj",
    "mlp_add",
    "final_norm",
    "lm_head",
    "argmax",
)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_steps(model: Decoder, token, first: int, steps: int, device: str) -> dict[str, float]:
    """Median wall and enqueue seconds of ``steps`` decode steps from position ``first``."""
    walls, enqueues = [], []
    for pos in range(first, first + steps):
        _sync(device)
        start = time.perf_counter()
        token = model.decode(token, pos)
        enqueued = time.perf_counter()
        _sync(device)
        walls.append(time.perf_counter() - start)
        enqueues.append(enqueued - start)
    return {"wall_s": statistics.median(walls), "enqueue_s": statistics.median(enqueues)}


def device_time(model: Decoder, token, first: int, steps: int) -> dict[str, float]:
    """Kernel seconds and kernel launches per step, from torch.profiler (CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _steps(model, token, first, steps, "cuda")
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.time_range.elapsed_us() for e in kernels) * 1e-6
    return {"device_s": busy / steps, "kernels": len(kernels) / steps}


def profile_decode(
    config,
    *,
    batch: int,
    prompt: int,
    steps: int = 16,
    dtype: str = "bf16",
    device: str = "cpu",
    seed: int = 0,
    ops: bool = False,
) -> dict[str, Any]:
    """Two passes (new lengths, then the same lengths again) of ``steps`` decode steps:
    ``{"passes": [row, row], "ops": op_breakdown(...) or None}`` (the latter with ``ops``)."""
    if batch < 1 or prompt < 1 or steps < 1:
        raise RidgelineError("--batch, --prompt and --steps must be at least 1")
    device = resolve_device(device)
    max_len = prompt + steps + 1
    check_fits(config, batch, max_len, dtype, device)
    model = Decoder(config, dtype, device, max_batch=batch, max_len=max_len, seed=seed)
    tokens = torch.randint(0, config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(seed)).to(
        device
    )
    rows = []
    with torch.inference_mode():
        token = model.prefill(tokens)
        for name in ("new lengths", "same lengths again"):
            row = {"pass": name, **timed_steps(model, token, prompt, steps, device)}
            if device.startswith("cuda"):
                row.update(device_time(model, token, prompt, steps))
            rows.append(row)
        breakdown = op_breakdown(model, token, prompt, steps, device) if ops else None
    return {"passes": rows, "ops": breakdown}


def predicted_ops(config, *, batch: int, seq_len: int, dtype: str, device: str) -> tuple[list[dict[str, Any]], str]:
    """The engine's decode ops for this run, with the device's calibrated profile when there
    is one (else the spec roofline), and which of the two it used."""
    from kernels.bench.provenance import datasheet_device
    from kernels.e2e.e2e import engine_settings, measured_key
    from ridgeline.api import analyze
    from ridgeline.engine.roofline import spec_ceilings
    from ridgeline.io.resolve import calibrated_for

    spec = datasheet_device(device)
    calibrated, path, _ = calibrated_for(measured_key(device), spec, None)
    ceilings = calibrated or spec_ceilings(spec)
    result = analyze(
        config, spec, batch=batch, seq_len=seq_len, generate=0, settings=engine_settings(dtype), ceilings=ceilings
    )
    return result.decode.records(), (f"calibrated ({path.name})" if calibrated else "spec")


class HostTimer:
    """Host seconds and calls per op name (a CPU runs each op before its call returns)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    @contextlib.contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start
            self.calls[name] += 1


def op_breakdown(model: Decoder, token, first: int, steps: int, device: str) -> dict[str, dict]:
    """Per engine op: calls and milliseconds per step over ``steps`` decode steps from
    ``first``: host time around the op on a CPU (a timer, about a microsecond per op), kernel
    time inside the op's ``torch.profiler`` range on CUDA."""
    from kernels.e2e import decoder

    cuda = device.startswith("cuda")
    timer = HostTimer()
    decoder.LABELLER = torch.profiler.record_function if cuda else timer
    try:
        if cuda:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                _steps(model, token, first, steps, device)
            return range_kernel_time(prof.events(), steps)
        _steps(model, token, first, steps, device)
    finally:
        decoder.LABELLER = None
    return {k: {"calls": timer.calls[k] / steps, "ms": v * 1e3 / steps} for k, v in timer.seconds.items()}


def range_kernel_time(events, steps: int) -> dict[str, dict]:
    """Calls and kernel milliseconds per step of each op's profiler range. Only the host-side
    range counts (its kernels and its children's): the profiler also reports a device-side
    copy of every range under the same name, whose span includes the gaps between kernels."""
    out: dict[str, dict] = {}
    for e in events:
        if e.name in OP_LABELS and e.device_type == torch.autograd.DeviceType.CPU:
            entry = out.setdefault(e.name, {"calls": 0.0, "ms": 0.0})
            entry["calls"] += 1 / steps
            entry["ms"] += e.device_time_total / 1e3 / steps
    return out


def _steps(model: Decoder, token, first: int, steps: int, device: str) -> None:
    for pos in range(first, first + steps):
        token = model.decode(token, pos)
    _sync(device)


def breakdown_rows(measured: dict[str, dict], predicted: list[dict[str, Any]]) -> list[dict]:
    """Measured ms per step beside the engine's, op by op (engine order; unmodelled last)."""
    rows = []
    for r in predicted:
        m = measured.get(r["name"], {})
        pred_ms = r["time_s"] * r["count"] * 1e3
        rows.append(
            {
                "op": r["name"],
                "calls": m.get("calls", 0.0),
                "count": r["count"],
                "measured_ms": m.get("ms"),
                "predicted_ms": pred_ms,
                "error": m["ms"] and pred_ms / m["ms"] - 1 if m else None,
            }
        )
    names = {r["name"] for r in predicted}
    rows += [
        {"op": k, "calls": v["calls"], "count": 0, "measured_ms": v["ms"], "predicted_ms": None, "error": None}
        for k, v in measured.items()
        if k not in names
    ]
    return rows


def breakdown_lines(rows: list[dict[str, Any]], mode: str, device: str) -> list[str]:
    what = "kernel time in its profiler range" if device.startswith("cuda") else "host time"
    lines = [
        f"per op, ms per step ({what}; predicted: {mode})",
        f"{'op':<12} {'calls':>6} {'measured':>10} {'predicted':>10} {'error':>7}",
    ]
    for r in rows:
        measured = "-" if r["measured_ms"] is None else f"{r['measured_ms']:.3f}"
        predicted = "-" if r["predicted_ms"] is None else f"{r['predicted_ms']:.3f}"
        error = "-" if r["error"] is None else f"{r['error']:+.0%}"
        lines.append(f"{r['op']:<12} {r['calls']:>6.0f} {measured:>10} {predicted:>10} {error:>7}")
    return lines


def report_lines(
    config, rows: list[dict[str, Any]], *, batch: int, prompt: int, steps: int, dtype: str, device: str
) -> list[str]:
    """The table ``ridgeline decode-profile`` prints."""
    lines = [
        f"{config.name} ({config.num_layers} layers, {dtype}) on {device}, batch {batch}, "
        f"prompt {prompt}, {steps} decode steps; ms per step (medians)"
    ]
    for r in rows:
        dev = f"  device {r['device_s'] * 1e3:8.2f}  kernels {r['kernels']:6.0f}" if "device_s" in r else ""
        lines.append(f"{r['pass']:<20} wall {r['wall_s'] * 1e3:8.2f}  enqueue {r['enqueue_s'] * 1e3:8.2f}{dev}")
    return lines


def run(
    config,
    *,
    batch: int,
    prompt: int,
    steps: int,
    layers: int | None,
    dtype: str,
    device: str | None,
    ops: bool,
    threads: int | None,
) -> list[str]:
    """``ridgeline decode-profile``: profile the decode step of ``config`` (its first
    ``layers`` layers) and return the report's lines; with ``ops``, each engine op beside
    its prediction."""
    from kernels.e2e.e2e import truncate

    config = truncate(config, layers)
    device = resolve_device(device)
    if threads:
        torch.set_num_threads(threads)
    result = profile_decode(config, batch=batch, prompt=prompt, steps=steps, dtype=dtype, device=device, ops=ops)
    lines = report_lines(config, result["passes"], batch=batch, prompt=prompt, steps=steps, dtype=dtype, device=device)
    if ops:
        predicted, mode = predicted_ops(config, batch=batch, seq_len=prompt + steps // 2, dtype=dtype, device=device)
        lines += breakdown_lines(breakdown_rows(result["ops"], predicted), mode, device)
    return lines
