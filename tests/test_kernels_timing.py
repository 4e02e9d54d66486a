"""The timing primitive: quantiles, noise flag, rotation, and the CPU/CUDA paths (no timing asserts)."""

from __future__ import annotations

import math
import time

import pytest

from kernels.bench.timing import Measurement, measure, rotation_sets, summarize


def test_summarize_quantiles_and_spread():
    m = summarize(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0],
        inner=4,
        sets=2,
        method="perf_counter",
        noise_threshold=0.1,
    )
    assert (m.p20_s, m.median_s, m.p80_s) == (3.0, 6.0, 9.0)
    assert m.spread == pytest.approx(2.0) and m.noisy
    assert m.reps == 11 and m.inner == 4 and m.sets == 2
    quiet = summarize([1.0, 1.01, 1.02, 1.0, 1.01], inner=1, sets=1, method="x", noise_threshold=0.1)
    assert not quiet.noisy
    assert set(quiet.to_dict()) >= {"median_s", "p20_s", "p80_s", "spread", "reps", "noisy"}


def test_summarize_needs_samples():
    with pytest.raises(ValueError):
        summarize([], inner=1, sets=1, method="x", noise_threshold=0.1)


def test_rotation_sets_outgrow_the_cache():
    mib = 2**20
    assert rotation_sets(1 * mib, 32 * mib) == 96  # 3 x 32 MiB / 1 MiB
    assert rotation_sets(2**10, 32 * mib) == 512  # capped by max_sets
    assert rotation_sets(8 * mib, 32 * mib) == 12  # 3 x 32 MiB / 8 MiB
    assert rotation_sets(200 * mib, 32 * mib) == 1  # one set already exceeds it
    assert rotation_sets(800 * mib, 32 * mib, max_total_bytes=1024 * mib) == 1
    assert rotation_sets(100 * mib, 320 * mib, max_total_bytes=300 * mib) == 3  # memory cap
    assert rotation_sets(0, 32 * mib) == 1


def test_measure_cpu_rotates_and_returns_ordered_quantiles():
    torch = pytest.importorskip("torch")
    seen = []

    def fn(x):
        seen.append(x)
        return sum(range(200))

    m = measure(fn, [(0,), (1,), (2,)], budget_s=0.01, min_reps=5, warmup_s=0.001)
    assert isinstance(m, Measurement)
    # one thread: the thread's own CPU time; more: wall time
    assert m.method == (
        "torch.utils.benchmark/thread_time" if torch.get_num_threads() == 1 else "torch.utils.benchmark"
    )
    assert 0 < m.p20_s <= m.median_s <= m.p80_s
    assert m.reps >= 5 and m.inner >= 1 and m.sets == 3
    assert set(seen) == {0, 1, 2}
    assert math.isfinite(m.spread)


@pytest.mark.slow
def test_one_thread_is_timed_by_its_own_cpu_time():
    """A one-thread kernel is timed by the thread's CPU time: a sleep inside the call costs
    nothing on that clock (time given to other processes is not the kernel's)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        m = measure(lambda: time.sleep(0.002), [()], budget_s=0.05, min_reps=5, warmup_s=0.0)
    finally:
        torch.set_num_threads(threads)
    assert m.method == "torch.utils.benchmark/thread_time"
    assert m.median_s < 0.5e-3  # wall time would be at least the 2 ms slept


def test_measure_needs_inputs():
    with pytest.raises(ValueError):
        measure(lambda: None, [])


@pytest.mark.gpu
def test_measure_cuda_events_and_graphs():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    big = [(torch.randn(4096, 4096, device="cuda"),) for _ in range(2)]
    m = measure(lambda x: x @ x, big, device="cuda", budget_s=0.05, timing="eager")
    assert m.method == "cuda_events" and 0 < m.p20_s <= m.median_s <= m.p80_s
    assert "nvml_before" in m.extra
    tiny = [(torch.randn(16, device="cuda"),) for _ in range(4)]
    t = measure(lambda x: x + 1, tiny, device="cuda", budget_s=0.02, timing="eager")
    assert t.method in ("cuda_graph", "cuda_events") and t.median_s > 0
