"""Kernels through torch on the CPU: correctness checks, rows, skips and errors (small shapes)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

torch = pytest.importorskip("torch")

from kernels.bench import bench as B
from kernels.bench.cases import Case, Options, suite_cases
from kernels.bench.suite import RunConfig, run_case

CFG = RunConfig("cpu", 1, 2**20, budget_s=0.002, min_reps=3)
SMALL = {"model": "qwen2-0.5b", "stage": "decode", "batch": 2, "length": 63}


def small_cases(dtype: str) -> list[Case]:
    """One case per kernel at qwen2-0.5b decode sizes (plus int_mm at a small prefill)."""
    cases = [
        c
        for c in suite_cases("calibration", Options((dtype,), ("math", "flash")), quick=True)
        if c.recipe.get("model") == "qwen2-0.5b" and c.stage == "decode" and c.recipe.get("batch") == 2
    ]  # the smallest calibration decode batch
    picked = {}
    for c in cases:
        picked.setdefault((c.kernel, c.backend), c)
    return list(picked.values())


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_kernel_matches_float64(dtype):
    torch.manual_seed(1)
    cases = small_cases(dtype)
    kernels = {c.kernel for c in cases}
    assert {"linear", "qk_matmul", "sv_matmul", "softmax", "rmsnorm", "residual_add", "silu_mul", "sdpa"} <= kernels
    for case in cases:
        try:
            bench = B.make_bench(case, "cpu", 2**20)
        except B.Unsupported:
            continue
        with bench.context():
            err = bench.check()
        assert err <= B.tolerance(case), (case.name, err)
        assert err > 0 or case.kernel == "int8_matmul" or dtype == "fp32"


def test_int_mm_is_exact():
    case = Case(
        "t/int8mm",
        "quant",
        "int8_matmul",
        "bf16",
        MappingProxyType({"builder": "int_matmul", "m": 32, "k": 128, "n": 64, "dtype": "int8"}),
    )
    bench = B.make_bench(case, "cpu", 2**20)
    assert bench.check() == 0.0


def test_run_case_row_has_measurement_and_op():
    case = small_cases("fp32")[0]
    row = run_case(case, CFG)
    assert row["status"] == "ok", row["reason"]
    assert row["rel_error"] <= row["tolerance"]
    assert 0 < row["p20_s"] <= row["measured_s"] <= row["p80_s"]
    assert row["flops"] == float(case.op.flops) and row["bytes"] == float(case.op.bytes)
    assert row["name"] == case.name and row["dims"] == {k: v for k, v in case.op.dims.items()}


def test_wrong_result_is_an_error_not_a_timing(monkeypatch):
    case = small_cases("fp32")[0]
    real = B.BUILDERS[case.kernel]

    def broken(c, dev, cache):
        bench = real(c, dev, cache)
        bench.check = lambda: 0.5
        return bench

    monkeypatch.setitem(B.BUILDERS, case.kernel, broken)
    row = run_case(case, CFG)
    assert row["status"] == "error" and row["reason"].startswith("wrong result: relative error 0.5")
    assert "measured_s" not in row


def test_fp8_on_cpu_is_skipped_with_a_reason():
    case = Case(
        "t/fp8",
        "quant",
        "fp8_matmul",
        "bf16",
        MappingProxyType({"builder": "int_matmul", "m": 32, "k": 64, "n": 64, "dtype": "fp8", "rename": "fp8_matmul"}),
    )
    row = run_case(case, CFG)
    assert row["status"] == "skipped" and "compute capability" in row["reason"]


def test_rope_bf16_is_skipped():
    case = Case(
        "t/rope",
        "elementwise",
        "rope",
        "bf16",
        MappingProxyType({"builder": "engine", **SMALL, "dtype": "bf16", "op": "rope"}),
    )
    with pytest.raises(B.Unsupported, match="fp32 only"):
        B.make_bench(case, "cpu", 2**20)


def test_inputs_are_never_zero():
    case = Case(
        "t/lin",
        "gemv",
        "linear",
        "fp32",
        MappingProxyType({"builder": "linear", "m": 3, "k": 64, "n": 32, "dtype": "fp32"}),
    )
    bench = B.make_bench(case, "cpu", 2**20)
    for args in bench.arg_sets:
        assert all(bool((a != 0).all()) for a in args)
    assert bool((B._nonzero_int8(64, 64, device="cpu") != 0).all())


@pytest.mark.gpu
def test_cuda_cases_run():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    cfg = RunConfig("cuda", 1, 50 * 2**20, budget_s=0.01, min_reps=3)
    for case in small_cases("bf16")[:6]:
        row = run_case(case, cfg)
        assert row["status"] in ("ok", "skipped"), (case.name, row["reason"])


def test_folded_gqa_decode_takes_any_output_layout(monkeypatch):
    """The memory-efficient CUDA kernel returns its output as a transposed view; the folded
    grouped-query decode path must not need a contiguous one (it once used .view and every
    such case was skipped as 'unavailable')."""
    case = next(c for c in small_cases("fp32") if c.kernel == "sdpa")
    assert case.op.dims["kv_heads"] < case.op.dims["heads"] and case.stage == "decode"
    real = B.F.scaled_dot_product_attention

    def strided(*args, **kwargs):  # same values, [b, q, h, d] memory order
        return real(*args, **kwargs).transpose(1, 2).contiguous().transpose(1, 2)

    monkeypatch.setattr(B.F, "scaled_dot_product_attention", strided)
    bench = B.make_bench(case, "cpu", 2**20)
    with bench.context():
        assert bench.check() <= B.tolerance(case)
