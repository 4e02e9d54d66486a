"""Config + stage + workload + deployment -> the list of ``Op`` of one forward pass.

Ops are per device: with tensor parallelism heads and MLP columns are split, with pipeline
parallelism each device runs ``num_layers / pp`` layers, with expert parallelism each holds
``num_experts / ep`` experts. Layer ops carry ``count`` = layers on the device; ``embed``,
``final_norm`` and ``lm_head`` run once. Each op names the producers of the activations it
reads (``inputs``), in data-flow order, which is what the memory tracker's liveness walk needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ridgeline.engine import ops as O
from ridgeline.engine.fusion import fuse
from ridgeline.engine.model import ModelConfig, group_of
from ridgeline.engine.ops import Op, Quant
from ridgeline.engine.workload import Number
from ridgeline.errors import InvalidSettingError


@dataclass(frozen=True)
class Plan:
    """Everything device- and setting-dependent the layer builder needs."""

    wb: float  # bytes per layer weight (linear projections)
    ab: float  # bytes per activation
    kvb: float  # bytes per KV-cache element
    matrix_dtype: str  # compute type of matrix ops
    vector_dtype: str  # compute type of element-wise ops
    scale_bytes: float = 0.0  # scale + zero point per quantisation group (0: unquantised)
    group_size: int = 0
    dequant: bool = False  # weights converted up inside the matrix kernels
    attention: str = "eager"
    kv_block: int = 16
    tile_rows: int = 128  # query rows per on-chip tile (flash attention)
    key_block: int = 0  # causal flash: keys computed in whole blocks (0: exact causal)
    compute_units: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    micro_batches: int = 1
    hb: float = 0.0  # bytes per embedding, norm, router and lm_head weight (0: ab)
    head_dtype: str = ""  # compute type of lm_head and the router ("": matrix_dtype)
    memory_utilization: float = 1.0  # fraction of device memory the runtime may use
    # eager as transformers runs it: repeat_kv copies, scale and mask passes, fp32 softmax
    transformers_eager: bool = False
    half_to_float: bool = False  # that softmax reads fp16 itself (a GPU): no cast-up kernel
    fusion: frozenset = frozenset()  # kernels a serving engine fuses (fusion.FUSIONS); empty: PyTorch's
    # routed experts stored apart from the other linear layers (a checkpoint's MXFP4 experts):
    # their weights' format and the type their products run in; None / "": as every linear
    expert_quant: Quant | None = None
    expert_dtype: str = ""

    @property
    def head_bytes(self) -> float:
        """Bytes per weight of what stays unquantised: embeddings, norms, router, lm_head."""
        return self.hb or self.ab

    @property
    def head_matrix_dtype(self) -> str:
        return self.head_dtype or self.matrix_dtype

    @cached_property  # each linear op asks: made once per plan
    def quant(self) -> Quant:
        return Quant(self.wb, self.scale_bytes, self.group_size, self.dequant)

    @property
    def routed_quant(self) -> Quant:
        """How the routed experts' weights are stored."""
        return self.expert_quant or self.quant

    @property
    def routed_dtype(self) -> str:
        """The compute type of the routed experts' products."""
        return self.expert_dtype or self.matrix_dtype

    @cached_property
    def unquantised(self) -> Quant:
        return Quant(self.head_bytes)


@dataclass(frozen=True)
class Shard:
    """Per-device sizes under tensor/expert parallelism."""

    heads: int
    kv_heads: int
    intermediate: int
    moe_intermediate: int
    shared_intermediate: int
    experts: int
    layers: int
    moe_layers: int
    dense_layers: int


