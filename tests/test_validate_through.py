"""``validate --through transformers`` (kernels/validate/through.py): transformers' own
attention and MLP modules of one decoder layer, measured and predicted with the engine's ops.

The tiny Llama here: hidden 64, 4 query heads over 2 K/V heads (head_dim 16), MLP width 128,
fp32 (4 B), on the EPYC 9654's datasheet (a CPU: prompt attention in key blocks of 512)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kernels.validate.through import (
    MODELS,
    QUICK_MODELS,
    QUICK_SHAPES,
    SHAPES,
    ModuleCase,
    engine_model,
    layer_config,
    module_cases,
    module_ops,
    module_row,
)
from ridgeline.cli import app
from ridgeline.io.resolve import resolve

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 3,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
}
TINY_SHAPES = {"decode": ((2, 8),), "prefill": ((1, 8),)}


def _ops(case: ModuleCase):
    config = engine_model(layer_config(TINY), "tiny")
    return module_ops(config, case, resolve(config, "epyc-9654", dtype="fp32").plan)


def test_the_case_list_is_every_model_type_shape_and_module():
    cases = module_cases(["a", "b"], ["fp32", "bf16"], shapes=TINY_SHAPES)
    assert len(cases) == 2 * 2 * 2 * 2  # models x types x shapes x modules
    assert [c.name for c in cases[:4]] == [
        "a/decode/b2x8/attention/fp32/transformers",
        "a/decode/b2x8/mlp/fp32/transformers",
        "a/prefill/b1x8/attention/fp32/transformers",
        "a/prefill/b1x8/mlp/fp32/transformers",
    ]
    assert len(module_cases(MODELS, ["bf16"])) == 2 * 3 * 2
    assert len(module_cases(MODELS[:1], ["bf16"], quick=True)) == 2 * 2
    assert SHAPES["decode"] == ((1, 1536), (8, 768)) and QUICK_SHAPES["prefill"] == ((1, 320),)


def test_the_modules_are_held_out_in_model_batch_and_length():
    """transformers' modules are measured on what calibration never measures, as the kernel
    validation is: the validation models, at batch sizes and lengths no calibration case uses."""
    from kernels.bench.cases import VALIDATION_MODELS, Options, dimension_values, suite_cases

    opts = Options(("fp32", "bf16", "fp16"))  # every type calibration measures on a CPU
    used = dimension_values(suite_cases("calibration", opts, False) + suite_cases("calibration", opts, True))
    assert MODELS == VALIDATION_MODELS == ("llama-3-8b", "llama-2-7b") and QUICK_MODELS == MODELS[:1]
    assert not set(MODELS) & used["model"]
    for shapes in (SHAPES, QUICK_SHAPES):
        pairs = [pair for stage in shapes.values() for pair in stage]
        assert not {b for b, _ in pairs} & used["batch"] and not {n for _, n in pairs} & used["length"]


def test_shapes_decode_one_new_token_over_the_cache_prefill_the_prompt():
    decode, prefill = (
        ModuleCase("m", "attention", "decode", 2, 8, "fp32"),
        ModuleCase("m", "mlp", "prefill", 1, 8, "fp32"),
    )
    assert (decode.q_len, decode.kv_len) == (1, 9)  # 8 cached + the new token
    assert (prefill.q_len, prefill.kv_len) == (8, 8)


def test_the_layer_is_one_layer_with_a_small_vocabulary():
    raw = layer_config({**TINY, "bos_token_id": 31000, "_name_or_path": "x"})
    assert raw["num_hidden_layers"] == 1 and raw["vocab_size"] == 256
    assert "bos_token_id" not in raw and "_name_or_path" not in raw
    assert engine_model(raw, "tiny").num_layers == 1


def test_predicted_ops_of_the_attention_module_at_decode():
    """Batch 2, one new token over 8 cached (9 keys), auto = sdpa-gqa (transformers' path):
    q_proj 2 x 2 x 64 x 64 = 16,384 flops; k/v_proj 2 x 2 x 64 x 32 = 8,192; attention
    4 x B x H x keys x d = 4 x 2 x 4 x 9 x 16 = 4,608 flops, reading K and V of 2 K/V
    heads once: 2 x 2 x 2 x 9 x 16 x 4 B = 4,608 B."""
    ops = _ops(ModuleCase("tiny", "attention", "decode", 2, 8, "fp32"))
    by = {op.name: op for op in ops}
    assert [op.name for op in ops] == ["q_proj", "k_proj", "v_proj", "rope", "sdpa_gqa", "o_proj"]
    assert [by[n].flops for n in ("q_proj", "k_proj", "v_proj", "o_proj")] == [16384, 8192, 8192, 16384]
    assert by["sdpa_gqa"].flops == 4608 and by["sdpa_gqa"].kv_read_bytes == 4608
    assert all(op.count == 1 for op in ops)


def test_predicted_ops_of_the_mlp_and_the_prompt_attention():
    """MLP at decode (2 tokens): gate, up and down 2 x 2 x 64 x 128 = 32,768 flops each.
    Prompt of 8: causal in key blocks of 512 on a CPU, so all 8 x 8 pairs: 4 x 4 x 64 x 16
    = 16,384 flops."""
    mlp = _ops(ModuleCase("tiny", "mlp", "decode", 2, 8, "fp32"))
    assert [op.name for op in mlp] == ["gate_proj", "up_proj", "mlp_act", "down_proj"]
    assert [op.flops for op in mlp if op.matrix] == [32768] * 3
    (attention,) = [
        op for op in _ops(ModuleCase("tiny", "attention", "prefill", 1, 8, "fp32")) if op.kind == "attention"
    ]
    assert attention.flops == 16384


def test_a_rows_weights_are_the_modules_parameters():
    """The row sums its ops: the attention module's weights (64 x 64 x 2 + 64 x 32 x 2) x 4 B
    = 49,152 B and the MLP's 3 x 64 x 128 x 4 B = 98,304 B, what transformers' modules hold."""
    case = ModuleCase("tiny", "attention", "decode", 2, 8, "fp32")
    row = module_row(case, _ops(case), "sdpa-gqa", "sdpa")
    assert row["weight_bytes"] == 49152 and row["through"] == "transformers" and row["op_class"] == "module:attention"
    assert row["ops"] == ["q_proj", "k_proj", "v_proj", "rope", "sdpa_gqa", "o_proj"]
    mlp = ModuleCase("tiny", "mlp", "decode", 2, 8, "fp32")
    assert module_row(mlp, _ops(mlp), "sdpa-gqa", "sdpa")["weight_bytes"] == 98304


def test_moe_models_are_refused_in_one_line():
    from ridgeline.errors import RidgelineError

    with pytest.raises(RidgelineError, match="dense models with plain attention; mixtral is not one"):
        engine_model({**TINY, "num_local_experts": 8, "num_experts_per_tok": 2}, "mixtral")


@pytest.mark.slow
def test_one_measured_run_end_to_end(tmp_path):
    """Build the tiny layer with transformers, check each module against float64, time it,
    predict it and write the snapshot (no timing is asserted: only that the pipeline runs
    and transformers took the path the prediction assumes)."""
    pytest.importorskip("transformers")
    from kernels.bench.provenance import datasheet_device
    from kernels.bench.suite import setup
    from kernels.validate.through import measure_modules
    from kernels.validate.validate import summarize, write_snapshot
    from ridgeline.engine.roofline import spec_ceilings

    cfg = setup("cpu", 1, quick=True)
    device = datasheet_device("cpu", 1)
    ceilings = {"spec": spec_ceilings(device), "calibrated": spec_ceilings(device)}
    rows = measure_modules(
        cfg, ["fp32"], ceilings, device, models=["tiny"], shapes=TINY_SHAPES, raws={"tiny": TINY}, log=lambda _: None
    )
    assert [r["status"] for r in rows] == ["ok"] * 4, [r["reason"] for r in rows]
    assert all(r["rel_error"] <= r["tolerance"] and r["measured_s"] > 0 and r["predicted_spec_s"] > 0 for r in rows)
    assert rows[0]["attention_paths"] == {"decode:enable_gqa": 1} and rows[0]["attention"] == "sdpa-gqa"
    assert rows[2]["attention_paths"] == {"prefill:enable_gqa": 1}
    assert len(rows[1]["predicted_ops_spec_s"]) == 4
    result = {
        "meta": {"device_key": "test", "through": "transformers"},
        "ceilings": {m: c.to_dict() for m, c in ceilings.items()},
        "summary": summarize(rows).to_dict("records"),
        "rows": rows,
    }
    paths = write_snapshot(result, tmp_path, "through")
    written = json.loads(paths["json"].read_text())
    assert {s["op_class"] for s in written["summary"]} == {"module:attention", "module:mlp", "all"}


def test_cli_refuses_a_bad_through_in_one_line(tmp_path):
    runner = CliRunner()
    for args in (["--through", "bogus"], ["--through", "transformers", "--draw", "3"]):
        result = runner.invoke(app, ["validate", *args])
        assert result.exit_code == 2
        assert "--through takes kernels or transformers" in result.output
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"meta": {"through": "transformers", "profile": "x"}, "ceilings": {}, "rows": []}))
    result = runner.invoke(app, ["validate", "--repredict", str(snapshot)])
    assert result.exit_code == 2 and "measured with --through transformers" in result.output
