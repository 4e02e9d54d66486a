"""ridgeline decode-profile: host against device time of eager decode steps (CPU here)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dataclasses import replace  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from kernels.e2e.decode_profile import breakdown_rows, profile_decode, range_kernel_time, report_lines
from kernels.e2e.e2e import engine_settings
from ridgeline.api import analyze
from ridgeline.cli import app  # noqa: E402
from ridgeline.engine.model import ModelConfig

TINY = ModelConfig(
    name="tiny",
    model_type="llama",
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    intermediate_size=48,
    vocab_size=50,
    tie_word_embeddings=False,
)


def test_two_passes_over_the_same_positions_on_cpu():
    rows = profile_decode(TINY, batch=2, prompt=5, steps=3, dtype="fp32", device="cpu")["passes"]
    assert [r["pass"] for r in rows] == ["new lengths", "same lengths again"]
    for r in rows:
        # on a CPU the step is done when its last call returns: enqueue is the whole wall
        assert 0 < r["enqueue_s"] <= r["wall_s"]
        assert "device_s" not in r and "kernels" not in r  # the profiler pass is CUDA only
    lines = report_lines(TINY, rows, batch=2, prompt=5, steps=3, dtype="fp32", device="cpu")
    assert lines[0].startswith("tiny (2 layers, fp32) on cpu, batch 2, prompt 5, 3 decode steps")
    assert lines[1].startswith("new lengths") and "enqueue" in lines[1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch", "0"], "--batch, --prompt and --steps must be at least 1"),
        (["--steps", "-1"], "--batch, --prompt and --steps must be at least 1"),
        (["--dtype", "int3"], "unknown dtype 'int3'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(app, ["decode-profile", "qwen2-0.5b", "--device", "cpu", "--layers", "1", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"num_kv_heads": 1, "gated_mlp": False, "hidden_act": "gelu_new", "norm": "layernorm", "parallel_attn": True},
    ],
    ids=["llama-like", "falcon-like"],
)
def test_every_engine_op_is_timed_once_per_count(overrides):
    """The decoder mirrors the engine's decode ops one to one: the timed ops are exactly the
    engine's (plus the greedy argmax, which it does not model), each called as many times
    per step as the engine counts it."""
    config = replace(TINY, **overrides)
    ops = profile_decode(config, batch=2, prompt=5, steps=3, dtype="fp32", device="cpu", ops=True)["ops"]
    engine = analyze(config, "a6000", batch=2, seq_len=6, generate=0, settings=engine_settings("fp32")).decode.records()
    assert set(ops) == {r["name"] for r in engine} | {"argmax"}
    assert all(ops[r["name"]]["calls"] == r["count"] for r in engine)
    assert all(m["ms"] > 0 for m in ops.values())
    rows = breakdown_rows(ops, engine)
    assert [r["op"] for r in rows] == [r["name"] for r in engine] + ["argmax"]
    assert rows[-1]["predicted_ms"] is None and rows[-1]["error"] is None
    first = rows[0]
    assert first["error"] == pytest.approx(first["predicted_ms"] / first["measured_ms"] - 1)


def test_cuda_ranges_count_the_host_side_range_only():
    """On CUDA the profiler lists each record_function range twice (host side, and a device
    side span): only the host side, whose device time is its kernels', is counted."""
    from types import SimpleNamespace

    cpu, gpu = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    events = [
        SimpleNamespace(name="q_proj", device_type=cpu, device_time_total=30.0),
        SimpleNamespace(name="q_proj", device_type=gpu, device_time_total=95.0),
        SimpleNamespace(name="q_proj", device_type=cpu, device_time_total=50.0),
        SimpleNamespace(name="aten::mm", device_type=cpu, device_time_total=80.0),
    ]
    assert range_kernel_time(events, steps=2) == {"q_proj": {"calls": 1.0, "ms": pytest.approx(0.04)}}
