"""What changes from one CPU to the next: which data types have native kernels, and how
fast a pure read stream runs against a copy (a CPU whose writes first read their line)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernels.bench.cases import Options, suite_cases
from kernels.calibrate.calibrate import memory_roof

MIB = 1024 * 1024
LLC = SimpleNamespace(l2_bytes=32 * MIB)


def gemv(m: int, weight_mib: float, seconds: float, name: str):
    weights = weight_mib * MIB
    op = SimpleNamespace(
        kind="linear", dims={"m": m, "k": 8192, "n": 2048}, weight_bytes=weights, bytes=weights + 40960
    )
    return {"name": name, "measured_s": seconds}, op


def profile(copy_gb_s: float) -> dict:
    return {"bandwidth_gb_s": copy_gb_s, "measurements": {"copy": {"gb_s": copy_gb_s}}}


def test_a_read_stream_faster_than_the_copy_sets_the_memory_roof():
    """Zen 3, one thread: the copy moves 17.7 GB/s (read + write), a 64 MiB GEMV reads
    (64 MiB + 40 KiB) / 2.463 ms = 27.26 GB/s: the roof is the GEMV's."""
    rows, ops = zip(
        gemv(1, 64, 2.463e-3, "m1"), gemv(3, 64, 7.664e-3, "m3"), gemv(1, 16, 0.3e-3, "small")
    )  # 56 GB/s, but inside the cache: ignored
    p = profile(17.7)
    memory_roof(p, list(rows), list(ops), LLC)
    rate = (64 * MIB + 40960) / 2.463e-3 / 1e9
    assert p["bandwidth_gb_s"] == round(rate, 3) == 27.263
    assert p["measurements"]["stream"] == {"case": "m1", "gb_s": 27.263, "copy_gb_s": 17.7}
    memory_roof(p, list(rows), list(ops), LLC)  # a refit gives the same roof
    assert p["bandwidth_gb_s"] == 27.263 and p["measurements"]["stream"]["copy_gb_s"] == 17.7


def test_on_a_cpu_with_a_cache_larger_than_every_matrix_a_64_mib_stream_sets_the_roof():
    """Intel Xeon, 260 MiB L3, one thread: the copy moves 12.739 GB/s, a one-row fp32
    product over 64 MiB of weights (inputs rotated past 3x the cache) reads
    (64 MiB + 40 KiB) / 4.321 ms = 15.54 GB/s. A 16 MiB one is too short a stream to count."""
    xeon = SimpleNamespace(l2_bytes=260 * MIB)
    rows, ops = zip(gemv(1, 64, 4.321e-3, "m1x8192x2048"), gemv(1, 16, 0.5e-3, "m1x2048x2048"))
    p = profile(12.739)
    memory_roof(p, list(rows), list(ops), xeon)
    assert p["bandwidth_gb_s"] == round((64 * MIB + 40960) / 4.321e-3 / 1e9, 3) == 15.54
    assert p["measurements"]["stream"]["case"] == "m1x8192x2048"
    p = profile(12.739)
    memory_roof(p, [rows[1]], [ops[1]], xeon)  # 33.6 GB/s, but only 16 MiB
    assert p["bandwidth_gb_s"] == 12.739 and "stream" not in p["measurements"]


def test_a_copy_faster_than_every_stream_stays_the_roof():
    rows, ops = zip(gemv(1, 64, 2.463e-3, "m1"))
    p = profile(39.069)  # Zen 5: the copy already reads faster
    memory_roof(p, list(rows), list(ops), LLC)
    assert p["bandwidth_gb_s"] == 39.069 and "stream" not in p["measurements"]


def test_slow_data_types_are_skipped_with_the_measured_ratio(monkeypatch):
    """On AMD Zen 3 (AVX2 only) bf16, fp16 and int8 products run a scalar fallback."""
    import torch

    import kernels.bench.suite as suite

    seconds = {torch.float32: 1.0, torch.bfloat16: 118.0, torch.float16: 2.0, torch.int8: 57.0}
    monkeypatch.setattr(suite, "_matmul_seconds", lambda dtype, device: seconds[dtype])
    opts, skipped = suite.device_options("cpu")
    assert opts.dtypes == ("fp32", "fp16") and not opts.int8
    assert skipped == {
        "bf16": "bf16 matmul runs 118x slower than fp32 on this CPU (no native kernel)",
        "int8": "int8 matmul runs 57x slower than fp32 on this CPU (no native kernel)",
    }


@pytest.mark.parametrize("int8", [True, False])
def test_int8_products_are_cased_only_where_they_run_natively(int8):
    cases = suite_cases("validation", Options(("fp32", "bf16"), ("flash",), "cpu", int8=int8), True)
    assert any(c.kernel == "int8_matmul" for c in cases) == int8
    assert any(c.kernel == "int8_weight_only" for c in cases)  # bf16 activations, own kernel


@pytest.mark.slow
def test_the_committed_zen3_profile_is_what_todays_fit_gives(tmp_path):
    """Its calibration ran while the fit changed (meta.commit is '+dirty'): a refit from its
    CSV with the committed code gives the committed roofs and tables exactly."""
    import yaml

    from kernels.calibrate.calibrate import refit
    from ridgeline.io.catalog import PROFILES_DIR

    path = PROFILES_DIR / "cpu-amd-epyc-f25m1-1t.yaml"
    committed = yaml.safe_load(path.read_text())
    _, again = refit(path, tmp_path / "again.yaml", log=lambda _m: None)
    for key in ("bandwidth_gb_s", "matrix_peak_tops", "efficiency", "overhead_us", "row_curves", "refused"):
        assert again[key] == committed[key], key
    assert (
        again["measurements"]["stream"]
        == committed["measurements"]["stream"]
        == {"case": "grid/m1x8192x2048/fp32", "gb_s": 28.351, "copy_gb_s": 19.827}
    )
