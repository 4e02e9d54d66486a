"""transformers' ``sdpa`` attention path in a continuous-batching step, priced by the engine.

The serving simulator prices a step this way under ``Scheduler(batch_attention="gather")``,
which ``kernels/servecheck/cb_server.py`` sets to match transformers' server as it runs
(the ``transformers`` scheduler policy): the new tokens' K and V written into the paged
cache, the step's whole cache read back and repeated for grouped heads, one masked SDPA
over every (query, key) pair of the step, which PyTorch's CPU flash kernel computes in
blocks of query rows (:func:`query_blocks`). :func:`gather_ops` lists those ops;
:class:`GatherCost` tabulates them once per simulation; ``step_cost.gather_step_time``
adds them to the step's token ops.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ridgeline.engine.layers import Plan, shard
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.ops import Op, flash_attention
from ridgeline.engine.roofline import Ceilings, evaluate
from ridgeline.errors import InvalidWorkloadError

GATHER_OPS = ("kv_write", "kv_gather", "kv_repeat", "attention", "attention", "attention")

# PyTorch's CPU flash kernel splits each (batch, head)'s query into blocks of qSplitSize rows,
# chosen by the query length: 256 rows from 768 query rows, 64 from 192, else 32
# (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp, flash_attention_kernel_impl). A block of
# a few rows takes nearly as long as a full one (CPU seconds of the masked call at 32 and 33
# query rows: docs/servecheck.md). (from query rows, rows per block), largest first.
CPU_QUERY_BLOCKS = ((768, 256), (192, 64), (1, 32))


def query_blocks(p: Plan, tokens):
    """The query of a T-token step (``tokens``, per head) as PyTorch's fused kernel runs it:
    (full blocks, rows per block, rows of the last, partial block; 0 when none). On a CPU
    (``p.key_block``: the CPU flash kernel) in ``CPU_QUERY_BLOCKS``; elsewhere one block of
    all T rows, as before."""
    tokens = np.asarray(tokens)
    if not p.key_block:
        return np.ones_like(tokens), tokens, np.zeros_like(tokens)
    block = np.select([tokens >= low for low, _ in CPU_QUERY_BLOCKS], [rows for _, rows in CPU_QUERY_BLOCKS])
    return tokens // block, block, tokens % block


def gather_ops(config: ModelConfig, p: Plan, tokens, keys) -> list[Op]:
    """What transformers' ``sdpa`` attention runs in each layer for a continuous-batching
    step of ``tokens`` query tokens (T, every sequence's new tokens side by side) over
    ``keys`` keys (K, every sequence's cached and new tokens), in ``GATHER_OPS`` order:

    - ``kv_write``: the new tokens' K and V written into the paged cache by index
      (``index_copy_``, one kernel each): T rows of kv_heads x head_dim, read and written;
    - ``kv_gather``: when any sequence of the step has a cache, the whole K and V of the
      step read back into contiguous tensors (``index_select``): K rows, read and written;
    - ``kv_repeat``: with grouped K/V heads and more than one query token, K and V copied
      to every query head (``repeat_kv``; SDPA gets a mask, so not ``enable_gqa``): K rows
      of kv_heads read, K rows of heads written;
    - ``attention``: PyTorch's fused SDPA (the CPU flash kernel) with the additive mask,
      which skips no tile: all T x K pairs, K/V read per query head (heads = kv_heads
      after the repeat) and per block of query rows (:func:`query_blocks`), the T x K mask
      read once; first the full blocks, each priced at the rows it holds,
    - ``attention`` again: the last, partial block of query rows (none when T fills its
      blocks); one call with the first, so its fixed cost is counted there;
    - ``attention`` a third time, as it runs for a lone query token: transformers folds the
      query heads onto their K/V head (``pack_gqa``) and repeats nothing.

    Copies are element-wise ops (no arithmetic), two kernels (K and V) per layer. The
    attention is the fused kernel whatever ``p.attention`` says: ``sdpa`` calls one.
    Latent attention (MLA) is not modelled: transformers' cache holds other tensors there."""
    if config.is_mla:
        raise InvalidWorkloadError(
            f"batch-attention gather models transformers' sdpa path for "
            f"MHA/GQA/MQA attention; {config.name} uses latent attention (MLA)"
        )
    s = shard(config, p)
    d, row = config.head_dim, s.kv_heads * config.head_dim
    zero = 0 * (tokens + keys)  # every field of every op shaped like the workload
    copy = dict(
        kind="elementwise",
        count=2 * s.layers,
        flops=zero,
        weight_bytes=zero,
        act_read_bytes=zero,
        act_write_bytes=zero,
        kv_read_bytes=zero,
        kv_write_bytes=zero,
        dtype=p.vector_dtype,
    )
    ops = [
        Op(
            "kv_write",
            **{**copy, "act_read_bytes": zero + tokens * row * p.ab, "kv_write_bytes": zero + tokens * row * p.kvb},
        ),
        Op(
            "kv_gather",
            **{**copy, "kv_read_bytes": zero + keys * row * p.kvb, "act_write_bytes": zero + keys * row * p.kvb},
        ),
        Op(
            "kv_repeat",
            **{
                **copy,
                "act_read_bytes": zero + keys * row * p.kvb,
                "act_write_bytes": zero + keys * s.heads * d * p.kvb,
            },
        ),
    ]
    full, rows, last = query_blocks(p, tokens)
    # (blocks, query rows each, K/V heads): the full blocks, the partial block, a lone token folded
    calls = (
        (full, rows, s.heads),
        (np.minimum(last, 1), np.where(last > 0, last, rows), s.heads),
        (1, tokens, s.kv_heads),
    )
    for blocks, q_rows, kv_heads in calls:
        op = flash_attention(
            blocks,
            s.heads,
            kv_heads,
            q_rows,
            q_rows * keys,
            zero + keys,
            d,
            d,
            ab=p.ab,
            kvb=p.kvb,
            count=s.layers,
            dtype=p.matrix_dtype,
            inputs=(),
        )
        mask = blocks * q_rows * keys * p.ab  # their rows of the T x K mask
        ops.append(replace(op, act_read_bytes=op.act_read_bytes + mask, weight_bytes=zero, kv_write_bytes=zero))
    return ops


@dataclass(frozen=True)
class GatherCost:
    """:func:`gather_ops`, tabulated by the step's query tokens T ([op, T+1]): compute,
    memory and exponential seconds at no keys (a) and per key (b). At a given T every op is
    affine in the step's keys K, and each is one kernel over the whole step."""

    a: np.ndarray  # [3, op, T+1]: compute, memory, exp seconds with K = 0
    b: np.ndarray  # [3, op, T+1]: their slopes per key
    overhead_s: np.ndarray  # [op]
    count: np.ndarray  # [op] kernels per pass
    grouped: bool  # fewer K/V heads than query heads

    def seconds(self, tokens: int, keys: float, reads: bool) -> float:
        """The ops a step of ``tokens`` query tokens over ``keys`` keys runs; ``reads``:
        some sequence of the step has a cache to read back."""
        several = tokens > 1
        repeated = several or not self.grouped
        on = np.array([True, reads, several and self.grouped, repeated, repeated, self.grouped and not several])
        per_op = np.max(self.a[:, :, tokens] + self.b[:, :, tokens] * keys, axis=0) + self.overhead_s
        return float(np.dot(self.count * on, per_op))


def build_gather_cost(config: ModelConfig, p: Plan, roofs: Ceilings, max_tokens: int) -> GatherCost:
    """Two vectorised engine calls: :func:`gather_ops` for T = 1..max_tokens at K = 0 and 1."""
    tokens = np.arange(1, max_tokens + 1)
    at = [evaluate(gather_ops(config, p, tokens, k), roofs) for k in (0, 1)]

    def table(t: dict) -> np.ndarray:
        rows = [np.broadcast_to(t[key], (len(GATHER_OPS), max_tokens)) for key in ("compute_s", "memory_s", "exp_s")]
        return np.concatenate([np.zeros((3, len(GATHER_OPS), 1)), np.stack(rows)], axis=2)

    a = table(at[0])
    s = shard(config, p)
    return GatherCost(
        a=a,
        b=table(at[1]) - a,
        # the partial block of query rows runs in the full blocks' call: one fixed cost
        overhead_s=np.broadcast_to(at[0]["overhead_s"], (len(GATHER_OPS), max_tokens))[:, 0] * [1, 1, 1, 1, 0, 1],
        count=np.ravel(at[0]["count"]).astype(float),
        grouped=s.kv_heads < s.heads,
    )
