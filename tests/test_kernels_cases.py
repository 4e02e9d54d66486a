"""Benchmark cases (no torch): ops built from the engine, held-out shapes, recipes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernels.bench import cases as K
from kernels.bench.cases import Options, case_from_dict, check_disjoint, suite_cases


@pytest.mark.parametrize("quick", [False, True])
def test_calibration_and_validation_shapes_are_disjoint(quick):
    opts = Options(("fp32", "bf16"), ("math", "flash"))
    cal = suite_cases("calibration", opts, False) + suite_cases("calibration", opts, True)
    val = suite_cases("validation", opts, quick)
    check_disjoint(cal, val)  # raises on overlap
    assert not {c.shape_key() for c in cal} & {c.shape_key() for c in val}
    assert {c.split for c in val} == {"validation"}
    assert {m for c in val for m in [c.recipe.get("model")] if m} <= set(K.VALIDATION_MODELS)


def test_check_disjoint_names_the_overlap():
    case = suite_cases("calibration", quick=True)[0]
    with pytest.raises(ValueError, match=case.name.split("/")[0]):
        check_disjoint([case], [case])


def test_every_op_class_is_covered_and_cases_are_unique():
    val = suite_cases("validation", Options(("fp32", "bf16"), ("math", "flash")))
    assert {c.op_class for c in val} == set(K.OP_CLASSES)
    assert len({c.name for c in val}) == len(val)
    assert len({c.shape_key() for c in val}) == len(val)


def test_linear_case_is_the_engine_op():
    case = next(c for c in suite_cases("validation") if c.name == "llama-3-8b/prefill/b1x320/q_proj/bf16")
    op = case.op
    assert dict(op.dims) == {"m": 320, "k": 4096, "n": 4096, "experts": 1}
    assert op.flops == 2 * 320 * 4096 * 4096
    assert op.weight_bytes == 4096 * 4096 * 2
    assert op.act_read_bytes == 320 * 4096 * 2 and op.act_write_bytes == 320 * 4096 * 2
    assert case.op_class == "gemm" and case.kernel == "linear" and op.dtype == "bf16"


def test_decode_linear_is_gemv_with_m_equal_batch():
    case = next(c for c in suite_cases("validation") if c.name == "llama-3-8b/decode/b8x768/down_proj/fp32")
    assert case.op_class == "gemv"
    assert dict(case.op.dims) == {"m": 8, "k": 14336, "n": 4096, "experts": 1}


def test_sdpa_math_decode_folds_the_group_and_counts_its_passes():
    base = {"model": "llama-3-8b", "stage": "decode", "batch": 2, "length": 511, "dtype": "fp32"}
    math_op = K.build_op({"builder": "sdpa_math", **base})
    qk = K.build_op({"builder": "engine", **base, "op": "qk_matmul"})
    sv = K.build_op({"builder": "engine", **base, "op": "sv_matmul"})
    assert math_op.flops == qk.flops + sv.flops and math_op.dtype == "fp32"
    # b=2, h=32, g=8, q=1, kv=512, d=128: queries 8192, K (and V) 1,048,576 elements read
    # once per K/V head (the decode group rides on the query axis), scores 32,768
    assert math_op.kv_read_bytes == 2 * 1_048_576 * 4
    # reads: scale (8192 + 1048576) + q@K^T (8192 + 1048576) + softmax 32768
    #        + P@V (32768 + 1048576) = 3,227,648 elements, less the cache's first read
    assert math_op.act_read_bytes == 3_227_648 * 4 - 2 * 1_048_576 * 4
    # writes: scale 1,056,768 + scores 32,768 + softmax 32,768 + output 8,192
    assert math_op.act_write_bytes == 1_130_496 * 4


def test_sdpa_math_prefill_converts_expands_and_masks():
    base = {"model": "llama-3-8b", "stage": "prefill", "batch": 1, "length": 320, "dtype": "bf16"}
    math_op = K.build_op({"builder": "sdpa_math", **base})
    assert math_op.dtype == "fp32"  # bf16 inputs: the math backend runs in fp32
    # queries 1,310,720; K 327,680 per tensor, 1,310,720 after the 4x expansion; scores
    # 3,276,800. Writes (bytes): scale 2,621,440 x 4; scores, mask, softmax 3 x 3,276,800 x 4;
    # output 1,310,720 x 4; to fp32 (1,310,720 + 655,360) x 4; back to bf16 1,310,720 x 2;
    # expansion 2,621,440 x 4
    assert math_op.act_write_bytes == 76_021_760
    assert math_op.kv_read_bytes == 2 * 327_680 * 2


def test_flash_case_uses_the_engine_fused_op_and_knows_kv_len():
    case = next(c for c in suite_cases("validation") if c.name == "llama-3-8b/prefill/b1x320/sdpa/fp32/flash")
    op = case.op
    assert (op.name, op.kind) == ("attention", "attention")
    # causal, in PyTorch's CPU flash kernel's 512-key blocks: the whole square up to 512
    assert op.dims["pairs"] == 320 * 320 and case.recipe["key_block"] == 512
    dims = K.attention_dims(case)
    assert (dims["q_len"], dims["kv_len"], dims["kv_heads"]) == (320, 320, 8)


def test_eager_silu_mul_keeps_its_temporary_in_cache():
    """silu(gate) * up: the temporary is written and read back at once: memory sees gate and
    up read and the product written, as for the fused kernel."""
    op = K.build_op(
        {
            "builder": "mlp_act_eager",
            "model": "llama-3-8b",
            "stage": "decode",
            "batch": 4,
            "length": 100,
            "dtype": "bf16",
        }
    )
    elems = 4 * 14336
    assert (op.act_read_bytes, op.act_write_bytes) == (2 * elems * 2, elems * 2)
    assert op.name == "mlp_act_eager"


def test_int_matmul_writes_int32():
    op = K.build_op({"builder": "int_matmul", "m": 64, "k": 256, "n": 128, "dtype": "int8"})
    assert op.weight_bytes == 256 * 128 and op.act_read_bytes == 64 * 256
    assert op.act_write_bytes == 64 * 128 * 4 and op.dtype == "int8"


def test_weight_only_int4_counts_group_scales_and_dequant():
    op = K.build_op(
        {
            "builder": "engine",
            "model": "llama-3-8b",
            "stage": "decode",
            "batch": 1,
            "length": 10,
            "dtype": "bf16",
            "op": "o_proj",
            "w_dtype": "int4",
            "group_size": 128,
            "rename": "int4_weight_only",
        }
    )
    weights = 4096 * 4096
    assert op.name == "int4_weight_only"
    assert op.weight_bytes == weights * 0.5 + weights / 128 * 4
    assert op.vector_flops == 2 * weights


def test_case_round_trips_through_json():
    for case in suite_cases("validation", quick=True)[:30]:
        again = case_from_dict(json.loads(json.dumps(case.to_dict())))
        assert again == case and again.op == case.op


def test_unknown_builder_is_an_error():
    with pytest.raises(ValueError, match="unknown op recipe builder"):
        K.build_op({"builder": "nope"})


@pytest.mark.parametrize("dim", ["model", "batch", "length", "width"])
@pytest.mark.parametrize("quick", [False, True])
def test_validation_is_held_out_in_every_dimension(dim, quick):
    opts = Options(("fp32", "bf16"), ("math", "flash"))
    cal = suite_cases("calibration", opts, False) + suite_cases("calibration", opts, True)
    val = suite_cases("validation", opts, quick)
    assert K.held_out_overlap(cal, val)[dim] == set()
    # and the dimension is really there on both sides (a check that cannot pass vacuously)
    used = {d for c in val for d in K.case_dimensions(c)[dim]}
    fitted = {d for c in cal for d in K.case_dimensions(c)[dim]}
    assert used and fitted


def test_case_dimensions_of_a_model_case_are_its_gemm_widths():
    case = next(c for c in suite_cases("validation") if c.name == "llama-3-8b/decode/b8x768/q_proj/bf16")
    # Llama-3-8B: hidden 4096, intermediate 14336, 32 x 128 query and 8 x 128 key/value widths
    assert K.case_dimensions(case) == {
        "model": {"llama-3-8b"},
        "batch": {8},
        "length": {768},
        "width": {4096, 14336, 1024},
    }


def test_check_disjoint_names_a_shared_dimension():
    cal = suite_cases("calibration", quick=True)
    val = [c for c in suite_cases("validation", quick=True)]
    shared_batch = K._stage_cases("llama-3-8b", "decode", 4, 1536, "bf16", "validation", Options())
    with pytest.raises(ValueError, match="not held out in batch: calibration also uses batch 4"):
        check_disjoint(cal, val + shared_batch)


def test_grid_measures_every_row_count_to_16_then_log_steps_to_256():
    grid = K.grid_cases(("fp32", "bf16"))
    for dtype in ("fp32", "bf16"):
        rows = sorted(
            {c.op.dims["m"] for c in grid if c.dtype == dtype and c.op.dims["k"] == 2048 and c.op.dims["n"] == 2048}
        )
        assert rows == [*range(1, 17), 24, 32, 48, 64, 96, 128, 192, 256]
        steps = np.diff(np.log(rows[15:]))
        assert steps.max() <= np.log(1.5) + 1e-9  # 16, 24, 32, 48, ...: at most x1.5
    assert {c.split for c in grid} == {"calibration"}
    # fp32 stops where one product would pass 40 GFLOP: 3584 x 18944 and 4608 x 15360 reach
    # 256 rows (a prompt's product is not read from a 64-row point), 28672 x 8192 stops at 64
    for k, top in ((3584, 256), (4608, 256), (15360, 256), (28672, 64)):
        rows = [c.op.dims["m"] for c in grid if c.dtype == "fp32" and c.op.dims["k"] == k]
        n = next(c.op.dims["n"] for c in grid if c.op.dims["k"] == k)
        assert max(rows) == top and 2 * top * k * n <= K.GRID_MAX_FP32_FLOPS
    assert 2 * 96 * 28672 * 8192 > K.GRID_MAX_FP32_FLOPS


def test_quant_grid_is_the_model_cases_kernels_on_the_row_grid():
    from kernels.calibrate.fit import ROW_TABLE_CLASSES, fit_key

    grid = K.quant_grid_cases(("fp32", "bf16"))
    assert K.quant_grid_cases(("fp32",)) == []  # bf16 activations, as the model cases
    assert len(grid) == 2 * len(K.GRID_KN) * 20 and {c.split for c in grid} == {"calibration"}
    assert sorted({c.op.dims["m"] for c in grid}) == [*range(1, 17), 24, 32, 48, 64]
    # at a model case's own shape and rows, a grid op is that case's op: bytes, flops, class
    model = [c for c in suite_cases("calibration", Options(("bf16",))) if c.op_class == "quant" and c.stage == "decode"]
    by_shape = {(c.kernel, c.op.dims["m"], c.op.dims["k"], c.op.dims["n"]): c for c in model}
    matched = 0
    for c in grid:
        twin = by_shape.get((c.kernel, c.op.dims["m"], c.op.dims["k"], c.op.dims["n"]))
        if twin is None:
            continue
        matched += 1
        for f in ("weight_bytes", "act_read_bytes", "act_write_bytes", "flops", "vector_flops"):
            assert getattr(c.op, f) == getattr(twin.op, f), (c.name, f)
        assert fit_key(c.op) == fit_key(twin.op) and fit_key(c.op).startswith(ROW_TABLE_CLASSES)
    assert matched >= 8
    # the int4 grid points keep the group size the kernel is called with
    assert {c.recipe.get("group_size") for c in grid if c.kernel == "int4_weight_only"} == {K.INT4_GROUP}


def test_weight_only_scale_bytes_are_the_engines():
    from ridgeline.engine.precision import SCALE_BYTES, ZERO_POINT_BYTES

    assert K.precision("bf16", w_dtype="int8").scale_bytes == SCALE_BYTES == 2.0
    assert K.precision("bf16", w_dtype="int4", group_size=128).scale_bytes == SCALE_BYTES + ZERO_POINT_BYTES == 4.0


@pytest.mark.parametrize("seed", [0, 1, 7, 2026])
@pytest.mark.slow
def test_a_fresh_draw_is_held_out_in_every_dimension(seed):
    """``validate --draw SEED``: a set nobody chose, still disjoint from calibration in
    shape, model, batch, context length and width, and the same set for the same seed."""
    opts = Options(("fp32", "bf16", "fp16"), ("math", "flash"))
    cal = suite_cases("calibration", opts, False) + suite_cases("calibration", opts, True)
    cases, drawn = K.drawn_cases(seed, opts)
    check_disjoint(cal, cases)  # raises on any overlap
    assert all(not v for v in K.held_out_overlap(cal, cases).values())
    assert len(drawn["models"]) == K.DRAW_MODEL_COUNT
    assert set(drawn["models"]) <= set(K.DRAW_MODELS) and not set(drawn["models"]) & set(K.CALIBRATION_MODELS)
    assert {c.recipe["model"] for c in cases if "model" in c.recipe} == set(drawn["models"])
    assert len(drawn["decode"]) == K.DRAW_DECODES and set(drawn["prefill"]) == set(opts.dtypes)
    for batch, length in drawn["decode"]:
        assert 1 <= batch <= 64 and 128 <= length <= 4096 and batch * length <= K.DRAW_DECODE_TOKENS
    for dtype, [(batch, length)] in drawn["prefill"].items():
        assert 1 <= batch <= 4 and length % 16 == 0
        assert batch * length <= K.DRAW_PREFILL_TOKENS.get(dtype, K.DRAW_PREFILL_TOKENS["default"])
    again, same = K.drawn_cases(seed, opts)
    assert same == drawn and [c.name for c in again] == [c.name for c in cases]


def test_draws_differ_between_seeds():
    opts = Options(("fp32", "bf16"), ("flash",))
    draws = [K.drawn_cases(seed, opts)[1] for seed in range(4)]
    assert len({json.dumps(d["decode"]) for d in draws}) == 4


def test_a_seed_draws_the_same_workloads_whatever_the_device_runs():
    """An AVX2-only CPU measures fp32 alone: its draw is the fp32 part of the same draw."""
    full = K.drawn_cases(1125, Options(("fp32", "bf16", "fp16"), ("math", "flash")))[1]
    fp32 = K.drawn_cases(1125, Options(("fp32",), ("math", "flash")))[1]
    assert fp32["decode"] == full["decode"] and fp32["models"] == full["models"]
    assert fp32["prefill"] == {"fp32": full["prefill"]["fp32"]}


def test_the_grids_reach_the_catalogs_head_dim_256_and_a_70b_down_proj():
    cal = suite_cases("calibration", Options(), False)
    attention = [c for c in cal if c.recipe.get("builder") == "attention_grid" and c.stage == "decode"]
    assert sorted({c.recipe["head_dim"] for c in attention}) == [64, 96, 128, 256]
    # decode, per data type (fp32, bf16): 3 kernels x 2 cache lengths x 13 row counts at head_dim 256
    assert sum(c.recipe["head_dim"] == 256 for c in attention) == 2 * 3 * 2 * 13
    # to a multi-query model's rows per K/V head (Falcon-7B: 71)
    assert max(c.recipe["rows"] for c in attention) == 128
    long_k = [c for c in cal if (c.recipe.get("k"), c.recipe.get("n")) == (28672, 8192)]
    by_kind = {}
    for c in long_k:
        by_kind.setdefault((c.name.split("/")[0], c.dtype), []).append(c.recipe["m"])
    # fp32 stops at 64 rows (2 x 64 x 28672 x 8192 = 30.1 GFLOP <= GRID_MAX_FP32_FLOPS)
    assert sorted(by_kind[("grid", "fp32")]) == [*range(1, 17), 24, 32, 48, 64]
    assert sorted(by_kind[("grid", "bf16")]) == list(K.GRID_M)
    assert len(by_kind[("qgrid", "bf16")]) == 2 * len(K.QUANT_GRID_M)  # int8 and int4 weight-only
    # 1,636 before: + 144 attention + 81 products + 135 activation and norm kinds + 80 flash
    # prompts (2 data types x 4 head_dims x 5 lengths x 2 row counts); + 185: 4608 x 15360 both
    # ways (bf16 and fp32 products at 24 row counts, int8 and int4 weight-only at 20: 176) and
    # fp32 rows past 12 GFLOP (96, 192, 256 at 3584 x 18944 both ways, 32 to 64 at 28672 x 8192;
    # 128 rows there is a qwen2-7b prompt's own case); + 160 eager q.K^T and P.V prompts on the
    # same prompt grid (2 data types x 2 kernels x 4 head_dims x 5 lengths x 2 row counts); + the
    # softmax tail series (2 data types x 32 widths, quick too); + decode rows at 128 (2 data
    # types x 3 kernels x 4 head_dims x 2 cache lengths); + the norms (RMSNorm, LayerNorm; fp32,
    # bf16) at three more widths (896, 3584, 8192): 174 sizes, less 16 that a calibration
    # model's own RMSNorm already measures (qwen2-0.5b's 896, qwen2-7b's 3584 at 2, 4, 32, 128 tokens)
    norms = [c for c in cal if c.recipe.get("builder") == "size_grid" and c.kernel in ("rmsnorm", "layernorm")]
    widths = [c for c in norms if c.recipe["width"] in K.SIZE_GRID_NORM_WIDTHS]
    assert len(widths) == 174 - 16 and {c.kernel for c in widths} == {"rmsnorm", "layernorm"}
    # + the CPU softmax at three more key counts (64, 192, 2048): 2^0 to 2^16 rows up to 256 MiB,
    # fp32 17 + 17 + 15 and bf16 17 + 17 + 16 sizes, less 2 that llama-3.2-1b's batch-2 prompt of
    # 64 tokens already measures (4096 rows x 64 keys)
    softmax = [c for c in cal if c.name.startswith("sgrid/softmax/") and c.recipe["width"] != 512]
    assert len(softmax) == 17 + 17 + 15 + 17 + 17 + 16 - 2
    assert len(cal) == 2261 + 2 * 2 * 4 * 5 * 2 + 2 * 32 + 2 * 3 * 4 * 2 + 158 + 97
    quick = suite_cases("calibration", Options(), True)
    # and each kind's quick size series (fp32, bf16), and the quick prompt table: flash prompts at
    # 2 data types x 3 head_dims (64, 128, 256) x 5 lengths x 2 row counts; then the eager q.K^T
    # and P.V on the same prompt grid (2 kernels), products at 512 and 1024 rows (2 data types x
    # 3 shapes x 2), and 37 size points: 2048 and 8192 tokens where a series reaches them (30)
    # and the fp32 rotary series (8, its 4-token point a model's own case); the decode grid at
    # head_dim 256 (2 data types x 3 kernels x 8 row counts), then its rows at 32, 64 and 128
    # (2 data types x 3 kernels x 3 head_dims x 3 row counts)
    quick_rows = 2 * 3 * 3 * 3
    # and the norms' quick series at the three more widths: 110 sizes, less 2 a model's own (4 tokens)
    quick_widths = 110 - 2
    # and the softmax's at its three more key counts: 11 + 11 + 10 sizes per data type, less the
    # fp32 prompt's 4096 x 64 (quick calibration measures that prompt in fp32 only)
    quick_widths += 2 * (11 + 11 + 10) - 1
    assert (
        len(quick)
        == 479
        + 70
        + 2 * 3 * 5 * 2
        + 2 * 2 * 3 * 5 * 2
        + 2 * 3 * 2
        + 30
        + 7
        + 2 * 3 * 8
        + 2 * 32
        + quick_rows
        + quick_widths
    )
    # 28672 is no validation or draw width: both stay held out in every dimension
    val = suite_cases("validation", Options(), False) + K.drawn_cases(7)[0]
    check_disjoint(cal, val)
    assert not any(K.held_out_overlap(cal, val).values())


def test_an_int4_product_takes_the_largest_group_that_divides_its_k():
    assert [K.int4_group(k) for k in (4096, 4544, 4576, 4100)] == [128, 64, 32, None]
    # falcon-7b's projections over its 4,544-wide hidden state: 71 groups of 64, as AWQ and
    # GPTQ quantise it (torch's int4 kernel refuses a K that is not whole groups)
    cases = K._stage_cases("falcon-7b", "decode", 12, 1088, "bf16", "validation", Options())
    int4 = {
        c.name.split("/")[3]: (c.recipe["group_size"], c.op.dims["k"]) for c in cases if c.kernel == "int4_weight_only"
    }
    assert int4["o_proj.int4wo"] == (64, 4544)
    assert all(k % g == 0 for g, k in int4.values())
    assert int4["down_proj.int4wo"] == (128, 18176)
