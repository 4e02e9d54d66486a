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

import statistics
import time
from typing import Any

import torch

from ridgeline.errors import RidgelineError

from .decoder import Decoder, check_fits
from .e2e import resolve_device


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
        for pos in range(first, first + steps):
            token = model.decode(token, pos)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.time_range.elapsed_us() for e in kernels) * 1e-6
    return {"device_s": busy / steps, "kernels": len(kernels) / steps}


def profile_decode(config, *, batch: int, prompt: int, steps: int = 16, dtype: str = "bf16",
                   device: str = "cpu", seed: int = 0) -> list[dict[str, Any]]:
    """Two passes (new lengths, then the same lengths again) of ``steps`` decode steps."""
    if batch < 1 or prompt < 1 or steps < 1:
        raise RidgelineError("--batch, --prompt and --steps must be at least 1")
    device = resolve_device(device)
    max_len = prompt + steps + 1
    check_fits(config, batch, max_len, dtype, device)
    model = Decoder(config, dtype, device, max_batch=batch, max_len=max_len, seed=seed)
    tokens = torch.randint(0, config.vocab_size, (batch, prompt),
                           generator=torch.Generator().manual_seed(seed)).to(device)
    rows = []
    with torch.inference_mode():
        token = model.prefill(tokens)
        for name in ("new lengths", "same lengths again"):
            row = {"pass": name, **timed_steps(model, token, prompt, steps, device)}
            if device.startswith("cuda"):
                row.update(device_time(model, token, prompt, steps))
            rows.append(row)
    return rows


def report_lines(config, rows: list[dict[str, Any]], *, batch: int, prompt: int, steps: int,
                 dtype: str, device: str) -> list[str]:
    """The table ``ridgeline decode-profile`` prints."""
    lines = [f"{config.name} ({config.num_layers} layers, {dtype}) on {device}, batch {batch}, "
             f"prompt {prompt}, {steps} decode steps; ms per step (medians)"]
    for r in rows:
        dev = (f"  device {r['device_s'] * 1e3:8.2f}  kernels {r['kernels']:6.0f}"
               if "device_s" in r else "")
        lines.append(f"{r['pass']:<20} wall {r['wall_s'] * 1e3:8.2f}  "
                     f"enqueue {r['enqueue_s'] * 1e3:8.2f}{dev}")
    return lines
