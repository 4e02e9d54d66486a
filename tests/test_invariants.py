"""Invariants under hypothesis: roofs, monotone memory, linear KV, exact decode sums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ridgeline as rl
from ridgeline.engine.analyze import decode_time_sum, stage_totals
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.precision import make_plan
from ridgeline.engine.roofline import spec_ceilings

MODELS = ["llama-2-7b", "llama-3-8b", "falcon-7b", "opt-6.7b", "gpt-j-6b", "gemma-7b"]
batches = st.integers(1, 256)
lengths = st.integers(1, 32768)
models = st.sampled_from(MODELS)
devices = st.sampled_from(["a6000", "h100-sxm", "l4", "rtx-4090"])


@settings(max_examples=40, deadline=None)
@given(models, devices, batches, lengths)
def test_time_never_below_either_roof(model, device, batch, length):
    a = rl.analyze(model, device, batch=batch, seq_len=length)
    d = a.device
    for frame in (a.prefill.ops, a.decode.ops):
        peak = np.where(frame["kind"].isin(["linear", "attention"]), d.matrix_peak["fp16"], max(d.vector_peak.values()))
        assert np.all(frame["time_s"] >= frame["bytes"] / d.memory_bandwidth * (1 - 1e-12))
        assert np.all(frame["time_s"] >= frame["flops"] / peak * (1 - 1e-12))


@settings(max_examples=30, deadline=None)
@given(models, batches, lengths, st.integers(0, 512))
def test_memory_monotone_in_batch_and_length(model, batch, length, generate):
    base = rl.analyze(model, "h100-sxm", batch=batch, seq_len=length, generate=generate).memory
    more_b = rl.analyze(model, "h100-sxm", batch=batch + 1, seq_len=length, generate=generate).memory
    more_s = rl.analyze(model, "h100-sxm", batch=batch, seq_len=length + 7, generate=generate).memory
    for key in ("kv_cache_bytes", "activations_peak_bytes", "peak_bytes"):
        assert more_b[key] >= base[key] and more_s[key] >= base[key]


@settings(max_examples=30, deadline=None)
@given(models, batches, st.integers(1, 20000), st.integers(1, 5000))
def test_decode_kv_bytes_linear_in_length(model, batch, length, step):
    def kv(s):
        return rl.analyze(model, "a6000", batch=batch, seq_len=s).decode.total["kv_read_bytes"]

    a, b, c = kv(length), kv(length + step), kv(length + 2 * step)
    assert b - a == pytest.approx(c - b, rel=1e-12)
    assert b > a


@settings(max_examples=30, deadline=None)
@given(models, devices, st.integers(1, 512), st.integers(1, 4096), st.integers(1, 300))
def test_closed_form_decode_sum_equals_the_loop(model, device, batch, prompt, generate):
    cfg, dev = rl.load_model(model), rl.load_device(device)
    p, roofs = make_plan(rl.Settings(), dev), spec_ceilings(dev)
    loop = sum(
        stage_totals(stage_ops(cfg, "decode", batch, s, p), roofs)[0]["time_s"]
        for s in range(prompt, prompt + generate - 1)
    )
    closed = decode_time_sum(cfg, batch, np.asarray(prompt), np.asarray(prompt + generate - 2), p, roofs)
    assert float(closed) == pytest.approx(loop, rel=1e-9, abs=1e-15)


def test_sweep_rows_equal_single_analyses():
    frame = rl.sweep("llama-3-8b", "h100-sxm", [1, 8, 64], [128, 4096], generate=32)
    for row in frame.itertuples():
        one = rl.analyze("llama-3-8b", "h100-sxm", batch=row.batch, seq_len=row.seq_len, generate=32)
        assert row.ttft_s == pytest.approx(one.generation["ttft_s"], rel=1e-12)
        assert row.tpot_s == pytest.approx(one.generation["tpot_s"], rel=1e-12)
        assert row.peak_bytes == pytest.approx(one.memory["peak_bytes"], rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(models, st.integers(1, 1024), st.integers(1, 4096), st.integers(2, 300))
def test_closed_form_decode_sum_keeps_the_first_touch(model, batch, prompt, generate):
    # a CPU's first touch of fresh tensors (here the logits of a large batch): constant in the
    # cached length under the fused kernel, so the closed form stays exact
    from dataclasses import replace

    cfg, dev = rl.load_model(model), rl.load_device("a6000")
    p = make_plan(rl.Settings(attention="flash"), dev)
    roofs = replace(spec_ceilings(dev), first_touch_rate=3e9)
    loop = sum(
        stage_totals(stage_ops(cfg, "decode", batch, s, p), roofs)[0]["time_s"]
        for s in range(prompt, prompt + generate - 1)
    )
    closed = decode_time_sum(cfg, batch, np.asarray(prompt), np.asarray(prompt + generate - 2), p, roofs)
    assert float(closed) == pytest.approx(loop, rel=1e-9, abs=1e-15)
    plain = decode_time_sum(cfg, batch, np.asarray(prompt), np.asarray(prompt + generate - 2), p, spec_ceilings(dev))
    logits = batch * cfg.vocab_size * 2
    assert (float(closed) > float(plain)) == (logits >= 32 * 2**20)
