"""Serving engines as a setting (issue 54, goal 3): each engine's description is data with
its sources (hardware/engines), and it decides which kernels fuse, the attention, the KV
blocks, graphs, the scheduler and that scheduler's defaults per GPU. Hand-worked figures
carry their arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.cli import app
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.serving_engine import bench_requests, bench_sizing
from ridgeline.errors import InvalidSettingError, UnknownEngineError
from ridgeline.io.engines import engine_names, load_engine
from ridgeline.io.resolve import load_device, resolve
from ridgeline.serving.arrivals import poisson
from ridgeline.serving.simulator import Scheduler

ALL = "qkv+gate_up+add_norm+rope+pointwise"


def decode_ops(fusion: str, **how):
    d = resolve("llama-3-8b", "a6000", dtype="bf16", attention="paged", fusion=fusion, **how)
    return {op.name: op for op in stage_ops(d.model, "decode", 1, 512, d.plan)}


def test_fused_projections_by_hand():
    """Llama-3-8B, bf16, one decode token: q, k, v (4096 -> 4096 + 1024 + 1024 = 6144
    columns) read the input once, 4096 x 2 B; the weights 4096 x 6144 x 2 = 50 331 648 B;
    q and k written as activations (rotary rewrites k), (4096 + 1024) x 2 = 10 240 B, v to
    the cache, 1024 x 2 = 2048 B. gate and up: 4096 x 28 672 x 2 = 234 881 024 B of
    weights, 28 672 x 2 = 57 344 B written."""
    ops = decode_ops("qkv+gate_up")
    qkv, gate_up = ops["qkv_proj"], ops["gate_up_proj"]
    assert (qkv.dims["k"], qkv.dims["n"]) == (4096, 6144)
    assert qkv.weight_bytes == 50_331_648 and qkv.act_read_bytes == 8192
    assert (qkv.act_write_bytes, qkv.kv_write_bytes, qkv.flops) == (10_240, 2048, 2 * 4096 * 6144)
    assert gate_up.weight_bytes == 234_881_024 and gate_up.act_write_bytes == 57_344
    assert ops["mlp_act"].inputs == ("gate_up_proj",) and ops["rope"].inputs == ("qkv_proj",)
    assert not {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"} & ops.keys()


def test_the_residual_add_inside_the_norm_by_hand():
    """add + RMSNorm as one kernel reads the residual and the branch (2 x 4096 x 2 B) and
    writes the new residual and the normed output (2 x 4096 x 2 B): one read of 8192 B less
    than the add (2 reads, 1 write) and the norm (1 read, 1 write) apart."""
    fused, plain = decode_ops("add_norm"), decode_ops("")
    norm = fused["mlp_norm"]
    assert (norm.act_read_bytes, norm.act_write_bytes) == (16_384, 16_384)
    assert norm.flops == plain["attn_add"].flops + plain["mlp_norm"].flops
    assert norm.inputs == ("x", "o_proj")
    assert "attn_add" not in fused and "mlp_add" not in fused
    assert fused["attn_norm"].act_read_bytes == 16_384  # the last layer's add joins the next norm


def test_rope_inside_attention_by_hand():
    """TensorRT-LLM's attention reads the new k (1024 x 2 B) and writes it rotated to the
    cache (1024 x 2 B); rope's 8192 B of q rewritten is gone."""
    fused, plain = decode_ops("rope"), decode_ops("")
    attn, base = fused["attention"], plain["attention"]
    assert "rope" not in fused
    assert attn.act_read_bytes - base.act_read_bytes == 2048
    assert attn.kv_write_bytes - base.kv_write_bytes == 2048
    assert attn.vector_flops - base.vector_flops == plain["rope"].flops


def pass_totals(model: str, stage: str, length: int, fusion: str) -> dict[str, float]:
    d = resolve(model, "h100-sxm", dtype="bf16", attention="paged", fusion=fusion)
    ops = stage_ops(d.model, stage, 4, length, d.plan)
    keys = ("weight_bytes", "kv_read_bytes", "kv_write_bytes", "act_read_bytes", "flops", "vector_flops", "count")
    return {k: sum(float(getattr(op, k)) * (1 if k == "count" else op.count) for op in ops) for k in keys}


@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b", "qwen2-7b", "phi-3-mini"])
@pytest.mark.parametrize("stage,length", [("prefill", 256), ("decode", 512)])
def test_fusion_keeps_the_arithmetic_and_the_weights_and_saves_reads(model, stage, length):
    """Fusing moves no weight and no operation; it only saves activation traffic and kernels."""
    fused, plain = pass_totals(model, stage, length, ALL), pass_totals(model, stage, length, "")
    for key in ("weight_bytes", "kv_read_bytes", "kv_write_bytes"):
        assert fused[key] == pytest.approx(plain[key]), key
    assert fused["flops"] + fused["vector_flops"] == pytest.approx(plain["flops"] + plain["vector_flops"])
    assert fused["act_read_bytes"] < plain["act_read_bytes"] and fused["count"] < plain["count"]


