"""The defects an independent hand audit found (issue 11), each pinned by a value worked
out by hand in the comment beside it. Model shapes come from models/catalog/*.json,
device figures from hardware/*.yaml."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.api import max_batch, speculative
from ridgeline.cli import app
from ridgeline.engine.analyze import pass_activation_peak
from ridgeline.engine.layers import forward_masks, stage_ops
from ridgeline.engine.memory import kv_capacity_bytes, usable_bytes, weight_bytes
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.precision import make_plan
from ridgeline.engine.roofline import evaluate, spec_ceilings
from ridgeline.engine.workload import Settings
from ridgeline.errors import InvalidConfigError, InvalidWorkloadError
from ridgeline.io.host import _physical_cores
from ridgeline.io.resolve import load_device, resolve
from ridgeline.report.analysis import attention_label

runner = CliRunner()


def rows(analysis, stage="decode"):
    return {r["name"]: r for r in getattr(analysis, stage).records()}


# --- MLA -------------------------------------------------------------------------------


def test_mla_absorb_weights_are_per_head():
    """DeepSeek-V2-Lite: 16 heads, qk_nope 128, kv_lora_rank 512, v_head 128. W_UK and W_UV
    are per head: 16 x 128 x 512 x 2 bytes = 2,097,152 bytes each per layer."""
    a = rl.analyze("deepseek-v2-lite", "h100-sxm", dtype="bf16", batch=1, seq_len=4096, generate=256)
    d = rows(a)
    assert d["q_absorb"]["weight_bytes"] == 16 * 128 * 512 * 2 == 2_097_152
    assert d["v_absorb"]["weight_bytes"] == 16 * 512 * 128 * 2 == 2_097_152
    # one token: each head multiplies its 128-wide q_nope by its 128 x 512 matrix
    assert d["q_absorb"]["flops"] == 2 * 16 * 128 * 512


def test_absorbed_flash_decode_reads_the_latent_once():
    """V is the first 512 columns of the cached 576-wide row: 4097 x 576 x 2 = 4,719,744
    bytes per layer (not 4097 x (576 + 512) x 2)."""
    a = rl.analyze("deepseek-v2-lite", "h100-sxm", dtype="bf16", seq_len=4096, attention="flash")
    assert rows(a)["attention"]["kv_read_bytes"] == 4097 * 576 * 2 == 4_719_744


# --- speculative decoding --------------------------------------------------------------


def test_verify_pass_computes_logits_at_every_position():
    """Verifying k = 4 draft tokens for 2 sequences: lm_head over 2 x 5 = 10 rows,
    2 x 10 x 4096 x 32000 operations (Llama-2-7B)."""
    p = make_plan(Settings(), load_device("a6000"))
    ops = {op.name: op for op in stage_ops(rl.load_model("llama-2-7b"), "decode", 2, 1024, p, q_len=5)}
    assert ops["lm_head"].flops == 2 * 10 * 4096 * 32000
    prefill = {op.name: op for op in stage_ops(rl.load_model("llama-2-7b"), "prefill", 2, 1024, p)}
    assert prefill["lm_head"].flops == 2 * 2 * 4096 * 32000  # prefill: the last position only


def test_speculation_counts_the_draft_in_memory_and_ttft():
    s = speculative("llama-2-13b", "a100-80gb", "llama-2-7b", seq_len=1024, draft_tokens=4)
    target = rl.analyze("llama-2-13b", "a100-80gb", seq_len=1024, generate=6)  # 1024 + 5 cached
    draft = rl.analyze("llama-2-7b", "a100-80gb", seq_len=1024, generate=6)
    assert s["memory"]["weights_bytes"] == target.memory["weights_bytes"] + draft.memory["weights_bytes"]
    assert s["memory"]["kv_cache_bytes"] == target.memory["kv_cache_bytes"] + draft.memory["kv_cache_bytes"]
    assert s["ttft_s"] == pytest.approx(target.prefill.total["time_s"] + draft.prefill.total["time_s"])
    assert s["tokens_per_s"] is None  # no generation (issue 26: tokens/s is plain decoding's, batch x N / total)


def test_speculative_cli_headline_and_valid_json():
    out = runner.invoke(
        app,
        [
            "analyze",
            "llama-2-7b",
            "-H",
            "h100-sxm",
            "--draft",
            "llama-3.2-1b",
            "--draft-tokens",
            "0",
            "--format",
            "json",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["speculative"]["by_draft_tokens"][0]["break_even_acceptance"] is None
    table = runner.invoke(
        app, ["analyze", "llama-2-7b", "-H", "h100-sxm", "--generate", "8", "--draft", "llama-3.2-1b"]
    )
    assert table.exit_code == 0, table.output
    # issue 26: the speculative TPOT is averaged over the same 8-token generation as plain TPOT
    spec = speculative("llama-2-7b", "h100-sxm", "llama-3.2-1b", seq_len=512, generate=8)
    assert f"TPOT {rl.engine.units.format_time(spec['tpot_s'])}" in table.stdout
    assert "memory with the draft" in table.stdout


def test_speculation_is_priced_on_plain_decodings_basis():
    """Issue 26, item 1: llama-2-7b (fp16, a6000), batch 16, prompt P = 512, N = 4096 output
    tokens, draft llama-3.2-1b, k = 4, a = 0.7. Attention is set to ``eager``, transformers'
    eager path (item 3: ``repeat_kv`` copies, fp32 softmax; tests/test_eager_attention.py).

    Memory at the last step: the last verify pass starts with P + N - 2 = 4606 tokens cached
    and writes k + 1 = 5, so both caches hold 4611 positions. KV per token: 2 x 32 layers x
    4096 x 2 B = 524,288 B (7B) and 2 x 16 layers x 8 KV heads x 64 x 2 B = 32,768 B (1B):
    (524,288 + 32,768) x 4611 x 16 = 41,097,363,456 B = 41.10 GB. Weights 2 x (6,738,415,616
    + 1,235,814,400) = 15.95 GB. Activations, the larger peak, the target's prefill: 16 x 32
    heads x 512^2 scores at 8 B each (fp16 masked scores, fp32 probabilities, fp16 copy) =
    1,073,741,824, + the layer input, its normed copy and the rotated query that transformers'
    frames hold, 3 x 16 x 512 x 4096 x 2 B = 201,326,592, + the fp16 causal mask it holds
    across the layers, 16 x 512 x 512 x 2 B = 8,388,608: 1.28 GB (the draft's: 1.18 GB, + its
    K/V copies, narrower). Total 58.33 GB = 54.3 GiB, against 0.9 x 48
    GiB - 0.75 GiB = 42.45 GiB usable: short by 11.9 GiB (it said 19.7 GiB, fits, with the
    cache at P + k + 1; 11.2 GiB short before item 3 priced eager attention's passes).

    Time on the same basis: step times are means over the cached lengths 512 .. 4606 (the
    engine's closed-form sum / 4095), as plain TPOT is (mean attended length 2560): target
    45.84 ms before item 3, + 16 x 32 x 2560 x 32 scores x 16.06 B more (fp16 on a GPU: 24 B
    a score, not 8, + the mask's 2 B per key / 32 heads) / 768 GB/s = 0.88 ms: 46.72 ms (=
    plain TPOT); draft 10.50 ms + the copies (K/V cache 1.342 GB read, 5.369 GB written) and
    16 x 32 x 2560 x 16 scores x 16.06 B: 7.05 GB / 768 GB/s = 9.18 ms: 19.68 ms; verify (5
    tokens) 48.59 + 5 x 0.88 = 52.98 ms; E = (1 - 0.7^5) / 0.3 = 2.7731 tokens/step; TPOT =
    (4 x 19.68 + 52.98) / 2.7731 = 47.49 ms; speed-up 46.72 / 47.49 = 0.98 (1.40 before item
    3; it said 1.48 with both at 512 cached): eager attention's cache copy makes the GQA
    draft's step cost 1.9 times as much; tokens/s as plain decoding's, batch x N / (TTFT +
    (N - 1) x TPOT) = 65,536 / (1.085 + 4095 x 0.04749) = 335.2 (it said 1022, batch / TPOT)."""
    args = ["analyze", "llama-2-7b", "-H", "a6000", "--dtype", "fp16", "--batch", "16", "--seq-len", "512"]
    args += [
        "--attention",
        "eager",
        "--generate",
        "4096",
        "--draft",
        "llama-3.2-1b",
        "--draft-tokens",
        "4",
        "--acceptance",
        "0.7",
    ]
    out = runner.invoke(app, [*args, "-f", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    spec, gen, mem = data["speculative"], data["generation"], data["speculative"]["memory"]
    assert mem["kv_cache_bytes"] == (524_288 + 32_768) * 4611 * 16 == 41_097_363_456
    assert mem["weights_bytes"] == 2 * (6_738_415_616 + 1_235_814_400)
    assert mem["activations_peak_bytes"] == 1_073_741_824 + 201_326_592 + 8_388_608
    assert mem["peak_bytes"] / 2**30 == pytest.approx(54.3, abs=0.05)
    assert mem["usable_bytes"] / 2**30 == pytest.approx(42.45, abs=0.005)
    assert not mem["fits"] and mem["shortfall_bytes"] / 2**30 == pytest.approx(11.9, abs=0.05)
    assert spec["target_step_s"] == pytest.approx(gen["tpot_s"], rel=1e-12) == pytest.approx(46.72e-3, rel=1e-3)
    assert spec["draft_step_s"] == pytest.approx(19.68e-3, rel=1e-3)
    assert spec["verify_s"] == pytest.approx(52.98e-3, rel=1e-3)
    assert spec["tpot_s"] == pytest.approx((4 * 19.68e-3 + 52.98e-3) / 2.7731, rel=1e-3)  # 47.49 ms
    assert spec["speedup"] == pytest.approx(gen["tpot_s"] / spec["tpot_s"], rel=1e-12) == pytest.approx(0.98, abs=0.005)
    assert spec["tokens_per_s"] == pytest.approx(16 * 4096 / (spec["ttft_s"] + 4095 * spec["tpot_s"]), rel=1e-12)
    assert spec["tokens_per_s"] == pytest.approx(335.2, rel=1e-3)
    assert gen["tokens_per_s"] == pytest.approx(341.0, rel=1e-3)  # plain: the same definition
    table = runner.invoke(app, args)
    assert "4607 positions exceed llama-2-7b's max_position_embeddings (4096)" in table.stdout  # stays
    assert "memory with the draft: 54.3GiB of 48GiB: does NOT fit: 11.9GiB over" in table.stdout


# --- parallelism -----------------------------------------------------------------------


def test_all_reduce_costs_hops_times_latency_plus_bytes():
    """Llama-2-70B decode, tp 8 on H100 SXM: a ring all-reduce of 8192 x 2 bytes sends
    2 x 7/8 x 16384 = 28,672 bytes and crosses 2 x 7 = 14 hops of 0.6 µs (NCCL's NVLink
    figure). Since issue 26 item 4 it also pays NCCL's ring LL base latency, 6.6 µs, and LL
    moves data at half the bandwidth: 6.6 + 14 x 0.6 + 28672 / 225e9 = 15.1274 µs (it
    was 28672 / 450e9 + 14 x 0.6 = 8.4637 µs, no base)."""
    r = rows(rl.analyze("llama-2-70b", "h100-sxm", tp=8))["attn_allreduce"]
    assert r["comm_bytes"] == 28_672
    # issue 57 item 4: NCCL's own bus bandwidth (18 x 20.6 = 370.8 GB/s), LL at half of it
    # capped at llMaxBws, 141 GB/s: 6.6 + 8.4 + 28672 / 141e9 = 15.2033 µs
    assert r["time_s"] == pytest.approx(6.6e-6 + 14 * 0.6e-6 + 28672 / 141e9)


def test_nccl_prices_with_its_own_bus_bandwidth_and_ll_cap():
    """Issue 57 item 4, by hand. A 64 MiB all-reduce at tp 8 on the H100: ring Simple, 2 x
    7/8 x 64 MiB = 117,440,512 bytes over NCCL's 370.8 GB/s (not the datasheet's 450) plus
    8.4 + 14 x 3.4 µs = 372.7 µs (was 317.0). 1 MiB at tp 2: ring LL, 1,048,576 bytes at
    min(0.5 x 370.8, 141) GB/s plus 6.6 + 2 x 0.6 µs = 15.24 µs (was 12.46)."""
    from ridgeline.engine.collectives import collective_seconds

    dev = load_device("h100-sxm")
    assert (dev.nccl_bus_bandwidth, dev.nccl_ll_max) == (370.8e9, 141e9)
    big = collective_seconds("nccl-nvlink", "all_reduce", 117_440_512, 8, dev.nccl_bus_bandwidth, dev.nccl_ll_max)
    assert big == pytest.approx(372.72e-6, abs=0.01e-6)
    small = collective_seconds("nccl-nvlink", "all_reduce", 1_048_576, 2, dev.nccl_bus_bandwidth, dev.nccl_ll_max)
    assert small == pytest.approx(15.2367e-6, abs=0.0001e-6)
    # a --link-bw the user gives is the bus bandwidth of every protocol (the LL cap stays)
    mine = rl.analyze("llama-2-70b", "h100-sxm", tp=8, link_bw_gb_s=450)
    assert rows(mine)["attn_allreduce"]["time_s"] == pytest.approx(15e-6 + 28672 / 141e9)


def test_mesh_bandwidth_depends_on_the_group():
    """MI300X: one 64 GB/s xGMI link per peer: tp 2 -> 64, tp 4 -> 3 x 64 = 192,
    tp 8 -> 7 x 64 = 448 GB/s. NVSwitch (H100) gives every group 450."""
    mesh = spec_ceilings(load_device("mi300x"))
    assert [float(mesh.group_bandwidth(n)) / 1e9 for n in (2, 4, 8)] == [64, 192, 448]
    assert spec_ceilings(load_device("h100-sxm")).group_bandwidth(2) == 450e9
    # Llama-2-70B tp 2 decode on MI300X, the group's 64 GB/s: RCCL's ring LL, base 12 µs + 2
    # hops x 0.8 µs + 16384 bytes / (0.5 x 64e9) = 14.112 µs (ring Simple: 17 + 7.2 + 0.256 =
    # 24.456). Before issue 26 item 4: 16384 / 64e9 + 2 x 0.8 = 1.856 µs, no base latency.
    r = rows(rl.analyze("llama-2-70b", "mi300x", tp=2))["attn_allreduce"]
    assert r["time_s"] == pytest.approx(12e-6 + 2 * 0.8e-6 + 16384 / 32e9)
    shown = runner.invoke(app, ["hardware", "show", "mi300x"]).stdout
    assert "fabric                 mesh, 64 GB/s per peer link" in shown
    assert "link latency           0.8 µs per hop" in shown


def test_vocab_parallel_embedding_and_logits_gather():
    """Llama-2-7B, tp 2, decode batch 1: the embedding all-reduce sends 2 x 1/2 x 4096 x 2
    = 8192 bytes; gathering 32000 fp16 logits sends (2-1)/2 x 64000 = 32,000 bytes."""
    d = rows(rl.analyze("llama-2-7b", "h100-sxm", tp=2))
    assert d["embed_allreduce"]["comm_bytes"] == 8192
    assert d["logits_gather"]["comm_bytes"] == 32_000
    assert d["lm_head"]["weight_bytes"] == 16000 * 4096 * 2  # half the vocabulary


def test_network_and_memory_seconds_are_separate_columns():
    table = evaluate(
        stage_ops(rl.load_model("llama-2-7b"), "decode", 1, 512, make_plan(Settings(tp=2), load_device("h100-sxm"))),
        spec_ceilings(load_device("h100-sxm")),
    )
    comm = table["comm_bytes"].ravel() > 0
    memory_s, network_s = table["memory_s"].ravel(), table["network_s"].ravel()
    assert comm.sum() == 4  # embed_allreduce, attn_allreduce, mlp_allreduce, logits_gather
    assert np.all(memory_s[comm] == 0) and np.all(network_s[comm] > 0)
    assert np.all(network_s[~comm] == 0)


# --- attention conventions -------------------------------------------------------------


def test_sliding_window_eager_prefill_is_full_then_masked():
    """Mistral-7B-v0.1 (window 4096), eager prefill of 16384: the full score matrix,
    2 x 32 x 16384^2 x 128 operations, and K at all 16384 positions: the cache read once
    (8 KV heads x 128 x 2 B), copied to the 32 query heads (``repeat_kv``) and the copy read
    by the matmul beside q. Decode reads the cache, which the window caps at 4096 positions."""
    a = rl.analyze("mistral-7b-v0.1", "h100-sxm", seq_len=16384, attention="eager")
    pre, dec = rows(a, "prefill"), rows(a)
    assert pre["qk_matmul"]["flops"] == 2 * 32 * 16384 * 16384 * 128
    assert pre["repeat_k"]["kv_read_bytes"] == 16384 * 8 * 128 * 2
    assert pre["qk_matmul"]["act_read_bytes"] == 2 * 16384 * 32 * 128 * 2  # q and the K copy
    assert dec["repeat_k"]["kv_read_bytes"] == 4096 * 8 * 128 * 2
    assert dec["qk_matmul"]["act_read_bytes"] == 32 * 128 * 2 + 4096 * 32 * 128 * 2
    assert dec["qk_matmul"]["flops"] == 2 * 32 * 4096 * 128


def test_sdpa_prefill_past_the_window_computes_every_pair_under_its_mask():
    """Gemma 3 4B (8 heads x 256, 4 KV heads, window 1024), transformers' sdpa path (auto):
    a prompt of 4096 reaches the window, so transformers passes a boolean mask and SDPA
    computes all 4096^2 pairs: 2 x 8 x 4096^2 x (256 + 256) = 137,438,953,472 operations a
    sliding layer (an exact window would be 1024 x 1025 / 2 + 3072 x 1024 = 3,670,528 pairs a
    head, 30.1G), reading the 4096^2-byte mask; the global layers keep is_causal (4096 x 4097
    / 2 pairs). A prompt of 1000 stays under the window: no mask, 1000 x 1001 / 2 pairs.
    Flash attention takes the window itself and skips the rest, as before. Measured on a
    2-core EPYC (tests/benchmarks/window_mask.py, one thread, fp32): a 2048 prompt under a
    512 window's mask took 1.74x its is_causal time, priced 1.60x (S^2 against the CPU
    kernel's 512-key causal blocks); an exact window would have priced 0.35x."""
    a = rows(rl.analyze("gemma-3-4b", "h100-sxm", seq_len=4096), "prefill")
    assert a["sliding/sdpa_gqa"]["flops"] == 2 * 8 * 4096 * 4096 * 512 == 137_438_953_472
    assert a["global/sdpa_gqa"]["flops"] == 2 * 8 * (4096 * 4097 // 2) * 512
    # q (4096 x 8 x 256 x 2 B) and the mask; K/V (4 heads x 512 x 2 B a position) once per
    # 128-row query tile: 4096^2 / 128 positions
    assert a["sliding/sdpa_gqa"]["act_read_bytes"] == 4096 * 8 * 256 * 2 + 4096 * 4096
    assert a["sliding/sdpa_gqa"]["kv_read_bytes"] == 4 * (4096 * 4096 // 128) * 512 * 2
    unmasked = rows(rl.analyze("gemma-3-4b", "h100-sxm", seq_len=4096, attention="flash"), "prefill")
    assert unmasked["sliding/attention"]["flops"] == 2 * 8 * (1024 * 1025 // 2 + 3072 * 1024) * 512
    short = rows(rl.analyze("gemma-3-4b", "h100-sxm", seq_len=1000), "prefill")
    assert short["sliding/sdpa_gqa"]["flops"] == 2 * 8 * (1000 * 1001 // 2) * 512


def test_the_masks_transformers_builds_once_a_forward_count_in_the_activation_peak():
    """transformers builds one [b, 1, q, kv] mask per kind of layer once per forward and holds
    it until the last layer returns (masking_utils.py, huggingface/transformers@00c4411).
    Gemma 3 4B (sliding 1024 and global layers), batch 4, prompt 2048, bf16 on an H100:
    - sdpa (auto): the global layers' mask is skipped (is_causal: nothing cached); the sliding
      one is built once 2048 keys pass the 1024 window, booleans over the whole batch (the
      all-ones padding mask joins): 4 x 2048 x 2048 x 1 B = 16,777,216;
    - eager: both kinds, converted to bf16: 2 x 4 x 2048^2 x 2 B = 67,108,864;
    - flash: none. A prompt of 1000 stays under the window: sdpa none, eager 2 x 4 x 1000^2 x 2.
    A verify pass of k + 1 = 5 over 600 cached (llama-3-8b, sdpa, batch 16) is neither one new
    token nor a fresh prompt, so its causal mask is built: 16 x 5 x 605 x 1 B = 48,400."""
    gemma, h100 = resolve("gemma-3-4b", "h100-sxm").model, load_device("h100-sxm")
    plans = {a: make_plan(Settings(attention=a), h100) for a in ("sdpa-gqa", "eager", "flash")}
    assert forward_masks(gemma, 4, 2048, 0, plans["sdpa-gqa"]) == 4 * 2048 * 2048 == 16_777_216
    assert forward_masks(gemma, 4, 2048, 0, plans["eager"]) == 2 * 4 * 2048**2 * 2 == 67_108_864
    assert forward_masks(gemma, 4, 2048, 0, plans["flash"]) == 0
    assert forward_masks(gemma, 4, 1000, 0, plans["sdpa-gqa"]) == 0
    assert forward_masks(gemma, 1, 32768, 0, plans["sdpa-gqa"]) == 32768**2 == 2**30  # docs/families.md
    assert forward_masks(gemma, 4, 1000, 0, plans["eager"]) == 2 * 4 * 1000**2 * 2
    llama = resolve("llama-3-8b", "h100-sxm").model
    assert forward_masks(llama, 16, 5, 600, plans["sdpa-gqa"]) == 16 * 5 * 605 == 48_400
    assert forward_masks(llama, 16, 1, 600, plans["sdpa-gqa"]) == 0  # one new token: is_causal
    # the analysis's peak is the layers' liveness peak with the mask beside it
    d = resolve("gemma-3-4b", "h100-sxm")
    ops, x = stage_ops(d.model, "prefill", 4, 2048, d.plan), 4 * 2048 * 2560 * 2
    bare = pass_activation_peak(d.model, ops, x, d.plan)
    assert pass_activation_peak(d.model, ops, x, d.plan, 16_777_216) - bare == 16_777_216
    analysis = rl.analyze("gemma-3-4b", "h100-sxm", batch=4, seq_len=2048)
    assert analysis.memory["activations_peak_bytes"] == bare + 16_777_216


def test_gpt_oss_auto_attention_is_its_own_eager_path_with_the_sinks():
    """transformers runs gpt-oss without SDPA (GptOssPreTrainedModel: _supports_sdpa = False),
    so auto prices its eager_attention_forward. gpt-oss-20b (64 heads, d 64), fp16, a prompt of
    1000: E = 64 x 1000^2 = 64,000,000 scores a layer, W = 64 x 1000 x 1001 = 64,064,000
    with the sink column, R = 64,000 rows. cat reads the scores and the 64 sinks (2 E + 128 B)
    and writes W (2 W B); the rows' max reads 2 W B and writes 2 R B; the shift reads 2 W + 2 R
    and writes 2 W; softmax in fp16 reads and writes 2 W B (5 ops an element), with no fp32
    casts. Other models keep transformers' sdpa path."""
    a = rl.analyze("gpt-oss-20b", "h100-sxm", seq_len=1000)
    pre = rows(a, "prefill")
    assert a.plan.attention == "eager"
    assert (pre["sliding/attn_sinks"]["act_read_bytes"], pre["sliding/attn_sinks"]["act_write_bytes"]) == (
        2 * 64_000_000 + 128,
        2 * 64_064_000,
    )
    assert (pre["sliding/attn_max"]["act_read_bytes"], pre["sliding/attn_max"]["act_write_bytes"]) == (
        2 * 64_064_000,
        2 * 64_000,
    )
    assert pre["sliding/attn_shift"]["act_read_bytes"] == 2 * 64_064_000 + 2 * 64_000
    assert pre["sliding/softmax"]["act_read_bytes"] == pre["sliding/softmax"]["act_write_bytes"] == 2 * 64_064_000
    assert pre["sliding/softmax"]["flops"] == 5 * 64_064_000
    assert not [name for name in pre if "cast" in name]
    assert attention_label("auto", a.plan.attention) == (
        "eager attention (auto: transformers' eager path; the model's class runs no SDPA)"
    )
    assert rl.analyze("llama-3-8b", "h100-sxm").plan.attention == "sdpa-gqa"
    assert rl.analyze("gpt-oss-20b", "h100-sxm", attention="flash").plan.attention == "flash"


def test_eager_gqa_copies_kv_per_query_head():
    """Llama-3-8B (32 query heads, 8 KV heads, d 128), decode with 1024 cached: eager's
    repeat_kv reads each cached K and V head once, 1025 x 8 x 128 x 2 = 2,099,200 bytes, and
    writes a copy per query head, 1025 x 32 x 128 x 2 = 8,396,800, which qk and sv read;
    flash reads each KV head once, 8 x 1025 x (128 + 128) x 2 = 4,198,400; MHA (Llama-2-7B)
    has no copy (``repeat_kv`` returns its input): the matmul reads 1025 x 32 x 128 x 2."""
    eager = rows(rl.analyze("llama-3-8b", "h100-sxm", seq_len=1024, attention="eager"))
    assert eager["repeat_k"]["kv_read_bytes"] == eager["repeat_v"]["kv_read_bytes"] == 2_099_200
    assert eager["repeat_k"]["act_write_bytes"] == eager["repeat_v"]["act_write_bytes"] == 8_396_800
    assert eager["qk_matmul"]["kv_read_bytes"] == eager["sv_matmul"]["kv_read_bytes"] == 0
    flash = rows(rl.analyze("llama-3-8b", "h100-sxm", seq_len=1024, attention="flash"))
    assert flash["attention"]["kv_read_bytes"] == 4_198_400
    mha = rows(rl.analyze("llama-2-7b", "h100-sxm", seq_len=1024, attention="eager"))
    assert mha["qk_matmul"]["kv_read_bytes"] == 1025 * 32 * 128 * 2 and "repeat_k" not in mha


def test_exponentials_bound_a_flash_attention_2_kernel():
    """H100 SXM: 16 exp per SM per clock x 132 SMs at the clock the datasheet's dense bf16
    tensor peak implies, 989.4e12 / (132 x 4096) = 1.830 GHz: 3.8648e12 exp/s (3.865 in
    hardware/h100-sxm.yaml; it was 4.182 at the 1.98 GHz boost clock, issue 26 item 6;
    FlashAttention-3 quotes 3.9). Falcon-7B
    (71 heads, d = 64) flash prefill of 4096 in fp8: 71 x 4096 x 4097/2 = 595,736,576
    exponentials take 154.14 µs, while the fp8 matrix work (256 ops per pair at 1978.9 T)
    and the softmax's vector work (5 per pair at 133.8 T) take 77.06 + 22.26 = 99.3 µs."""
    r = rows(rl.analyze("falcon-7b", "h100-sxm", seq_len=4096, attention="flash", dtype="fp8_e4m3"), "prefill")[
        "attention"
    ]
    exps = 71 * 4096 * 4097 / 2
    assert exps == 595_736_576
    assert r["bound"] == "exp"
    assert r["time_s"] == pytest.approx(exps / 3.865e12)
    assert r["time_s"] == pytest.approx(154.14e-6, rel=1e-4)
    # at bf16 the matrix work (2 x 77.06 µs) is the larger term again
    bf16 = rows(rl.analyze("falcon-7b", "h100-sxm", seq_len=4096, attention="flash", dtype="bf16"), "prefill")[
        "attention"
    ]
    assert bf16["bound"] == "compute"


# --- quantisation and catalogs ---------------------------------------------------------


@pytest.mark.parametrize(
    "options", [{"dtype": "int4"}, {"w_dtype": "int4"}, {"a_dtype": "int8"}, {"w_dtype": "int8", "a_dtype": "int8"}]
)
def test_embeddings_norms_and_lm_head_stay_16_bit(options):
    """One rule for every route: Llama-2-7B's lm_head is 32000 x 4096 x 2 bytes, a norm
    4096 x 2, the embedding row 4096 x 2, and lm_head runs at the fp16 roof."""
    d = rows(rl.analyze("llama-2-7b", "a6000", **options))
    assert d["lm_head"]["weight_bytes"] == 32000 * 4096 * 2
    assert d["lm_head"]["dtype"] == "fp16"
    assert d["attn_norm"]["weight_bytes"] == d["final_norm"]["weight_bytes"] == 4096 * 2
    assert d["embed"]["weight_bytes"] == 4096 * 2


def test_packed_zero_points():
    """int4, groups of 128, packed 4-bit zeros: an fp16 scale + a 0.5-byte zero per group,
    4 + 8 x 2.5 / 128 = 4.15625 bits per weight (fp16 zeros: 4 + 8 x 4 / 128 = 4.25)."""
    weights = 4096 * 4096
    packed = rows(rl.analyze("llama-2-7b", "a6000", w_dtype="int4", group_size=128, zero_points="packed"))["q_proj"][
        "weight_bytes"
    ]
    fp16 = rows(rl.analyze("llama-2-7b", "a6000", w_dtype="int4", group_size=128))["q_proj"]["weight_bytes"]
    assert 8 * packed / weights == 4.15625
    assert 8 * fp16 / weights == 4.25
    with pytest.raises(InvalidWorkloadError, match="unknown zero-point layout"):
        Settings(zero_points="int8")


def test_b200_figures():
    """HGX B200 table: fp32 600 TFLOPS for 8 GPUs -> 75; 7.7 TB/s per GPU."""
    b200 = load_device("b200")
    assert b200.matrix_peak["fp32"] == b200.vector_peak["fp32"] == 75e12
    assert b200.memory_bandwidth == 7700e9


def test_physical_cores_count_smt_siblings_once(tmp_path):
    """4 logical CPUs on 2 cores (SMT pairs 0/2 and 1/3) count 2 cores."""
    for cpu, core in ((0, 0), (1, 1), (2, 0), (3, 1)):
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert _physical_cores({0, 1, 2, 3}, tmp_path) == 2
    assert _physical_cores({0, 2}, tmp_path) == 1
    assert _physical_cores({0, 1, 5}, tmp_path) == 3  # no topology for cpu5: logical count


def test_models_commands_show_moe():
    """Mixtral-8x7B: 32 x (4096^2 x 2 + 4096 x 1024 x 2 + 4096 x 8 + 2 x 4096 + 2 x 3 x
    4096 x 14336) + 2 x 32000 x 4096 + 4096 = 12,879,925,248 active parameters."""
    show = runner.invoke(app, ["models", "show", "mixtral-8x7b"])
    assert show.exit_code == 0
    assert "active parameters                12.880 B" in show.stdout
    listing = runner.invoke(app, ["models", "list"]).stdout.splitlines()
    assert any(line.startswith("mixtral-8x7b") and "MoE 8 experts, top-2" in line for line in listing)
    assert not any(line.startswith("llama-2-7b") and "MoE" in line for line in listing)


# --- inputs the engine refuses or flags ------------------------------------------------


@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_device_yaml_with_nan_or_inf_is_refused(tmp_path, value):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\nvendor: x\nkind: gpu\nmemory_capacity_gib: 8\n"
        f"memory_bandwidth_gb_s: {value}\nmatrix_peak_tops: {{fp16: 10}}\n"
        "sources: [http://x]\n"
    )
    out = runner.invoke(app, ["analyze", "llama-2-7b", "-H", str(path)])
    assert out.exit_code == 2
    assert "'memory_bandwidth_gb_s' must be a positive number" in out.output
    assert "Traceback" not in out.output


def test_hidden_size_must_split_into_heads():
    raw = {
        "model_type": "llama",
        "hidden_size": 4100,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
        "intermediate_size": 11008,
        "vocab_size": 32000,
    }
    with pytest.raises(
        InvalidConfigError,
        match=r"hidden_size \(4100\) is not a multiple of "
        r"num_attention_heads \(32\)",
    ):
        ModelConfig.from_hf_config(raw)
    assert ModelConfig.from_hf_config({**raw, "head_dim": 128}).head_dim == 128


def test_sequence_beyond_max_positions_warns():
    """Llama-2-7B: max_position_embeddings 4096; 4000 + 200 - 1 = 4199 positions."""
    a = rl.analyze("llama-2-7b", "a6000", seq_len=4000, generate=200)
    assert a.to_dict()["warnings"] == ["4199 positions exceed llama-2-7b's max_position_embeddings (4096)"]
    assert "warnings" not in rl.analyze("llama-2-7b", "a6000", seq_len=4000, generate=97).to_dict()


# --- memory headroom -------------------------------------------------------------------


def test_headroom_and_runtime_reserve_set_what_fits():
    """A6000: 48 GiB x 0.9 - 0.75 GiB reserve = 42.45 GiB usable; the KV cache gets what
    the weights and activations leave of it."""
    device = load_device("a6000")
    p = make_plan(Settings(), device)
    assert usable_bytes(device, p) == pytest.approx(42.45 * 2**30)
    model = rl.load_model("llama-2-7b")
    assert kv_capacity_bytes(model, device, p, 1e9) == pytest.approx(42.45 * 2**30 - weight_bytes(model, p) - 1e9)
    default = max_batch("llama-2-7b", "a6000", 1024, 128)
    whole = max_batch("llama-2-7b", "a6000", 1024, 128, memory_utilization=1.0)
    assert default < whole
    a = rl.analyze("llama-2-7b", "a6000", batch=default, seq_len=1024, generate=128)
    assert a.memory["fits"] and a.memory["peak_bytes"] <= 42.45 * 2**30
    assert not rl.analyze("llama-2-7b", "a6000", batch=default + 1, seq_len=1024, generate=128).memory["fits"]
    with pytest.raises(InvalidWorkloadError, match="memory utilization must be in"):
        Settings(memory_utilization=1.5)
    assert math.isclose(a.memory["runtime_reserve_bytes"], 0.75 * 2**30)


# --- NCCL's collective cost model (issue 26 item 4) ----------------------------------------


def test_tensor_parallel_all_reduce_pays_nccl_base_latency():
    """NCCL's tuning model (src/graph/tuning.cc) on an H100 SXM node: time = base + steps x
    hop + bytes / (bus bandwidth x fraction), the cheapest of ring / tree x LL / LL128 /
    Simple, the bus bandwidth NCCL's own 370.8 GB/s (18 x 20.6) and ring LL's capped at
    llMaxBws, 141 GB/s (issue 57 item 4). Llama-2-7B decode, batch 1: each all-reduce is
    4096 x 2 B = 8,192 B.
    tp 2, ring LL: 6.6 + 2 x 0.6 = 7.8 µs + 8,192 B / 141e9 = 7.8581 µs (ring Simple 8.4 + 2 x
    3.4 = 15.2 µs: LL wins). tp 8: 6.6 + 14 x 0.6 = 15.0 µs + 14,336 B (2 x 7/8 x 8,192) /
    141e9 = 15.1017 µs. TPOT at tp 2: 2.537 ms before item 4 + 65 all-reduces x (7.8581 -
    7.8364) µs + the logits' all-gather (32,000 x 2 B on a ring: 32,000 B / 141e9 against
    / 225e9, +0.0849 µs) = 2.5381 ms."""
    kw = dict(dtype="bf16", seq_len=512, generate=128)
    tp2, tp8 = (rl.analyze("llama-2-7b", "h100-sxm", tp=tp, **kw) for tp in (2, 8))
    assert rows(tp2)["attn_allreduce"]["time_s"] == pytest.approx(7.8581e-6, rel=1e-4)
    assert rows(tp8)["mlp_allreduce"]["time_s"] == pytest.approx(15.1017e-6, rel=1e-4)
    assert tp2.generation["tpot_s"] == pytest.approx(2.5381e-3, rel=3e-4)
    # prefill's 512 x 4096 x 2 = 4,194,304 B: ring Simple 8.4 + 6.8 + 4,194,304 / 370.8e9 =
    # 26.51 µs beats ring LL (7.8 + 29.75 = 37.55) and LL128 (17.8 + 12.30 = 30.10)
    assert rows(tp2, "prefill")["attn_allreduce"]["time_s"] == pytest.approx(26.5115e-6, rel=1e-4)
    # PCIe (a6000, 32 GB/s): NCCL's PCI latencies, ring LL 6.6 + 2 x 1.0 + 8,192 / 16e9
    a6000 = rl.analyze("llama-2-7b", "a6000", tp=2, **kw)
    assert rows(a6000)["attn_allreduce"]["time_s"] == pytest.approx(8.6e-6 + 8192 / 16e9, rel=1e-4)
    # a link latency given by hand is the whole latency: 2 hops x 5 µs, no base
    own = rl.analyze("llama-2-7b", "h100-sxm", tp=2, link_latency_us=5.0, **kw)
    assert rows(own)["attn_allreduce"]["time_s"] == pytest.approx(10e-6 + 8192 / 450e9, rel=1e-4)


def test_mi300x_collectives_use_rccl_latencies():
    """RCCL's tuning.cc: base 12 µs (LL), xGMI hop 0.8 µs (ring LL). MI300X at tp 8 (mesh:
    7 x 64 = 448 GB/s): 12 + 14 x 0.8 = 23.2 µs + 14,336 B / (0.5 x 448e9) = 23.264 µs; the
    output says which model priced it."""
    a = rl.analyze("llama-2-7b", "mi300x", dtype="bf16", seq_len=512, generate=128, tp=8)
    assert rows(a)["attn_allreduce"]["time_s"] == pytest.approx(23.2e-6 + 14336 / 224e9, rel=1e-4)
    out = CliRunner().invoke(app, ["analyze", "llama-2-7b", "-H", "mi300x", "--tp", "8", "--dtype", "bf16"])
    assert out.exit_code == 0 and "RCCL latencies, NCCL model" in out.output


def test_pipeline_decode_with_fewer_micro_batches_than_stages_is_the_sum_of_the_stages():
    """Issue 57 item 5. Llama-2-7B on an H100's datasheet, batch 4 at pp 4 with 2 micro-batches:
    one micro-batch's stage runs 8 layers (1008.45 µs), the first stage also the embedding
    (0.01 µs), the last the final norm and lm_head (0.01 + 78.30 µs) and the 3 sends (1.91 µs).
    Two micro-batches cannot fill four stages: a round is the sum of the stages, 4 x 1008.45
    + 0.01 + 0.01 + 78.30 + 1.91 = 4114.0 µs (the audit's hand figure: 4.117 ms), not 4 x the
    heaviest stage, 4354.7 µs. With 4 micro-batches, 4 turns of the heaviest stage."""
    from ridgeline.engine.layers import EMBED_OPS, LAST_STAGE_OPS

    a = rl.analyze("llama-2-7b", "h100-sxm", batch=4, pp=4, micro_batches=2, generate=128)
    ops = a.decode.ops
    seconds = ops["count"] * ops["time_s"]
    ends = ops["name"].isin(EMBED_OPS + LAST_STAGE_OPS)
    assert a.decode.total["time_s"] == pytest.approx(4 * seconds[~ends].sum() + seconds[ends].sum())
    assert a.decode.total["time_s"] == pytest.approx(4.117e-3, rel=1e-3)
    full = rl.analyze("llama-2-7b", "h100-sxm", batch=8, pp=4, micro_batches=4, generate=128)
    f = full.decode.ops
    s = f["count"] * f["time_s"]
    head, tail = s[f["name"].isin(EMBED_OPS)].sum(), s[f["name"].isin(LAST_STAGE_OPS)].sum()
    layers = s[~f["name"].isin(EMBED_OPS + LAST_STAGE_OPS)].sum()
    assert full.decode.total["time_s"] == pytest.approx(4 * (layers + max(head, tail)))


def test_speculative_memory_holds_the_verify_pass():
    """Issue 57 item 1: Llama-3-8B with a Llama-3.2-1B draft, batch 64, prompt 16, k = 8 on an
    A6000. The verify pass computes 9 positions a sequence: its logits are 64 x 9 x 128,256 x
    2 B = 147,750,912 B, alive beside the final norm's output they come from, 64 x 9 x 4096 x
    2 B = 4,718,592 B: 152,469,504 B, above the prefill's peak (what was reported): its MLP's
    gate, up and product (3 x 14,336 wide) beside the three hidden-width tensors transformers'
    frames hold there (3 x 4096): 64 x 16 x 55,296 x 2 B = 113,246,208 B."""
    s = rl.api.speculative("llama-3-8b", "a6000", "llama-3.2-1b", batch=64, seq_len=16, generate=64, draft_tokens=8)
    assert s["memory"]["activations_peak_bytes"] == 147_750_912 + 4_718_592
    plain = rl.analyze("llama-3-8b", "a6000", batch=64, seq_len=16, generate=64)
    assert plain.memory["activations_peak_bytes"] == 64 * 16 * 55_296 * 2 == 113_246_208  # no draft: the prefill's


QWEN3_8B = {  # Qwen/Qwen3-8B config.json (the shapes; tokenizer fields left out)
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "max_position_embeddings": 40960,
}
FALCON_40B = {  # tiiuae/falcon-40b config.json
    "model_type": "falcon",
    "hidden_size": 8192,
    "num_attention_heads": 128,
    "num_kv_heads": 8,
    "num_hidden_layers": 60,
    "vocab_size": 65024,
    "new_decoder_architecture": True,
    "parallel_attn": True,
    "bias": False,
}


def test_qwen3_normalises_each_head_of_q_and_k():
    """Issue 57 item 8: Qwen3's attention runs an RMSNorm over each head of q (32 x 128) and of
    k (8 x 128) before RoPE, each with a 128-wide weight. Decode at batch 4: q_norm normalises
    4 x 32 rows of 128, k_norm 4 x 8; RoPE reads their outputs. Non-embedding parameters: 36 x
    (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 12288 + 2 x 4096 + 2 x 128) = 6,946,071,552
    (the model card: 6.95B)."""
    from ridgeline.engine.memory import ONE_BYTE

    c = ModelConfig.from_hf_config(QWEN3_8B, name="qwen3-8b")
    assert c.qk_norm and not ModelConfig.from_hf_config({**QWEN3_8B, "model_type": "qwen2"}).qk_norm
    d = resolve(c, "a6000", dtype="bf16")
    ops = {op.name: op for op in stage_ops(c, "decode", 4, 512, d.plan)}
    assert (ops["q_norm"].dims["tokens"], ops["q_norm"].dims["hidden"]) == (4 * 32, 128)
    assert (ops["k_norm"].dims["tokens"], ops["k_norm"].weight_bytes) == (4 * 8, 128 * 2)
    assert ops["rope"].inputs == ("q_norm", "k_norm") and ops["q_norm"].count == 36
    embeddings = 2 * 151936 * 4096 + 4096  # untied embedding and lm_head, the final norm
    assert weight_bytes(c, ONE_BYTE) - embeddings == 6_946_071_552


def test_falcon_new_decoder_architecture_runs_two_layernorms():
    """Issue 57 item 8: Falcon-40B (new decoder architecture, num_ln_in_parallel_attn unset:
    2) runs ln_attn and ln_mlp, one LayerNorm each for attention and the MLP, both of the
    layer's input: 2 x 8192 norm weights a layer where one was priced. Falcon-7B keeps one."""
    c = ModelConfig.from_hf_config(FALCON_40B, name="falcon-40b")
    assert c.parallel_attn and c.mlp_norm_in_parallel and c.num_kv_heads == 8
    d = resolve(c, "h100-sxm", dtype="bf16")
    ops = {op.name: op for op in stage_ops(c, "decode", 1, 512, d.plan)}
    assert ops["attn_norm"].inputs == ops["mlp_norm"].inputs == ("x",)
    assert ops["mlp_norm"].count == 60 and ops["up_proj"].inputs == ("mlp_norm",)
    one = ModelConfig.from_hf_config({**FALCON_40B, "num_ln_in_parallel_attn": 1}, name="falcon2-11b-like")
    assert not one.mlp_norm_in_parallel
    seven = rl.load_model("falcon-7b")
    assert seven.parallel_attn and not seven.mlp_norm_in_parallel
