"""Calibrated model: the per-class fit and the engine's efficiency key lookup (no torch)."""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

from kernels.cases import build_op
from kernels.fit import EFF_GRID, OVERHEAD_GRID, fit_class, fit_key, fit_profile_terms, roof_seconds
from ridgeline.roofline import Ceilings, keys_for, time_op

CEIL = Ceilings("calibrated", 40e9, MappingProxyType({"fp32": 0.2e12, "bf16": 0.8e12, "int8": 1.6e12}),
                MappingProxyType({"fp32": 0.2e12}), device="test")


def test_fit_class_recovers_grid_parameters_exactly():
    ec, em, oh = EFF_GRID[80], EFF_GRID[60], OVERHEAD_GRID[20]
    compute = np.array([1e-3, 3e-3, 2e-5, 1e-6, 5e-4])
    memory = np.array([1e-4, 2e-4, 2e-3, 1e-6, 5e-4])
    measured = np.maximum(compute / ec, memory / em) + oh
    terms = fit_class(compute, memory, measured)
    assert terms["compute"] == pytest.approx(ec)
    assert terms["memory"] == pytest.approx(em)
    assert terms["overhead_s"] == pytest.approx(oh)
    assert terms["median_abs_error"] < 1e-9 and terms["cases"] == 5


def test_unconstrained_efficiency_stays_at_the_roof():
    # every case memory-bound by far: the compute term is pulled to 1
    terms = fit_class(np.full(4, 1e-9), np.array([1e-3, 2e-3, 4e-3, 8e-3]), np.array([2e-3, 4e-3, 8e-3, 16e-3]))
    assert terms["compute"] == pytest.approx(1.0, rel=0.05)
    assert terms["memory"] == pytest.approx(0.5, rel=0.03)


def test_fit_keys():
    base = {"model": "qwen2-0.5b", "stage": "decode", "batch": 1, "length": 100, "dtype": "bf16"}
    assert fit_key(build_op({"builder": "engine", **base, "op": "q_proj"})) == "linear@bf16"
    assert fit_key(build_op({"builder": "engine", **base, "op": "softmax"})) == "softmax:softmax@bf16"
    assert fit_key(build_op({"builder": "sdpa_math", **base})) == "attention:sdpa_math@bf16"
    wo = build_op({"builder": "engine", **base, "op": "o_proj", "w_dtype": "int8",
                   "rename": "int8_weight_only"})
    assert fit_key(wo) == "linear:int8_weight_only@bf16"


def test_fitted_terms_reproduce_synthetic_measurements():
    recipes = [{"builder": "linear", "m": m, "k": 2048, "n": 2048, "dtype": "bf16"} for m in (1, 8, 64, 512)]
    ops = [build_op(r) for r in recipes]
    compute, vector, memory = roof_seconds(ops, CEIL)
    assert not vector.any()
    truth = np.maximum(compute / 0.7, memory / 0.55) + 4e-6
    rows = [{"measured_s": t} for t in truth]
    efficiency, overhead, report = fit_profile_terms(rows, ops, CEIL)
    assert set(efficiency) == {"linear@bf16", "linear"}
    calibrated = Ceilings("calibrated", CEIL.bandwidth, CEIL.matrix_peak, CEIL.vector_peak,
                          MappingProxyType(efficiency), MappingProxyType(overhead))
    for op, t in zip(ops, truth):
        assert float(time_op(op, calibrated)["time_s"]) == pytest.approx(t, rel=0.05)
    assert report["linear@bf16"]["median_abs_error"] < 0.05


def test_engine_looks_up_the_most_specific_key():
    op = build_op({"builder": "engine", "model": "qwen2-0.5b", "stage": "prefill", "batch": 1,
                   "length": 64, "dtype": "fp32", "op": "q_proj"})
    assert keys_for(op) == ("linear:q_proj@fp32", "linear:q_proj", "linear@fp32", "linear")
    table = {"linear": {"compute": 0.5, "memory": 0.5}, "linear@fp32": {"compute": 0.25, "memory": 0.5}}
    c = Ceilings("calibrated", 1e10, {"fp32": 1e12}, {"fp32": 1e12}, table,
                 {"default": 1e-6, "linear@fp32": 2e-6})
    assert c.compute_roof(op) == 0.25e12 and c.overhead(op) == 2e-6
    spec = Ceilings("spec", 1e10, {"fp32": 1e12}, {"fp32": 1e12})
    assert spec.compute_roof(op) == 1e12 and spec.memory_roof(op) == 1e10 and spec.overhead(op) == 0.0


def test_tile_fill_scales_compute_for_few_rows_and_spares_gemv():
    base = {"builder": "linear", "k": 1024, "n": 1024, "dtype": "fp32"}
    eff = {"linear@fp32": {"compute": 1.0, "memory": 1.0, "rows_half": 8.0, "gemv": 1.0}}
    c = Ceilings("calibrated", 1e10, {"fp32": 1e12}, {"fp32": 1e12}, eff, {})
    roof = {m: c.compute_roof(build_op({**base, "m": m})) for m in (1, 8, 24)}
    assert roof[1] == 1e12                       # one row: a GEMV kernel, no tiles
    assert roof[8] == pytest.approx(0.5e12)      # 8 / (8 + 8)
    assert roof[24] == pytest.approx(0.75e12)
    no_gemv = Ceilings("calibrated", 1e10, {"fp32": 1e12}, {"fp32": 1e12},
                       {"linear@fp32": {"compute": 1.0, "rows_half": 8.0}}, {})
    assert no_gemv.compute_roof(build_op({**base, "m": 1})) == pytest.approx(1e12 / 9)


