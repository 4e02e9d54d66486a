"""What one simulated step costs: engine times tabulated once per simulation.

Ops that run over all the step's tokens at once (projections, MLP, norms: one kernel on T
rows) cost the engine's time at T tokens; attention costs each sequence's own (query, key)
work, summed per op into one kernel: ``max(sum compute_s, sum memory_s) + overhead``. A
fresh prompt chunk is the engine's prefill over it; a chunk over cached context (a later
chunk, a prefix-cache hit, a decode) is the engine's multi-token decode pass with that many
tokens cached. :func:`step_time` prices a step so (``batch_attention`` "varlen"),
:func:`masked_step_time` with one masked attention over the whole step ("masked") and
:func:`gather_step_time` as transformers' sdpa path runs it ("gather",
:mod:`ridgeline.serving.transformers_sdpa`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ridgeline.engine.layers import Plan, engine_chunk, layer_parts, pipeline_factors, stage_ops
from ridgeline.engine.memory import kv_bytes_per_token
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.ops import base_name
from ridgeline.engine.roofline import Ceilings, evaluate
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.transformers_sdpa import GatherCost, build_gather_cost

# ops whose work depends on each sequence's own query and cached lengths
ATTENTION_OPS = (
    *("repeat_k", "repeat_v", "qk_matmul", "attn_scale", "attn_mask"),
    *("softmax_upcast", "softmax", "softmax_downcast", "sv_matmul", "attention", "attn_combine"),
    *("sdpa_gqa", "sdpa_repeat_kv"),  # transformers' sdpa paths (docs/model.md, "Attention settings")
)
HEAD_OPS = ("lm_head",)


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
    # layers that attend over different spans: each attention op's (inf: global), and each
    # kind's share of a token's KV bytes with its span; None / () when every layer is alike
    spans: np.ndarray | None = None  # [K]
    kv_spans: tuple[tuple[float, float], ...] = ()
    chunks: np.ndarray | None = None  # [K] the chunk an op's kernel attends within (0: none)

    def capped(self, cached: np.ndarray) -> np.ndarray:
        """[K] each attention op's sum of the cached lengths, each capped at its span less
        the new token (``spans``), or, for a kernel that attends within chunks of C, what
        precedes the new token in its own chunk: cached mod C."""
        cached = np.asarray(cached, dtype=float)[None, :]
        kept = np.minimum(cached, self.spans[:, None] - 1)
        if self.chunks is not None:
            chunk = self.chunks[:, None]
            kept = np.where(chunk > 0, cached % np.maximum(chunk, 1), kept)
        return kept.sum(axis=1)

    def kv_kept(self, tokens):
        """Positions a sequence of ``tokens`` keeps, in whole-model tokens: each kind of
        layer keeps at most its span, weighted by its share of a token's KV bytes."""
        return sum(share * np.minimum(tokens, span) for share, span in self.kv_spans)

    def decode_time(self, n: int, cached: float) -> float:
        """``step_time`` of n decodes alone, in scalars (the simulator's hot path)."""
        base, terms = self._decode_rows[n]
        total = base
        for count, ca, cb, ma, mb, over in terms:
            total += count * (max(ca + cb * cached, ma + mb * cached) + over)
        return self.factor * total

    def decode_times(self, n: int, cached: np.ndarray) -> np.ndarray:
        """``decode_time`` at each of the sums ``cached`` (float), elementwise: the same
        operations in the same order, so each is ``decode_time(n, c)`` to the bit."""
        base, terms = self._decode_rows[n]
        total = np.full(len(cached), base)
        for count, ca, cb, ma, mb, over in terms:
            total += count * (np.maximum(ca + cb * cached, ma + mb * cached) + over)
        return self.factor * total

    @cached_property
    def _decode_rows(self) -> list[tuple[float, list[tuple[float, ...]]]]:
        """Per decode count n, ``decode_time``'s terms as Python floats (same arithmetic,
        without numpy's per-element cost)."""
        ca, cb, ma, mb = (a.tolist() for a in self.decode)
        over = [float(o) if h else 0.0 for o, h in zip(self.overhead_s, self.cached_has)]
        count = [float(c) for c in self.count]
        rows = min(len(self.head_s), len(self.token_s))  # n decodes, 0..B (at most the budget's tokens)
        base = (self.token_s[:rows] + self.cached_only_s[:rows] + self.head_s[:rows]).tolist()
        return [
            (base[n], [(count[k], ca[k][n], cb[k][n], ma[k][n], mb[k][n], over[k]) for k in range(len(count))])
            for n in range(rows)
        ]

    def attention_s(self, compute: np.ndarray, memory: np.ndarray, present: np.ndarray) -> float:
        """Attention ops as one kernel each over the step's sequences."""
        per_op = np.maximum(compute, memory) + np.where(present, self.overhead_s, 0.0)
        return float(np.dot(self.count, per_op))


