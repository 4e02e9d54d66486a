"""Discrete-event simulation of an LLM inference server with continuous batching.

Requests arrive (Poisson or a trace, :mod:`ridgeline.io.traces`), wait in a FIFO queue and are
served in steps, in the manner of vLLM: each step first gives every running request its
next tokens (one for a decode; the next chunk of a prompt), in admission order, then admits
waiting requests while the step has sequences, tokens and KV blocks to spare. A prompt is
split into chunks to fit the step's token budget (chunked prefill); when the paged KV cache
runs out, the request admitted last is preempted and later recomputed from scratch.

Each step costs what the engine says for its mix of sequences: ops that run over all the
step's tokens at once (projections, MLP, norms: one kernel on T rows) cost the engine's
time at T tokens; attention costs each sequence's own (query, key) work, summed per op
into one kernel: ``max(sum compute_s, sum memory_s) + overhead``. A fresh prompt chunk is
the engine's prefill over it; a chunk over cached context (a later chunk, a prefix-cache
hit, a decode) is the engine's multi-token decode pass with that many tokens cached. All
of it is read from tables built with a few vectorised engine calls before the first step,
so one step is a handful of numpy operations.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.analyze import memory_totals, plain
from ridgeline.engine.layers import Plan, pipeline_factors, shard, stage_ops
from ridgeline.engine.memory import kv_bytes_per_token
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.ops import Op, flash_attention
from ridgeline.engine.roofline import Ceilings, evaluate
from ridgeline.engine.workload import Workload
from ridgeline.errors import InvalidWorkloadError
from ridgeline.io.resolve import Deployment, as_deployment
from ridgeline.io.traces import Arrivals

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# ops whose work depends on each sequence's own query and cached lengths
ATTENTION_OPS = ("qk_matmul", "softmax", "sv_matmul", "attention", "attn_combine")
HEAD_OPS = ("lm_head",)
PERCENTILES = (50, 90, 99)
BATCH_ATTENTION = ("varlen", "masked", "gather")


@dataclass(frozen=True)
class Scheduler:
    """The server's batching policy (vLLM's names in brackets)."""

    max_batch: int = 256  # sequences per step [max_num_seqs]
    token_budget: int = 2048  # tokens per step, prefill chunks + decodes [max_num_batched_tokens]
    chunked_prefill: bool = True  # split prompts to fit the budget; off: a prompt runs whole
    prefix_hit: float = 0.0  # fraction of each prompt already in the prefix cache (whole blocks)
    kv_blocks: int | None = None  # paged KV blocks; None: what the device memory leaves (kv_capacity_bytes)
    admit_margin: float = 0.0  # new prompts wait while fewer than this fraction of blocks are
    # free (transformers' FIFO "safety margin", 0.15; vLLM: 0)
    step_overhead_s: float = 0.0  # host seconds per step beyond the model's forward (scheduling,
    # batch tensors, sampling): measured, `simulate-check --fit-overhead`
    request_overhead_s: float = 0.0  # host seconds per request in the step, on top
    host_overlap: bool = False  # the host's seconds overlap the device's (a GPU run eager: the
    # host enqueues while kernels run), so a step takes the longer
    # of the forward and the host terms, not their sum
    batch_attention: str = "varlen"  # varlen: each sequence attends to its own keys (vLLM, flash);
    # masked: one attention over all the step's queries and keys
    # under a block-diagonal mask; gather: masked as transformers'
    # sdpa path runs it (cache copied out, GQA heads repeated)

    def __post_init__(self) -> None:
        for name in ("max_batch", "token_budget"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidWorkloadError(f"{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        if self.token_budget > 1 << 20:
            raise InvalidWorkloadError(f"token-budget {self.token_budget} is more than 2^20 tokens per step")
        for name in ("prefix_hit", "admit_margin"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise InvalidWorkloadError(f"{name.replace('_', '-')} must be in [0, 1), got {value}")
        if self.kv_blocks is not None and self.kv_blocks < 1:
            raise InvalidWorkloadError(f"kv-blocks must be >= 1, got {self.kv_blocks}")
        if self.batch_attention not in BATCH_ATTENTION:
            raise InvalidWorkloadError(
                f"batch-attention must be one of {', '.join(BATCH_ATTENTION)}, got {self.batch_attention!r}"
            )
        for name in ("step_overhead_s", "request_overhead_s"):
            value = getattr(self, name)
            if not 0.0 <= value < 1e3:  # also refuses NaN
                raise InvalidWorkloadError(f"{name[:-2].replace('_', '-')} must be >= 0 seconds, got {value}")

    def host_s(self, requests: int) -> float:
        """Host seconds a step of ``requests`` requests spends beyond the forward."""
        return self.step_overhead_s + self.request_overhead_s * requests


# --- the step cost -------------------------------------------------------------------


@dataclass(frozen=True)
class StepCost:
    """Engine times, tabulated. Token tables are indexed by tokens in the step, ``head_s``
    by sequences; attention tables hold per-op compute and memory seconds ([op, index])."""

    token_s: np.ndarray  # [T+1] ops run over every token of the step
    fresh_only_s: np.ndarray  # [T+1] token ops only fresh prompt chunks run (MLA's kv_b_proj)
    cached_only_s: np.ndarray  # [T+1] token ops only chunks over a cache run (MLA's absorbed path)
    head_s: np.ndarray  # [B+1] lm_head over n sequences
    fresh: tuple[np.ndarray, np.ndarray]  # compute, memory s of a causal chunk of c tokens [K, T+1]
    chunk: tuple[np.ndarray, ...]  # c tokens over a cache: compute a, b; memory a, b [K, T+1]
    decode: tuple[np.ndarray, ...]  # n decodes: compute a, b/n; memory a, b/n [K, B+1]
    fresh_has: np.ndarray  # [K] bool: op present in a fresh chunk
    cached_has: np.ndarray  # [K] bool: op present in a chunk over a cache
    overhead_s: np.ndarray  # [K]
    count: np.ndarray  # [K] instances per pass (layers)
    window: int | None  # sliding window: attention sees at most this many keys
    factor: float  # pipeline stages a step passes through
    gather: GatherCost | None = None  # transformers' sdpa step (batch_attention "gather")

    def decode_time(self, n: int, cached: float) -> float:
        """``step_time`` of n decodes alone, in scalars (the simulator's hot path)."""
        base, terms = self._decode_rows[n]
        total = base
        for count, ca, cb, ma, mb, over in terms:
            total += count * (max(ca + cb * cached, ma + mb * cached) + over)
        return self.factor * total

    @cached_property
    def _decode_rows(self) -> list[tuple[float, list[tuple[float, ...]]]]:
        """Per decode count n, ``decode_time``'s terms as Python floats (same arithmetic,
        without numpy's per-element cost)."""
        ca, cb, ma, mb = (a.tolist() for a in self.decode)
        over = [float(o) if h else 0.0 for o, h in zip(self.overhead_s, self.cached_has)]
        count = [float(c) for c in self.count]
        rows = len(self.head_s)  # n decodes, 0..B
        base = (self.token_s[:rows] + self.cached_only_s[:rows] + self.head_s).tolist()
        return [
            (base[n], [(count[k], ca[k][n], cb[k][n], ma[k][n], mb[k][n], over[k]) for k in range(len(count))])
            for n in range(rows)
        ]

    def attention_s(self, compute: np.ndarray, memory: np.ndarray, present: np.ndarray) -> float:
        """Attention ops as one kernel each over the step's sequences."""
        per_op = np.maximum(compute, memory) + np.where(present, self.overhead_s, 0.0)
        return float(np.dot(self.count, per_op))


def _first(ops, table: dict, name: str) -> float:
    """The per-kernel overhead of op ``name`` in an evaluated table."""
    i = [op.name for op in ops].index(name)
    return float(np.ravel(table["overhead_s"][i])[0])


def _token_time(table: dict, rows: list[int]) -> np.ndarray:
    if not rows:
        return 0.0
    return np.sum(table["count"][rows] * table["time_s"][rows], axis=0)


def build_step_cost(
    config: ModelConfig, p: Plan, roofs: Ceilings, max_tokens: int, max_batch: int, batch_attention: str = "varlen"
) -> StepCost:
    """Tabulate every term a step's cost needs, with six vectorised engine calls (two more
    for ``batch_attention`` "gather": :func:`build_gather_cost`)."""
    tokens = np.arange(1, max_tokens + 1)
    batches = np.arange(1, max_batch + 1)
    fresh_ops = stage_ops(config, "prefill", 1, tokens, p)
    fresh = evaluate(fresh_ops, roofs)
    chunk_ops = [stage_ops(config, "decode", 1, cached, p, tokens) for cached in (0, 1)]
    chunk = [evaluate(ops, roofs) for ops in chunk_ops]
    dec_ops = [stage_ops(config, "decode", batches, cached, p) for cached in (0, 1)]
    dec = [evaluate(ops, roofs) for ops in dec_ops]
    token_ops = stage_ops(config, "decode", tokens, 1, p)
    by_token = evaluate(token_ops, roofs)

    skip = ATTENTION_OPS + HEAD_OPS
    fresh_names = [op.name for op in fresh_ops if op.name not in skip]
    cached_names = [op.name for op in token_ops if op.name not in skip]
    shared = [n for n in fresh_names if n in cached_names]
    pad = lambda a: np.concatenate([[0.0], np.broadcast_to(a, tokens.shape)])  # noqa: E731
    rows = lambda ops, names: [i for i, op in enumerate(ops) if op.name in names]  # noqa: E731
    token_s = pad(_token_time(fresh, rows(fresh_ops, shared)))
    fresh_only = pad(_token_time(fresh, rows(fresh_ops, [n for n in fresh_names if n not in shared])))
    cached_only = pad(_token_time(by_token, rows(token_ops, [n for n in cached_names if n not in shared])))
    head_rows = rows(dec_ops[0], HEAD_OPS)
    head_s = np.concatenate([[0.0], np.broadcast_to(_token_time(dec[0], head_rows), batches.shape)])

    names = [n for n in ATTENTION_OPS if any(op.name == n for op in fresh_ops + chunk_ops[0])]
    K = len(names)

    def gather(ops, table, key, width):
        """[K, width+1] of one column; zeros for ops this path does not run."""
        out = np.zeros((K, width + 1))
        for k, name in enumerate(names):
            for i, op in enumerate(ops):
                if op.name == name:
                    out[k, 1:] = np.broadcast_to(table[key][i], (width,))
        return out

    def slope(tables, ops, key, width):
        a = gather(ops, tables[0], key, width)
        return a, gather(ops, tables[1], key, width) - a

    chunk_c, chunk_m = (slope(chunk, chunk_ops[0], key, max_tokens) for key in ("compute_s", "memory_s"))
    dec_c, dec_m = (slope(dec, dec_ops[0], key, max_batch) for key in ("compute_s", "memory_s"))
    per_seq = np.concatenate([[1.0], batches])  # decode slopes per cached token of the sum
    info = {op.name: op for op in fresh_ops + chunk_ops[0]}
    overhead = np.array(
        [
            _first(fresh_ops, fresh, n) if n in [o.name for o in fresh_ops] else _first(chunk_ops[0], chunk[0], n)
            for n in names
        ]
    )
    time_factor, _ = pipeline_factors(p)
    return StepCost(
        token_s=token_s,
        fresh_only_s=fresh_only,
        cached_only_s=cached_only,
        head_s=head_s,
        fresh=(gather(fresh_ops, fresh, "compute_s", max_tokens), gather(fresh_ops, fresh, "memory_s", max_tokens)),
        chunk=(chunk_c[0], chunk_c[1], chunk_m[0], chunk_m[1]),
        decode=(dec_c[0], dec_c[1] / per_seq, dec_m[0], dec_m[1] / per_seq),
        fresh_has=np.array([any(op.name == n for op in fresh_ops) for n in names]),
        cached_has=np.array([any(op.name == n for op in chunk_ops[0]) for n in names]),
        overhead_s=overhead,
        count=np.array([float(info[n].count) for n in names]),
        window=config.sliding_window,
        factor=time_factor,
        gather=build_gather_cost(config, p, roofs, max_tokens) if batch_attention == "gather" else None,
    )


def step_time(
    cost: StepCost, fresh: list[int], chunks: list[tuple[int, int]], decodes: int, decode_cached: float
) -> float:
    """Seconds of one step: ``fresh`` prompt chunks (tokens each, nothing cached),
    ``chunks`` (tokens, cached) over a cache, and ``decodes`` one-token steps whose cached
    lengths sum to ``decode_cached`` (each capped at the sliding window)."""
    n_fresh = sum(fresh)
    n_cached = sum(c for c, _ in chunks) + decodes
    sequences = len(fresh) + len(chunks) + decodes
    total = (
        cost.token_s[n_fresh + n_cached]
        + cost.fresh_only_s[n_fresh]
        + cost.cached_only_s[n_cached]
        + cost.head_s[sequences]
    )
    ca, cb, ma, mb = cost.decode
    compute = ca[:, decodes] + cb[:, decodes] * decode_cached
    memory = ma[:, decodes] + mb[:, decodes] * decode_cached
    present = cost.cached_has if decodes else np.zeros_like(cost.cached_has)
    for c in fresh:
        compute = compute + cost.fresh[0][:, c]
        memory = memory + cost.fresh[1][:, c]
        present = present | cost.fresh_has
    qa, qb, wa, wb = cost.chunk
    for c, cached in chunks:
        if cost.window:
            cached = min(cached, max(cost.window - c, 0))
        compute = compute + qa[:, c] + qb[:, c] * cached
        memory = memory + wa[:, c] + wb[:, c] * cached
        present = present | cost.cached_has
    return cost.factor * (float(total) + cost.attention_s(compute, memory, present))


def _token_part(cost: StepCost, fresh: int, cached: int, sequences: int) -> float:
    """The ops a step runs over all its tokens at once, and the lm_head."""
    return float(
        cost.token_s[fresh + cached] + cost.fresh_only_s[fresh] + cost.cached_only_s[cached] + cost.head_s[sequences]
    )


def masked_step_time(cost: StepCost, fresh: int, cached: int, sequences: int, keys: float) -> float:
    """Seconds of one step whose attention is one kernel over all its T = ``fresh`` +
    ``cached`` query tokens and all its ``keys`` (every sequence's cached and new tokens),
    masked block-diagonally: every (query, key) pair of the step is computed, T x keys,
    which is the engine's pass of T tokens over keys - T cached ones. Token ops and the
    lm_head as in :func:`step_time`."""
    tokens = fresh + cached
    qa, qb, wa, wb = cost.chunk
    over = keys - tokens
    compute, memory = qa[:, tokens] + qb[:, tokens] * over, wa[:, tokens] + wb[:, tokens] * over
    return cost.factor * (
        _token_part(cost, fresh, cached, sequences) + cost.attention_s(compute, memory, cost.cached_has)
    )


# --- transformers' sdpa step ----------------------------------------------------------------

GATHER_OPS = ("kv_write", "kv_gather", "kv_repeat", "attention", "attention")


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
      after the repeat), the T x K mask read once;
    - ``attention`` again, as it runs for a lone query token: transformers folds the query
      heads onto their K/V head (``pack_gqa``) and repeats nothing.

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
    for kv_heads in (s.heads, s.kv_heads):
        op = flash_attention(
            1,
            s.heads,
            kv_heads,
            tokens,
            tokens * keys,
            zero + keys,
            d,
            d,
            ab=p.ab,
            kvb=p.kvb,
            count=s.layers,
            dtype=p.matrix_dtype,
            inputs=(),
        )
        ops.append(
            replace(op, act_read_bytes=op.act_read_bytes + tokens * keys * p.ab, weight_bytes=zero, kv_write_bytes=zero)
        )
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
        on = np.array(
            [True, reads, several and self.grouped, several or not self.grouped, self.grouped and not several]
        )
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
        overhead_s=np.broadcast_to(at[0]["overhead_s"], (len(GATHER_OPS), max_tokens))[:, 0].copy(),
        count=np.ravel(at[0]["count"]).astype(float),
        grouped=s.kv_heads < s.heads,
    )


