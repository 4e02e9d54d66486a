"""Activations and norms by kind (issue 31, item 2): each kind is its own op, kernel and class,
a profile without the kind's class says so, and draws cover the other kinds.

Bytes and operations are worked by hand from ``ridgeline.engine.ops`` (NORM_OPS: RMSNorm 7,
LayerNorm 10, + 1 with its bias; ACT_OPS: ReLU 1, GELU 8, + 1 for the gated multiply)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from types import MappingProxyType

import pytest
from typer.testing import CliRunner

from kernels.bench import cases as K
from kernels.bench.bench import make_bench, tolerance
from kernels.calibrate.fit import fit_key
from ridgeline.cli import app
from ridgeline.engine import ops as O
from ridgeline.engine.basis import unmeasured
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.roofline import keys_for
from ridgeline.io.catalog import MODELS_DIR, PROFILES_DIR, list_names
from ridgeline.io.profile import calibrated_ceilings, load_profile
from ridgeline.io.resolve import load_device, load_model

H100 = str(PROFILES_DIR / "cuda-nvidia-h100-80gb-hbm3.yaml")


def _h100():
    return calibrated_ceilings(load_profile(H100), load_device("h100-sxm"))


BF16 = dict(ab=2.0, count=1, dtype="bf16", inputs=())


@pytest.mark.parametrize(
    "kind, flops, weight_bytes",
    [
        ("rmsnorm", 7 * 8 * 4096, 4096 * 2),  # square, sum, mean, eps, rsqrt, scale, weight
        ("layernorm_nobias", 10 * 8 * 4096, 4096 * 2),  # + sum, mean, subtract for the mean
        ("layernorm", 11 * 8 * 4096, 2 * 4096 * 2),  # + the bias: its vector read too
    ],
)
def test_a_norm_counts_its_kind(kind, flops, weight_bytes):
    op = O.norm("attn_norm", 8, 4096, wb=2.0, kind=kind, **BF16)
    assert (op.flops, op.weight_bytes) == (flops, weight_bytes)
    assert op.act_read_bytes == op.act_write_bytes == 8 * 4096 * 2 and op.dims["norm"] == kind
    assert O.op_variant(op) == kind


@pytest.mark.parametrize(
    "act, gated, flops, reads, kernel",
    [
        ("relu", False, 1 * 8 * 16384, 8 * 16384 * 2, "relu"),
        ("gelu_new", False, 8 * 8 * 16384, 8 * 16384 * 2, "gelu_tanh"),
        ("gelu_pytorch_tanh", True, 9 * 8 * 16384, 2 * 8 * 16384 * 2, "gelu_tanh_mul"),
        ("silu", True, 5 * 8 * 16384, 2 * 8 * 16384 * 2, "silu_mul"),
    ],
)
def test_an_activation_counts_its_kind(act, gated, flops, reads, kernel):
    op = O.mlp_act(8, 16384, act, gated, **BF16)
    assert (op.flops, op.act_read_bytes, op.act_write_bytes) == (flops, reads, 8 * 16384 * 2)
    assert O.op_variant(op) == kernel


def _op(model: str, name: str, dtype: str = "bf16"):
    plan = K.precision(dtype)
    return next(op for op in stage_ops(load_model(model), "decode", 4, 512, plan) if op.name == name)


def test_the_catalog_models_run_their_own_kinds():
    """OPT, GPT-J and Falcon run nn.LayerNorm (with its bias); Gemma runs hidden_activation,
    tanh-GELU when unset (transformers' GemmaMLP), not its hidden_act 'gelu'."""
    assert load_model("gemma-7b").hidden_act == "gelu_pytorch_tanh"
    kinds = {m: K.model_kernels(m) for m in ("gemma-7b", "opt-6.7b", "gpt-j-6b", "falcon-7b", "llama-2-7b")}
    assert kinds == {
        "gemma-7b": ("rmsnorm", "gelu_tanh_mul"),
        "opt-6.7b": ("layernorm", "relu"),
        "gpt-j-6b": ("layernorm", "gelu_tanh"),
        "falcon-7b": ("layernorm", "gelu"),
        "llama-2-7b": ("rmsnorm", "silu_mul"),
    }
    norm = _op("opt-6.7b", "mlp_norm", "fp16")
    assert norm.weight_bytes == 2 * 4096 * 2 and norm.flops == 11 * 4 * 4096


def test_class_keys_try_the_kind_first_then_the_generic_classes():
    assert keys_for(_op("gemma-7b", "mlp_act")) == (
        "elementwise:mlp_act.gelu_tanh_mul@bf16",
        "elementwise.gelu_tanh_mul@bf16",  # the kind over op names: what calibration fits
        "elementwise:mlp_act@bf16",
        "elementwise:mlp_act",
        "elementwise@bf16",
        "elementwise",
    )
    # SiLU x up and RMSNorm keep their bare class names: older profiles price them as before
    assert keys_for(_op("llama-2-7b", "attn_norm")) == (
        "norm:attn_norm@bf16",
        "norm.rmsnorm@bf16",
        "norm:attn_norm",
        "norm@bf16",
        "norm",
    )
    grid = {c.kernel: c.op for c in K.size_grid_cases(["bf16"]) if c.recipe["tokens"] == 64}
    assert fit_key(grid["gelu_tanh_mul"]) == "elementwise:mlp_act_eager.gelu_tanh_mul@bf16"
    assert fit_key(grid["layernorm"]) == "norm:attn_norm.layernorm@bf16"
    assert fit_key(grid["silu_mul"]) == "elementwise:mlp_act_eager@bf16"
    assert fit_key(grid["rmsnorm"]) == "norm:attn_norm@bf16"


def test_a_profile_prices_a_kind_with_its_own_class_where_it_has_one():
    ceilings = _h100()
    op = _op("gemma-7b", "mlp_act")
    assert ceilings.terms(op) == ceilings.efficiency["elementwise@bf16"]
    own = {"compute": 0.25, "memory": 0.125}
    efficiency = MappingProxyType({**ceilings.efficiency, "elementwise.gelu_tanh_mul@bf16": own})
    assert replace(ceilings, efficiency=efficiency).terms(op) == own


def _notes(model: str) -> list[str]:
    result = CliRunner().invoke(
        app, ["analyze", model, "-H", "h100-sxm", "--dtype", "bf16", "--profile", H100, "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["basis"]["notes"]


def test_an_analysis_says_when_a_kind_is_priced_from_another_kinds_class():
    """The committed H100 profile measured SiLU x up and RMSNorm only."""
    assert (
        "mlp_act@bf16 (gelu_tanh_mul) priced from the 'elementwise@bf16' class of other kinds: "
        "the profile measured no gelu_tanh_mul class"
    ) in _notes("gemma-7b")
    opt = _notes("opt-6.7b")
    assert (
        "attn_norm@bf16 (layernorm) priced from the 'norm:attn_norm@bf16' class of other kinds: "
        "the profile measured no layernorm class"
    ) in opt
    assert (
        "mlp_norm@bf16, final_norm@bf16 (layernorm) priced from the 'norm@bf16' class of other kinds: "
        "the profile measured no layernorm class"
    ) in opt
    assert not [n for n in _notes("llama-2-7b") if "of other kinds" in n]


def test_no_kind_note_where_the_profile_has_the_kinds_class():
    ceilings = _h100()
    op = _op("gemma-7b", "mlp_act")
    entry = {"op": "mlp_act", "dtype": "bf16", "term": "kind gelu_tanh_mul", "priced_by": "elementwise@bf16"}
    assert unmeasured([op], ceilings) == [entry]  # in the JSON's basis.unmeasured too
    efficiency = MappingProxyType({**ceilings.efficiency, "elementwise.gelu_tanh_mul@bf16": {"memory": 0.5}})
    assert unmeasured([op], replace(ceilings, efficiency=efficiency)) == []


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("kernel", [*K.SIZE_GRID_KINDS, "rmsnorm", "silu_mul", "layernorm_nobias", "relu_mul", "silu"])
def test_each_kinds_kernel_matches_its_float64_reference(kernel, dtype):
    recipe = {"builder": "size_grid", "kernel": kernel, "tokens": 8, "width": 256, "dtype": dtype}
    cls = "norm" if kernel in O.NORM_OPS else "elementwise"
    case = K.Case("t", cls, kernel, dtype, MappingProxyType(recipe), split="calibration", stage="grid")
    bench = make_bench(case, "cpu", 1e5)
    assert bench.fn(*bench.arg_sets[0]).shape == (8, 256)
    assert bench.check() < tolerance(case)


def test_model_stages_measure_their_own_kinds():
    opt = {
        c.name.split("/")[-2]: c
        for c in K._stage_cases("opt-6.7b", "decode", 3, 200, "fp32", "validation", K.Options())
    }
    assert (opt["attn_norm"].kernel, opt["mlp_act"].kernel) == ("layernorm", "relu")
    assert "gate_proj" not in opt and "rope" not in opt  # no gate, no rotary embedding
    assert opt["mlp_act"].op.allocations == (3 * 16384 * 4,)  # act(up): one kernel, one tensor
    gemma = {
        c.name.split("/")[-2]: c
        for c in K._stage_cases("gemma-7b", "decode", 3, 200, "bf16", "validation", K.Options())
    }
    assert gemma["mlp_act"].kernel == "gelu_tanh_mul" and len(gemma["mlp_act"].op.allocations) == 2


def _widths(model: str) -> set[int]:
    c = load_model(model)
    return {c.hidden_size, c.intermediate_size, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim}


def test_the_draw_pool_is_every_dense_held_out_model_within_the_per_op_bound():
    """Each catalog model left out of DRAW_MODELS is calibrated, MoE or MLA, over the bound,
    not held out in width, has a drawn model's shapes and kinds, or came after the
    committed draws (``DRAW_LATER``: in the pool, their seeds would draw other sets)."""
    cal = K.dimension_values(K.suite_cases("calibration", K.Options(), False))
    signature = lambda m: (sorted(_widths(m)), K.model_kernels(m), load_model(m).num_heads)  # noqa: E731
    drawn = {m: signature(m) for m in K.DRAW_MODELS}
    for model in list_names(MODELS_DIR, ".json"):
        c = load_model(model)
        largest = max(c.hidden_size * c.intermediate_size, c.hidden_size * c.num_heads * c.head_dim) * 4
        reasons = {
            "calibrated": model in K.CALIBRATION_MODELS,
            "moe/mla": c.is_moe or c.is_mla,
            "too large": largest > K.DRAW_MAX_WEIGHT_BYTES,
            "width": bool(_widths(model) & cal["width"]),
            "twin": model not in drawn and signature(model) in drawn.values(),
            "later": model in K.DRAW_LATER,
        }
        assert (model in K.DRAW_MODELS) == (not any(reasons.values())), (model, reasons)
    assert set(K.DRAW_KINDS) == {m for m in K.DRAW_MODELS if K.model_kernels(m) != ("rmsnorm", "silu_mul")}


@pytest.mark.slow
def test_every_draw_takes_another_kind_and_records_the_kinds():
    opts = K.Options(("fp32", "bf16"), ("flash",))
    families = set()
    for seed in range(8):
        _, drawn = K.drawn_cases(seed, opts)
        assert set(drawn["models"]) & set(K.DRAW_KINDS)
        assert drawn["kinds"] == {m: list(K.model_kernels(m)) for m in drawn["models"]}
        families |= {load_model(m).model_type for m in drawn["models"]}
        assert K.drawn_cases(seed, opts)[1] == drawn  # same seed, same set
    assert families >= {"opt", "gptj", "falcon"}
    picks = [K._draw_models(random.Random(s), list(K.DRAW_MODELS), 2) for s in range(3)]
    assert picks == [K._draw_models(random.Random(s), list(K.DRAW_MODELS), 2) for s in range(3)]


def test_the_draw_line_names_the_models_kinds():
    from kernels.results.generate import draw_line

    _, drawn = K.drawn_cases(0, K.Options(("fp32",), ("flash",)))
    line = draw_line({"draw": drawn})
    assert line.startswith("Drawn with seed 0: gpt-j-6b (layernorm, gelu_tanh) and opt-6.7b (layernorm, relu); ")


def test_a_recorded_case_keeps_the_kernel_it_ran():
    """The committed H100 calibration measured SiLU x up at Gemma's shapes (its recipes name
    no kernel): rebuilt today, they are still SiLU x up, in the SiLU class."""
    old = {"builder": "mlp_act_eager", "model": "gemma-7b", "stage": "decode", "batch": 1, "length": 512}
    op = K.build_op({**old, "dtype": "fp32"})
    assert (op.dims["act"], op.flops, fit_key(op)) == ("silu", 5 * 24576, "elementwise:mlp_act_eager@fp32")
    new = K.build_op({**old, "dtype": "fp32", "kernel": "gelu_tanh_mul"})
    assert (new.flops, fit_key(new)) == (9 * 24576, "elementwise:mlp_act_eager.gelu_tanh_mul@fp32")


def test_a_kinds_size_series_fits_its_own_table_and_the_engines_class():
    """LayerNorm's grid at half the bound: its own size table, and the pooled kind class that
    prices the engine's norms of that kind (OPT's mlp_norm), not RMSNorm's."""
    import numpy as np

    from kernels.calibrate.fit import fit_profile_terms, roof_seconds
    from ridgeline.engine.roofline import Ceilings, roofline_time

    ceil = Ceilings("calibrated", 20e9, {"fp32": 0.2e12, "bf16": 1e12}, {"fp32": 0.2e12}, device="test")
    cases = [c for c in K.size_grid_cases(["bf16"]) if c.kernel == "layernorm"]
    ops = [c.op for c in cases]
    compute, vector, memory = roof_seconds(ops, ceil)
    times = 2 * roofline_time(compute + vector, memory) + 1e-6
    rows = [{"measured_s": t, "recipe": dict(c.recipe)} for c, t in zip(cases, times)]
    fit = fit_profile_terms(rows, ops, ceil, cpu=True)
    assert "norm:attn_norm.layernorm@bf16" in fit.size_curves and "norm.layernorm@bf16" in fit.efficiency
    profile = replace(ceil, efficiency=MappingProxyType(fit.efficiency))
    assert profile.terms(_op("opt-6.7b", "mlp_norm")) == fit.efficiency["norm.layernorm@bf16"]
    assert max(np.asarray(fit.size_curves["norm:attn_norm.layernorm@bf16"]["fraction"])) <= 1.0
