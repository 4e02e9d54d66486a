"""The host's side of a device profile: launch gap, dispatch per op, kernels per op.

    python -m kernels.calibrate.host_profile llama-3-8b --device cuda --layers 4 \
        --profile reports/profiles/cuda-nvidia-h100-80gb-hbm3.yaml

Runs the decoder's decode step (``kernels.e2e.decoder``) and measures, per engine op:

- ``host_us.eager``: host seconds per call, a host timer around the op with no
  synchronisation inside a step (each step starts on an empty queue: its few hundred
  launches never fill the device's queue, so the host never waits on it);
- ``kernels_per_op.eager``: device activities (kernels, copies) per call, counted in the
  op's ``torch.profiler`` range (its own and its children's, as ``device_time_total``
  sums their time); a CUDA graph replays exactly these;
- ``host_us.compiled`` / ``kernels_per_op.compiled``: under ``torch.compile`` (no graphs)
  ops are fused across the engine's boundaries, so one figure per engine op call: the
  step's enqueue time and its kernels, divided by the engine op calls of the step;
- ``launch_gap_us``: the device's idle time between back-to-back kernels in a graph
  (``kernels.bench.timing.launch_gap``).

The terms are merged into the profile YAML (atomically; the rest of it is kept), where
``ridgeline.io.profile`` reads them. Only a GPU has them: on a CPU the host runs the kernels
itself (its dispatch is in the fitted ``overhead_us``), so ``--device cpu`` prints the
terms as a dry run and writes only to an explicit ``--output``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from kernels.e2e import decoder
from kernels.e2e.decode_profile import OP_LABELS, HostTimer, _sync
from kernels.e2e.decoder import Decoder, check_fits
from ridgeline.errors import RidgelineError
from ridgeline.io.files import write_atomic, yaml_text

NOT_ENGINE_OPS = ("argmax",)  # greedy sampling: the decoder runs it, the engine does not model it


def count_kernels(event) -> int:
    """Device activities of a profiler range: its own and, recursively, its children's."""
    return len(event.kernels) + sum(count_kernels(c) for c in event.cpu_children)


def range_kernel_counts(events, steps: int) -> dict[str, dict[str, float]]:
    """Per op label: calls per step and device activities per call, from the host-side
    ranges (the profiler's device-side copies of the ranges are left out)."""
    calls: dict[str, int] = defaultdict(int)
    kernels: dict[str, int] = defaultdict(int)
    for e in events:
        if e.name in OP_LABELS and e.device_type == torch.autograd.DeviceType.CPU:
            calls[e.name] += 1
            kernels[e.name] += count_kernels(e)
    return {k: {"calls": calls[k] / steps, "kernels": kernels[k] / calls[k]} for k in calls}


def host_per_call(timer: HostTimer) -> dict[str, float]:
    """Seconds per call of each op the timer saw."""
    return {k: v / timer.calls[k] for k, v in timer.seconds.items() if timer.calls[k]}


def steps_synced(model: Decoder, token, first: int, steps: int, device: str, decode=None):
    """``steps`` decode steps from ``first``, the queue drained after each."""
    decode = decode or model.decode
    for pos in range(first, first + steps):
        token = decode(token, pos)
        _sync(device)
    return token


def eager_terms(model: Decoder, token, first: int, steps: int, device: str) -> dict[str, Any]:
    """Host seconds per call and kernels per call of each engine op in eager mode."""
    timer = HostTimer()
    decoder.LABELLER = timer
    try:
        steps_synced(model, token, first, steps, device)
    finally:
        decoder.LABELLER = None
    out: dict[str, Any] = {"host_s": host_per_call(timer), "calls": {k: c / steps for k, c in timer.calls.items()}}
    if device.startswith("cuda"):
        from torch.profiler import ProfilerActivity, profile

        decoder.LABELLER = torch.profiler.record_function
        try:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                steps_synced(model, token, first, steps, device)
        finally:
            decoder.LABELLER = None
        out["kernels"] = {k: v["kernels"] for k, v in range_kernel_counts(prof.events(), steps).items()}
    return out