def gather_step_time(cost: StepCost, fresh: int, cached: int, sequences: int, keys: float, reads: bool) -> float:
    """Seconds of one step as transformers' sdpa path runs it (:func:`gather_ops`): token
    ops and the lm_head as in :func:`step_time`, then per layer the cache written, read
    back when ``reads``, repeated for GQA and one masked attention over T x ``keys``."""
    if cost.gather is None:
        raise ValueError("build the step cost with batch_attention='gather'")
    tokens = fresh + cached
    return cost.factor * (_token_part(cost, fresh, cached, sequences) + cost.gather.seconds(tokens, keys, reads))


# --- KV capacity ---------------------------------------------------------------------


def kv_capacity_bytes(config: ModelConfig, device, p: Plan, token_budget: int) -> float:
    """Bytes left for the paged KV cache on one device: what the runtime may use
    (``memory_utilization`` x capacity less the runtime's reserve) less the weights and the
    activation peak of the largest step, a prefill of ``token_budget`` tokens
    (``analyze.memory_totals``' ``kv_capacity_bytes``)."""
    mem = memory_totals(config, device, Workload(p.micro_batches, int(token_budget), 0), p)
    return float(mem["kv_capacity_bytes"])


def kv_block_count(config: ModelConfig, device, p: Plan, scheduler: Scheduler) -> int:
    if scheduler.kv_blocks is not None:
        return int(scheduler.kv_blocks)
    room = kv_capacity_bytes(config, device, p, scheduler.token_budget)
    blocks = int(room // (p.kv_block * kv_bytes_per_token(config, p)))
    if blocks < 1:
        raise InvalidWorkloadError(
            f"no room for a KV cache: {config.name} leaves {room / 2**30:.3g} GiB of "
            f"{device.name}'s usable memory after weights and activations; use more --tp, "
            "lower precision, a smaller --token-budget or a higher --memory-utilization"
        )
    return blocks


# --- the simulation --------------------------------------------------------------------


@dataclass(frozen=True)
class SimResult:
    """Per request times, the step timeline and the summary of one simulated run."""

    requests: dict[str, np.ndarray]  # one array per column, one row per request
    timeline: dict[str, np.ndarray]  # one row per step: start, seconds, KV blocks used, ...
    summary: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.requests)

    @property
    def timeline_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.timeline)

    def to_dict(self, rows: bool = True) -> dict[str, Any]:
        out = {"meta": self.meta, "summary": self.summary}
        if rows:
            out["requests"] = self.frame.to_dict(orient="list")
            out["timeline"] = {k: v.tolist() for k, v in self.timeline.items()}
        return plain(out)


