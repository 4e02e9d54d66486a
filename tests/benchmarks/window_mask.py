"""What a sliding window costs SDPA at a prompt past it: transformers passes a boolean mask
there (``ridgeline.engine.layers.window_masked``), and the kernel computes every pair under
it. Times PyTorch's SDPA on this machine's CPU, one thread, fp32 (8 heads x 128, one
sequence): ``is_causal``, the window's mask, and no mask; then the ratio of the window's
mask to ``is_causal`` beside the ratio of the pairs ridgeline prices for each (the CPU
kernel's 512-key causal blocks, ``attended_pairs``).

Run: python tests/benchmarks/window_mask.py [PROMPT WINDOW ...]   (default 1024 256 2048 512;
medians of torch.utils.benchmark's blocked_autorange; compare the ratios, not the times)
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from torch.utils import benchmark

from ridgeline.engine.layers import causal_pairs
from ridgeline.engine.precision import attention_key_block

HEADS, HEAD_DIM = 8, 128


def median_s(fn) -> float:
    return benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=1).blocked_autorange(min_run_time=1.0).median


def one(prompt: int, window: int) -> str:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, prompt, HEAD_DIM, generator=gen) for _ in range(3))
    i = torch.arange(prompt)
    mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
    causal = median_s(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    masked = median_s(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    full = median_s(lambda: F.scaled_dot_product_attention(q, k, v))
    priced = prompt * prompt / causal_pairs(prompt, attention_key_block("cpu"))
    return (
        f"prompt {prompt}, window {window}: is_causal {causal * 1e3:.1f} ms, window mask {masked * 1e3:.1f} ms, "
        f"no mask {full * 1e3:.1f} ms; mask / causal measured {masked / causal:.2f}x, priced {priced:.2f}x (pairs)"
    )


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [1024, 256, 2048, 512]
    torch.set_num_threads(1)
    for prompt, window in zip(sizes[::2], sizes[1::2]):
        print(one(prompt, window))


if __name__ == "__main__":
    main(sys.argv[1:])
