"""Layers that differ: per-layer attention (sliding, chunked, NoPE) and MLP kinds, priced
group by group, and models whose layers are alike priced as before."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.api import simulate
from ridgeline.cli import app
from ridgeline.engine.analyze import decode_total, mean_in_chunk, stage_totals, steady_decode_ops
from ridgeline.engine.layers import Plan, stage_ops
from ridgeline.engine.memory import kv_bytes_per_token, kv_cache_bytes, weight_bytes
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import spec_ceilings
from ridgeline.errors import InvalidConfigError, InvalidWorkloadError, RidgelineError, UnsupportedArchitectureError
from ridgeline.io.catalog import MODELS_DIR
from ridgeline.io.files import read_json
from ridgeline.io.resolve import resolve
from ridgeline.serving.arrivals import poisson
from ridgeline.serving.step_cost import build_step_cost, step_time

FP16 = Plan(2, 2, 2, "fp16", "fp16", attention="flash")
LLAMA = read_json(MODELS_DIR / "llama-3-8b.json")  # 32 layers, 8 KV heads of 128


def mixed(**keys) -> ModelConfig:
    return ModelConfig.from_hf_config({**LLAMA, **keys}, name="mixed")


HALF = ["sliding_attention", "full_attention"] * 16  # 16 sliding, 16 global


def test_alike_layers_price_as_the_uniform_model():
    """``layer_types`` all full is the plain model, op for op."""
    plain = rl.load_model("llama-3-8b")
    same = mixed(layer_types=["full_attention"] * 32, sliding_window=4096)
    assert same.layer_groups == () and same.sliding_window is None
    a = stage_ops(plain, "decode", 2, 1000, FP16)
    b = stage_ops(same, "decode", 2, 1000, FP16)
    assert [op.name for op in a] == [op.name for op in b]
    assert all(x.kv_read_bytes == y.kv_read_bytes and x.flops == y.flops for x, y in zip(a, b))


def test_groups_and_their_ops():
    m = mixed(layer_types=HALF, sliding_window=128)
    assert [(g.label, g.count, g.window) for g in m.layer_groups] == [("sliding", 16, 128), ("global", 16, None)]
    assert m.windows == (128,)
    assert "layers: 16 sliding, 16 global" in m.notes
    ops = {op.name: op for op in stage_ops(m, "decode", 1, 1000, FP16)}
    # decode over 1001 positions: a sliding layer reads 128 of them, 8 KV heads x (K + V) 256 x 2 B
    assert ops["sliding/attention"].kv_read_bytes == 8 * 128 * 256 * 2
    assert ops["global/attention"].kv_read_bytes == 8 * 1001 * 256 * 2
    assert ops["sliding/q_proj"].count == ops["global/q_proj"].count == 16
    assert ops["global/attn_norm"].inputs == ("x",)


def test_kv_cache_by_kind():
    """Per token, 2 x 32 layers x 8 x 128 x 2 B = 128 KiB, whatever the kinds; a cache of
    10,000 tokens keeps 10,000 in the 16 global layers and 128 in the 16 sliding ones:
    16 x 4096 B x (10,000 + 128) = 663,748,608 B."""
    m = mixed(layer_types=HALF, sliding_window=128)
    assert kv_bytes_per_token(m, FP16) == 131_072
    assert kv_cache_bytes(m, 1, 10_000, FP16) == 16 * 4096 * (10_000 + 128)
    assert weight_bytes(m, FP16) == weight_bytes(rl.load_model("llama-3-8b"), FP16)


def test_decode_sum_splits_at_each_window_and_matches_the_loop():
    m = mixed(layer_types=HALF, sliding_window=128)
    device = rl.load_device("h100-sxm")
    roofs = spec_ceilings(device)
    loop = sum(
        stage_totals(stage_ops(m, "decode", 4, s, FP16), roofs, FP16, "decode")[0]["time_s"] for s in range(50, 300)
    )
    closed = decode_total(m, 4, np.asarray(50), np.asarray(299), FP16, roofs)
    assert float(closed) == pytest.approx(loop, rel=1e-12)


CHUNKED = ["chunked_attention", "full_attention"] * 16  # 16 chunked, 16 global


def test_chunked_layers_attend_within_their_chunk_under_the_engines_kernels():
    """vLLM's ChunkedLocalAttention runs each chunk as a batch of its own (vllm@0213df59), so
    under flash and paged a chunked layer computes, per head, a prompt of 300 in chunks of 128
    as 2 x 128 x 129 / 2 + 44 x 45 / 2 = 17,502 pairs (a window of 128 would be 128 x 129 / 2
    + 172 x 128 = 30,272), and a decode step at 1000 cached (the 1001st position, the 105th of
    its chunk: 1000 mod 128 + 1) reads 105 positions: 8 KV heads x 105 x 256 x 2 B. Under
    SDPA (transformers' mask over a cache of the last 128) it reads 128, and the prompt
    computes every pair past the chunk, as before."""
    m = mixed(layer_types=CHUNKED, attention_chunk_size=128)
    pre = {op.name: op for op in stage_ops(m, "prefill", 1, 300, FP16)}
    assert pre["chunked/attention"].flops == 2 * 32 * 17_502 * 256
    assert pre["global/attention"].flops == 2 * 32 * (300 * 301 // 2) * 256
    dec = {op.name: op for op in stage_ops(m, "decode", 1, 1000, FP16)}
    assert dec["chunked/attention"].kv_read_bytes == 8 * 105 * 256 * 2
    paged = replace(FP16, attention="paged")
    assert {op.name: op for op in stage_ops(m, "decode", 1, 1000, paged)}[
        "chunked/attention"
    ].flops == 2 * 32 * 105 * 256
    sdpa = {op.name: op for op in stage_ops(m, "decode", 1, 1000, replace(FP16, attention="sdpa-gqa"))}
    assert sdpa["chunked/sdpa_gqa"].kv_read_bytes == 8 * 128 * 256 * 2


def test_chunked_decode_sum_splits_at_every_chunk_and_matches_the_loop():
    """Cached 50 .. 400 cross the chunks' starts at 128, 256 and 384: the closed form splits
    at each (the keys start over) and equals the step-by-step sum."""
    m = mixed(layer_types=CHUNKED, attention_chunk_size=128)
    roofs = spec_ceilings(rl.load_device("h100-sxm"))
    step = lambda s: stage_totals(stage_ops(m, "decode", 4, s, FP16), roofs, FP16, "decode")[0]["time_s"]  # noqa: E731
    closed = decode_total(m, 4, np.asarray(50), np.asarray(400), FP16, roofs)
    assert float(closed) == pytest.approx(sum(step(s) for s in range(50, 401)), rel=1e-12)


def test_moe_every_other_layer_and_nope():
    """Llama 4's pattern on a MoE model: MoE on odd layers (interleave step 2), chunked
    attention on layers with rotary, global NoPE on every fourth."""
    moe = read_json(MODELS_DIR / "mixtral-8x7b.json")
    rope = [0 if (i + 1) % 4 == 0 else 1 for i in range(32)]
    m = ModelConfig.from_hf_config(
        {**moe, "interleave_moe_layer_step": 2, "attention_chunk_size": 8192, "no_rope_layers": rope}, name="x"
    )
    kinds = [(g.label, g.count) for g in m.layer_groups]
    assert kinds == [("chunked-dense", 16), ("chunked-moe", 8), ("global-nope-moe", 8)]
    assert m.num_moe_layers == 16
    ops = {op.name for op in stage_ops(m, "decode", 1, 100, FP16)}
    assert "global-nope-moe/rope" not in ops and "chunked-moe/rope" in ops
    assert "chunked-dense/router" not in ops and "chunked-moe/router" in ops


def test_unmodelled_keys_and_bad_layer_types_are_refused():
    with pytest.raises(InvalidConfigError, match="'num_kv_shared_layers' .* is not modelled"):
        mixed(num_kv_shared_layers=10)
    with pytest.raises(InvalidConfigError, match="'layer_types' must list 32 of"):
        mixed(layer_types=["linear_attention"] * 32)
    # a span is null (none) or a length: a negative window or chunk is refused, not dropped
    for key in ("sliding_window", "attention_chunk_size"):
        with pytest.raises(InvalidConfigError, match=f"'{key}' must be a positive integer, got -8"):
            mixed(**{key: -8})
    assert mixed(sliding_window=None).sliding_window is None


def test_the_simulator_prices_each_kind_of_layer():
    """gpt-oss-20b in the simulator: a step of 4 decodes at 1000 cached is the engine's
    decode pass (the sliding layers' attention capped at its 128 keys), a fresh chunk of 200
    its prefill; a sequence of 1000 tokens keeps 128 in half the KV bytes and 1000 in the
    other half, 564 whole-model positions, 36 blocks of 16."""
    d = resolve("gpt-oss-20b", "h100-sxm", attention="flash")
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16)
    engine = lambda stage, batch, length: stage_totals(  # noqa: E731
        stage_ops(d.model, stage, batch, length, d.plan), d.ceilings, d.plan, stage
    )[0]["time_s"]
    decodes = step_time(cost, [], [], 4, cost.capped(np.full(4, 1000)))
    assert decodes == pytest.approx(engine("decode", 4, 1000), rel=1e-12)
    assert step_time(cost, [200], [], 0, cost.capped(np.zeros(0))) == pytest.approx(
        engine("prefill", 1, 200), rel=1e-12
    )
    assert cost.kv_kept(1000) == 0.5 * 128 + 0.5 * 1000
    result = simulate(d, None, poisson(4.0, 8, 1000, 20))
    assert result.summary["requests"] == 8


def test_the_simulator_prices_chunked_layers_within_their_chunk():
    """Llama 4 Scout under flash in the simulator: 4 decodes at 9000 cached are the engine's
    decode pass, the chunked layers reading 9000 mod 8192 + 1 = 809 positions (a window of
    the chunk would read 8192, as at 8191 cached, the last of the first chunk)."""
    d = resolve("llama-4-scout", "h100-sxm", attention="flash")
    cost = build_step_cost(d.model, d.plan, d.ceilings, 256, 16)
    engine = lambda length: stage_totals(  # noqa: E731
        stage_ops(d.model, "decode", 4, length, d.plan), d.ceilings, d.plan, "decode"
    )[0]["time_s"]
    for cached in (9000, 8191):
        step = step_time(cost, [], [], 4, cost.capped(np.full(4, cached)))
        assert step == pytest.approx(engine(cached), rel=1e-12)
    assert engine(9000) < engine(8191)
    chunked = {op.name: op for op in stage_ops(d.model, "decode", 4, 9000, d.plan)}["chunked/attention"]
    assert chunked.kv_read_bytes == 4 * 8 * 809 * 256 * 2


def test_a_steady_decode_prices_a_chunk_at_its_mean_place():
    """Requests spread evenly over cached lengths 8000 .. 8383 sit at 8000 .. 8191 of their
    first chunk of 8192 and at 0 .. 191 of the next: c mod 8192 averages (8095.5 + 95.5) / 2
    = 4095.5. plan's steady-state step (its throughput and TPOT bounds) prices Llama 4
    Scout's chunked layers there, 4096.5 keys, and its global ones at the mean cached length,
    8191.5 (8192.5 keys); 8 KV heads x (K + V) 256 x 2 B a key, 4 requests."""
    assert mean_in_chunk(8000, 8383, 8192) == 4095.5
    assert mean_in_chunk(100, 16098, 8192) == pytest.approx(np.mean(np.arange(100, 16099) % 8192), rel=1e-12)
    d = resolve("llama-4-scout", "h100-sxm", attention="flash")
    ops = {op.name: op for op in steady_decode_ops(d.model, 4, 8000, 8383, d.plan)}
    assert ops["chunked/attention"].kv_read_bytes == 4 * 8 * 4096.5 * 256 * 2
    assert ops["global-nope/attention"].kv_read_bytes == 4 * 8 * 8192.5 * 256 * 2
    plain = {op.name: op for op in steady_decode_ops(rl.load_model("llama-3-8b"), 4, 8000, 8383, FP16)}
    assert plain["attention"].kv_read_bytes == 4 * 8 * 8192.5 * 256 * 2  # no chunk: the mean


def test_the_masked_and_gathered_steps_refuse_mixed_spans():
    d = resolve("gpt-oss-20b", "h100-sxm")
    with pytest.raises(
        InvalidWorkloadError, match="gpt-oss-20b mixes layers \\(12 sliding, 12 global\\): use 'varlen'"
    ):
        build_step_cost(d.model, d.plan, d.ceilings, 256, 16, "masked")


def test_an_unsupported_architecture_names_the_nearest_and_what_it_lacks():
    with pytest.raises(
        UnsupportedArchitectureError,
        match="Nearest: 'qwen3_moe', whose reader needs 'num_hidden_layers', which this config lacks",
    ):
        ModelConfig.from_hf_config({"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16})
    with pytest.raises(
        UnsupportedArchitectureError, match="Nearest: 'llama': this config has every field its reader needs"
    ):
        ModelConfig.from_hf_config({**LLAMA, "model_type": "llamba"})
    # the list names what is read through another's reader too: wrappers and aliases
    with pytest.raises(UnsupportedArchitectureError, match="gemma3, gemma3_text, .* kimi_k2, .* qwen2_5_vl, "):
        ModelConfig.from_hf_config({**LLAMA, "model_type": "llamba"})


def test_the_cli_refuses_an_unsupported_architecture_in_one_line(tmp_path):
    path = tmp_path / "next.json"
    path.write_text(json.dumps({**LLAMA, "model_type": "qwen3_next"}))
    result = CliRunner().invoke(app, ["analyze", str(path), "-H", "h100-sxm"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "Nearest: 'qwen3_moe'" in result.output


# A small decoder's keys, for the readers of types the catalog has no config of (the values
# are this test's, not a published model's)
SMALL = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 8}
SMALL |= {"intermediate_size": 512, "vocab_size": 1000}


def test_cohere2_slides_with_rotary_and_keeps_its_global_layers_without():
    m = ModelConfig.from_hf_config(
        {**SMALL, "model_type": "cohere2", "sliding_window": 64, "sliding_window_pattern": 4}
    )
    assert [(g.label, g.count, g.window) for g in m.layer_groups] == [("sliding", 6, 64), ("global-nope", 2, None)]
    assert (m.norm, m.parallel_attn, m.mlp_norm_in_parallel) == ("layernorm_nobias", True, False)
    names = {op.name for op in stage_ops(m, "decode", 1, 100, FP16)}
    assert "sliding/rope" in names and "global-nope/rope" not in names and "sliding/mlp_norm" not in names


def test_wrappers_and_moe_readers():
    wrapped = ModelConfig.from_hf_config({"model_type": "mistral3", "text_config": {**SMALL, "model_type": "mistral"}})
    assert wrapped.model_type == "mistral" and wrapped.notes[0].startswith("mistral3: the text decoder")
    glm = {**SMALL, "model_type": "glm4_moe", "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1}
    glm |= {"moe_intermediate_size": 64, "first_k_dense_replace": 3, "use_qk_norm": True}
    g = ModelConfig.from_hf_config(glm)
    assert (g.qk_norm, g.num_moe_layers, g.num_shared_experts, g.layer_groups) == (True, 5, 1, ())
    granite = {**SMALL, "model_type": "granitemoe", "num_local_experts": 8, "num_experts_per_tok": 2}
    assert ModelConfig.from_hf_config(granite).moe_intermediate_size == 512  # its experts are intermediate_size wide


def test_the_e2e_decoder_refuses_layers_that_differ():
    from kernels.e2e.decoder import check_supported

    with pytest.raises(RidgelineError, match="gemma-2-9b: layers that differ is not implemented by the e2e decoder"):
        check_supported(rl.load_model("gemma-2-9b"))


def test_the_plan_bounds_count_blocks_by_kind():
    """gpt-oss-20b, 1000 tokens: (12 sliding x 128 + 12 global x 1000) / 24 layers = 564
    whole-model positions, 36 blocks of 16 (as the simulator's kv_kept)."""
    from ridgeline.serving.bounds import _blocks

    assert _blocks(1000, rl.load_model("gpt-oss-20b"), 16) == 36
    assert _blocks(1000, rl.load_model("mistral-7b-v0.1"), 16) == 63  # uniform: ceil(1000 / 16)
