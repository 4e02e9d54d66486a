"""Calibrated model: the per-class fit and the engine's efficiency key lookup (no torch)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

from kernels.bench.cases import build_op
from kernels.calibrate.fit import EFF_GRID, OVERHEAD_GRID, fit_class, fit_key, fit_profile_terms, roof_seconds
from ridgeline.engine.roofline import Ceilings, keys_for, time_op

CEIL = Ceilings(
    "calibrated",
    40e9,
    MappingProxyType({"fp32": 0.2e12, "bf16": 0.8e12, "int8": 1.6e12}),
    MappingProxyType({"fp32": 0.2e12}),
    device="test",
)


def test_fit_class_recovers_grid_parameters_exactly():
    ec, em, oh = EFF_GRID[60], EFF_GRID[45], OVERHEAD_GRID[20]
    compute = np.array([1e-3, 3e-3, 2e-5, 1e-6, 5e-4])
    memory = np.array([1e-4, 2e-4, 2e-3, 1e-6, 5e-4])
    measured = np.maximum(compute / ec, memory / em) + oh
    terms = fit_class(compute, memory, measured)
    assert terms["compute"] == pytest.approx(ec)
    assert terms["memory"] == pytest.approx(em)
    assert terms["overhead_s"] == pytest.approx(oh)
    assert terms["median_abs_error"] < 1e-9 and terms["cases"] == 5 and terms["wanted"] == {}


def test_unconstrained_efficiency_stays_at_the_roof():
    # every case memory-bound by far: the compute term is pulled to 1
    terms = fit_class(np.full(4, 1e-9), np.array([1e-3, 2e-3, 4e-3, 8e-3]), np.array([2e-3, 4e-3, 8e-3, 16e-3]))
    assert terms["compute"] == pytest.approx(1.0, rel=0.05)
    assert terms["memory"] == pytest.approx(0.5, rel=0.03)


def test_fit_keys():
    base = {"model": "qwen2-0.5b", "stage": "decode", "batch": 1, "length": 100, "dtype": "bf16"}
    assert fit_key(build_op({"builder": "engine", **base, "op": "q_proj"})) == "linear@bf16"
    assert fit_key(build_op({"builder": "engine", **base, "op": "softmax"})) == "softmax:softmax@bf16"
    # the math backend computes in fp32 whatever its inputs: one class for both
    assert fit_key(build_op({"builder": "sdpa_math", **base})) == "attention:sdpa_math@fp32"
    wo = build_op({"builder": "engine", **base, "op": "o_proj", "w_dtype": "int8", "rename": "int8_weight_only"})
    assert fit_key(wo) == "linear:int8_weight_only@bf16"


def test_fitted_terms_reproduce_synthetic_measurements():
    recipes = [{"builder": "linear", "m": m, "k": 2048, "n": 2048, "dtype": "bf16"} for m in (1, 8, 64, 512)]
    ops = [build_op(r) for r in recipes]
    compute, vector, memory = roof_seconds(ops, CEIL)
    assert not vector.any()
    truth = np.maximum(compute / 0.7, memory / 0.55) + 4e-6
    rows = [{"measured_s": t} for t in truth]
    fit = fit_profile_terms(rows, ops, CEIL)
    efficiency, overhead, report = fit.efficiency, fit.overhead_s, fit.report
    assert set(efficiency) == {"linear@bf16", "linear"} and not fit.row_curves
    calibrated = Ceilings(
        "calibrated",
        CEIL.bandwidth,
        CEIL.matrix_peak,
        CEIL.vector_peak,
        MappingProxyType(efficiency),
        MappingProxyType(overhead),
    )
    for op, t in zip(ops, truth):
        assert float(time_op(op, calibrated)["time_s"]) == pytest.approx(t, rel=0.05)
    assert report["linear@bf16"]["median_abs_error"] < 0.05


def test_engine_looks_up_the_most_specific_key():
    op = build_op(
        {
            "builder": "engine",
            "model": "qwen2-0.5b",
            "stage": "prefill",
            "batch": 1,
            "length": 64,
            "dtype": "fp32",
            "op": "q_proj",
        }
    )
    assert keys_for(op) == ("linear:q_proj@fp32", "linear:q_proj", "linear@fp32", "linear")
    table = {"linear": {"compute": 0.5, "memory": 0.5}, "linear@fp32": {"compute": 0.25, "memory": 0.5}}
    c = Ceilings("calibrated", 1e10, {"fp32": 1e12}, {"fp32": 1e12}, table, {"default": 1e-6, "linear@fp32": 2e-6})
    assert c.compute_roof(op) == 0.25e12 and c.overhead(op) == 2e-6
    spec = Ceilings("spec", 1e10, {"fp32": 1e12}, {"fp32": 1e12})
    assert spec.compute_roof(op) == 1e12 and spec.memory_roof(op) == 1e10 and spec.overhead(op) == 0.0


def test_tile_fill_scales_compute_for_few_rows_and_spares_gemv():
    base = {"builder": "linear", "k": 1024, "n": 1024, "dtype": "fp32"}
    eff = {"linear@fp32": {"compute": 1.0, "memory": 1.0, "rows_half": 8.0, "gemv": 1.0}}
    c = Ceilings("calibrated", 1e10, {"fp32": 1e12}, {"fp32": 1e12}, eff, {})
    roof = {m: c.compute_roof(build_op({**base, "m": m})) for m in (1, 8, 24)}
    assert roof[1] == 1e12  # one row: a GEMV kernel, no tiles
    assert roof[8] == pytest.approx(0.5e12)  # 8 / (8 + 8)
    assert roof[24] == pytest.approx(0.75e12)
    no_gemv = Ceilings(
        "calibrated", 1e10, {"fp32": 1e12}, {"fp32": 1e12}, {"linear@fp32": {"compute": 1.0, "rows_half": 8.0}}, {}
    )
    assert no_gemv.compute_roof(build_op({**base, "m": 1})) == pytest.approx(1e12 / 9)


@pytest.mark.parametrize(
    "heads, kv_heads, q_len, rows",
    [
        (32, 32, 1, 1),  # MHA decode: one query row per K/V head
        (32, 8, 1, 4),  # GQA decode (Llama-3-8B): the group of 4 shares K/V
        (71, 1, 1, 71),  # MQA decode (Falcon-7B): every head shares one K/V head
        (32, 8, 256, 1024),  # prefill: query length times the group
    ],
)
def test_attention_tile_rows_are_query_rows_per_kv_head(heads, kv_heads, q_len, rows):
    from ridgeline.engine import ops as O
    from ridgeline.engine.roofline import tile_rows

    kw = dict(ab=2, kvb=2, count=1, dtype="bf16")
    assert tile_rows(O.qk_matmul(2, heads, kv_heads, q_len, 512, 128, **kw)) == rows
    flash = O.flash_attention(2, heads, kv_heads, q_len, q_len * 512, 512, 128, 128, inputs=("q",), **kw)
    assert tile_rows(flash) == rows
    c = Ceilings(
        "calibrated", 1e10, {"bf16": 1e12}, {"bf16": 1e12}, {"attention@bf16": {"compute": 1.0, "rows_half": 4.0}}, {}
    )
    assert c.compute_roof(flash) == pytest.approx(1e12 * rows / (rows + 4))


def test_tile_fill_broadcasts_over_workload_arrays():
    import ridgeline as rl
    from ridgeline.io.resolve import load_device

    eff = {"linear@fp16": {"compute": 0.9, "memory": 0.6, "rows_half": 16.0, "gemv": 1.0, "gemv_memory": 0.45}}
    dev = load_device("a6000")
    c = Ceilings("calibrated", dev.memory_bandwidth, dev.matrix_peak, dev.vector_peak, eff, {})
    batches = np.array([1, 4, 64])
    frame = rl.sweep("llama-3.2-1b", "a6000", batches, np.array([128]), generate=4, ceilings=c)
    single = [
        rl.analyze("llama-3.2-1b", "a6000", batch=int(b), seq_len=128, generate=4, ceilings=c).generation["tpot_s"]
        for b in batches
    ]
    assert frame["tpot_s"].to_numpy() == pytest.approx(single, rel=1e-9)


def test_fit_keeps_one_row_products_out_of_the_tile_fit():
    # seven row counts: under MIN_CURVE_ROWS, so the class gets efficiency terms, no row table
    shapes = [(m, kn) for m in (1, 2, 4, 16, 64, 256, 512) for kn in (1024, 4096)]
    ops = [build_op({"builder": "linear", "m": m, "k": kn, "n": kn, "dtype": "bf16"}) for m, kn in shapes]
    compute, vector, memory = roof_seconds(ops, CEIL)
    rows = np.array([m for m, _ in shapes], dtype=float)
    fill = np.where(rows == 1, 1.0, rows / (rows + 16))
    truth = np.maximum(compute / fill, memory / 0.5) + 2e-6
    fit = fit_profile_terms([{"measured_s": t} for t in truth], ops, CEIL)
    terms, report = fit.efficiency["linear@bf16"], fit.report
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
    fit = fit_profile_terms([{"measured_s": t} for t in truth], ops, CEIL)
    efficiency, report = fit.efficiency, fit.report
    terms = efficiency["linear@bf16"]
    assert terms["memory"] == pytest.approx(0.6, rel=0.03)
    assert terms["gemv_memory"] == pytest.approx(0.4, rel=0.035)  # grid steps 6.5%: half a step
    assert report["linear@bf16"]["max_abs_error"] < 0.035
    # the engine streams one-row products at gemv_memory and the rest at memory
    c = replace(CEIL, efficiency=MappingProxyType(efficiency))
    assert c.memory_roof(ops[0]) == pytest.approx(40e9 * terms["gemv_memory"])
    assert c.memory_roof(ops[3]) == pytest.approx(40e9 * terms["memory"])


def test_quantised_kernels_are_not_pooled_into_the_plain_gemm_class():
    base = {"model": "qwen2-0.5b", "stage": "decode", "batch": 4, "length": 100, "dtype": "bf16"}
    plain = [build_op({"builder": "engine", **base, "op": n}) for n in ("q_proj", "o_proj", "down_proj")]
    quant = [
        build_op({"builder": "engine", **base, "op": n, "w_dtype": "int8", "rename": "int8_weight_only"})
        for n in ("q_proj", "o_proj", "down_proj")
    ]
    ops = plain + quant
    report = fit_profile_terms([{"measured_s": 1e-4}] * len(ops), ops, CEIL).report
    assert report["linear@bf16"]["cases"] == 3
    assert report["linear:int8_weight_only@bf16"]["cases"] == 3
    assert report["linear"]["cases"] == 6


def _grid_ops(shapes, ms, dtype="fp32"):
    return [build_op({"builder": "linear", "m": m, "k": k, "n": n, "dtype": dtype}) for k, n in shapes for m in ms]


def test_row_table_follows_a_non_monotone_curve_and_is_read_back_by_the_engine():
    # the fp32 host: one row streams at 15 GB/s, four rows at 7: a tile fill
    # rows / (rows + rows_half) cannot go down and up again; the measured table can
    ms = list(range(1, 17)) + [24, 32, 64, 128, 256]

    def fraction(m):
        return 0.375 if m == 1 else 0.175 if m <= 8 else 0.5

    # the grid shape, and a model's shape at three row counts (it fixes the overhead: the
    # table reproduces its own shape whatever the overhead)
    ops = _grid_ops([(2048, 2048)], ms) + _grid_ops([(1024, 4096)], [1, 4, 32])
    compute, _, memory = roof_seconds(ops, CEIL)
    overhead = OVERHEAD_GRID[15]  # about 2.2 us, a point of the search
    measured = np.maximum(compute, memory) / np.array([fraction(op.dims["m"]) for op in ops]) + overhead
    fit = fit_profile_terms([{"measured_s": t} for t in measured], ops, CEIL)
    (entry,) = fit.row_curves["linear@fp32"]
    assert (entry["k"], entry["n"]) == (2048, 2048) and entry["rows"] == ms
    assert entry["fraction"] == pytest.approx([fraction(m) for m in ms], rel=1e-3)
    assert fit.overhead_s["linear@fp32"] == pytest.approx(overhead)
    assert "linear@fp32" not in fit.efficiency and fit.refused == []
    from ridgeline.io.profile import calibrated_ceilings
    from ridgeline.io.resolve import load_device

    profile = {
        "bandwidth_gb_s": 40,
        "matrix_peak_tops": {"fp32": 0.2},
        "vector_peak_tops": {"fp32": 0.2},
        "timing": "device",
        "row_curves": fit.row_curves,
        "overhead_us": {"linear@fp32": overhead * 1e6},
    }
    c = calibrated_ceilings(profile, load_device("a6000"))
    for op, t in zip(ops, measured):
        assert float(time_op(op, c)["time_s"]) == pytest.approx(t, rel=2e-3)
    # between calibrated row counts the fraction is interpolated in log rows: m = 20 lies
    # between 16 and 24 (both 0.5)
    assert c.row_fraction(
        build_op({"builder": "linear", "m": 20, "k": 2048, "n": 2048, "dtype": "fp32"})
    ) == pytest.approx(0.5, rel=1e-3)


def test_weight_only_products_on_the_grid_get_their_own_row_table():
    # the quick gate's Xeon: a one-row int8 product streams near the memory roof while a tile
    # fill fitted at 2, 4 and 32 rows priced it twice as slow; the grid measures it
    from kernels.bench.cases import quant_grid_cases

    grid = [c.op for c in quant_grid_cases(("bf16",), quick=True) if c.kernel == "int8_weight_only"]
    model = [
        build_op(
            {
                "builder": "engine",
                "model": "qwen2-0.5b",
                "stage": "decode",
                "batch": b,
                "length": 100,
                "dtype": "bf16",
                "op": "o_proj",
                "w_dtype": "int8",
                "rename": "int8_weight_only",
            }
        )
        for b in (2, 4, 32)
    ]
    ops = grid + model

    def fraction(m):
        return 0.9 if m == 1 else 0.4 if m <= 8 else 0.6

    compute, vector, memory = roof_seconds(ops, CEIL)
    measured = np.maximum(compute + vector, memory) / np.array([fraction(op.dims["m"]) for op in ops])
    fit = fit_profile_terms([{"measured_s": t} for t in measured], ops, CEIL)
    key = "linear:int8_weight_only@bf16"
    assert key not in fit.efficiency and {(e["k"], e["n"]) for e in fit.row_curves[key]} == {
        (2048, 2048),
        (2048, 8192),
        (8192, 2048),
    }
    for entry in fit.row_curves[key]:
        assert entry["fraction"] == pytest.approx([fraction(m) for m in entry["rows"]], rel=1e-2)
    assert "linear@bf16" not in fit.row_curves  # the plain products' table stays apart


def test_a_measured_fraction_scales_the_dequantising_too_so_the_table_gives_back_its_own_times():
    # The Xeon 6/167's int4 products from 16 rows up: the matrix work plus the dequantising
    # outweighs the bytes, and the fraction is of that whole bound (bound / measured). When
    # the engine scaled the matrix part only, it priced the table's own 16-, 32- and 64-row
    # knots 10-18 % fast (and a draw's int4 decodes -15 % to -27 %).
    from kernels.bench.cases import quant_grid_cases
    from ridgeline.io.profile import calibrated_ceilings
    from ridgeline.io.resolve import load_device

    ops = [c.op for c in quant_grid_cases(("bf16",), quick=True) if c.kernel == "int4_weight_only"]
    compute, vector, memory = roof_seconds(ops, CEIL)
    fraction = np.array([0.5 if op.dims["m"] <= 4 else 0.1 for op in ops])
    measured = np.maximum(compute + vector, memory) / fraction
    vector_heavy = (compute + vector > memory) & (vector > 0.2 * compute)
    assert vector_heavy.sum() >= 6  # the case this test is about is in the grid
    fit = fit_profile_terms([{"measured_s": t} for t in measured], ops, CEIL)
    profile = {
        "bandwidth_gb_s": 40,
        "matrix_peak_tops": {"fp32": 0.2, "bf16": 0.8, "int8": 1.6},
        "vector_peak_tops": {"fp32": 0.2},
        "timing": "device",
        "row_curves": fit.row_curves,
        "overhead_us": {k: v * 1e6 for k, v in fit.overhead_s.items()},
    }
    c = calibrated_ceilings(profile, load_device("a6000"))
    priced = np.array([float(time_op(op, c)["time_s"]) for op in ops])
    assert priced == pytest.approx(measured, rel=2e-3)
    # by hand at one knot: 16 x 2048 x 8192 at a tenth of the bound
    i = next(i for i, op in enumerate(ops) if (op.dims["m"], op.dims["k"], op.dims["n"]) == (16, 2048, 8192))
    bound = max(ops[i].flops / 0.8e12 + ops[i].vector_flops / 0.2e12, ops[i].bytes / 40e9)
    assert priced[i] == pytest.approx(bound / 0.1, rel=2e-3)


def test_row_table_interpolates_between_shapes_by_inverse_squared_log_distance():
    from ridgeline.engine.roofline import Curve, RowTable

    table = RowTable(
        ((1024.0, 1024.0), (4096.0, 4096.0)), (Curve((1.0, 4.0), (0.2, 0.4)), Curve((1.0, 4.0), (0.6, 0.8)))
    )
    assert table.at(2.0, 1024, 1024) == pytest.approx(0.3)  # halfway in log rows
    assert table.at(1.0, 4096, 4096) == pytest.approx(0.6)  # a measured shape: its own
    # (2048, 2048) is equally far from both in (log k, log n): the mean of 0.2 and 0.6
    assert table.at(1.0, 2048, 2048) == pytest.approx(0.4)
    # (1024, 2048): d^2 = (ln 2)^2 to the first, 5 (ln 2)^2 to the second -> weights 5 : 1
    assert table.at(1.0, 1024, 2048) == pytest.approx((5 * 0.2 + 0.6) / 6)
    assert table.at(np.array([1.0, 64.0]), 1024, 1024) == pytest.approx([0.2, 0.4])  # held flat


def test_a_more_specific_kernel_class_is_not_read_from_the_plain_gemm_table():
    from ridgeline.engine.roofline import Curve, RowTable

    wo = build_op(
        {
            "builder": "engine",
            "model": "qwen2-0.5b",
            "stage": "decode",
            "batch": 1,
            "length": 10,
            "dtype": "bf16",
            "op": "o_proj",
            "w_dtype": "int8",
            "rename": "int8_weight_only",
        }
    )
    table = RowTable(((896.0, 896.0),), (Curve((1.0,), (0.5,)),))
    c = replace(
        CEIL,
        row_curves={"linear@bf16": table},
        efficiency={"linear:int8_weight_only@bf16": {"compute": 0.9, "memory": 0.8}},
    )
    assert c.row_fraction(wo) is None and c.memory_roof(wo) == pytest.approx(0.8 * 40e9)
    plain = build_op({"builder": "linear", "m": 1, "k": 896, "n": 896, "dtype": "bf16"})
    assert c.row_fraction(plain) == 0.5 and c.memory_roof(plain) == pytest.approx(0.5 * 40e9)


def test_fit_refuses_a_fraction_above_the_measured_roof():
    # synthetic: the class runs at 1.5 x the memory roof it is measured against
    memory = np.array([1e-4, 2e-4, 4e-4, 8e-4])
    terms = fit_class(np.full(4, 1e-9), memory, memory / 1.5)
    assert terms["memory"] <= 1.0 and terms["compute"] <= 1.0
    assert terms["wanted"]["memory"] == pytest.approx(1.5, rel=0.04)


def test_a_residual_add_may_reach_its_reads_at_the_roof_on_recorded_cpu_data():
    """Recorded on the development EPYC (reports/profiles/cpu-amd-epyc-1t.yaml of commit
    426082c, 1 thread): fp32 residual adds, whose per-class fit wants 1.2 of the copy roof
    (36.064 GB/s). An add reads two tensors and writes one into a buffer the allocator
    reuses (cache-hot: no read of the line before the write), so its fastest is its reads
    at the roof: 1.5 of it counted over all its bytes (``write_free``). The fit takes the
    1.2 and refuses nothing; a fraction past 1.5 would still be refused."""
    import json
    from pathlib import Path

    import pandas as pd

    from kernels.bench.cases import case_from_dict
    from kernels.calibrate.fit import write_free

    frame = pd.read_csv(Path(__file__).parent / "data" / "epyc-attn-add-fp32.calibration.csv", keep_default_na=False)
    rows = [
        {**r, "recipe": json.loads(r["recipe_json"]), "noisy": str(r["noisy"]) == "True"}
        for r in frame.to_dict("records")
    ]
    ops = [case_from_dict(r).op for r in rows]
    assert write_free(ops) == pytest.approx(1.5)
    ceil = Ceilings(
        "calibrated",
        36.064e9,
        MappingProxyType({"fp32": 0.10496e12}),
        MappingProxyType({"fp32": 0.10496e12}),
        device="AMD EPYC",
    )
    fit = fit_profile_terms(rows, ops, ceil, cpu=True)
    assert fit.efficiency["elementwise:attn_add@fp32"]["memory"] == pytest.approx(1.2, rel=0.04)
    gpu = fit_profile_terms(rows, ops, ceil)  # a GPU's fit keeps every fraction <= 1
    assert gpu.efficiency["elementwise:attn_add@fp32"]["memory"] == 1.0
    assert not [r for r in fit.refused if r["class"] == "elementwise:attn_add@fp32"]
    assert all(terms["compute"] <= 1.0 and terms["memory"] <= 1.5 for terms in fit.efficiency.values())


def test_the_write_free_cap_refuses_beyond_it():
    memory = np.array([1e-4, 2e-4, 4e-4, 8e-4])
    terms = fit_class(np.full(4, 1e-9), memory, memory / 2.0, memory_cap=1.5)
    assert terms["memory"] <= 1.5 and terms["wanted"]["memory"] == pytest.approx(2.0, rel=0.04)
    assert fit_class(np.full(4, 1e-9), memory, memory / 1.3, memory_cap=1.5)["wanted"] == {}


def _grid_row(m, t, dtype="bf16", k=2048, n=2048):
    return {
        "name": f"grid/m{m}x{k}x{n}/{dtype}",
        "stage": "grid",
        "status": "ok",
        "dtype": dtype,
        "recipe": {"builder": "linear", "m": m, "k": k, "n": n},
        "measured_s": t,
    }


def test_grid_breaks_finds_points_slower_than_both_neighbours():
    from kernels.calibrate.calibrate import grid_breaks

    rows = [
        _grid_row(1, 1.0),
        _grid_row(2, 1.1),
        _grid_row(3, 1.5),
        _grid_row(4, 1.2),
        _grid_row(5, 1.2),
        _grid_row(6, 1.6),  # last point: no larger neighbour
        _grid_row(3, 9.0, dtype="fp32"),  # a curve of one point
        {**_grid_row(2, 5.0), "stage": "decode"},
    ]  # not a grid row
    # m=3: 1.5 > 1.25 x max(1.1, 1.2) = 1.5? no - equal is not a break
    assert grid_breaks(rows) == []
    rows[2]["measured_s"] = 1.51
    assert grid_breaks(rows) == [2]
    rows[1]["measured_s"] = 2.0  # m=2 vs 1.0 and 1.51: 2.0 > 1.89
    assert grid_breaks(rows) == [1]  # m=3 no longer above its m=2


def test_grid_breaks_reads_the_size_grid_by_tokens_per_kernel_and_width():
    from kernels.calibrate.calibrate import grid_breaks

    def row(kernel, tokens, t, width=2048):
        return {
            "name": f"sgrid/{kernel}/t{tokens}xw{width}/fp32",
            "stage": "grid",
            "status": "ok",
            "dtype": "fp32",
            "measured_s": t,
            "recipe": {"builder": "size_grid", "kernel": kernel, "tokens": tokens, "width": width},
        }

    rows = [
        row("rmsnorm", 1, 1.0),
        row("rmsnorm", 4, 2.0),
        row("rmsnorm", 16, 1.5),
        row("residual_add", 4, 9.0),
        _grid_row(1, 1.0),
        _grid_row(2, 1.1),
    ]
    assert grid_breaks(rows) == [1]  # 2.0 > 1.25 x 1.5; the add's lone point is its own curve


@pytest.mark.slow
def test_decode_attention_gets_a_measured_table_and_prefill_keeps_its_terms():
    """An attention class measured on the decode grid: its decode cases become a row table by
    (rows per K/V head, head_dim), read back by the engine for one-token queries; its prefill
    cases keep fitted terms, and an array of query lengths takes each where it applies."""
    from kernels.bench.cases import attention_grid_cases

    def fraction(rows, d):  # one row slow, a dip at 4, and head_dim 128 half as fast
        base = 0.1 if rows == 1 else 0.3 if rows == 4 else 0.5
        return base / 2 if d == 128 else base

    grid = [c for c in attention_grid_cases(("fp32",), quick=True) if c.kernel == "qk_matmul"]
    prefill = [
        build_op(
            {
                "builder": "engine",
                "model": m,
                "stage": "prefill",
                "batch": 2,
                "length": n,
                "dtype": "fp32",
                "op": "qk_matmul",
            }
        )
        for m in ("qwen2-0.5b", "llama-3.2-1b")
        for n in (64, 192)
    ]
    ops = [c.op for c in grid] + prefill
    compute, _, memory = roof_seconds(ops, CEIL)
    bound = np.maximum(compute, memory)
    overhead = OVERHEAD_GRID[15]
    decode_t = [
        bound[i] / fraction(op.dims["heads"] / op.dims["kv_heads"], op.dims["head_dim"]) + overhead
        for i, op in enumerate(ops[: len(grid)])
    ]
    prefill_t = list(bound[len(grid) :] / 0.6 + overhead)  # 60 % of the roof at full tiles
    fit = fit_profile_terms([{"measured_s": t} for t in decode_t + prefill_t], ops, CEIL)
    key = "attention:qk_matmul@fp32"
    entries = {e["k"]: e for e in fit.row_curves[key]}
    assert sorted(entries) == [64, 128, 256]  # the quick grid's head dims
    # one case per knot: any overhead reproduces them, and the fraction takes what is left
    assert entries[128]["fraction"] == pytest.approx([fraction(r, 128) for r in entries[128]["rows"]], rel=2e-2)
    assert key in fit.efficiency  # prefill: fitted terms
    c = fitted_ceilings(fit, key, "device")
    for op, t in zip(ops[: len(grid)], decode_t):
        assert float(time_op(op, c)["time_s"]) == pytest.approx(t, rel=2e-3)
    assert np.isnan(c.row_fraction(prefill[0]))  # a prompt: the table does not apply
    # a query length array takes the table where its rows per K/V head were measured (up to
    # 16 on the quick grid) and the terms beyond
    both = replace(ops[0], dims={**ops[0].dims, "q_len": np.array([1, 100])})
    roof = c.compute_roof(both)
    table_part = CEIL.matrix_peak["fp32"] * c.row_fraction(ops[0])
    assert roof[0] == pytest.approx(table_part) and roof[1] != pytest.approx(table_part)


@pytest.mark.parametrize("kernel", ["sdpa", "qk_matmul", "sv_matmul"])
@pytest.mark.slow
def test_a_cpu_class_on_both_grids_gets_a_decode_row_table_and_a_prefill_table(kernel):
    """A CPU attention class measured on the decode grid (two cache lengths) and the prompt
    grid (five lengths): decodes become a row table by (rows per K/V head, head_dim), prompts
    a prefill attention table by (rows, prompt, head_dim); the engine reads each op from its
    own, and the extrapolation check names each table's spans. The fused kernel and the eager
    products alike."""
    from kernels.bench.cases import PREFILL_GRID_LENGTHS, attention_grid_cases, prefill_grid_cases
    from ridgeline.engine.grid import outside_spans

    def decode_fraction(rows, d):
        return (0.1 if rows == 1 else 0.4) / (2 if d == 128 else 1)

    def prefill_fraction(q):  # a short prompt fills its blocks worse
        return 0.2 + 0.5 * np.log2(q / 64) / np.log2(PREFILL_GRID_LENGTHS[-1] / 64)

    decode = [c.op for c in attention_grid_cases(("fp32",), quick=True) if c.kernel == kernel]
    prefill = [c.op for c in prefill_grid_cases(("fp32",)) if c.kernel == kernel and c.backend in ("flash", "")]
    ops = decode + prefill
    compute, _, memory = roof_seconds(ops, CEIL)
    bound, overhead = np.maximum(compute, memory), OVERHEAD_GRID[15]
    truth = [
        bound[i] / decode_fraction(op.dims["heads"] / op.dims["kv_heads"], op.dims["head_dim"]) + overhead
        for i, op in enumerate(decode)
    ] + [bound[len(decode) + i] / prefill_fraction(op.dims["q_len"]) + overhead for i, op in enumerate(prefill)]
    rows = [{"measured_s": t, "recipe": {"builder": "attention_grid"}} for t in truth]
    fit = fit_profile_terms(rows, ops, CEIL, cpu=True)
    key = f"attention:{'attention' if kernel == 'sdpa' else kernel}@fp32"
    assert list(fit.attention_tables[key]) == ["prefill"] and key in fit.row_curves
    c = fitted_ceilings(fit, key, "cpu")
    got = [float(time_op(op, c)["time_s"]) for op in ops]
    assert got == pytest.approx(truth, rel=0.02)
    assert outside_spans(decode[0], c) == () and outside_spans(prefill[0], c) == ()
    # a 4096-token prompt lies past the prompt grid: its context span says so
    first = next(c for c in prefill_grid_cases(("bf16",)) if c.kernel == kernel)
    long = build_op({**dict(first.recipe), "q_len": 4096, "kv_len": 4096, "dtype": "fp32"})
    assert [s.dimension for s in outside_spans(long, c)] == ["context"]


def fitted_ceilings(fit, key: str, timing: str):
    """The ceilings of a profile holding ``fit``'s tables and terms on ``CEIL``'s roofs, with
    class ``key``'s overhead."""
    from ridgeline.io.profile import calibrated_ceilings
    from ridgeline.io.resolve import load_device

    profile = {
        "bandwidth_gb_s": 40,
        "matrix_peak_tops": {"fp32": 0.2},
        "timing": timing,
        "vector_peak_tops": {"fp32": 0.2},
        "row_curves": fit.row_curves,
        **({"attention_tables": fit.attention_tables} if fit.attention_tables else {}),
        "efficiency": fit.efficiency,
        "overhead_us": {key: fit.overhead_s[key] * 1e6},
    }
    return calibrated_ceilings(profile, load_device("a6000"))