def compiled_terms(model: Decoder, token, first: int, steps: int, device: str, engine_calls: float) -> dict[str, float]:
    """Host seconds and kernels per engine op call under torch.compile (no graphs)."""
    decode = torch.compile(model.decode)
    steps_synced(model, token, first, steps, device, decode)  # compile, warm up
    enqueue = []
    for pos in range(first, first + steps):
        _sync(device)
        start = time.perf_counter()
        token = decode(token, pos)
        enqueue.append(time.perf_counter() - start)
    _sync(device)
    out = {"host_s": float(sorted(enqueue)[len(enqueue) // 2]) / engine_calls}
    if device.startswith("cuda"):
        from torch.profiler import ProfilerActivity, profile

        from kernels.bench.timing import kernel_stats

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            steps_synced(model, token, first, steps, device, decode)
        out["kernels"] = kernel_stats(prof.events(), steps)[1] / engine_calls
    return out


def profile_terms(eager: dict[str, Any], compiled: dict[str, float] | None, gap_s: float) -> dict[str, Any]:
    """The profile's keys (µs, kernels per call; engine ops only, 'default' their median)."""

    def table(values: dict[str, float], scale: float) -> dict[str, float]:
        kept = {k: round(v * scale, 4) for k, v in values.items() if k not in NOT_ENGINE_OPS}
        ordered = sorted(kept.values())
        return {"default": ordered[len(ordered) // 2], **kept} if kept else {}

    terms: dict[str, Any] = {
        "launch_gap_us": round(gap_s * 1e6, 4),
        "host_us": {"eager": table(eager["host_s"], 1e6)},
        "kernels_per_op": {},
    }
    if "kernels" in eager:
        terms["kernels_per_op"]["eager"] = table(eager["kernels"], 1.0)
    if compiled is not None:
        terms["host_us"]["compiled"] = {"default": round(compiled["host_s"] * 1e6, 4)}
        if "kernels" in compiled:
            terms["kernels_per_op"]["compiled"] = {"default": round(compiled["kernels"], 4)}
    if not terms["kernels_per_op"]:
        del terms["kernels_per_op"]
    return terms


def measure_terms(
    config,
    *,
    device: str,
    batch: int = 1,
    prompt: int = 512,
    steps: int = 16,
    dtype: str = "bf16",
    compiled: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """Build the decoder, run ``steps`` decode steps per measurement, return the terms."""
    from kernels.e2e.e2e import resolve_device

    device = resolve_device(device)
    if batch < 1 or prompt < 1 or steps < 1:
        raise RidgelineError("--batch, --prompt and --steps must be at least 1")
    max_len = prompt + 2 * steps + 1
    check_fits(config, batch, max_len, dtype, device)
    model = Decoder(config, dtype, device, max_batch=batch, max_len=max_len, seed=seed)
    tokens = torch.randint(0, config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(seed)).to(
        device
    )
    with torch.inference_mode():
        token = model.prefill(tokens)
        steps_synced(model, token, prompt, steps, device)  # warm-up at these lengths
        eager = eager_terms(model, token, prompt, steps, device)
        engine_calls = sum(c for k, c in eager["calls"].items() if k not in NOT_ENGINE_OPS)
        comp = compiled_terms(model, token, prompt, steps, device, engine_calls) if compiled else None
    gap = 0.0
    if device.startswith("cuda"):
        from kernels.bench.timing import launch_gap

        gap = launch_gap()
    return profile_terms(eager, comp, gap)


def merge_into(path: Path, terms: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The profile at ``path`` with the terms (and their provenance) replaced; written
    atomically."""
    from ridgeline.io.profile import load_profile

    profile = load_profile(path)
    profile.update(terms)
    profile.setdefault("meta", {})["execution_terms"] = meta
    write_atomic(path, yaml_text(profile))
    return profile


def main(argv: list[str] | None = None) -> int:
    import argparse
    import datetime as dt
    import sys

    from kernels.bench.provenance import collect
    from kernels.e2e.e2e import truncate
    from ridgeline.io.resolve import load_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile terms")
    parser.add_argument("--profile", type=Path, help="merge the terms into this profile (CUDA)")
    parser.add_argument("--output", type=Path, help="write the terms alone to this YAML")
    args = parser.parse_args(argv)
    try:
        config = truncate(load_model(args.model), args.layers)
        terms = measure_terms(
            config,
            device=args.device,
            batch=args.batch,
            prompt=args.prompt,
            steps=args.steps,
            dtype=args.dtype,
            compiled=not args.no_compile,
        )
        meta = {
            **collect("cuda" if args.device.startswith("cuda") else "cpu", torch.get_num_threads()),
            "model": config.name,
            "layers": config.num_layers,
            "batch": args.batch,
            "prompt": args.prompt,
            "steps": args.steps,
            "dtype": args.dtype,
            "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        if args.profile is not None:
            if not args.device.startswith("cuda"):
                raise RidgelineError(
                    "--profile: a CPU profile keeps its dispatch in overhead_us; "
                    "host terms are for GPUs (use --output for a dry run)"
                )
            merge_into(args.profile, terms, meta)
            print(f"merged into {args.profile}")
        if args.output is not None:
            write_atomic(args.output, yaml_text({"meta": meta, **terms}, width=None))
            print(f"wrote {args.output}")
    except RidgelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(yaml_text(terms, width=None), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