def test_fused_pointwise_kernels_are_priced_by_the_measured_one_kernel_class():
    d = resolve(
        "llama-3-8b", "h200", dtype="bf16", engine="vllm", profile=rl.io.catalog.PROFILES_DIR / "cuda-nvidia-h200.yaml"
    )
    norm = next(op for op in stage_ops(d.model, "decode", 8, 512, d.plan) if op.name == "mlp_norm")
    assert norm.dims["kernel"] == "fused"
    assert d.ceilings.keys(norm)[0] == "elementwise:attn_add@bf16"
    assert d.ceilings.overhead(norm) == pytest.approx(1.214e-6)  # one kernel's, not PyTorch's RMSNorm's 4.9 us


def test_every_engine_loads_and_cites_its_sources():
    assert engine_names() == ["gpt-fast", "pytorch", "sglang", "trtllm", "vllm"]
    for name in engine_names():
        e = load_engine(name)
        assert e.name == name and e.sources and e.version
    assert dict(load_engine("pytorch").settings) == {}  # today's defaults, unchanged


def test_an_engine_sets_what_the_user_did_not():
    d = resolve("llama-3-8b", "h200", engine="trtllm", dtype="fp8")
    assert (d.settings.fusion, d.settings.attention, d.settings.kv_block) == (ALL, "paged", 32)
    mine = resolve("llama-3-8b", "h200", engine="trtllm", dtype="fp8", attention="flash", fusion="qkv")
    assert (mine.settings.fusion, mine.settings.attention) == ("qkv", "flash")
    plain = resolve("llama-3-8b", "h200", dtype="fp8")
    assert (plain.settings.engine, plain.settings.fusion, plain.settings.attention) == ("pytorch", "", "auto")


def test_unknown_engines_and_fusions_are_one_line_errors():
    with pytest.raises(UnknownEngineError, match="unknown engine 'trtlm'; choose one of: gpt-fast, pytorch"):
        resolve("llama-3-8b", "h200", engine="trtlm")
    with pytest.raises(InvalidSettingError, match="unknown fusion 'qvk'"):
        resolve("llama-3-8b", "h200", fusion="qvk+gate_up")
    out = CliRunner().invoke(app, ["analyze", "llama-3-8b", "-H", "h200", "--engine", "vlm"])
    assert out.exit_code == 2
    assert out.output == (
        "error: unknown engine 'vlm'; choose one of: gpt-fast, pytorch, sglang, trtllm, vllm (set with --engine). "
        "Did you mean: vllm?\n"
    )


@pytest.mark.parametrize(
    "device,server,offline",
    [
        ("h200", (1024, 8192), (1024, 16384)),  # >= 70 GiB, not an A100
        ("h100-sxm", (1024, 8192), (1024, 16384)),
        ("a100-80gb", (256, 2048), (256, 8192)),  # 80 GiB, but an A100: the small defaults
        ("l40s", (256, 2048), (256, 8192)),  # 48 GiB
    ],
)
def test_vllm_defaults_per_gpu(device, server, offline):
    e, dev = load_engine("vllm"), load_device(device)
    assert tuple(e.limits(dev, "server").values()) == server
    assert tuple(e.limits(dev, "offline").values()) == offline


@pytest.mark.parametrize(
    "device,limits,why",
    [
        ("h200", (1024, 8192), "141 GiB: at least 70 GiB and not an A100"),
        ("h100-sxm", (1024, 8192), "80 GiB: at least 70 GiB and not an A100"),
        ("a100-80gb", (256, 2048), "80 GiB: an A100"),  # vLLM keeps the A100 on the small defaults
        ("l4", (256, 2048), "24 GiB: under 70 GiB"),
    ],
)
def test_the_default_engine_runs_vllm_v1_defaults_and_says_which(device, limits, why):
    """Issue 57 item 7: ``simulate`` without --engine runs vLLM V1's policy (the pytorch
    engine), so it takes vLLM V1's server limits for the device (`vllm serve`: 1024
    sequences and 8192 tokens on >= 70 GiB GPUs that are not A100s, else 256 and 2048) and
    its prefix caching, and its basis says which rule applied."""
    s = rl.api.serving_scheduler(resolve("llama-3-8b", device))
    assert (s.policy, (s.max_batch, s.token_budget), s.prefix_cache) == ("vllm-v1", limits, True)
    assert s.basis == (
        f"vLLM (V1 engine) server defaults for {device} ({why}): {limits[0]} sequences, "
        f"{limits[1]} batched tokens, prefix caching on"
    )


