"""The ``eager`` attention setting prices what transformers' ``eager_attention_forward`` moves
(issue 26, item 3), worked by hand and, where torch and transformers are installed, checked
kernel by kernel against the function itself.

Source: transformers' models/llama/modeling_llama.py (``eager_attention_forward``,
``repeat_kv``), ATen's aten/src/ATen/native/SoftMax.cpp (``softmax`` with a dtype fuses the
cast to fp32 only for fp16 on a GPU). Llama-3-8B: 32 layers, 32 query heads, 8 K/V heads,
head dim 128.
"""

from __future__ import annotations

import weakref

import pytest

import ridgeline as rl
from ridgeline.engine.layers import AttentionCall, Plan, transformers_eager
from ridgeline.engine.memory import activation_peak

ISSUE = dict(dtype="bf16", batch=32, seq_len=4096, generate=2)  # one decode step at 4096 cached
SCORE_OPS = ("attn_scale", "attn_mask", "softmax_upcast", "softmax", "softmax_downcast")


def rows(analysis, stage: str = "decode") -> dict:
    """Per op name, its figures over every layer of the step (a record is one instance)."""
    out = {}
    for r in getattr(analysis, stage).records():
        out[r["name"]] = {k: v * r["count"] if k.endswith("bytes") else v for k, v in r.items()}
    return out


@pytest.fixture(scope="module")
def issue():
    return rl.analyze("llama-3-8b", "h100-sxm", attention="eager", **ISSUE)


def test_repeat_kv_copies_the_cache_out_to_every_query_head(issue):
    """The decode step attends 4097 positions. K and V of the cache, 2 x 32 layers x 32
    sequences x 8 heads x 4097 x 128 x 2 B = 17,184,063,488 B (17.18 GB), are read once by
    ``repeat_kv``, which writes copies for all 32 query heads: 4 x that = 68,736,253,952 B
    (68.74 GB, the engine's whole kv_read before); the two matmuls read the copies again. K/V
    traffic (g + 2h) / h = (8 + 64) / 32 = 2.25 x the 68.74 GB."""
    r = rows(issue)
    cache, copies = 17_184_063_488, 68_736_253_952
    assert r["repeat_k"]["kv_read_bytes"] + r["repeat_v"]["kv_read_bytes"] == cache
    assert r["repeat_k"]["act_write_bytes"] + r["repeat_v"]["act_write_bytes"] == copies
    q, probs = 32 * 32 * 128 * 2 * 32, 32 * 32 * 4097 * 2 * 32  # per step, all layers
    assert r["qk_matmul"]["act_read_bytes"] - q + r["sv_matmul"]["act_read_bytes"] - probs == copies
    assert issue.decode.total["kv_read_bytes"] == cache  # the cache, once
    assert (cache + 2 * copies) / copies == 2.25


def test_the_score_matrix_moves_32_bytes_an_element_in_bf16(issue):
    """32 x 32 heads x 4097 keys x 32 layers = 134,250,496 scores a step. In bf16 each is
    written by the matmul (2), read and written by ``* scaling`` (2 + 2) and ``+ mask``
    (2 + 2), cast to fp32 (2 + 4), soft-maxed in fp32 (4 + 4), cast back (4 + 2) and read by
    the second matmul (2): 32 B, against 8 for the grouped kernels (the issue counted the
    matmuls and the softmax pass: 24). The mask [32, 1, 1, 4097] adds 2 B a key per layer."""
    r, scores = rows(issue), 134_250_496
    mask = 32 * 4097 * 2 * 32
    moved = r["qk_matmul"]["act_write_bytes"] + sum(r[n]["bytes"] for n in SCORE_OPS) - mask
    moved += scores * 2  # read by sv_matmul
    assert moved == 32 * scores
    assert r["softmax"]["act_read_bytes"] == r["softmax"]["act_write_bytes"] == 4 * scores


def test_fp16_on_a_gpu_reads_fp16_in_the_softmax_kernel():
    """ATen fuses ``softmax(x, dtype=float32)`` for fp16 on CUDA (``half_to_float``): no cast
    kernel before it, 24 B a score; in bf16, or on a CPU, the cast runs on its own. With fp32
    activations there is nothing to cast: 4 + 8 + 8 + 8 + 4 = 32 B in fp32's 4-byte elements."""
    kw = dict(batch=1, seq_len=1024, generate=2, attention="eager")
    gpu16 = rows(rl.analyze("llama-3-8b", "h100-sxm", dtype="fp16", **kw))
    assert "softmax_upcast" not in gpu16
    scores = 32 * 1025 * 32
    assert gpu16["softmax"]["act_read_bytes"] == 2 * scores and gpu16["softmax"]["act_write_bytes"] == 4 * scores
    cpu = rows(rl.analyze("llama-3-8b", "xeon-8480", dtype="bf16", **kw))
    assert cpu["softmax_upcast"]["act_write_bytes"] == 4 * scores
    fp32 = rows(rl.analyze("llama-3-8b", "h100-sxm", dtype="fp32", **kw))
    assert "softmax_upcast" not in fp32 and "softmax_downcast" not in fp32
    assert fp32["softmax"]["bytes"] == 8 * scores


