"""transformers' ``generate`` on a CPU: the first token's lm_head copies its bf16 weight once
per sequence (issue 31 item 5). ridgeline prices its own decoder's plain 2-D lm_head; the
basis says what ``generate`` adds, and the transformers client measures it.

Byte counts worked by hand from the catalog configs: vocab x hidden x 2 bytes (bf16)."""

from __future__ import annotations

import pytest

from ridgeline.api import analyze
from ridgeline.engine.basis import generate_notes
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.units import format_bytes
from ridgeline.io.resolve import resolve

# (catalog name, tied lm_head?, lm_head weight bytes in bf16)
MODELS = [
    ("qwen2-0.5b", True, 151_936 * 896 * 2),  # 272,269,312 B
    ("llama-2-7b", False, 32_000 * 4_096 * 2),  # 262,144,000 B
]


def copy_note(basis: dict) -> list[str]:
    return [n for n in basis["notes"] if n.startswith("transformers' generate")]


@pytest.mark.parametrize(("name", "tied", "weight_bytes"), MODELS)
def test_the_cpu_basis_names_the_lm_head_weight_generate_copies(name, tied, weight_bytes):
    a = analyze(name, "epyc-9654", 4, 256, 16, dtype="bf16")
    assert a.model.tie_word_embeddings is tied
    [note] = copy_note(a.extra["basis"])
    assert f"copies the bf16 lm_head weight ({format_bytes(weight_bytes)}) once per sequence" in note
    assert "python -m kernels.e2e.hf_client" in note
    # a note, not a price: the prediction is ridgeline's decoder's, with no copy op
    assert "lm_head_copy" not in {op.name for op in stage_ops(a.model, "prefill", 4, 256, resolve(name).plan)}
    # fp32 takes no copy; a GPU runs cuBLAS's strided batched GEMM
    assert copy_note(analyze(name, "epyc-9654", 4, 256, 16, dtype="fp32").extra["basis"]) == []
    assert copy_note(analyze(name, "h100-sxm", 4, 256, 16, dtype="bf16").extra["basis"]) == []


def test_only_the_first_token_copies():
    d = resolve("qwen2-0.5b", "epyc-9654", dtype="bf16")
    prefill, decode = (stage_ops(d.model, stage, 1, 256, d.plan) for stage in ("prefill", "decode"))
    assert generate_notes({"decode": decode}, d.device) == []
    assert len(generate_notes({"prefill": prefill, "decode": decode}, d.device)) == 1


def tiny(name: str, dtype: str):
    """A 1-layer random model from the catalog config, with a 512-token vocabulary."""
    from kernels.e2e import hf_client

    raw, _ = hf_client.read_config(name)
    small = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2)
    small.update(bos_token_id=1, eos_token_id=2)
    return hf_client.build_model({**hf_client.hf_raw(raw, 1), **small}, dtype, "cpu")


@pytest.mark.parametrize(("name", "tied", "_bytes"), MODELS)
def test_transformers_copies_the_bf16_lm_head_weight_once_per_sequence(name, tied, _bytes):
    """Fails when transformers (or PyTorch) stops copying: then the basis note goes too."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from kernels.e2e.hf_client import measure_lm_head

    torch.set_num_threads(1)
    model = tiny(name, "bf16")
    assert (model.lm_head.weight is model.model.embed_tokens.weight) is tied
    weight = 512 * 128 * 2
    assert measure_lm_head(model, 1, 16, "cpu", 1)["lm_head_copied_bytes"] == weight
    # batch 3: the weight three times, and the [3, 1, 128] slice made contiguous
    assert measure_lm_head(model, 3, 16, "cpu", 1)["lm_head_copied_bytes"] == 3 * weight + 3 * 128 * 2
    assert measure_lm_head(tiny(name, "fp32"), 3, 16, "cpu", 1)["lm_head_copied_bytes"] == 0


def test_the_client_adds_the_measured_gap_to_the_prediction():
    from kernels.e2e.hf_client import lm_head_lines

    row = dict(batch=4, dtype="bf16", measured_ttft_s=3.0, predicted_spec_ttft_s=1.0, predicted_calibrated_ttft_s=1.5)
    row.update(measured_lm_head_generate_s=1.25, measured_lm_head_plain_s=0.25, lm_head_copied_bytes=2**30)
    head, line = lm_head_lines([row])
    assert head.startswith("predictions price lm_head as ridgeline's decoder calls it, a 2-D linear")
    assert line == (
        "lm_head of the first token (batch 4, bf16): 1250.00 ms as generate calls it, 250.00 ms as a 2-D "
        "linear, 1GiB copied; calibrated TTFT + the gap = 2500.00 ms (-17%)"
    )