def test_given_scheduler_options_win_and_the_basis_names_them():
    d = resolve("llama-3-8b", "h100-sxm")
    s = rl.api.serving_scheduler(d, {"max_batch": 64, "prefix_cache": False})
    assert (s.max_batch, s.token_budget, s.prefix_cache) == (64, 8192, False)
    assert s.basis.endswith("64 sequences, 8192 batched tokens, prefix caching off; given: max_batch, prefix_cache")
    hit = rl.api.serving_scheduler(d, {"prefix_hit": 0.5})  # a fixed hit fraction replaces the cache
    assert (hit.prefix_hit, hit.prefix_cache) == (0.5, False) and hit.basis.endswith("; given: prefix_hit")
    run = rl.api.simulate("llama-3-8b", "h100-sxm", poisson(1.0, 2, 64, 2))  # no scheduler: the engine's
    assert (run.meta["scheduler"]["max_batch"], run.meta["scheduler"]["token_budget"]) == (1024, 8192)
    out = CliRunner().invoke(app, ["simulate", "llama-3-8b", "-H", "a100-80gb", "--requests", "4"])
    assert out.exit_code == 0, out.output
    assert "engine pytorch: policy vllm-v1, batch 256, 2048 tokens a step, chunked prefill" in out.output
    assert "scheduler defaults: vLLM (V1 engine) server defaults for a100-80gb (80 GiB: an A100)" in out.output


@pytest.mark.parametrize(
    "device,tokens,reserve_gib",
    [
        ("l4", 2048, 2.8 + 0.1),  # 24 GiB: below 35 x 1024 MiB
        ("h100-sxm", 8192, 9.5 + 0.5),  # 80 GiB
        ("h200", 8192, 12 + 0.5),  # 141 GiB
        ("b200", 16384, 32.0),  # 180 GiB: above 160 x 1024 MiB
    ],
)
def test_sglang_defaults_per_gpu(device, tokens, reserve_gib):
    e, dev = load_engine("sglang"), load_device(device)
    assert e.limits(dev, "server") == {"token_budget": tokens}
    assert e.reserve_bytes(dev, 1) == pytest.approx(reserve_gib * 2**30)


def test_trtllm_bench_sizing_by_hand():
    """finetune_setting: 1000 requests, 128 in, 2048 out: batch 1000 -> 128 x ceil(1000/128)
    = 1024; tokens 1000 x (1 + 128/2048) = 1062.5 -> at least 2048. 300 requests, 2048 in,
    128 out: batch 384; tokens 300 x 17 = 5100 -> 512 x 10 = 5120. 100 requests over pp 2:
    50 -> at least 64; 50 x 2 = 100 tokens -> 2048. 9000 requests: capped at 4096."""
    assert bench_sizing(1000, 128, 2048, 1) == (1024, 2048)
    assert bench_sizing(300, 2048, 128, 1) == (384, 5120)
    assert bench_sizing(100, 128, 128, 2) == (64, 2048)
    assert bench_sizing(9000, 1000, 1000, 1) == (4096, 8192)
    # Llama-3-8B fp8 on one H200 (141 GiB), fp8 KV: (141 - 8.03e9 / 2^30) x 0.95 GiB over
    # 2 x 32 x 8 x 128 B = 64 KiB a token x 2176 tokens
    requests = bench_requests(141 * 2**30, 1, 8.03e9, 1.0, 65_536, 2176)
    assert requests == pytest.approx(0.95 * (141 - 8.03e9 / 2**30) * 2**30 / (65_536 * 2176))


def test_guaranteed_no_evict_never_preempts_and_reserves_whole_sequences():
    """KV blocks for two whole sequences (2 x (100 + 100) tokens / 16 = 26 blocks): TensorRT-LLM
    runs at most two at once and never evicts; vLLM V1 admits more and preempts."""
    d = resolve("qwen2-0.5b", "a6000", attention="flash")
    arrivals = poisson(1e9, 10, np.full(10, 100), np.full(10, 100), seed=0)
    runs = {
        p: rl.api.simulate(d, None, arrivals, Scheduler(policy=p, kv_blocks=26, max_batch=16, token_budget=2048))
        for p in ("trtllm", "vllm-v1")
    }
    assert runs["trtllm"].summary["preemptions"] == 0
    assert max(runs["trtllm"].timeline["running"]) == 2
    assert runs["vllm-v1"].summary["preemptions"] > 0


def test_sglang_steps_are_prefill_or_decode_never_both(monkeypatch):
    """Every step either computes prompt chunks only (decoding requests wait) or one token for
    each running request."""
    from ridgeline.serving.policies.sglang import PrefillFirst

    kinds = []
    schedule = PrefillFirst.schedule

    def recorded(self, server, now):
        chunk = schedule(self, server, now)
        gen = server.run[3]
        decoding = gen > 0
        kinds.append("decode" if np.all(chunk[decoding] == 1) and not np.any(chunk[~decoding]) else "prefill")
        assert kinds[-1] == "decode" or not np.any(chunk[decoding]), "a prompt chunk beside decodes"
        return chunk

    monkeypatch.setattr(PrefillFirst, "schedule", recorded)
    d = resolve("qwen2-0.5b", "a6000", attention="flash")
    arrivals = poisson(50.0, 40, np.full(40, 300), np.full(40, 20), seed=1)
    run = rl.api.simulate(d, None, arrivals, Scheduler(policy="sglang", max_batch=64, token_budget=512))
    assert {"prefill", "decode"} <= set(kinds)
    assert run.summary["requests"] == 40 and np.all(np.isfinite(run.requests["finish_s"]))