def test_the_step_time_on_the_h100_spec(issue):
    """Every op of the step is memory-bound on the H100 SXM datasheet (3.35 TB/s), so the
    step is its bytes over the bandwidth: 85,207,113,728 B before (25.435 ms, the issue's
    25.4), + the copies' 17,184,063,488 read and 68,736,253,952 written, + 134,250,496 scores
    x 24 B more, + the mask's 8,390,656: 89,150,720,000 B more, 26.61 ms: 52.05 ms (the issue
    said about 51 ms, leaving out the scale and mask passes and the casts' bytes)."""
    more = 17_184_063_488 + 68_736_253_952 + 134_250_496 * 24 + 8_390_656
    assert more == 89_150_720_000
    assert issue.decode.total["bytes"] == 85_207_113_728 + more
    assert issue.generation["tpot_s"] == pytest.approx((85_207_113_728 + more) / 3.35e12, rel=1e-9)
    assert issue.generation["tpot_s"] == pytest.approx(52.05e-3, rel=1e-3)


def test_the_peak_holds_the_fp32_softmax():
    """One sequence of 2048 tokens, bf16: 32 heads x 2048^2 = 134,217,728 scores per layer.
    While the fp32 softmax runs, the masked bf16 scores (still ``attn_weights`` in Python),
    the fp32 copy and the fp32 result are live: 10 B a score, 1,342,177,280 B, beside the K/V
    copies (2 x 32 x 2048 x 128 x 2 = 33,554,432), the layer input (2048 x 4096 x 2 =
    16,777,216), the normed input and the rotated query the attention's frame holds (2 x
    16,777,216) and the bf16 causal mask transformers holds for the pass (2048^2 x 2 =
    8,388,608): 1,434,451,968 B (1.43 GB), against 553,648,128 (0.55 GB) for the grouped
    kernels' two bf16 score tensors and the input. The issue's 0.8 GB counted the bf16 scores
    and one fp32 tensor (6 B a score); the kernel-by-kernel check below measures 10."""
    a = rl.analyze("llama-3-8b", "h100-sxm", dtype="bf16", batch=1, seq_len=2048, attention="eager")
    held = 1_342_177_280 + 33_554_432 + 3 * 16_777_216 + 8_388_608
    assert a.memory["activations_peak_bytes"] == held == 1_434_451_968
    extra = 33_554_432 + 2 * 16_777_216 + 8_388_608  # copies, frames, mask
    assert a.memory["activations_peak_bytes"] - 553_648_128 == 134_217_728 * 6 + extra


def test_mha_has_no_copy():
    """``repeat_kv`` returns its input when heads == K/V heads (n_rep = 1): Llama-2-7B's
    matmuls read the cache itself, 32 layers x 1025 x 32 x 128 x 2 B each."""
    r = rows(rl.analyze("llama-2-7b", "h100-sxm", dtype="bf16", seq_len=1024, attention="eager"))
    assert "repeat_k" not in r and "repeat_v" not in r
    assert r["qk_matmul"]["kv_read_bytes"] == r["sv_matmul"]["kv_read_bytes"] == 32 * 1025 * 32 * 128 * 2


def test_the_engine_runs_the_kernels_transformers_runs():
    """transformers' own ``eager_attention_forward`` on CPU (bf16, 8 query and 2 K/V heads,
    64 tokens, head dim 16), every fresh tensor recorded by a dispatch mode from its birth to
    its collection: the kernels that allocate are the engine's ops in order (plus the
    output's transpose copy, left out), each writing the bytes the engine says, and the
    largest sum of live tensors is the engine's liveness peak."""
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from torch.utils._python_dispatch import TorchDispatchMode

    class Live(TorchDispatchMode):
        def __init__(self, known):
            super().__init__()
            self.seen, self.live, self.peak, self.written = set(known), 0, 0, []

        def free(self, ptr, size):
            self.live -= size
            self.seen.discard(ptr)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            storage = out.untyped_storage() if isinstance(out, torch.Tensor) else None
            if storage is not None and storage.data_ptr() not in self.seen and storage.nbytes():
                self.seen.add(storage.data_ptr())
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
                self.written.append(storage.nbytes())
                weakref.finalize(storage, self.free, storage.data_ptr(), storage.nbytes())
            return out

    class Module(torch.nn.Module):
        num_key_value_groups = 4

    b, h, g, s, d = 1, 8, 2, 64, 16
    q, k, v = (torch.randn(b, n, s, d, dtype=torch.bfloat16) for n in (h, g, g))
    mask = torch.zeros(b, 1, s, s, dtype=torch.bfloat16)
    mode = Live(t.untyped_storage().data_ptr() for t in (q, k, v, mask))
    with mode:
        llama.eager_attention_forward(Module().eval(), q, k, v, mask, d**-0.5)

    plan = Plan(2.0, 2.0, 2.0, "bf16", "bf16", attention="eager", transformers_eager=True)
    ops = transformers_eager(AttentionCall(b, s, s, h, g, d, d, 1, True, "rope"), s, plan)
    assert [op.name for op in ops] == ["repeat_k", "repeat_v", "qk_matmul", *SCORE_OPS, "sv_matmul"]
    assert mode.written[: len(ops)] == [op.act_write_bytes for op in ops]
    assert mode.written[len(ops) :] == [b * s * h * d * 2]  # transpose(1, 2).contiguous()
    assert mode.peak == activation_peak(ops, 0) == 2 * 2 * h * s * d + 10 * h * s * s
