"""Time one eager RMSNorm with malloc as a fresh process leaves it, and after ``steady_heap``.

Run: python tests/benchmarks/heap_state.py fresh
     python tests/benchmarks/heap_state.py steady
Each call is its own process (malloc's state is per process). On glibc, a bf16 RMSNorm whose
fp32 temporaries are 8-16 MiB pays page faults on every call in a fresh process and none after
``kernels.bench.suite.steady_heap``; one whose temporaries pass 32 MiB pays them in both.
Medians of torch.utils.benchmark; compare the two modes' ratios, not one machine's times.
"""

import sys

import torch
from torch.utils.benchmark import Timer

from kernels.bench.suite import steady_heap


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x.float()
    return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


def main(mode: str) -> None:
    torch.set_num_threads(1)
    print(steady_heap() if mode == "steady" else "fresh process")
    for tokens, dtype in ((244, torch.bfloat16), (1953, torch.bfloat16), (3906, torch.bfloat16), (977, torch.float32)):
        x, w = torch.randn(tokens, 2048, dtype=dtype), torch.randn(2048, dtype=dtype)
        m = Timer("f(x, w)", globals={"f": rmsnorm, "x": x, "w": w}).blocked_autorange(min_run_time=0.3)
        print(f"{mode} rmsnorm {tokens} x 2048 {str(dtype)[6:]}: {m.median * 1e3:.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fresh")