class _Server:
    """The mutable state of one run (kept inside ``simulate``; never returned)."""

    def __init__(self, arrivals: Arrivals, scheduler: Scheduler, cost: StepCost, blocks: int, block: int):
        self.s, self.cost, self.blocks, self.block = scheduler, cost, blocks, block
        n = len(arrivals)
        self.arrival, self.prompt, self.output = arrivals.time_s, arrivals.prompt, arrivals.output
        self.admitted = np.full(n, np.nan)
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preempted = np.zeros(n, dtype=np.int64)
        self.hit_tokens = np.zeros(n, dtype=np.int64)
        self.done_of = np.zeros(n, dtype=np.int64)  # KV tokens computed, for preempted requests
        self.gen_of = np.zeros(n, dtype=np.int64)  # tokens emitted so far
        # the running requests, in admission order: id, prompt, output, emitted, cached
        self.run = [np.zeros(0, dtype=np.int64) for _ in range(5)]
        self.waiting: deque[int] = deque()
        self.used = 0
        self.computed = 0  # tokens run through the model, recomputation included
        self.recomputed = 0
        self.pure = False  # this step only decodes (set by schedule)
        self.steady = False  # the last step only decoded and admitted nobody: so does this one
        self.ones = np.ones(scheduler.max_batch, dtype=np.int64)  # a steady step's chunk (read only)
        self.tokens = 0  # tokens this step computes (set by schedule)

    def kv_blocks(self, tokens):
        kept = np.minimum(tokens, self.cost.window) if self.cost.window else tokens
        return -(-kept // self.block)

    def preempt_last(self) -> None:
        """Recompute policy: the request admitted last frees its blocks and goes back to
        the front of the queue; its emitted tokens stay emitted."""
        rid, _p, _n, gen, done = (a[-1] for a in self.run)
        self.used -= int(self.kv_blocks(done))
        self.recomputed += int(done)
        self.preempted[rid] += 1
        self.gen_of[rid], self.done_of[rid] = gen, 0
        self.run = [a[:-1] for a in self.run]
        self.waiting.appendleft(int(rid))
        self.steady = False

    def schedule(self, now: float):
        """Chunks for the running requests (preempting when blocks run out), then admissions."""
        while True:
            rid, prompt, _out, gen, done = self.run
            if self.steady and not self.cost.window:  # the hot path: nothing to look at
                self.pure = len(rid) > 0
                chunk = self.ones[: len(rid)]
                grow = int(np.count_nonzero(done % self.block == 0))
                if self.used + grow <= self.blocks or len(rid) == 0:
                    break
                self.preempt_last()
                continue
            need = prompt + gen - done
            # the common step: every running request decodes one token after its first
            self.pure = 0 < len(rid) <= self.s.token_budget and need.max() == 1 and gen.min() > 0
            if self.pure and not self.cost.window:
                chunk = need
                grow = int(np.count_nonzero(done % self.block == 0))
            else:
                before = np.cumsum(need) - need
                chunk = np.clip(self.s.token_budget - before, 0, need)
                grow = int(np.sum(self.kv_blocks(done + chunk) - self.kv_blocks(done)))
            if self.used + grow <= self.blocks or len(rid) == 0:
                break
            self.preempt_last()
        self.used += grow
        self.tokens = len(rid) if self.pure else int(chunk.sum())
        budget = self.s.token_budget - self.tokens
        margin_ok = (self.blocks - self.used) >= self.s.admit_margin * self.blocks
        new = []
        while self.waiting and len(rid) + len(new) < self.s.max_batch and budget > 0:
            if not margin_ok and (len(rid) or new):
                break
            r = self.waiting[0]
            gen = int(self.gen_of[r])
            hit = min(int(self.s.prefix_hit * self.prompt[r]) // self.block * self.block, int(self.prompt[r]) + gen - 1)
            need = int(self.prompt[r]) + gen - hit
            c = min(need, budget) if self.s.chunked_prefill else need
            if c > budget:
                break
            blocks = int(self.kv_blocks(hit + c))
            if self.used + blocks > self.blocks:
                break
            self.waiting.popleft()
            self.used += blocks
            budget -= c
            self.hit_tokens[r] += hit
            if np.isnan(self.admitted[r]):
                self.admitted[r] = now
            new.append((r, gen, hit, c))
        if new:
            self.pure = False
            ids, gens, hits, chunks = (np.array(v, dtype=np.int64) for v in zip(*new))
            self.run = [
                np.concatenate(pair) for pair in zip(self.run, (ids, self.prompt[ids], self.output[ids], gens, hits))
            ]
            chunk = np.concatenate([chunk, chunks])
            self.tokens += int(chunks.sum())
        self.steady = self.pure and not self.cost.window
        return chunk

    def cost_of(self, chunk: np.ndarray) -> float:
        forward, host = self.forward_of(chunk), self.s.host_s(int(np.count_nonzero(chunk)))
        return max(forward, host) if self.s.host_overlap else forward + host

    def forward_of(self, chunk: np.ndarray) -> float:
        done = self.run[4]
        if self.s.batch_attention != "varlen":
            active = chunk > 0
            fresh = int(chunk[active & (done == 0)].sum())
            mix = (fresh, int(chunk.sum()) - fresh, int(active.sum()), float((done + chunk)[active].sum()))
            if self.s.batch_attention == "gather":
                return gather_step_time(self.cost, *mix, bool(np.any(done[active] > 0)))
            return masked_step_time(self.cost, *mix)
        if self.pure:
            cached = np.minimum(done, self.cost.window - 1) if self.cost.window else done
            return self.cost.decode_time(len(done), float(cached.sum()))
        decode = (chunk == 1) & (done > 0)
        cached = done[decode]
        if self.cost.window:
            cached = np.minimum(cached, self.cost.window - 1)
        other = np.flatnonzero((chunk > 0) & ~decode)
        fresh = [int(chunk[i]) for i in other if done[i] == 0]
        chunks = [(int(chunk[i]), int(done[i])) for i in other if done[i] > 0]
        return step_time(self.cost, fresh, chunks, int(decode.sum()), float(cached.sum()))

    def advance(self, chunk: np.ndarray, end: float) -> None:
        """Apply a finished step: cached tokens grow; a request whose chunk completes its
        pending tokens emits one; requests with all their tokens leave."""
        rid, prompt, out, gen, done = self.run
        if self.pure:  # every request emits a token after its first
            self.computed += len(rid)
            done, gen = done + 1, gen + 1
        else:
            self.computed += int(chunk.sum())
            done = done + chunk
            emits = (chunk > 0) & (done == prompt + gen)
            gen = gen + emits
            self.first[rid[emits & (gen == 1)]] = end
        over = gen >= out
        if over.any():
            self.finish[rid[over]] = end
            self.gen_of[rid[over]] = gen[over]
            self.used -= int(np.sum(self.kv_blocks(done[over])))
            keep = ~over
            self.run = [a[keep] for a in (rid, prompt, out, gen, done)]
        else:
            self.run = [rid, prompt, out, gen, done]


def simulate(
    model: Deployment | str | ModelConfig,
    hardware,
    arrivals: Arrivals,
    scheduler: Scheduler | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    **how: Any,
) -> SimResult:
    """Serve ``arrivals`` with continuous batching; every step costs what the engine says.

    ``model`` is a resolved :class:`Deployment` (``hardware`` None), or a model and a
    device with ``ridgeline.resolve``'s keywords: Settings fields (``tp=2``,
    ``w_dtype="int4"``, ...), ``dtype``, ``settings``, ``profile``, ``ceilings``.
    ``progress(finished, total)`` is called every few thousand steps.
    """
    s = scheduler or Scheduler()
    d = as_deployment(model, hardware, **how)
    config, device, p, roofs, chosen = d.model, d.device, d.plan, d.ceilings, d.settings
    if p.micro_batches > 1:
        raise InvalidWorkloadError("the simulator runs one micro-batch per step; use --micro-batches 1")
    longest = int(np.max(arrivals.prompt + arrivals.output - 1))
    if not s.chunked_prefill and longest > s.token_budget:
        raise InvalidWorkloadError(
            f"without chunked prefill a request of {longest} tokens (prompt + output - 1, "
            f"as a recomputation needs) does not fit --token-budget {s.token_budget}; "
            "raise it or allow chunked prefill"
        )
    cost = build_step_cost(config, p, roofs, s.token_budget, s.max_batch, s.batch_attention)
    blocks = kv_block_count(config, device, p, s)
    block = p.kv_block
    largest = int(
        np.max(-(-np.minimum(arrivals.prompt + arrivals.output - 1, config.sliding_window or np.inf) // block))
    )
    if largest > blocks:
        raise InvalidWorkloadError(
            f"one request needs {largest} KV blocks of {block} tokens but the cache holds "
            f"{blocks}; shorten the requests or give the cache more memory"
        )
    server = _Server(arrivals, s, cost, blocks, block)
    times = _run(server, arrivals, progress)
    return _result(server, times, config, device, chosen, roofs, s, blocks, block)


def _run(server: _Server, arrivals: Arrivals, progress) -> dict[str, list]:
    n = len(arrivals)
    arrival = arrivals.time_s
    now, nxt, finished, steps = 0.0, 0, 0, 0
    line = {k: [] for k in ("start_s", "step_s", "kv_blocks", "running", "waiting", "tokens")}
    while finished < n:
        if not len(server.run[0]) and not server.waiting:
            now = max(now, float(arrival[nxt]))
        while nxt < n and arrival[nxt] <= now:
            server.waiting.append(nxt)
            nxt += 1
        chunk = server.schedule(now)
        dt = server.cost_of(chunk)
        line["start_s"].append(now)
        line["step_s"].append(dt)
        line["kv_blocks"].append(server.used)
        line["running"].append(len(chunk))
        line["waiting"].append(len(server.waiting))
        line["tokens"].append(server.tokens)
        now += dt
        before = len(server.run[0])
        server.advance(chunk, now)
        finished += before - len(server.run[0])
        steps += 1
        if progress is not None and steps % 2000 == 0:
            progress(finished, n)
    if progress is not None:
        progress(finished, n)
    return line


def percentiles(values: np.ndarray) -> dict[str, float]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return {f"p{q}": float("nan") for q in PERCENTILES} | {"mean": float("nan")}
    out = {f"p{q}": float(np.percentile(finite, q)) for q in PERCENTILES}
    out["mean"] = float(finite.mean())
    return out


def _result(server: _Server, line, config, device, settings, roofs, s: Scheduler, blocks: int, block: int) -> SimResult:
    arrival, out = server.arrival, server.output
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (server.finish - server.first) / np.maximum(out - 1, 1), np.nan)
    requests = {
        "arrival_s": arrival,
        "prompt": server.prompt,
        "output": out,
        "queue_s": server.admitted - arrival,
        "ttft_s": server.first - arrival,
        "tpot_s": tpot,
        "latency_s": server.finish - arrival,
        "finish_s": server.finish,
        "preemptions": server.preempted,
        "prefix_hit_tokens": server.hit_tokens,
    }
    timeline = {k: np.asarray(v) for k, v in line.items()}
    timeline["kv_fraction"] = timeline["kv_blocks"] / blocks
    span = float(np.max(server.finish) - arrival[0])
    summary = {
        "requests": len(arrival),
        "steps": len(timeline["start_s"]),
        "duration_s": span,
        "offered_rate": (len(arrival) - 1) / float(arrival[-1] - arrival[0]) if arrival[-1] > arrival[0] else None,
        "requests_per_s": len(arrival) / span,
        "output_tokens_per_s": float(out.sum()) / span,
        "prompt_tokens": int(server.prompt.sum()),
        "output_tokens": int(out.sum()),
        "computed_tokens": server.computed,
        "recomputed_tokens": server.recomputed,
        "prefix_hit_tokens": int(server.hit_tokens.sum()),
        "preemptions": int(server.preempted.sum()),
        "kv_blocks": blocks,
        "kv_block_tokens": block,
        "kv_peak_fraction": float(timeline["kv_fraction"].max()),
        "kv_mean_fraction": float(
            np.sum(timeline["kv_fraction"] * timeline["step_s"]) / max(np.sum(timeline["step_s"]), 1e-300)
        ),
        "mean_running": float(
            np.sum(timeline["running"] * timeline["step_s"]) / max(np.sum(timeline["step_s"]), 1e-300)
        ),
    }
    for key in ("queue_s", "ttft_s", "tpot_s", "latency_s"):
        summary[key] = percentiles(requests[key])
    meta = {
        "model": config.name,
        "hardware": device.name,
        "mode": roofs.mode,
        "settings": settings.__dict__.copy(),
        "scheduler": s.__dict__.copy(),
    }
    return SimResult(requests, timeline, plain(summary), plain(meta))


# --- service-level objectives ------------------------------------------------------------


def goodput(result: SimResult, ttft_slo: float | None = None, tpot_slo: float | None = None) -> dict[str, float]:
    """Requests per second that met every given SLO, and the fraction that did."""
    r = result.requests
    ok = np.ones(len(r["arrival_s"]), dtype=bool)
    if ttft_slo is not None:
        ok &= r["ttft_s"] <= ttft_slo
    if tpot_slo is not None:
        ok &= ~(r["tpot_s"] > tpot_slo)  # one-token requests have no TPOT: they pass it
    return {"goodput_rps": float(ok.sum() / result.summary["duration_s"]), "slo_attainment": float(ok.mean())}


def meets(result: SimResult, ttft_slo: float | None, tpot_slo: float | None, percentile: float = 99) -> bool:
    """Whether the ``percentile`` of TTFT and of TPOT are within their SLOs."""
    r = result.requests
    for key, slo in (("ttft_s", ttft_slo), ("tpot_s", tpot_slo)):
        values = r[key][np.isfinite(r[key])]
        if slo is not None and values.size and np.percentile(values, percentile) > slo:
            return False
    return True


def max_rate(
    run: Callable[[float], SimResult],
    ttft_slo: float | None,
    tpot_slo: float | None,
    percentile: float = 99,
    start: float = 1.0,
    tolerance: float = 0.02,
    most_runs: int = 40,
) -> dict[str, Any]:
    """The highest request rate whose ``percentile`` TTFT and TPOT meet the SLOs: double
    (or halve) from ``start`` to bracket it, then bisect on a log scale to ``tolerance``.
    ``run(rate)`` simulates at one rate (same seed each time: common random numbers)."""
    if ttft_slo is None and tpot_slo is None:
        raise InvalidWorkloadError("the rate search needs --ttft-slo and/or --tpot-slo")
    tried = []

    def ok(rate: float) -> bool:
        good = meets(run(rate), ttft_slo, tpot_slo, percentile)
        tried.append({"rate": rate, "meets": good})
        return good

    lo, hi = None, None
    rate = start
    while len(tried) < most_runs and (lo is None or hi is None):
        if ok(rate):
            lo, rate = rate, rate * 2
        else:
            hi, rate = rate, rate / 2
        if lo is None and rate < start * 2.0**-20:
            return {"max_rate": 0.0, "tried": tried}
    while lo is not None and hi is not None and hi / lo > 1 + tolerance and len(tried) < most_runs:
        mid = float(np.sqrt(lo * hi))
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return {"max_rate": lo, "tried": tried}
