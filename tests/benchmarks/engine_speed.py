"""Engine speed: one generation analysis in-process, sweep points per second, an analysis
with its intervals against one without, and the analytical pass of ``ridgeline plan`` per
deployment (the issue's example search).

Run: python tests/benchmarks/engine_speed.py   (prints medians of repeats; the machine is noisy)
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import ridgeline as rl
from ridgeline.serving.bounds import Load, Slo, Space, analytic_pass


def median_seconds(fn, inner: int, outer: int = 7) -> float:
    times = []
    for _ in range(outer):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def main() -> None:
    model, device = rl.load_model("llama-2-7b"), rl.load_device("a6000")
    one = median_seconds(lambda: rl.analyze(model, device, batch=1, seq_len=1024, generate=128), 100)
    print(f"one analysis (prompt 1024, generate 128): {one * 1e3:.3f} ms (goal < 1 ms)")
    batch = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    seq = np.arange(1, 1001) * 32
    for generate in (0, 128):
        t = median_seconds(lambda generate=generate: rl.sweep(model, device, batch, seq, generate=generate), 1, 5)
        print(
            f"sweep of {batch.size * seq.size} points, generate {generate}: {t:.3f} s "
            f"-> {batch.size * seq.size / t:,.0f} points/s (goal >= 10,000)"
        )
    intervals_cost(model, device)
    plan_pass()


def intervals_cost(model, device) -> None:
    """One analysis with its intervals (the device kind's spec residual pools, as
    ``Deployment.intervals`` carries them) against one without (issue 27: within 2x)."""
    with_intervals = rl.resolve(model, device)
    without = rl.resolve(model, device, intervals=(None, ""))
    times = {}
    for name, d in (("with", with_intervals), ("without", without)):
        times[name] = median_seconds(lambda d=d: rl.analyze(d, batch=1, seq_len=1024, generate=128), 100)
    print(
        f"analyze with intervals: {times['with'] * 1e3:.3f} ms, without: {times['without'] * 1e3:.3f} ms "
        f"-> {times['with'] / times['without']:.2f}x (goal <= 2x; {with_intervals.intervals.basis})"
    )


def plan_pass() -> None:
    """``ridgeline plan llama-3-8b --workload poisson:rate=20,prompt=512,output=256,n=10000
    --slo ttft=0.5,tpot=0.05 --devices h100-sxm,h200,a100-80gb,mi300x``: its bounds alone."""
    model = rl.load_model("llama-3-8b")
    space = Space(tuple(rl.load_device(n) for n in ("h100-sxm", "h200", "a100-80gb", "mi300x")))
    load, slo = Load(20, 512, 256, 10_000), Slo(0.5, 0.05)
    t = median_seconds(lambda: analytic_pass(model, space, load, slo), 1, 7)
    print(
        f"plan's analytical pass: {space.size} deployments in {t * 1e3:.0f} ms -> "
        f"{t / space.size * 1e6:.0f} µs per deployment (goal <= 100 µs)"
    )


if __name__ == "__main__":
    main()