@pytest.mark.parametrize("heads, kv_heads, q_len, rows", [
    (32, 32, 1, 1),       # MHA decode: one query row per K/V head
    (32, 8, 1, 4),        # GQA decode (Llama-3-8B): the group of 4 shares K/V
    (71, 1, 1, 71),       # MQA decode (Falcon-7B): every head shares one K/V head
    (32, 8, 256, 1024),   # prefill: query length times the group
])
def test_attention_tile_rows_are_query_rows_per_kv_head(heads, kv_heads, q_len, rows):
    from ridgeline import ops as O
    from ridgeline.roofline import tile_rows

    kw = dict(ab=2, kvb=2, count=1, dtype="bf16")
    assert tile_rows(O.qk_matmul(2, heads, kv_heads, q_len, 512, 128, **kw)) == rows
    flash = O.flash_attention(2, heads, kv_heads, q_len, q_len * 512, 512, 128, 128,
                              inputs=("q",), **kw)
    assert tile_rows(flash) == rows
    c = Ceilings("calibrated", 1e10, {"bf16": 1e12}, {"bf16": 1e12},
                 {"attention@bf16": {"compute": 1.0, "rows_half": 4.0}}, {})
    assert c.compute_roof(flash) == pytest.approx(1e12 * rows / (rows + 4))


def test_tile_fill_broadcasts_over_workload_arrays():
    import ridgeline as rl
    from ridgeline.hardware import load_device

    eff = {"linear@fp16": {"compute": 0.9, "memory": 0.6, "rows_half": 16.0, "gemv": 1.0,
                           "gemv_memory": 0.45}}
    dev = load_device("a6000")
    c = Ceilings("calibrated", dev.memory_bandwidth, dev.matrix_peak, dev.vector_peak, eff, {})
    batches = np.array([1, 4, 64])
    frame = rl.sweep("llama-3.2-1b", "a6000", batches, np.array([128]), generate=4, ceilings=c)
    single = [rl.analyze("llama-3.2-1b", "a6000", batch=int(b), seq_len=128, generate=4,
                         ceilings=c).generation["tpot_s"] for b in batches]
    assert frame["tpot_s"].to_numpy() == pytest.approx(single, rel=1e-9)


def test_fit_keeps_one_row_products_out_of_the_tile_fit():
    shapes = [(m, kn) for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) for kn in (1024, 4096)]
    ops = [build_op({"builder": "linear", "m": m, "k": kn, "n": kn, "dtype": "bf16"}) for m, kn in shapes]
    compute, vector, memory = roof_seconds(ops, CEIL)
    rows = np.array([m for m, _ in shapes], dtype=float)
    fill = np.where(rows == 1, 1.0, rows / (rows + 16))
    truth = np.maximum(compute / fill, memory / 0.5) + 2e-6
    efficiency, overhead, report = fit_profile_terms([{"measured_s": t} for t in truth], ops, CEIL)
    terms = efficiency["linear@bf16"]
    assert terms["gemv"] == 1.0 and terms["rows_half"] == 16.0
    assert terms["memory"] == pytest.approx(0.5, rel=0.03)
    assert report["linear@bf16"]["max_abs_error"] < 0.03


def test_one_row_products_get_their_own_memory_efficiency():
    shapes = [(m, kn) for m in (1, 2, 4, 8, 32, 128, 512) for kn in (1024, 2048, 4096)]
    ops = [build_op({"builder": "linear", "m": m, "k": kn, "n": kn, "dtype": "bf16"}) for m, kn in shapes]
    compute, vector, memory = roof_seconds(ops, CEIL)
    rows = np.array([m for m, _ in shapes], dtype=float)
    fill = np.where(rows == 1, 1.0, rows / (rows + 16))
    truth = np.maximum(compute / fill, memory / np.where(rows == 1, 0.4, 0.6)) + 2e-6
    efficiency, _, report = fit_profile_terms([{"measured_s": t} for t in truth], ops, CEIL)
    terms = efficiency["linear@bf16"]
    assert terms["memory"] == pytest.approx(0.6, rel=0.03)
    assert terms["gemv_memory"] == pytest.approx(0.4, rel=0.03)
    assert report["linear@bf16"]["max_abs_error"] < 0.03
    # the engine streams one-row products at gemv_memory and the rest at memory
    c = replace(CEIL, efficiency=MappingProxyType(efficiency))
    assert c.memory_roof(ops[0]) == pytest.approx(40e9 * terms["gemv_memory"])
    assert c.memory_roof(ops[3]) == pytest.approx(40e9 * terms["memory"])


def test_quantised_kernels_are_not_pooled_into_the_plain_gemm_class():
    base = {"model": "qwen2-0.5b", "stage": "decode", "batch": 4, "length": 100, "dtype": "bf16"}
    plain = [build_op({"builder": "engine", **base, "op": n}) for n in ("q_proj", "o_proj", "down_proj")]
    quant = [build_op({"builder": "engine", **base, "op": n, "w_dtype": "int8",
                       "rename": "int8_weight_only"}) for n in ("q_proj", "o_proj", "down_proj")]
    ops = plain + quant
    _, _, report = fit_profile_terms([{"measured_s": 1e-4}] * len(ops), ops, CEIL)
    assert report["linear@bf16"]["cases"] == 3
    assert report["linear:int8_weight_only@bf16"]["cases"] == 3
    assert report["linear"]["cases"] == 6