def shard(c: ModelConfig, p: Plan) -> Shard:
    """Split heads, MLP columns and experts over devices; replicate KV heads when fewer than tp."""
    if c.num_heads % p.tp:
        raise InvalidSettingError("tp", f"tp={p.tp} does not divide {c.num_heads} attention heads")
    if c.num_kv_heads > p.tp and c.num_kv_heads % p.tp:
        raise InvalidSettingError("tp", f"tp={p.tp} does not divide {c.num_kv_heads} KV heads")
    if c.is_moe and c.num_experts % p.ep:
        raise InvalidSettingError("ep", f"ep={p.ep} does not divide {c.num_experts} experts")
    if not c.is_moe and p.ep > 1:
        raise InvalidSettingError("ep", f"ep > 1 needs a mixture-of-experts model; {c.name} is dense")
    if p.pp > c.num_layers:
        raise InvalidSettingError("pp", f"pp={p.pp} is more than the {c.num_layers} layers")
    shared = c.shared_expert_intermediate_size or c.num_shared_experts * c.moe_intermediate_size
    return Shard(
        heads=c.num_heads // p.tp,
        kv_heads=max(1, c.num_kv_heads // p.tp),
        intermediate=math.ceil(c.intermediate_size / p.tp),
        moe_intermediate=math.ceil(c.moe_intermediate_size / p.tp),
        shared_intermediate=math.ceil(shared / p.tp),
        experts=c.num_experts // p.ep if c.is_moe else 0,
        layers=math.ceil(c.num_layers / p.pp),
        moe_layers=math.ceil(c.num_moe_layers / p.pp),
        dense_layers=math.ceil((c.num_layers - c.num_moe_layers) / p.pp),
    )


def kv_length(c: ModelConfig, kv_len: Number) -> Number:
    """Positions a query attends to: a sliding window caps it."""
    return np.minimum(kv_len, c.sliding_window) if c.sliding_window else kv_len


# the kernels that attend within each chunk of a chunked layer (vLLM's ChunkedLocalAttention
# splits every sequence into one virtual batch a chunk: make_local_attention_virtual_batches,
# vllm/attention/layers/chunked_local_attention.py, vllm-project/vllm@0213df59)
CHUNKED_KERNELS = ("flash", "flash-decoding", "paged")


def engine_chunk(c: ModelConfig, p: Plan) -> int:
    """The chunk C a layer's kernel attends within (0: none, or a window of C under
    transformers' mask, whose cache keeps the last C positions)."""
    return (c.attention_chunk or 0) if p.attention in CHUNKED_KERNELS else 0


def engine_chunks(c: ModelConfig, p: Plan) -> dict[str, int]:
    """Each kind of layer's chunk that the plan's kernels attend within, by its label."""
    return {g.label: g.chunk for g in c.layer_groups if engine_chunk(group_of(c, g), p)}


def chunk_keys(q_len: Number, kv_len: Number, chunk: int) -> Number:
    """Keys each new query sees in its chunk when the last of ``q_len`` new positions is the
    ``kv_len``-th: (kv_len - 1) mod C + 1 while the new ones share one chunk, else at most C."""
    own = (np.asarray(kv_len) - 1) % chunk + 1
    return np.where(np.asarray(q_len) <= own, own, np.minimum(kv_len, chunk))


def chunked_pairs(q_len: Number, chunk: int, key_block: int = 0) -> Number:
    """(query, key) pairs of a causal prompt of S tokens in chunks of C, each chunk causal
    over itself alone: floor(S / C) C(C+1)/2 + r(r+1)/2, r = S mod C (in whole key blocks
    as :func:`causal_pairs` counts them)."""
    whole = np.asarray(q_len) // chunk
    return whole * causal_pairs(chunk, key_block) + causal_pairs(q_len - whole * chunk, key_block)


def attended_pairs(c: ModelConfig, q_len: Number, kv_len: Number, causal: bool, key_block: int = 0) -> Number:
    """(query, key) pairs per head after masking. Causal prefill over S tokens attends
    S(S+1)/2 pairs; a window W caps each query at W keys: W(W+1)/2 + (S-W)W when S > W.

    A kernel that takes keys in blocks of ``key_block`` and masks inside a block computes
    every key of each block a query row reaches: the rows of block b (b = 0..n-1, n =
    ceil(S / B)) compute min(S, (b + 1) B) keys each, B^2 n(n-1)/2 + (S - (n-1)B) S in all
    (S^2 up to S = B). PyTorch's CPU flash kernel has B = 512 (its key split): with
    ``is_causal`` it took as long as without it up to S = 512 on the development EPYC, and
    0.76 of it at S = 1024 (this formula: 0.75). A window past the prompt changes nothing;
    one within it is counted exactly."""
    if not causal:
        return q_len * kv_length(c, kv_len)
    prompt = causal_pairs(q_len, key_block)  # a window longer than the prompt masks nothing
    if not c.sliding_window:
        return prompt
    w = c.sliding_window
    return np.where(q_len > w, w * (w + 1) / 2 + (q_len - w) * w, prompt)


def causal_pairs(q_len: Number, key_block: int = 0) -> Number:
    """(query, key) pairs a causal prompt of ``q_len`` tokens computes over itself: S(S+1)/2,
    or in whole blocks of ``key_block`` keys (``attended_pairs``)."""
    if not key_block:
        return q_len * (q_len + 1) / 2
    n = np.ceil(np.asarray(q_len, dtype=float) / key_block)
    return key_block**2 * n * (n - 1) / 2 + (q_len - (n - 1) * key_block) * q_len


@dataclass(frozen=True)
class AttentionCall:
    """One attention kernel on one device: its sizes and where its query comes from."""

    batch: Number
    q_len: Number  # new positions per sequence
    kv_len: Number  # positions attended to, before any window cap
    heads: int  # query heads on the device
    kv_heads: int  # K/V heads on the device (1 for MLA's shared latent)
    qk_dim: int
    v_dim: int
    count: int  # layers
    prefill: bool  # causal over the new tokens (else: decode)
    q_from: str  # producer of the query (liveness)
    latent: bool = False  # absorbed MLA: V is the first v_dim columns of the K row


def eager_attention(c: ModelConfig, a: AttentionCall, p: Plan) -> list[Op]:
    """qk_matmul -> softmax -> sv_matmul: the score matrix goes through memory.

    Eager prefill computes the full q x S score matrix and masks it (a sliding window
    changes the mask, not the work), so flops and bytes both cover every position. Decode
    reads the cache, which a window caps at W positions. A Plan without
    ``transformers_eager`` prices the three grouped kernels the microbenchmarks time (query
    heads folded onto their K/V head, softmax in the activation type); with it, the kernels
    transformers' ``eager_attention_forward`` runs (:func:`transformers_eager`).
    """
    kv = a.kv_len if a.prefill else kv_length(c, a.kv_len)
    if p.transformers_eager:
        return transformers_eager(a, kv, p, sinks=c.attention_sinks)
    kw = dict(ab=p.ab, kvb=p.kvb, count=a.count, dtype=p.matrix_dtype)
    return [
        O.qk_matmul(a.batch, a.heads, a.kv_heads, a.q_len, kv, a.qk_dim, inputs=(a.q_from,), **kw),
        O.softmax(a.batch, a.heads, a.q_len, kv, ab=p.ab, count=a.count, dtype=p.vector_dtype),
        O.sv_matmul(a.batch, a.heads, a.kv_heads, a.q_len, kv, a.v_dim, **kw),
    ]


FP32 = 4.0  # bytes of the fp32 the eager softmax computes in


def transformers_eager(a: AttentionCall, kv: Number, p: Plan, sinks: bool = False) -> list[Op]:
    """transformers' ``eager_attention_forward`` (models/llama/modeling_llama.py), kernel by
    kernel: ``repeat_kv`` copies grouped K and V out to every query head (none when g = h:
    it returns its input), ``matmul(q, k^T) * scaling`` (two kernels), ``+ attention_mask``
    (the [b, 1, q, kv] mask in the activation type), ``softmax(dtype=float32).to(q.dtype)``,
    ``matmul(p, v)``. ATen's softmax with a dtype (aten/src/ATen/native/SoftMax.cpp) casts
    the input to fp32 in a kernel of its own, except fp16 on a GPU (one kernel reads fp16
    and writes fp32: ``half_to_float``); ``.to`` casts back. Per score element, bf16: written
    by the matmul 2, scale 2+2, mask 2+2, cast 2+4, softmax 4+4, cast back 4+2, read by the
    second matmul 2: 32 B, against 8 in the grouped kernels. fp32 activations: no casts.

    Liveness follows the Python frame (an op's ``inputs`` also name what it keeps alive): the
    masked scores stay referenced (``attn_weights``) until the softmax line returns, so they,
    the cast-up copy and the fp32 result are live at once, 10 B per element in bf16, beside
    both K/V copies (``key_states`` lives until the function returns).
    With ``sinks`` (gpt-oss), :func:`sink_softmax` replaces the fp32 softmax.
    The mask, built once per forward, is held beside every layer (:func:`forward_masks`).
    Left out: the output's transpose copy."""
    copy = not a.latent and a.kv_heads < a.heads
    g = a.heads if copy else a.kv_heads
    mm = dict(ab=p.ab, kvb=p.kvb, count=a.count, dtype=p.matrix_dtype, copied=copy)
    el = dict(count=a.count, dtype=p.vector_dtype)
    shape = (a.batch, a.heads, a.q_len, kv)
    copies = [
        O.repeat_kv(name, a.batch, a.heads, a.kv_heads, kv, dim, ab=p.ab, kvb=p.kvb, **el)
        for name, dim in (("repeat_k", a.qk_dim), ("repeat_v", a.v_dim))
    ]
    ops = copies if copy else []
    qk = O.qk_matmul(a.batch, a.heads, g, a.q_len, kv, a.qk_dim, **mm)
    ops.append(O.replaced(qk, inputs=(a.q_from, "repeat_k") if copy else (a.q_from,)))
    ops.append(O.score_pass("attn_scale", *shape, in_bytes=p.ab, out_bytes=p.ab, flops=1, inputs=("qk_matmul",), **el))
    mask = dict(mask_bytes=p.ab, inputs=("attn_scale",))
    ops.append(O.score_pass("attn_mask", *shape, in_bytes=p.ab, out_bytes=p.ab, flops=1, **mask, **el))
    ops += sink_softmax(shape, a.count, p) if sinks else fp32_softmax(shape, a.count, p)
    sv = O.sv_matmul(a.batch, a.heads, g, a.q_len, kv, a.v_dim, **mm)
    held = ("repeat_v", "repeat_k") if copy else ()  # key_states lives until the function returns
    return ops + [O.replaced(sv, inputs=(ops[-1].name, *held))]


def fp32_softmax(shape: tuple, count: int, p: Plan) -> list[Op]:
    """``softmax(x, dtype=float32).to(x.dtype)`` on the masked scores ``x`` (``attn_mask``'s):
    a cast up (none with fp32 activations or ``p.half_to_float``), the softmax in fp32, a
    cast back (a cast: 1 op per element, the conversion); ``attn_mask`` stays among the
    inputs while Python still holds it."""
    el = dict(count=count, dtype=p.vector_dtype)
    if p.ab >= FP32:
        return [O.softmax(*shape, ab=p.ab, inputs=("attn_mask",), **el)]
    fused = p.half_to_float
    up = O.score_pass("softmax_upcast", *shape, in_bytes=p.ab, out_bytes=FP32, flops=1, inputs=("attn_mask",), **el)
    held = ("attn_mask",) if fused else ("softmax_upcast", "attn_mask")
    # priced at the activations' vector type: a profile's softmax class of that type prices
    # it (it computes in fp32: memory-bound at 5 ops per 8 bytes either way)
    soft = O.softmax(*shape, ab=p.ab if fused else FP32, out_bytes=FP32, inputs=held, **el)
    down = O.score_pass(
        "softmax_downcast", *shape, in_bytes=FP32, out_bytes=p.ab, flops=1, inputs=("softmax", "attn_mask"), **el
    )
    return [soft, down] if fused else [up, soft, down]


def window_masked(c: ModelConfig, a: AttentionCall, p: Plan) -> Number:
    """Where an SDPA prompt call over a sliding window takes a boolean mask: transformers
    builds one for a sliding layer once its keys reach the window (``sdpa_mask`` skips it
    only while kv_length < the window: masking_utils.py, ``_ignore_causal_mask_sdpa``,
    huggingface/transformers@00c4411), and SDPA with a mask computes every (query, key)
    pair and reads the mask. A window then changes the mask, not the work, as in eager."""
    if not (a.prefill and c.sliding_window and p.attention in ("sdpa-gqa", "sdpa-repeat")):
        return False
    return np.asarray(a.kv_len) >= c.sliding_window


# the attention settings that run transformers' own modelling code (docs/model.md)
TRANSFORMERS_ATTENTION = ("eager", "sdpa-gqa", "sdpa-repeat")


def forward_masks(c: ModelConfig, batch: Number, q_len: Number, cached: Number, p: Plan) -> Number:
    """Bytes of the attention masks transformers builds once per forward and holds until its
    last layer returns: one per kind of layer the model has (``create_causal_mask`` and its
    sliding and chunked siblings in the model's ``forward``; masking_utils.py,
    huggingface/transformers@00c4411), each [b, 1, q, kv] with kv = the layer's cached
    positions (a window of W keeps W - 1) + q. ``eager``: always built, converted to the
    activation type by ``torch.where`` (``eager_mask``): b x q x kv x the activation's bytes.
    SDPA: none while ``_ignore_causal_mask_sdpa`` holds (one new token or nothing cached, and
    kv under the window), else booleans, 1 B each, over the whole batch (``generate``'s
    all-ones 2D mask joins through ``and_masks``). Flash and the serving engines build none."""
    if p.attention not in TRANSFORMERS_ATTENTION:
        return 0 * (batch * q_len * cached)
    kinds = {group_of(c, g).sliding_window for g in c.layer_groups} if c.layer_groups else {c.sliding_window}
    size, total = (p.ab if p.transformers_eager else 1), 0
    for w in kinds:
        kv = np.asarray((np.minimum(cached, w - 1) if w else cached) + q_len)
        skip = not p.transformers_eager and ((np.asarray(q_len) == 1) | (kv == q_len)) & (kv < (w or np.inf))
        total = total + np.where(skip, 0, batch * q_len * kv * size)
    return total


def sink_softmax(shape: tuple, count: int, p: Plan) -> list[Op]:
    """gpt-oss's ``eager_attention_forward`` after the mask (models/gpt_oss/modeling_gpt_oss.py,
    huggingface/transformers@00d4b3d): each head's sink logit joined as one more column
    (``torch.cat``: a new [b, h, q, kv + 1] tensor), the rows' max, the max subtracted (a new
    tensor), ``softmax(dtype=`` the scores' own type ``)`` (no casts), then the sink column
    dropped (a view the second matmul reads through). Per score element in bf16: cat 2+2,
    max 2, subtract 2+2, softmax 2+2. The masked scores (``attn_weights``) stay referenced
    until the softmax returns, beside the joined and the shifted copies."""
    batch, heads, q_len, kv = shape
    wide, rows = (batch, heads, q_len, kv + 1), batch * heads * q_len
    el = dict(count=count, dtype=p.vector_dtype)
    join = O.score_pass("attn_sinks", *wide, in_bytes=p.ab, out_bytes=p.ab, flops=0, inputs=("attn_mask",), **el)
    join = O.replaced(join, act_read_bytes=rows * kv * p.ab + heads * p.ab)  # the scores and the sinks
    row_max = O.score_pass(
        "attn_max", *wide, in_bytes=p.ab, out_bytes=0, flops=1, inputs=("attn_sinks", "attn_mask"), **el
    )
    row_max = O.replaced(row_max, act_write_bytes=rows * p.ab)
    held = ("attn_sinks", "attn_max", "attn_mask")
    shift = O.score_pass("attn_shift", *wide, in_bytes=p.ab, out_bytes=p.ab, flops=1, inputs=held, **el)
    shift = O.replaced(shift, act_read_bytes=shift.act_read_bytes + rows * p.ab)  # the max, broadcast
    soft = O.softmax(*wide, ab=p.ab, inputs=("attn_shift", "attn_mask"), **el)
    return [join, row_max, shift, soft]


def fused_attention(c: ModelConfig, a: AttentionCall, p: Plan) -> list[Op]:
    """Flash attention (and its decode variants): tiles on chip, K/V read once per query
    tile; the causal mask and a sliding window skip whole tiles, in flops and bytes alike
    (not under an SDPA call's window mask: :func:`window_masked`); a chunked layer under the
    engines' kernels attends within its chunk (:func:`engine_chunk`)."""
    pairs = attended_pairs(c, a.q_len, a.kv_len, causal=a.prefill, key_block=p.key_block)
    keys = kv_length(c, a.kv_len)
    if chunk := engine_chunk(c, p):
        own = chunk_keys(a.q_len, a.kv_len, chunk)
        pairs = chunked_pairs(a.q_len, chunk, p.key_block) if a.prefill else a.q_len * own
        if not a.prefill:
            keys = own
    masked = window_masked(c, a, p)
    if np.any(masked):
        pairs, keys = np.where(masked, a.q_len * a.kv_len, pairs), np.where(masked, a.kv_len, keys)
    positions = np.maximum(pairs / p.tile_rows, keys) if a.prefill else keys
    ops = [
        O.flash_attention(
            a.batch,
            a.heads,
            a.kv_heads,
            a.q_len,
            pairs,
            positions,
            a.qk_dim,
            a.v_dim,
            ab=p.ab,
            kvb=p.kvb,
            count=a.count,
            dtype=p.matrix_dtype,
            inputs=(a.q_from,),
            v_in_k=a.latent,
        )
    ]
    if p.attention == "sdpa-repeat":
        return [O.repeat_kv_attention(ops[0], keys if not a.prefill else a.kv_len, positions, p.kvb)]
    if np.any(masked):  # the window's mask [b, 1, q, kv], a byte a pair (sdpa-repeat reads its own)
        mask = np.where(masked, a.batch * a.q_len * a.kv_len, 0)
        ops[0] = O.replaced(ops[0], act_read_bytes=ops[0].act_read_bytes + mask)
    if p.attention == "sdpa-gqa" and a.kv_heads < a.heads and not a.latent:
        return [O.replaced(ops[0], name="sdpa_gqa")]  # a kernel of its own: no fold of the group
    if p.attention == "paged" and not a.prefill:  # the block table: 4 bytes per block
        ops[0] = O.replaced(ops[0], act_read_bytes=ops[0].act_read_bytes + a.batch * keys / p.kv_block * 4)
    if p.attention == "flash-decoding" and not a.prefill:
        splits = np.maximum(1, np.ceil(p.compute_units / (a.batch * a.heads)))
        ops.append(O.split_combine(a.batch, a.heads, splits, a.v_dim, count=a.count, dtype=p.vector_dtype))
    return ops


def attention_core(c: ModelConfig, a: AttentionCall, p: Plan) -> list[Op]:
    build = eager_attention if p.attention == "eager" else fused_attention
    return build(c, a, p)


def standard_attention(c: ModelConfig, s: Shard, batch, q_len, kv_len, p: Plan, prefill: bool) -> list[Op]:
    """q/k/v projections, rotary, attention, o_proj (MHA, GQA, MQA)."""
    tokens, h, L = batch * q_len, c.hidden_size, s.layers
    q_out, kv_out = s.heads * c.head_dim, s.kv_heads * c.head_dim
    lin = dict(q=p.quant, ab=p.ab, count=L, dtype=p.matrix_dtype, inputs=("attn_norm",))
    k_to_kv = 0.0 if c.rotary else p.kvb  # rotary rewrites k before it is cached
    ops = [
        O.linear("q_proj", tokens, h, q_out, **lin),
        O.linear("k_proj", tokens, h, kv_out, out_kv_bytes=k_to_kv, **lin),
        O.linear("v_proj", tokens, h, kv_out, out_kv_bytes=p.kvb, **lin),
    ]
    if c.qk_norm:  # each head of q and k normalised over head_dim (a head_dim-wide weight each)
        vec = dict(ab=p.ab, wb=p.head_bytes, count=L, dtype=p.vector_dtype, kind=c.norm)
        ops.append(O.norm("q_norm", tokens * s.heads, c.head_dim, inputs=("q_proj",), **vec))
        ops.append(O.norm("k_norm", tokens * s.kv_heads, c.head_dim, inputs=("k_proj",), **vec))
    if c.rotary:
        rope = O.rope(tokens, s.heads, s.kv_heads, c.head_dim, ab=p.ab, kvb=p.kvb, count=L, dtype=p.vector_dtype)
        ops.append(O.replaced(rope, inputs=("q_norm", "k_norm")) if c.qk_norm else rope)
    ops += attention_core(
        c,
        AttentionCall(
            batch,
            q_len,
            kv_len,
            s.heads,
            s.kv_heads,
            c.head_dim,
            c.head_dim,
            L,
            prefill,
            "rope" if c.rotary else "q_proj",
        ),
        p,
    )
    ops.append(
        O.linear("o_proj", tokens, q_out, h, q=p.quant, ab=p.ab, count=L, dtype=p.matrix_dtype, inputs=(ops[-1].name,))
    )
    return ops


def latent_attention(c: ModelConfig, s: Shard, batch, q_len, kv_len, p: Plan, prefill: bool) -> list[Op]:
    """Multi-head latent attention (DeepSeek-V2/V3). The cache holds one compressed latent
    (kv_lora_rank) plus the shared rotary key (qk_rope_head_dim) per token. Prefill
    decompresses K and V with kv_b_proj and runs ordinary attention; decode absorbs the
    up-projections into the query and output (attention over the latent, MQA-like): W_UK
    and W_UV are separate per head, so q_absorb and v_absorb are GEMMs batched over the
    heads, each head reading its own (nope x r) or (r x v_d) matrix."""
    tokens, h, L = batch * q_len, c.hidden_size, s.layers
    r, rope_d, nope, v_d = c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim, c.v_head_dim
    lin = dict(q=p.quant, ab=p.ab, count=L, dtype=p.matrix_dtype)
    ops = []
    if c.q_lora_rank:
        ops += [
            O.linear("q_a_proj", tokens, h, c.q_lora_rank, inputs=("attn_norm",), **lin),
            O.linear("q_proj", tokens, c.q_lora_rank, s.heads * (nope + rope_d), inputs=("q_a_proj",), **lin),
        ]
    else:
        ops.append(O.linear("q_proj", tokens, h, s.heads * (nope + rope_d), inputs=("attn_norm",), **lin))
    ops.append(O.linear("kv_a_proj", tokens, h, r + rope_d, inputs=("attn_norm",), out_kv_bytes=p.kvb, **lin))
    rope = O.rope(tokens, s.heads, 1, rope_d, ab=p.ab, kvb=0, count=L, dtype=p.vector_dtype)
    ops.append(O.replaced(rope, inputs=("q_proj", "kv_a_proj")))
    if prefill:
        ops.append(O.linear("kv_b_proj", tokens, r, s.heads * (nope + v_d), inputs=("kv_a_proj",), **lin))
        core = attention_core(
            c, AttentionCall(batch, q_len, kv_len, s.heads, s.heads, nope + rope_d, v_d, L, prefill, "rope"), p
        )
        ops += core
        last = core[-1].name
    else:
        ops.append(O.linear("q_absorb", tokens * s.heads, nope, r, inputs=("rope",), experts=s.heads, **lin))
        ops += attention_core(
            c, AttentionCall(batch, q_len, kv_len, s.heads, 1, r + rope_d, r, L, prefill, "q_absorb", latent=True), p
        )
        ops.append(O.linear("v_absorb", tokens * s.heads, r, v_d, inputs=(ops[-1].name,), experts=s.heads, **lin))
        last = "v_absorb"
    ops.append(O.linear("o_proj", tokens, s.heads * v_d, h, inputs=(last,), **lin))
    return ops


def dense_mlp(c: ModelConfig, tokens, width: int, p: Plan, source: str, count: int, prefix: str = "") -> list[Op]:
    """gate_proj/up_proj -> mlp_act -> down_proj (gate only for gated MLPs)."""
    h = c.hidden_size
    lin = dict(q=p.quant, ab=p.ab, count=count, dtype=p.matrix_dtype)
    names = {n: f"{prefix}{n}" for n in ("gate_proj", "up_proj", "mlp_act", "down_proj")}
    ops = [O.linear(names["gate_proj"], tokens, h, width, inputs=(source,), **lin)] if c.gated_mlp else []
    ops.append(O.linear(names["up_proj"], tokens, h, width, inputs=(source,), **lin))
    act_in = tuple(op.name for op in ops)
    vec = dict(ab=p.ab, count=count, dtype=p.vector_dtype)
    ops.append(O.mlp_act(tokens, width, c.hidden_act, c.gated_mlp, inputs=act_in, name=names["mlp_act"], **vec))
    ops.append(O.linear(names["down_proj"], tokens, width, h, inputs=(names["mlp_act"],), **lin))
    return ops


def expected_experts(experts: int, top_k: int, tokens: Number) -> Number:
    """Distinct experts hit by ``tokens`` tokens each routed to ``top_k`` of ``experts``,
    assuming uniform, independent routing: E * (1 - (1 - k/E)^T)."""
    return experts * (1 - (1 - top_k / experts) ** tokens)


def moe_mlp(c: ModelConfig, s: Shard, tokens, p: Plan, source: str) -> list[Op]:
    """Router, routed experts (weights of the experts hit are read), shared experts, and
    the all-to-all dispatch/combine under expert parallelism."""
    h, k, count = c.hidden_size, c.num_experts_per_tok, s.moe_layers
    ops = [
        O.linear(
            "router",
            tokens,
            h,
            c.num_experts,
            q=p.unquantised,
            ab=p.ab,
            count=count,
            dtype=p.head_matrix_dtype,
            inputs=(source,),
        )
    ]
    routed = tokens * k / p.ep  # token slots this device's experts serve
    hit = expected_experts(c.num_experts, k, tokens) / p.ep
    if p.ep > 1:
        ops.append(
            O.collective("ep_dispatch", tokens * k * h, p.ep, ab=p.ab, count=count, kind="all_to_all", inputs=(source,))
        )
    experts = dense_mlp(c, routed, s.moe_intermediate, p, source, count)
    for i, op in enumerate(experts):
        if op.kind == "linear":
            n_in, n_out = op.dims["k"], op.dims["n"]
            experts[i] = O.replaced(
                O.linear(
                    op.name,
                    routed,
                    n_in,
                    n_out,
                    q=p.routed_quant,
                    ab=p.ab,
                    count=count,
                    dtype=p.routed_dtype,
                    inputs=op.inputs,
                    experts=hit,
                )
            )
    ops += experts
    if p.ep > 1:
        ops.append(
            O.collective(
                "ep_combine", tokens * k * h, p.ep, ab=p.ab, count=count, kind="all_to_all", inputs=("down_proj",)
            )
        )
    if s.shared_intermediate:
        ops += dense_mlp(c, tokens, s.shared_intermediate, p, source, count, prefix="shared_")
    return ops


def mlp_block(c: ModelConfig, s: Shard, tokens, p: Plan, source: str) -> list[Op]:
    if not c.is_moe:
        return dense_mlp(c, tokens, s.intermediate, p, source, s.layers)
    ops = moe_mlp(c, s, tokens, p, source)
    if s.dense_layers:  # DeepSeek's first layers keep a dense MLP
        ops += dense_mlp(c, tokens, s.intermediate, p, source, s.dense_layers, prefix="dense_")
    return ops


def tp_all_reduce(name: str, tokens, c: ModelConfig, p: Plan, count: int, source: str) -> list[Op]:
    """Tensor parallelism sums partial outputs after o_proj and after down_proj."""
    if p.tp == 1:
        return []
    return [O.collective(name, tokens * c.hidden_size, p.tp, ab=p.ab, count=count, inputs=(source,))]


def layer_parts(c: ModelConfig, p: Plan) -> list[tuple[str, ModelConfig, Plan]]:
    """The model's kinds of layer, each as a uniform model of its layers on one device and
    the plan it runs under, with its label ("" when every layer is alike). Under pipeline
    parallelism a group keeps its share of a stage's layers, ceil(n x ceil(L / pp) / L);
    a dense group of a MoE model runs without expert parallelism."""
    if not c.layer_groups:
        return [("", c, p)]
    shard(c, p)  # the whole model's splits, checked once
    per_stage = math.ceil(c.num_layers / p.pp)
    parts = []
    for g in c.layer_groups:
        part = replace(group_of(c, g), num_layers=math.ceil(g.count * per_stage / c.num_layers))
        plan = replace(p, pp=1, ep=p.ep if part.is_moe else 1)
        parts.append((g.label, part, plan))
    return parts


def labelled(ops: list[Op], label: str) -> list[Op]:
    """A group's ops named ``label/name`` (their inputs too; ``x``, the layer input, stays)."""
    name = lambda n: n if n == "x" else f"{label}/{n}"  # noqa: E731
    return [O.replaced(op, name=name(op.name), inputs=tuple(map(name, op.inputs))) for op in ops]


def layer_ops(c: ModelConfig, batch: Number, q_len: Number, kv_len: Number, p: Plan, prefill: bool = True) -> list[Op]:
    """The decoder layers on one device, ``count`` = its layers there; a model whose layers
    differ gives each kind its ops (fused as a pass of its own), named ``label/op``."""
    if not c.layer_groups:
        return uniform_layer_ops(c, batch, q_len, kv_len, p, prefill)
    ops = []
    for label, part, plan in layer_parts(c, p):
        group = uniform_layer_ops(part, batch, q_len, kv_len, plan, prefill)
        ops += labelled(fuse(group, p.fusion) if p.fusion else group, label)
    return ops


def uniform_layer_ops(
    c: ModelConfig, batch: Number, q_len: Number, kv_len: Number, p: Plan, prefill: bool = True
) -> list[Op]:
    """One decoder layer on one device, ``count`` = its layers there."""
    s = shard(c, p)
    tokens, h, L = batch * q_len, c.hidden_size, s.layers
    vec = dict(ab=p.ab, count=L, dtype=p.vector_dtype)
    ops = [O.norm("attn_norm", tokens, h, wb=p.head_bytes, inputs=("x",), kind=c.norm, **vec)]
    build = latent_attention if c.is_mla else standard_attention
    ops += build(c, s, batch, q_len, kv_len, p, prefill)
    ops += tp_all_reduce("attn_allreduce", tokens, c, p, L, "o_proj")
    attn_out = post_norm(ops, "post_attn_norm", "o_proj", c, tokens, p, L)
    ops.append(O.residual_add("attn_add", tokens, h, inputs=("x", attn_out), **vec))
    mlp_source = "attn_norm"
    if c.mlp_norm_in_parallel:  # its own norm of the layer's input, beside attention's
        ops.append(O.norm("mlp_norm", tokens, h, wb=p.head_bytes, inputs=("x",), kind=c.norm, **vec))
        mlp_source = "mlp_norm"
    elif not c.parallel_attn:
        ops.append(O.norm("mlp_norm", tokens, h, wb=p.head_bytes, inputs=("attn_add",), kind=c.norm, **vec))
        mlp_source = "mlp_norm"
    mlp = mlp_block(c, s, tokens, p, mlp_source)
    ops += mlp
    ops += tp_all_reduce("mlp_allreduce", tokens, c, p, L, "down_proj")
    branch = tuple(op.name for op in mlp if op.name.endswith("down_proj"))
    if c.post_norms:  # Gemma 2/3: one norm of the MLP's whole output (its branches summed)
        branch = (post_norm(ops, "post_mlp_norm", branch[0], c, tokens, p, L),)
    ops.append(O.residual_add("mlp_add", tokens, h, inputs=("attn_add", *branch), **vec))
    return frames_held(ops, c, p, mlp[-1].name)


def frames_held(ops: list[Op], c: ModelConfig, p: Plan, mlp_last: str) -> list[Op]:
    """What transformers' Python frames keep past a tensor's last reader (modeling_llama.py,
    ``LlamaModel.forward``, ``LlamaDecoderLayer.forward``, ``LlamaAttention.forward``,
    huggingface/transformers@00c4411): the model's loop holds a layer's input until the layer
    returns (``x`` to ``mlp_add``); the attention's frame, its normed input and the rotated
    query (``query_states``) until ``o_proj`` returns; the layer's, the MLP's normed input
    until the MLP returns and, under eager, the attention's probabilities (returned beside
    its output, bound to ``_``) until the layer returns. Measured: a prefill's CPU allocator
    peak under transformers (tests/test_memory_measured.py). Engines, and layers whose
    attention and MLP read one input in parallel, are walked by readers alone."""
    if p.attention not in TRANSFORMERS_ATTENTION or c.parallel_attn or c.mlp_norm_in_parallel:
        return ops
    names = ["x", *(op.name for op in ops)]
    query = "rope" if "rope" in names else "q_proj"
    # eager returns its probabilities, which the layer keeps (``hidden_states, _ = self_attn``)
    kept = [op.inputs[0] for op in ops if op.name == "sv_matmul"] if p.transformers_eager else []
    holds = {"mlp_add": ("x", *kept), "o_proj": ("attn_norm", query), mlp_last: ("mlp_norm",)}
    return [
        O.replaced(op, inputs=(*op.inputs, *(h for h in holds[op.name] if h in names and h not in op.inputs)))
        if op.name in holds
        else op
        for op in ops
    ]


def post_norm(ops: list[Op], name: str, source: str, c: ModelConfig, tokens, p: Plan, count: int) -> str:
    """Gemma 2/3's norm of a branch's output before the residual add (appended to ``ops``);
    the name of what the add reads."""
    if not c.post_norms:
        return source
    vec = dict(ab=p.ab, count=count, dtype=p.vector_dtype)
    ops.append(O.norm(name, tokens, c.hidden_size, wb=p.head_bytes, inputs=(source,), kind=c.norm, **vec))
    return name


EMBED_OPS = ("embed", "embed_allreduce")  # the head ops that run before the layers


def head_ops(c: ModelConfig, batch: Number, q_len: Number, p: Plan, logit_rows: Number | None = None) -> list[Op]:
    """embed (before the layers, ``EMBED_OPS``), then final_norm and lm_head on
    ``logit_rows`` positions (default ``batch``: the last position of each sequence, as in
    prefill; decode computes every new position, so verifying k draft tokens computes
    batch x (k+1) logits).

    Under tensor parallelism the embedding and lm_head are split along the vocabulary
    (Megatron-LM's VocabParallelEmbedding): the partial lookups are summed by an all-reduce,
    and the vocabulary slices of the logits are gathered."""
    tokens = batch * q_len
    logit_rows = batch + 0 * q_len if logit_rows is None else logit_rows
    h, hb = c.hidden_size, p.head_bytes
    vocab = math.ceil(c.vocab_size / p.tp)
    before = [O.embed(tokens, h, wb=hb, ab=p.ab, dtype=p.vector_dtype)]
    after = [
        O.norm("final_norm", tokens, h, ab=p.ab, wb=hb, count=1, dtype=p.vector_dtype, inputs=("x",), kind=c.norm),
        O.linear(
            "lm_head",
            logit_rows,
            h,
            vocab,
            q=p.unquantised,
            ab=p.ab,
            count=1,
            dtype=p.head_matrix_dtype,
            inputs=("final_norm",),
        ),
    ]
    if c.logit_softcap:  # cap * tanh(logits / cap): a divide, a tanh, a multiply per logit
        el = dict(in_bytes=p.ab, out_bytes=p.ab, flops=3, count=1, dtype=p.vector_dtype, inputs=("lm_head",))
        after.append(O.score_pass("logit_softcap", logit_rows, 1, 1, vocab, **el))
    if p.tp > 1:
        before.append(O.collective("embed_allreduce", tokens * h, p.tp, ab=p.ab, count=1, inputs=("embed",)))
        after.append(
            O.collective(
                "logits_gather",
                logit_rows * vocab * p.tp,
                p.tp,
                ab=p.ab,
                count=1,
                kind="all_gather",
                inputs=("lm_head",),
            )
        )
    if p.pp > 1:  # activations cross each pipeline boundary once per micro-batch
        after.append(O.collective("pp_send", tokens * h, p.pp, ab=p.ab, count=p.pp - 1, kind="send"))
    return before + after


def stage_ops(c: ModelConfig, stage: str, batch: Number, length: Number, p: Plan, q_len: Number = 1) -> list[Op]:
    """All ops of one forward pass on one device, for one micro-batch.

    prefill: ``length`` prompt tokens per sequence, attending causally to themselves.
    decode: ``q_len`` new tokens per sequence (1, or k+1 when verifying k draft tokens)
    with ``length`` tokens already cached.
    """
    micro = batch / p.micro_batches if p.micro_batches > 1 else batch
    if stage == "prefill":
        q, kv, prefill, rows = length, length, True, micro + 0 * length
    elif stage == "decode":
        q, kv, prefill = q_len + 0 * length, length + q_len, False
        rows = micro * q
    else:
        raise ValueError(f"stage must be 'prefill' or 'decode', got {stage!r}")
    heads = head_ops(c, micro, q, p, rows)
    before = [op for op in heads if op.name in EMBED_OPS]
    after = [op for op in heads if op.name not in EMBED_OPS]
    ops = [*before, *layer_ops(c, micro, q, kv, p, prefill), *after]
    return fuse(ops, p.fusion) if p.fusion else ops


def pipeline_factors(p: Plan, stage: str) -> tuple[float, float]:
    """(time, amount) multipliers from one micro-batch on one stage to the whole batch;
    every quantity is incurred m times. A prefill pass of m micro-batches over pp stages
    fills and drains the pipeline: (m + pp - 1) stage-steps (GPipe, Huang et al., 2019).
    Decode runs round after round with the micro-batches staggered (vLLM's virtual
    engines): in steady state a round takes max(m, pp) stage-steps, idle only where there
    are fewer micro-batches than stages."""
    m, pp = p.micro_batches, p.pp
    if stage == "prefill":
        return float(m + pp - 1), float(m)
    if stage == "decode":
        return float(max(m, pp)), float(m)
    raise ValueError(f"stage must be 'prefill' or 'decode', got {stage!r}")


LAST_STAGE_OPS = ("final_norm", "lm_head", "logits_gather", "pp_send")  # the last stage's ends (and the sends)


def pipeline_round(names: Sequence[str], per_op: np.ndarray, p: Plan) -> np.ndarray:
    """A decode round's seconds from one micro-batch's per-op seconds on one stage (``per_op``,
    count applied, ops along axis 0): each stage runs its layers, the first the embedding,
    the last the final norm, lm_head and the sends between stages. A micro-batch crosses
    every stage in turn, pp x layers + the ends; with m micro-batches staggered the round
    also lasts m turns of the heaviest stage: max(pp L + E, m (L + heaviest end)), both
    ends in the stage when pp = 1 (then m (L + E), as before). With fewer micro-batches
    than stages some stages idle: the sum of the stages, not pp x the heaviest (issue 57
    item 5)."""
    first = np.array([n in EMBED_OPS for n in names])
    last = np.array([n in LAST_STAGE_OPS for n in names])
    pick = lambda mask: np.sum(per_op[mask], axis=0)  # noqa: E731
    layers, head, tail = pick(~(first | last)), pick(first), pick(last)
    heaviest = layers + (head + tail if p.pp == 1 else np.maximum(head, tail))
    return np.maximum(p.pp * layers + head + tail, p.micro_batches * heaviest)


def bubble_fraction(p: Plan, stage: str) -> float:
    """Share of a stage's stage-steps spent idle: 1 - m / (stage-steps per pass)."""
    return 1.0 - p.micro_batches / pipeline_factors(p, stage)[0]
