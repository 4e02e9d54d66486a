"""ridgeline decode-profile: host against device time of eager decode steps (CPU here)."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from kernels.decode_profile import profile_decode, report_lines  # noqa: E402
from ridgeline.cli import app  # noqa: E402
from ridgeline.model import ModelConfig  # noqa: E402

TINY = ModelConfig(name="tiny", model_type="llama", hidden_size=32, num_layers=2, num_heads=4,
                   num_kv_heads=2, head_dim=8, intermediate_size=48, vocab_size=50,
                   tie_word_embeddings=False)


def test_two_passes_over_the_same_positions_on_cpu():
    rows = profile_decode(TINY, batch=2, prompt=5, steps=3, dtype="fp32", device="cpu")
    assert [r["pass"] for r in rows] == ["new lengths", "same lengths again"]
    for r in rows:
        # on a CPU the step is done when its last call returns: enqueue is the whole wall
        assert 0 < r["enqueue_s"] <= r["wall_s"]
        assert "device_s" not in r and "kernels" not in r   # the profiler pass is CUDA only
    lines = report_lines(TINY, rows, batch=2, prompt=5, steps=3, dtype="fp32", device="cpu")
    assert lines[0].startswith("tiny (2 layers, fp32) on cpu, batch 2, prompt 5, 3 decode steps")
    assert lines[1].startswith("new lengths") and "enqueue" in lines[1]


@pytest.mark.parametrize("args, message", [
    (["--batch", "0"], "--batch, --prompt and --steps must be at least 1"),
    (["--steps", "-1"], "--batch, --prompt and --steps must be at least 1"),
    (["--dtype", "int3"], "unknown dtype 'int3'"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(app, ["decode-profile", "qwen2-0.5b", "--device", "cpu",
                                      "--layers", "1", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