def mixed_spans(config: ModelConfig) -> bool:
    """Whether the model's layers attend over different spans (sliding and global, chunked)."""
    return bool(config.windows and config.layer_groups)


def check_served(config: ModelConfig, batch_attention: str) -> None:
    """Layers over different spans are priced op by op in ``varlen`` steps only (the masked
    and gathered paths price one attention over the whole step)."""
    if mixed_spans(config) and batch_attention != "varlen":
        kinds = ", ".join(f"{g.count} {g.label}" for g in config.layer_groups)
        raise InvalidWorkloadError(
            f"batch attention '{batch_attention}' prices one attention span for every layer; "
            f"{config.name} mixes layers ({kinds}): use 'varlen'"
        )


def layer_spans(config: ModelConfig, p: Plan, names: list[str]) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Each attention op's span and the chunk its kernel attends within (by its kind's
    label: ``engine_chunk``), and each kind's (share of a token's KV bytes, span), for a
    model whose layers attend over different spans."""
    span = lambda part: float(part.sliding_window or np.inf)  # noqa: E731
    parts = {label: (part, plan) for label, part, plan in layer_parts(config, p)}
    total = kv_bytes_per_token(config, p)
    kinds = [parts[n.rpartition("/")[0]] for n in names]
    per_op = np.array([span(part) for part, _ in kinds])
    chunks = np.array([float(engine_chunk(part, plan)) for part, plan in kinds])
    kv = tuple((kv_bytes_per_token(part, plan) / total, span(part)) for part, plan in parts.values())
    return per_op, chunks, kv


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
    check_served(config, batch_attention)
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
    fresh_names = [op.name for op in fresh_ops if base_name(op.name) not in skip]
    cached_names = [op.name for op in token_ops if base_name(op.name) not in skip]
    shared = [n for n in fresh_names if n in cached_names]
    pad = lambda a: np.concatenate([[0.0], np.broadcast_to(a, tokens.shape)])  # noqa: E731
    rows = lambda ops, names: [i for i, op in enumerate(ops) if op.name in names]  # noqa: E731
    token_s = pad(_token_time(fresh, rows(fresh_ops, shared)))
    fresh_only = pad(_token_time(fresh, rows(fresh_ops, [n for n in fresh_names if n not in shared])))
    cached_only = pad(_token_time(by_token, rows(token_ops, [n for n in cached_names if n not in shared])))
    head_rows = rows(dec_ops[0], HEAD_OPS)
    head_s = np.concatenate([[0.0], np.broadcast_to(_token_time(dec[0], head_rows), batches.shape)])

    present = dict.fromkeys(op.name for op in fresh_ops + chunk_ops[0] if base_name(op.name) in ATTENTION_OPS)
    names = sorted(present, key=lambda n: ATTENTION_OPS.index(base_name(n)))  # each kind of layer's in turn
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
    time_factor, _ = pipeline_factors(p, "decode")  # one micro-batch (simulate refuses more): pp either way
    spans, chunks, kv_spans = layer_spans(config, p, names) if mixed_spans(config) else (None, None, ())
    return StepCost(
        token_s=token_s,
        fresh_only_s=fresh_only,
        cached_only_s=cached_only,
        head_s=head_s,
        fresh=(gather(fresh_ops, fresh, "compute_s", max_tokens), gather(fresh_ops, fresh, "memory_s", max_tokens)),
        chunk=(chunk_c[0], chunk_c[1], chunk_m[0], chunk_m[1]),
        decode=(dec_c[0], dec_c[1] / per_seq, dec_m[0], dec_m[1] / per_seq),
        fresh_has=np.array([any(op.name == n for op in fresh_ops) for n in names], dtype=bool),
        cached_has=np.array([any(op.name == n for op in chunk_ops[0]) for n in names], dtype=bool),
        overhead_s=overhead,
        count=np.array([float(info[n].count) for n in names]),
        window=min(config.windows) if spans is not None else config.sliding_window,
        factor=time_factor,
        gather=build_gather_cost(config, p, roofs, max_tokens) if batch_attention == "gather" else None,
        spans=spans,
        kv_spans=kv_spans,
        chunks=chunks if chunks is not None and chunks.any() else None,
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
        if cost.spans is not None:  # each op's own span
            cached = np.minimum(cached, np.maximum(cost.spans - c, 0))
        elif cost.window:
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


def gather_step_time(cost: StepCost, fresh: int, cached: int, sequences: int, keys: float, reads: bool) -> float:
    """Seconds of one step as transformers' sdpa path runs it (``transformers_sdpa.gather_ops``): token
    ops and the lm_head as in :func:`step_time`, then per layer the cache written, read
    back when ``reads``, repeated for GQA and one masked attention over T x ``keys``."""
    if cost.gather is None:
        raise ValueError("build the step cost with batch_attention='gather'")
    tokens = fresh + cached
    return cost.factor * (_token_part(cost, fresh, cached, sequences) + cost.gather.seconds(tokens, keys, reads))