def test_a_size_grid_point_measured_under_a_models_name_stays_a_knot_of_its_table():
    # the quick suite's RMSNorm grid (4^i tokens x 2048) loses its 4-token point to
    # Llama-3.2-1B's decode at batch 4 (the same shape: dedupe keeps the first case), which
    # left 7 grid sizes, under the 8 a table needs: the Xeon 6/167's RMSNorm, residual add and
    # SiLU x up went to efficiency terms (its norm p90 on draw 2723: 53.7 %)
    from kernels.bench.cases import dedupe, suite_cases

    cases = dedupe(suite_cases("calibration", quick=True))
    norm = [c for c in cases if c.op.name == "attn_norm" and c.dtype == "bf16" and c.op.dims["norm"] == "rmsnorm"]
    grid = [c for c in norm if c.recipe["builder"] == "size_grid" and c.recipe["width"] == 2048]  # its base width
    # the case this test is about: the 4-token point gone (9 sizes since the quick series took
    # 2048 and 8192 tokens too; the knot must stay all the same)
    assert len({c.op.bytes for c in grid}) == 9 and 4 not in {c.op.dims["tokens"] for c in grid}
    ops = [c.op for c in norm]
    _, _, memory = roof_seconds(ops, CEIL)
    fraction = {b: 0.1 + 0.05 * i for i, b in enumerate(sorted({op.bytes for op in ops}))}
    measured = memory / np.array([fraction[op.bytes] for op in ops])
    rows = [{"measured_s": t, "recipe": dict(c.recipe)} for t, c in zip(measured, norm)]
    fit = fit_profile_terms(rows, ops, CEIL)
    table = fit.size_curves["norm:attn_norm@bf16"]
    (model,) = [c.op for c in norm if c.recipe["builder"] == "engine" and c.op.dims == {**grid[0].op.dims, "tokens": 4}]
    assert model.dims["tokens"] == 4 and model.bytes in table["bytes"]
    assert {op.bytes for op in ops if op.dims["hidden"] == 896}.isdisjoint(table["bytes"])  # another width
    t = measured[ops.index(model)]
    overhead = fit.overhead_s["norm:attn_norm@bf16"]
    assert table["fraction"][table["bytes"].index(model.bytes)] == pytest.approx(
        memory[ops.index(model)] / (t - overhead), rel=1e-3
    )
