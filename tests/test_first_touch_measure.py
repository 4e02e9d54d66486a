"""How calibration measures a CPU's first touch: fresh pages that no heap state can recycle,
and a rate no page fault can reach refused (hand-worked from a Zen 5 calibration's own
timings, 2026-11-28, where a 64 MiB fill read 902 GB/s against a 39.3 GB/s copy)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from kernels.bench.suite import RunConfig  # noqa: E402
from kernels.calibrate import calibrate  # noqa: E402

CPU = RunConfig("cpu", 1, 32 * 2**20, 0.1, 5, 0.0, "")
MIB64 = 64 * 2**20


def _faked(monkeypatch, fresh_s: float, reused_s: float) -> None:
    """The two timings ``measure_first_touch`` takes, in its order: the reused buffer, then fresh pages."""
    times = iter((reused_s, fresh_s))
    monkeypatch.setattr(
        calibrate, "_timed", lambda fn, args, cfg, budget=None: SimpleNamespace(median_s=next(times), spread=0.01)
    )


def test_fresh_pages_that_cost_nothing_more_are_refused_not_kept_as_a_rate(monkeypatch):
    # 1.7788 ms fresh against 1.7044 ms reused: 64 MiB / 0.0744 ms = 902 GB/s, above the copy
    _faked(monkeypatch, 1.7788e-3, 1.7044e-3)
    assert calibrate.measure_first_touch(CPU, copy_gb_s=39.291) is None


def test_a_page_fault_rate_below_the_copy_is_kept(monkeypatch):
    # 23.868 ms fresh against 1.706 ms reused: 64 MiB / 22.162 ms = 3.028 GB/s
    _faked(monkeypatch, 23.868e-3, 1.706e-3)
    touch = calibrate.measure_first_touch(CPU, copy_gb_s=39.291)
    assert touch["gb_s"] == pytest.approx(MIB64 / 22.162e-3 / 1e9)
    assert touch["gb_s"] == pytest.approx(3.028, abs=1e-3)
    assert touch["bytes"] == MIB64
    assert touch["pages"] == "a private anonymous mapping per fill"


def test_no_first_touch_on_a_gpu_or_when_fresh_pages_are_not_slower(monkeypatch):
    assert calibrate.measure_first_touch(RunConfig("cuda", 1, 1.0, 0.1, 5, 0.0, ""), copy_gb_s=3000.0) is None
    _faked(monkeypatch, 1.0e-3, 1.2e-3)
    assert calibrate.measure_first_touch(CPU, copy_gb_s=39.291) is None


def test_fresh_pages_are_filled_in_a_mapping_of_their_own(monkeypatch):
    import mmap

    made = []
    real = mmap.mmap
    monkeypatch.setattr(mmap, "mmap", lambda *a, **k: made.append(k.get("flags")) or real(*a, **k))
    calibrate.fresh_pages(2**20)
    calibrate.fresh_pages(2**20)
    assert made == [mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS] * 2


def test_calibrate_says_when_it_keeps_no_first_touch_and_what_it_kept():
    assert calibrate.first_touch_line(None, "cpu") == (
        "  first touch: none kept (fresh pages cost no more than reused ones, or faster than the copy): priced at 0"
    )
    assert calibrate.first_touch_line(None, "cuda") is None
    kept = {"gb_s": 2.9718, "mmap_threshold_bytes": 32 * 2**20}
    assert calibrate.first_touch_line(kept, "cpu") == "  first touch 2.97 GB/s (fresh pages of allocations from 32 MiB)"
