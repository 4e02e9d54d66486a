"""End to end by execution mode: graph-captured decode, rows per mode, the transformers client."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from kernels.e2e.e2e import Case, compile_overhead, predicted_columns, row_execution, write_rows
from ridgeline import analyze  # noqa: E402
from ridgeline.cli import app  # noqa: E402
from ridgeline.engine.model import ModelConfig
from ridgeline.io.profile import calibrated_ceilings
from ridgeline.io.resolve import load_device

CUDA = torch.cuda.is_available()
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 256,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
ARGS = [
    "e2e",
    "qwen2-0.5b",
    "--device",
    "cpu",
    "--layers",
    "1",
    "--batch",
    "1",
    "--prompt",
    "8",
    "--generate",
    "3",
    "--dtype",
    "fp32",
    "--repeats",
    "1",
    "--threads",
    "1",
    "--hardware",
    "epyc-9654",
]


def test_graph_execution_needs_cuda(tmp_path):
    if CUDA:
        pytest.skip("a CUDA device is present")
    result = CliRunner().invoke(app, [*ARGS, "--execution", "graph", "-o", str(tmp_path / "o.json")])
    assert result.exit_code == 2 and "needs a CUDA device" in result.output
    assert not (tmp_path / "o.json").exists()
    result = CliRunner().invoke(app, [*ARGS, "--execution", "warp"])
    assert result.exit_code == 2 and "unknown --execution 'warp'" in result.output


@pytest.mark.slow
def test_eager_rows_carry_their_execution(tmp_path):
    out = tmp_path / "o.json"
    result = CliRunner().invoke(app, [*ARGS, "--execution", "eager", "-o", str(out)])
    assert result.exit_code == 0, result.output
    [row] = json.loads(out.read_text())["rows"]
    assert row["execution"] == "eager" and row["compile"] is False


def test_rows_of_each_execution_merge_apart(tmp_path):
    path = tmp_path / "r.json"
    base = {
        "model": "m",
        "layers": 2,
        "batch": 1,
        "prompt": 8,
        "generate": 4,
        "dtype": "fp32",
        "measured_ttft_s": 0.2,
        "measured_tpot_s": 0.1,
        "engine_ops_per_decode_step": 50,
    }
    write_rows(path, {}, [{**base, "compile": False}])  # an old row
    write_rows(
        path,
        {},
        [
            {**base, "compile": False, "execution": "eager", "measured_tpot_s": 0.12},
            {**base, "compile": False, "execution": "graph", "measured_tpot_s": 0.05},
            {**base, "compile": True, "execution": "compiled", "measured_tpot_s": 0.08},
        ],
    )
    rows = json.loads(path.read_text())["rows"]
    assert sorted(row_execution(r) for r in rows) == ["compiled", "eager", "graph"]
    [gap] = compile_overhead(rows)  # eager against compiled, not graph
    assert gap["tpot_saved_s"] == pytest.approx(0.12 - 0.08)


PROFILE = {
    "bandwidth_gb_s": 20.0,
    "matrix_peak_tops": {"fp32": 0.5},
    "launch_gap_us": 2.0,
    "host_us": {"eager": {"default": 50.0}},
    "kernels_per_op": {"eager": {"default": 2}},
}


def test_predictions_follow_the_execution():
    config = ModelConfig.from_hf_config({**TINY, "model_type": "llama"}, name="tiny")
    h100 = load_device("h100-sxm")
    ceilings = calibrated_ceilings(PROFILE, h100)
    case = Case(1, 16, 4)
    measured = {"measured_ttft_s": 1e-3, "measured_tpot_s": 1e-3}
    for execution in ("graph", "eager"):
        cols = predicted_columns(config, h100, case, "fp32", ceilings, measured, execution)
        expect = analyze(
            config, h100, 1, 16, 4, dtype="fp32", ceilings=ceilings, attention="flash", execution=execution
        ).generation
        assert cols["predicted_calibrated_tpot_s"] == pytest.approx(expect["tpot_s"], rel=1e-12)
    graph = predicted_columns(config, h100, case, "fp32", ceilings, measured, "graph")
    eager = predicted_columns(config, h100, case, "fp32", ceilings, measured, "eager")
    # a tiny model is host-bound in eager mode: 50 µs per op call beats its device time
    assert eager["predicted_calibrated_tpot_s"] > 3 * graph["predicted_calibrated_tpot_s"]


# --- the transformers client ----------------------------------------------------------


def test_step_times():
    from kernels.e2e.hf_client import step_times

    ttft, steps = step_times(10.0, [10.5, 10.7, 11.0])
    assert ttft == pytest.approx(0.5) and steps == pytest.approx([0.2, 0.3])


def test_client_refuses_other_model_types_and_compile_on_cpu(tmp_path):
    pytest.importorskip("transformers")
    from kernels.e2e.hf_client import main

    assert main(["falcon-7b", "--device", "cpu"]) == 2
    cfg = tmp_path / "tiny"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))
    if not CUDA:
        assert main([str(cfg), "--device", "cpu", "--mode", "compiled"]) == 2


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_client_generates_and_predicts_on_cpu(model_type, tmp_path):
    pytest.importorskip("transformers")
    from kernels.e2e.hf_client import run_hf

    cfg = tmp_path / f"tiny-{model_type}"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({**TINY, "model_type": model_type}))
    result = run_hf(
        str(cfg),
        [Case(2, 8, 3)],
        dtype="fp32",
        device="cpu",
        repeats=1,
        hardware="epyc-9654",
        profile=None,
        output=tmp_path / "hf.json",
    )
    [row] = json.loads((tmp_path / "hf.json").read_text())["rows"]
    assert result.meta["client"] == "transformers" and row["client"] == "transformers"
    assert (row["model"], row["layers"], row["batch"], row["execution"]) == (f"tiny-{model_type}", 2, 2, "eager")
    assert row["measured_ttft_s"] > 0 and row["measured_tpot_s"] > 0
    # fp32: the first token's lm_head copies nothing (bf16 does: tests/test_hf_generate.py)
    assert row["lm_head_copied_bytes"] == 0 and row["measured_lm_head_generate_s"] > 0
    # the prompt's SDPA calls as recorded, and the setting they make the prediction price
    # (grouped heads, a batch without padding: transformers passes enable_gqa, no mask)
    assert row["attention_paths"].get("prefill:enable_gqa") == 2 and row["attention_priced"] == "sdpa-gqa"
    config = ModelConfig.from_hf_config({**TINY, "model_type": model_type})
    spec = analyze(config, "epyc-9654", 2, 8, 3, dtype="fp32", attention="sdpa-gqa", execution="eager").generation
    assert row["predicted_spec_tpot_s"] == pytest.approx(spec["tpot_s"], rel=1e-12)


# --- on a GPU ---------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_graph_decode_gives_the_eager_tokens():
    from kernels.e2e.decoder import DecodeGraphs, Decoder

    config = ModelConfig.from_hf_config({**TINY, "model_type": "llama"}, name="tiny")
    model = Decoder(config, "fp32", "cuda", max_batch=2, max_len=32)
    tokens = torch.randint(0, 256, (2, 8), device="cuda")
    with torch.inference_mode():
        first = model.prefill(tokens)
        eager, token = [], first
        for pos in range(8, 12):
            token = model.decode(token, pos)
            eager.append(token.clone())
        graphs = DecodeGraphs(model, 2, 8, 4)
        token, replayed = first, []
        for pos in range(8, 12):
            token = graphs(token, pos)
            replayed.append(token.clone())
    assert all(torch.equal(a, b) for a, b in zip(eager, replayed))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_client_compiled_is_predicted_as_graph_on_cuda(tmp_path):
    pytest.importorskip("transformers")
    from kernels.e2e.hf_client import run_hf

    cfg = tmp_path / "tiny"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))
    result = run_hf(
        str(cfg),
        [Case(1, 8, 4)],
        dtype="bf16",
        device="cuda",
        repeats=1,
        modes=("eager", "compiled"),
        hardware="h100-sxm",
        write=False,
    )
    assert [r["execution"] for r in result.rows] == ["eager", "graph"]
    assert all(r["measured_tpot_s"] > 0 for r in result.rows)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_host_terms_on_cuda():
    from kernels.calibrate.host_profile import measure_terms

    config = ModelConfig.from_hf_config({**TINY, "model_type": "llama"}, name="tiny")
    terms = measure_terms(config, device="cuda", prompt=8, steps=2, dtype="bf16")
    assert terms["launch_gap_us"] >= 0
    assert terms["kernels_per_op"]["eager"]["q_proj"] >= 1
    assert terms["host_us"]["eager"]["q_proj"] > 0 and terms["host_us"]["compiled"]["default"] > 0
