"""Memory as it is allocated: a prefill's CPU allocator peak, from torch.profiler's
allocation events, against the engine's activation peak, for the e2e decoder and for
transformers' own models (the path ``auto`` prices)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernels.e2e.decoder import Decoder  # noqa: E402
from kernels.e2e.e2e import truncate  # noqa: E402
from ridgeline.engine.analyze import memory_totals  # noqa: E402
from ridgeline.engine.memory import kv_cache_bytes  # noqa: E402
from ridgeline.engine.workload import Workload  # noqa: E402
from ridgeline.io.resolve import resolve  # noqa: E402

ROOT = Path(__file__).parents[1]


def allocator_peak(fn) -> int:
    """The most bytes the CPU allocator held at once while ``fn`` ran: its allocations and
    frees as torch.profiler records them (``profile_memory``), summed in time order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"), key=lambda e: e.start_ns()
    )
    held = peak = 0
    for e in events:
        held += e.nbytes()
        peak = max(peak, held)
    return peak


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, dtype", [("qwen2-0.5b", "fp32"), ("llama-2-7b", "bf16"), ("gpt-j-6b", "bf16"), ("pythia-6.9b", "bf16")]
)
def test_the_decoder_holds_what_the_engine_counts(name, dtype):
    """A prefill's allocator peak equals the engine's activation peak, byte for byte: every
    tensor dies after its last reader. qwen2-0.5b (fp32) at batch 2 x 128: the peak is in the
    MLP, gate + up + the activation's product (3 x 2 x 128 x 4864 x 4 B) beside the residual
    sum (2 x 128 x 896 x 4 B): 15,859,712 B. Before, the decoder's own names kept the gate and
    the activation's input while it multiplied, and the layer input, the attention's output
    and the normed copy through the MLP: one MLP width and three hidden widths more a token,
    60.8 MB a sequence of 1024 for qwen2-7b, the -12.8 % the H200 run of 2026-11-27 recorded
    at batch 64 (reports/validation/gpu-runs/cuda-nvidia-h200-2026-11-27-heldout/run3-qwen2-eager).
    GPT-J and Pythia (attention and MLP off one normed input; Pythia's MLP normalises it
    again): the rotary held q's input while k turned, and was the peak, one hidden width a
    token over; the peak is now the MLP's, up and its activation (2 x 4 x 4096) beside
    attention's sum (the rotation's, with q's input dropped first, is as high, not higher)."""
    d = resolve(name, "h100-sxm", attention="flash", dtype=dtype)
    config, batch, prompt = replace(truncate(d.model, 1), vocab_size=1024), 2, 128  # the layer's peak
    model = Decoder(config, dtype, "cpu", max_batch=batch, max_len=prompt + 1, seed=0)
    tokens = torch.randint(0, config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model.prefill(tokens)  # warm-up: one-time allocations (rotary tables) out of the count
        peak = allocator_peak(lambda: model.prefill(tokens))
    predicted = memory_totals(config, d.device, Workload(batch, prompt, 1), d.plan)["activations_peak_bytes"]
    assert peak == predicted
    if name in ("gpt-j-6b", "pythia-6.9b"):
        assert peak == batch * prompt * (2 * 16_384 + 4096) * 2
    if name == "qwen2-0.5b":
        assert peak == 3 * 2 * 128 * 4864 * 4 + 2 * 128 * 896 * 4 == 15_859_712


def test_the_h200_peaks_missed_by_what_the_old_decoder_held():
    """The committed H200 qwen2-7b rows (prompt 1024, bf16) measured more than the engine
    predicted by 60.8 MB a sequence more at batch 64 than at 16: one MLP width (18,944) and
    three hidden widths (3,584) a token, 2 B each, 1024 tokens = 60,817,408 B, what the
    decoder's own names held (docs/e2e.md)."""
    path = "reports/validation/gpu-runs/cuda-nvidia-h200-2026-11-27-heldout/run3-qwen2-eager/e2e-qwen2-7b-eager.json"
    rows = {r["batch"]: r for r in json.loads((ROOT / path).read_text())["rows"]}
    gap = {b: rows[b]["measured_peak_bytes"] - rows[b]["predicted_peak_bytes"] for b in (16, 64)}
    assert (gap[64] - gap[16]) / 48 == pytest.approx(1024 * (18_944 + 3 * 3_584) * 2, rel=1e-3)
    assert [round(100 * rows[b]["error_peak"], 1) for b in (16, 64)] == [-5.5, -12.8]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, dtype, path, width",
    [
        ("qwen2-0.5b", "fp32", "sdpa", (896, 4864, 14)),
        ("llama-2-7b", "bf16", "sdpa", (4096, 11008, 32)),
        ("qwen3-8b", "bf16", "sdpa", (4096, 12288, 32)),
        ("qwen2-0.5b", "fp32", "eager", (896, 4864, 14)),
        ("llama-2-7b", "bf16", "eager", (4096, 11008, 32)),
    ],
)
def test_transformers_holds_what_the_engine_counts(name, dtype, path, width):
    """transformers' own model (one layer of the catalog config, random weights, its sdpa or
    eager path): the allocator peak of a prefill of 2 x 128 is the engine's activation peak
    plus what the engine counts elsewhere: the layer's KV cache (written during the pass) and
    the rotary tables and position ids the model builds once per forward (cos and sin, 128 x
    head_dim each, in the activation type; 128 int64 ids). The peak is in the MLP: gate, up
    and their product beside three hidden-width tensors the frames hold (the layer's input,
    the residual sum, the MLP's normed input); under eager also the attention's
    probabilities, which the layer keeps, and the mask the model keeps (2 x 128 x 128)."""
    transformers = pytest.importorskip("transformers")
    raw = {k: v for k, v in json.loads((ROOT / f"models/catalog/{name}.json").read_text()).items() if k[0] != "_"}
    config = transformers.AutoConfig.for_model(**{**raw, "num_hidden_layers": 1})
    torch.manual_seed(0)
    kind = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=kind, attn_implementation=path).eval()
    d = resolve(name, "h100-sxm", dtype=dtype, attention="auto" if path == "sdpa" else "eager")
    assert d.plan.attention == {"sdpa": "sdpa-gqa", "eager": "eager"}[path]
    one, batch, prompt, ab = truncate(d.model, 1), 2, 128, {"fp32": 4, "bf16": 2}[dtype]
    ids = torch.randint(0, config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model(ids, logits_to_keep=1)
        peak = allocator_peak(lambda: model(ids, logits_to_keep=1))
    predicted = memory_totals(one, d.device, Workload(batch, prompt, 1), d.plan)["activations_peak_bytes"]
    counted_apart = kv_cache_bytes(one, batch, prompt, d.plan) + 2 * prompt * one.head_dim * ab + prompt * 8
    assert peak == predicted + counted_apart
    hidden, intermediate, heads = width
    eager = (batch * heads * prompt**2 + batch * prompt**2) * ab if path == "eager" else 0
    assert predicted == batch * prompt * (3 * intermediate + 3 * hidden) * ab + eager
