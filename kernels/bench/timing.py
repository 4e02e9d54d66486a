"""The one timing primitive: ``measure(fn, arg_sets)`` -> median, p20, p80, spread, repetitions.

Modelled on ``triton.testing.do_bench``: warm-up and repetitions as time budgets, quantiles
returned, never a bare mean.

- CPU: ``torch.utils.benchmark.Timer.blocked_autorange`` at the thread count the caller fixed
  with ``torch.set_num_threads`` (recorded): each sample is a block of ``inner`` calls, sized
  by its estimate so the timer's own overhead is under 1e-4 of the block.
- CUDA, device time (``timing="device"``, the default; Triton's ``do_bench_cudagraph``
  idea): ``inner`` back-to-back calls over the rotated input sets (together larger than
  the L2 cache) captured in one CUDA graph, replayed between CUDA events, so that no host
  time is in the figure; the launch gaps inside the graph (``kernels`` per call, each
  ``launch_gap_s``, measured once per process) are subtracted, leaving the kernels' own
  time. A case a graph cannot capture is timed from ``torch.profiler`` kernel durations
  instead; every row says which (``method``: ``cuda_graph`` | ``profiler``). The eager host
  cost per call (enqueueing without waiting) and the kernels per call are measured apart
  and kept in ``extra`` (``host_s``, ``kernels``), and ``agree=True`` also times the case
  by the profiler (``extra['profiler_s']``) to show that the two methods agree.
- CUDA, eager (``timing="eager"``, as measured before device timing existed): CUDA events
  around each repetition, the L2 cache flushed (a buffer twice its size zeroed) before each
  one, outside the timed region; kernels shorter than ``GRAPH_BELOW_S`` are captured
  ``inner`` times in a CUDA graph and timed by replay. Clocks, power and temperature are read
  (never set) before and after, in both modes.
- Both: ``arg_sets`` are rotated call after call, so that when the caller builds enough sets
  (``rotation_sets``) the working set exceeds the last-level cache several times over and
  each call reads from memory, as in a real forward pass.

A result whose spread p80/p20 - 1 exceeds ``noise_threshold`` is measured once more; if it
is still noisy it is returned with ``noisy=True`` - flagged, not silently averaged.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

MIN_SAMPLE_S = 200e-6  # CPU: time budget per required sample, at the least
GRAPH_BELOW_S = 10e-6  # CUDA: kernels shorter than this are timed by graph replay
NOISE_CPU = 0.10  # default noise thresholds on p80/p20 - 1
NOISE_CUDA = 0.05
LLC_FACTOR = 3  # rotate inputs until the working set is this many caches


@dataclass(frozen=True)
class Measurement:
    """Seconds per call of a kernel, as quantiles over repetitions."""

    median_s: float
    p20_s: float
    p80_s: float
    reps: int  # timed samples
    inner: int  # calls per sample (CPU) or per graph replay (CUDA)
    sets: int  # input sets rotated through
    method: str  # torch.utils.benchmark | cuda_events | cuda_graph
    noisy: bool
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def spread(self) -> float:
        """p80 / p20 - 1: the relative width of the middle 60% of samples."""
        return self.p80_s / self.p20_s - 1.0 if self.p20_s > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["spread"] = self.spread
        return out


def summarize(
    samples_s: Sequence[float],
    *,
    inner: int,
    sets: int,
    method: str,
    noise_threshold: float,
    extra: Mapping[str, Any] | None = None,
) -> Measurement:
    """Quantiles of per-call times (samples already divided by ``inner``)."""
    arr = np.asarray(samples_s, dtype=float)
    if arr.size == 0:
        raise ValueError("no samples to summarize")
    p20, med, p80 = (float(v) for v in np.quantile(arr, [0.2, 0.5, 0.8]))
    spread = p80 / p20 - 1.0 if p20 > 0 else math.inf
    return Measurement(
        med, p20, p80, int(arr.size), inner, sets, method, noisy=bool(spread > noise_threshold), extra=dict(extra or {})
    )


def rotation_sets(
    set_bytes: float,
    cache_bytes: float,
    *,
    factor: int = LLC_FACTOR,
    max_sets: int = 512,
    max_total_bytes: float = 1.5 * 2**30,
) -> int:
    """How many copies of an input set make the working set ``factor`` x the cache.

    Capped by ``max_sets`` and by ``max_total_bytes`` of memory: tiny kernels (a norm over
    one token) then stay cache-resident, which is fine - their time is launch overhead.
    """
    if set_bytes <= 0 or cache_bytes <= 0:
        return 1
    wanted = math.ceil(factor * cache_bytes / set_bytes)
    affordable = max(1, int(max_total_bytes // set_bytes))
    return int(max(1, min(wanted, max_sets, affordable)))


def _budgeted_reps(per_call_s: float, inner: int, budget_s: float, min_reps: int, max_reps: int) -> int:
    per_sample = max(per_call_s * inner, 1e-9)
    return int(min(max(budget_s / per_sample, min_reps), max_reps))


def _measure_cpu(
    fn: Callable,
    arg_sets: Sequence[tuple],
    *,
    budget_s: float,
    min_reps: int,
    max_reps: int,
    warmup_s: float,
    noise_threshold: float,
) -> Measurement:
    """``torch.utils.benchmark.Timer`` at the thread count the caller fixed: blocks of calls
    (its estimate sizes a block so the timer's overhead is under 1e-4 of it) for ``budget_s``,
    topped up to ``min_reps`` blocks; each call takes the next input set."""
    import torch
    from torch.utils import benchmark

    n, where = len(arg_sets), [0]
    for args in arg_sets:  # first touch of every set: page faults and kernel set-up stay out
        fn(*args)

    def step():
        fn(*arg_sets[where[0]])
        where[0] = (where[0] + 1) % n

    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        step()
    threads = torch.get_num_threads()
    clock = time.thread_time if threads == 1 else time.perf_counter
    timer = benchmark.Timer(stmt="step()", globals={"step": step}, num_threads=threads, timer=clock)
    found = timer.blocked_autorange(min_run_time=max(budget_s, MIN_SAMPLE_S * min_reps))
    inner = found.number_per_run
    samples = list(found.times)[:max_reps]
    while len(samples) < min_reps:
        samples.append(timer.timeit(inner).median)
    method = "torch.utils.benchmark" + ("/thread_time" if threads == 1 else "")
    return summarize(samples, inner=inner, sets=n, method=method, noise_threshold=noise_threshold)


def _measure_cuda(
    fn: Callable,
    arg_sets: Sequence[tuple],
    *,
    budget_s: float,
    min_reps: int,
    max_reps: int,
    warmup_s: float,
    noise_threshold: float,
    cache_bytes: float,
    graph: bool,
) -> Measurement:
    import torch

    from kernels.bench.provenance import nvml_state

    n = len(arg_sets)
    flush = torch.empty(int(2 * max(cache_bytes, 2**20)) // 4, dtype=torch.int32, device="cuda")
    before = nvml_state()
    for args in arg_sets:
        fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < warmup_s or calls < 3:
        fn(*arg_sets[calls % n])
        calls += 1
        if calls % 16 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for k in range(5):
        fn(*arg_sets[k % n])
    e1.record()
    torch.cuda.synchronize()
    per_call = e0.elapsed_time(e1) * 1e-3 / 5
    method, inner, runner = "cuda_events", 1, None
    if graph and per_call < GRAPH_BELOW_S:
        inner = max(1, min(256, math.ceil(50e-6 / max(per_call, 1e-7))))
        runner = _capture_graph(fn, arg_sets, inner)
        method = "cuda_graph" if runner is not None else method
        inner = inner if runner is not None else 1
    if runner is None:
        idx = [0]

        def runner():
            fn(*arg_sets[idx[0]])
            idx[0] = (idx[0] + 1) % n

    reps = _budgeted_reps(per_call, inner, budget_s, min_reps, max_reps)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for begin, end in events:
        flush.zero_()  # evict L2: the next kernel reads its inputs from HBM
        begin.record()
        runner()
        end.record()
    torch.cuda.synchronize()
    samples = [b.elapsed_time(e) * 1e-3 / inner for b, e in events]
    return summarize(
        samples,
        inner=inner,
        sets=n,
        method=method,
        noise_threshold=noise_threshold,
        extra={"nvml_before": before, "nvml_after": nvml_state()},
    )


def _capture_graph(fn: Callable, arg_sets: Sequence[tuple], inner: int):
    """A CUDA graph of ``inner`` calls over rotating sets, or None if capture fails."""
    import torch

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for k in range(3):
                fn(*arg_sets[k % len(arg_sets)])
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for k in range(inner):
                fn(*arg_sets[k % len(arg_sets)])
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - an uncapturable kernel is timed with plain events
        return None
    return g.replay


def measure(
    fn: Callable,
    arg_sets: Sequence[tuple],
    *,
    device: str = "cpu",
    budget_s: float = 0.3,
    min_reps: int = 7,
    max_reps: int = 300,
    warmup_s: float = 0.05,
    noise_threshold: float | None = None,
    cache_bytes: float = 50 * 2**20,
    graph: bool = True,
    retry: bool = True,
    timing: str = "device",
    agree: bool = False,
) -> Measurement:
    """Time ``fn(*args)`` rotating over ``arg_sets``; seconds per call as quantiles. On CUDA
    ``timing`` picks device time (graph replay / profiler) or eager events (see above)."""
    if not arg_sets:
        raise ValueError("measure needs at least one argument set")
    threshold = noise_threshold if noise_threshold is not None else (NOISE_CUDA if device == "cuda" else NOISE_CPU)
    kw = dict(budget_s=budget_s, min_reps=min_reps, max_reps=max_reps, warmup_s=warmup_s, noise_threshold=threshold)
    if timing not in ("device", "eager"):
        raise ValueError(f"timing must be 'device' or 'eager', got {timing!r}")
    if device != "cuda":

        def run():
            return _measure_cpu(fn, arg_sets, **kw)
    elif timing == "device":

        def run():
            return _measure_cuda_device(fn, arg_sets, cache_bytes=cache_bytes, agree=agree, **kw)
    else:

        def run():
            return _measure_cuda(fn, arg_sets, cache_bytes=cache_bytes, graph=graph, **kw)

    result = run()
    if result.noisy and retry:
        again = run()
        best = again if again.spread < result.spread else result
        result = Measurement(**{**asdict(best), "extra": {**best.extra, "retried": True}})
    return result


# --- device time on CUDA: graph replay, profiler kernel durations, host cost ---------------

GRAPH_TARGET_S = 1e-3  # a replayed graph lasts about this long (at least every set once)
GRAPH_MAX_CALLS = 1024
PROFILED_CALLS = 8  # calls under torch.profiler to count kernels and their time


def kernel_stats(events, calls: int, device_type=None) -> tuple[float, float]:
    """(device seconds per call, kernels per call) from ``torch.profiler`` events of
    ``calls`` calls: every event that ran on the device (kernels, copies, memsets)."""
    if calls < 1:
        raise ValueError("kernel_stats needs at least one call")
    if device_type is None:
        import torch

        device_type = torch.autograd.DeviceType.CUDA
    on_device = [e for e in events if e.device_type == device_type]
    busy_us = sum(e.time_range.elapsed_us() for e in on_device)
    return busy_us * 1e-6 / calls, len(on_device) / calls


def device_samples(replay_s: Sequence[float], inner: int, kernels: float, gap_s: float) -> list[float]:
    """Seconds per call of the kernels themselves from graph replays of ``inner`` calls:
    replay / inner minus the launch gap of each of the call's kernels (never below 0)."""
    return [max(t / inner - kernels * gap_s, 0.0) for t in replay_s]


def launch_gap_from(replay_per_kernel_s: float, kernel_s: float) -> float:
    """Device idle per kernel in a graph: the replay's time per kernel minus the kernel's
    own duration (a kernel too small to be limited by anything but its launch)."""
    return max(replay_per_kernel_s - kernel_s, 0.0)


def agreement(a_s: float, b_s: float) -> float:
    """|a / b - 1| of two timings of the same kernel (inf when b is 0)."""
    return abs(a_s / b_s - 1.0) if b_s > 0 else math.inf


def graph_calls(per_call_s: float, sets: int) -> int:
    """Calls captured in one graph: enough for ``GRAPH_TARGET_S`` and to touch every input
    set once (so the working set exceeds the L2 cache), at most ``GRAPH_MAX_CALLS``."""
    wanted = math.ceil(GRAPH_TARGET_S / max(per_call_s, 1e-7) - 1e-9)  # 1e-3/1e-6 is not 1000
    return int(max(1, min(max(wanted, sets), GRAPH_MAX_CALLS)))


def host_seconds(fn: Callable, arg_sets: Sequence[tuple], calls: int, sync: Callable) -> float:
    """Eager host cost per call: the time to enqueue ``calls`` calls without waiting for the
    device (on a CPU, where nothing is queued, the whole call)."""
    sync()
    start = time.perf_counter()
    for k in range(calls):
        fn(*arg_sets[k % len(arg_sets)])
    per_call = (time.perf_counter() - start) / calls
    sync()
    return per_call


def profile_calls(fn: Callable, arg_sets: Sequence[tuple], calls: int) -> tuple[float, float]:
    """(kernel seconds per call, kernels per call) of ``calls`` calls under torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for k in range(calls):
            fn(*arg_sets[k % len(arg_sets)])
        torch.cuda.synchronize()
    return kernel_stats(prof.events(), calls)


_GAP: dict[str, float] = {}


def launch_gap(kernels: int = 512) -> float:
    """Seconds the device idles between back-to-back kernels in a CUDA graph, measured once
    per process: a graph of ``kernels`` one-element adds, replayed, against the profiler's
    duration of those adds."""
    if "gap" in _GAP:
        return _GAP["gap"]
    import torch

    x = torch.zeros(1, device="cuda")

    def tiny():
        x.add_(1.0)

    graph = _capture_graph(tiny, [()], kernels)
    if graph is None:
        return 0.0
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    replays = []
    for _ in range(20):
        begin.record()
        graph()
        end.record()
        torch.cuda.synchronize()
        replays.append(begin.elapsed_time(end) * 1e-3 / kernels)
    kernel_s, _ = profile_calls(tiny, [()], 64)
    _GAP["gap"] = launch_gap_from(float(np.median(replays)), kernel_s)
    return _GAP["gap"]


def _measure_cuda_device(
    fn: Callable,
    arg_sets: Sequence[tuple],
    *,
    budget_s: float,
    min_reps: int,
    max_reps: int,
    warmup_s: float,
    noise_threshold: float,
    cache_bytes: float,
    agree: bool = False,
) -> Measurement:
    """Device time per call (see the module's docstring): graph replay, else the profiler."""
    import torch

    from kernels.bench.provenance import nvml_state

    n, sync = len(arg_sets), torch.cuda.synchronize
    before = nvml_state()
    for args in arg_sets:
        fn(*args)
    sync()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < warmup_s or calls < 3:
        fn(*arg_sets[calls % n])
        calls += 1
        if calls % 16 == 0:
            sync()
    host_s = host_seconds(fn, arg_sets, min(16, max(n, 4)), sync)
    profiled = min(PROFILED_CALLS, max(n, 2))
    profiler_s, kernels = profile_calls(fn, arg_sets, profiled)
    gap = launch_gap()
    inner = graph_calls(max(profiler_s, 1e-7), n)
    runner = _capture_graph(fn, arg_sets, inner)
    extra: dict[str, Any] = {"host_s": host_s, "kernels": kernels, "launch_gap_s": gap}
    if runner is None:  # not capturable: the profiler's kernel durations, repeated
        samples = [profiler_s]
        samples += [profile_calls(fn, arg_sets, profiled)[0] for _ in range(max(min_reps - 1, 2))]
        return summarize(
            samples,
            inner=profiled,
            sets=n,
            method="profiler",
            noise_threshold=noise_threshold,
            extra={**extra, "nvml_before": before, "nvml_after": nvml_state()},
        )
    reps = _budgeted_reps(max(profiler_s, 1e-7), inner, budget_s, min_reps, max_reps)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for begin, end in events:
        begin.record()
        runner()
        end.record()
    sync()
    replay_s = [b.elapsed_time(e) * 1e-3 for b, e in events]
    extra["graph_s"] = float(np.median(replay_s)) / inner  # gaps included
    if agree:
        extra["profiler_s"] = profiler_s
    return summarize(
        device_samples(replay_s, inner, kernels, gap),
        inner=inner,
        sets=n,
        method="cuda_graph",
        noise_threshold=noise_threshold,
        extra={**extra, "nvml_before": before, "nvml_after": nvml_state()},
    )


def busy_cores(interval_s: float = 0.25) -> float:
    """Cores kept busy by anything on the machine over ``interval_s`` (/proc/stat), ~0
    when it is quiet; called between runs, so this process itself adds almost nothing."""

    def jiffies() -> tuple[int, int]:
        with open("/proc/stat") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # total, idle + iowait

    try:
        total0, idle0 = jiffies()
        time.sleep(interval_s)
        total1, idle1 = jiffies()
    except (OSError, ValueError, IndexError):
        return 0.0
    cores = os.cpu_count() or 1
    return cores * (1 - (idle1 - idle0) / max(total1 - total0, 1))


def wait_for_quiet(max_wait_s: float, threshold: float | None = None) -> float:
    """Sleep (up to ``max_wait_s``) until other processes leave our threads free cores
    (they use at most ``threshold`` cores: by default the cores beyond torch's threads,
    at least 0.3): on a small shared CPU a thread that shares its core stalls the whole
    step. Returns the seconds waited."""
    if threshold is None:
        import torch

        threshold = max(0.3, (os.cpu_count() or 1) - torch.get_num_threads())
    start = time.perf_counter()
    while time.perf_counter() - start < max_wait_s and busy_cores() > threshold:
        time.sleep(0.5)
    return time.perf_counter() - start
