"""A decoder-only transformer in plain PyTorch, built from any dense ``ModelConfig``.

Random weights from a fixed seed (no downloads), a pre-allocated static KV cache, and two
steps: ``prefill`` (the whole prompt, causal) and ``decode`` (one token per sequence).
Attention runs through ``scaled_dot_product_attention`` with grouped-query sharing, which
is what the engine's ``flash`` attention models: the score matrix never goes through memory.

The op sequence mirrors ``ridgeline.engine.layers.layer_ops`` one to one (attn_norm, q/k/v_proj,
rope, attention, o_proj, attn_add, mlp_norm, gate/up_proj, mlp_act, down_proj, mlp_add;
embed before, final_norm and lm_head on the last position after), so a measured step and
a predicted one count the same work.

torch is imported here: import this module only from code that needs a real forward pass.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from kernels.bench.bench import apply_rope, rope_tables
from ridgeline.engine.layers import Plan
from ridgeline.engine.memory import kv_bytes_per_token, weight_bytes
from ridgeline.engine.model import ModelConfig
from ridgeline.errors import RidgelineError

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
NORM_EPS = 1e-5
# kernels.e2e.decode_profile sets this to a callable: engine op name -> context manager around
# that op's work (a torch.profiler range, or a host timer); None costs one check per op
LABELLER = None
_UNLABELLED = contextlib.nullcontext()


def op(name: str):
    """The context of one engine op: ``LABELLER(name)``, or nothing."""
    return LABELLER(name) if LABELLER is not None else _UNLABELLED


def torch_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise RidgelineError(f"unknown dtype '{name}' for a real forward pass; use one of: {', '.join(DTYPES)}")
    return DTYPES[name]


def check_supported(config: ModelConfig) -> None:
    """Mixture-of-experts, latent attention and layers that differ have no real
    implementation here (every layer here is the first's)."""
    if config.is_moe or config.is_mla or config.layer_groups:
        mla = "multi-head latent attention" if config.is_mla else "layers that differ"
        kind = "mixture-of-experts" if config.is_moe else mla
        raise RidgelineError(
            f"{config.name}: {kind} is not implemented by the e2e decoder; "
            "pick a dense model (e.g. llama-2-7b, qwen2-0.5b)"
        )
    activation(config.hidden_act)


def activation(name: str):
    """The element-wise MLP activation of a Hugging Face ``hidden_act``."""
    table = {
        "silu": F.silu,
        "swish": F.silu,
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
    }
    if name not in table:
        raise RidgelineError(f"activation '{name}' is not implemented by the e2e decoder; known: {', '.join(table)}")
    return table[name]


# --- memory check --------------------------------------------------------------------


def footprint(c: ModelConfig, batch: int, max_len: int, size: int) -> tuple[float, float]:
    """(weights, static KV cache) in bytes of the decoder built below, by the engine's
    formulas (``ridgeline.engine.memory``: biases of LayerNorms are left out, < 0.1%): every tensor
    ``size`` bytes per element; the cache holds ``max_len`` tokens of K and V per sequence."""
    plan = Plan(size, size, size, "fp32", "fp32")
    return weight_bytes(c, plan), batch * max_len * kv_bytes_per_token(c, plan)


def available_memory(device: str) -> float:
    """Bytes the process can still allocate: free GPU memory, or the kernel's MemAvailable."""
    if device.startswith("cuda"):
        return float(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def check_fits(
    config: ModelConfig,
    batch: int,
    max_len: int,
    dtype: str,
    device: str,
    available: float | None = None,
    fraction: float = 0.7,
) -> None:
    """Refuse a model whose weights + KV cache exceed ``fraction`` of available memory."""
    size = torch.empty((), dtype=torch_dtype(dtype)).element_size()
    need = sum(footprint(config, batch, max_len, size))
    have = fraction * (available_memory(device) if available is None else available)
    if need <= have:
        return
    one, two = (sum(footprint(replace(config, num_layers=n), batch, max_len, size)) for n in (1, 2))
    per_layer = two - one
    fixed = need - config.num_layers * per_layer
    layers = int(max((have - fixed) // per_layer, 0))
    hint = (
        f"; try --layers {layers}" if layers >= 1 else "; even one layer does not fit: use a smaller --batch or --dtype"
    )
    raise RidgelineError(
        f"{config.name} ({config.num_layers} layers, batch {batch}, "
        f"{max_len} tokens, {dtype}) needs {need / 2**30:.1f} GiB for weights "
        f"and KV cache, more than {fraction:.0%} of the "
        f"{have / fraction / 2**30:.1f}"
        f" GiB available on {device}{hint}"
    )


# --- the model -----------------------------------------------------------------------


class Norm(nn.Module):
    def __init__(self, kind: str, width: int, dtype: torch.dtype):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(width, dtype=dtype), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(width, dtype=dtype), requires_grad=False) if kind == "layernorm" else None

    def forward(self, x: Tensor) -> Tensor:
        if self.kind.startswith("layernorm"):  # layernorm (with bias) | layernorm_nobias
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, NORM_EPS)
        return F.rms_norm(x, (x.shape[-1],), self.weight, NORM_EPS)


class Layer(nn.Module):
    def __init__(self, c: ModelConfig, dtype: torch.dtype):
        super().__init__()
        h, q, kv, i = (c.hidden_size, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim, c.intermediate_size)

        def linear(n_in: int, n_out: int) -> nn.Linear:
            return nn.Linear(n_in, n_out, bias=False, dtype=dtype).requires_grad_(False)

        self.c = c
        self.attn_norm = Norm(c.norm, h, dtype)
        self.q_proj, self.k_proj, self.v_proj = linear(h, q), linear(h, kv), linear(h, kv)
        self.o_proj = linear(q, h)
        # the MLP's own norm: after attention's sum, or of the layer's input beside attention's
        # (GPT-NeoX's use_parallel_residual, Falcon's new decoder); GPT-J's reads attention's
        self.mlp_norm = Norm(c.norm, h, dtype) if c.mlp_norm_in_parallel or not c.parallel_attn else None
        self.gate_proj = linear(h, i) if c.gated_mlp else None
        self.up_proj, self.down_proj = linear(h, i), linear(i, h)
        self.act = activation(c.hidden_act)

    def attention(self, held: list[Tensor], k_cache: Tensor, v_cache: Tensor, pos: int, cos, sin) -> Tensor:
        """The normed input [B, S, h] in ``held`` (taken out unless the MLP reads it too) at
        positions pos..pos+S-1; caches: [B, Hkv, max_len, D]."""
        c = self.c
        x = held.pop() if self.mlp_norm is not None else held[0]
        B, S, _ = x.shape
        with op("q_proj"):
            q = self.q_proj(x).view(B, S, c.num_heads, c.head_dim).transpose(1, 2)  # [B, H, S, D]
        with op("k_proj"):
            k = self.k_proj(x).view(B, S, c.num_kv_heads, c.head_dim).transpose(1, 2)  # [B, Hkv, S, D]
        with op("v_proj"):
            v = self.v_proj(x).view(B, S, c.num_kv_heads, c.head_dim).transpose(1, 2)
        del x
        if c.rotary:
            with op("rope"):  # q's input dies before k turns: one rotation's temporaries at a time
                q = apply_rope(q, cos, sin)
                k = apply_rope(k, cos, sin)
        with op("attention"):  # the engine's attention op writes the new K/V too
            out = self.sdpa(q, k, v, k_cache, v_cache, pos)
        with op("o_proj"):
            return self.o_proj(out.reshape(B, S, c.num_heads * c.head_dim))

    def sdpa(self, q: Tensor, k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, pos: int) -> Tensor:
        """Store the new K/V, attend over the cache: [B, H, S, D] -> [B, S, H, D]."""
        c = self.c
        B, _, S, _ = q.shape
        k_cache[:, :, pos : pos + S] = k
        v_cache[:, :, pos : pos + S] = v
        end = pos + S
        start = max(0, pos + 1 - c.sliding_window) if c.sliding_window else 0  # first query's view
        keys, values = k_cache[:, :, start:end], v_cache[:, :, start:end]  # [B, Hkv, T, D]
        group = c.num_heads // c.num_kv_heads
        if S == 1 and group > 1:
            # decode: every query sees every cached key, so the query heads sharing a KV
            # head can ride in the query-length axis: [B, Hkv, group, D], no GQA expansion
            # (8-20x faster than enable_gqa in the CPU kernel; same numbers)
            out = F.scaled_dot_product_attention(q.reshape(B, c.num_kv_heads, group, c.head_dim), keys, values)
        else:
            mask = attention_mask(pos, S, start, end, c.sliding_window, q.device)
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, is_causal=mask is None and S > 1, enable_gqa=group > 1
            )
        return out.reshape(B, c.num_heads, S, c.head_dim).transpose(1, 2)  # [B, S, H, D]

    def mlp(self, held: list[Tensor]) -> Tensor:
        """The MLP over the one tensor in ``held`` (taken out, so that it dies after its last
        reader); the activation multiplies into its own output, as one fused op leaves it."""
        x = held.pop()
        gate = None
        if self.gate_proj is not None:
            with op("gate_proj"):
                gate = self.gate_proj(x)
        with op("up_proj"):
            up = self.up_proj(x)
        del x
        with op("mlp_act"):
            hidden = self.act(up if gate is None else gate)
            if gate is not None:
                del gate
                hidden.mul_(up)
            del up
        with op("down_proj"):
            return self.down_proj(hidden)

    def forward(self, held: list[Tensor], k_cache: Tensor, v_cache: Tensor, pos: int, cos: Tensor, sin: Tensor):
        """One layer over the input in ``held``, taken out so that no frame keeps a tensor past
        its last reader: the liveness the engine's memory model counts (an input, a normed
        copy or a partial sum held by a caller's name would add its size to the peak)."""
        x = held.pop()
        with op("attn_norm"):
            held.append(self.attn_norm(x))
        attended = self.attention(held, k_cache, v_cache, pos, cos, sin)
        with op("attn_add"):
            summed = x + attended
        del attended
        source = x if self.c.mlp_norm_in_parallel else summed  # the MLP's norm reads it
        del x
        if self.mlp_norm is not None:  # else the MLP reads the normed input still in ``held``
            with op("mlp_norm"):
                held.append(self.mlp_norm(source))
        del source
        out = self.mlp(held)
        with op("mlp_add"):
            return summed + out


def attention_mask(pos: int, S: int, start: int, end: int, window: int | None, device) -> Tensor | None:
    """None where SDPA's own causal flag is right (prefill from 0, or a single query);
    otherwise a boolean [S, T] mask: query at pos+i sees keys at start+j <= pos+i and,
    with a sliding window, within ``window`` of it."""
    if S == 1 or (pos == 0 and not (window and end > window)):
        return None
    q_at = torch.arange(pos, end, device=device)[:, None]
    k_at = torch.arange(start, end, device=device)[None, :]
    mask = k_at <= q_at
    if window:
        mask &= k_at > q_at - window
    return mask


class Decoder(nn.Module):
    """The whole model and its static KV cache."""

    def __init__(
        self,
        config: ModelConfig,
        dtype: str = "fp32",
        device: str = "cpu",
        max_batch: int = 1,
        max_len: int = 2048,
        seed: int = 0,
    ):
        super().__init__()
        check_supported(config)
        c, tdtype = config, torch_dtype(dtype)
        self.config, self.max_batch, self.max_len = c, max_batch, max_len
        with torch.device("meta"):  # shapes only: no throw-away default init of big weights
            self.embed = nn.Embedding(c.vocab_size, c.hidden_size, dtype=tdtype).requires_grad_(False)
            self.layers = nn.ModuleList(Layer(c, tdtype) for _ in range(c.num_layers))
            self.final_norm = Norm(c.norm, c.hidden_size, tdtype)
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False, dtype=tdtype).requires_grad_(False)
            shape = (c.num_layers, max_batch, c.num_kv_heads, max_len, c.head_dim)
            self.register_buffer("k_cache", torch.empty(shape, dtype=tdtype), persistent=False)
            self.register_buffer("v_cache", torch.empty(shape, dtype=tdtype), persistent=False)
            self.register_buffer("cos", torch.empty(max_len, c.head_dim, dtype=tdtype), persistent=False)
            self.register_buffer("sin", torch.empty(max_len, c.head_dim, dtype=tdtype), persistent=False)
        self.to_empty(device=device)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.embed.weight
        init_weights(self, seed)

    def reserve(self, batch: int, length: int) -> None:
        """A fresh, empty KV cache of exactly ``batch`` x ``length`` tokens (the old one
        freed first), so a case holds on the device what the engine's memory model counts
        for it: weights + its own cache + activations. ``length`` <= the rotary tables'."""
        if length > self.cos.shape[0]:
            raise RidgelineError(
                f"a cache of {length} tokens exceeds the {self.cos.shape[0]} this decoder was built for"
            )
        c, dtype, device = self.config, self.k_cache.dtype, self.k_cache.device
        self.k_cache = self.v_cache = None  # free before allocating: no two caches at once
        if device.type == "cuda":
            torch.cuda.empty_cache()
        shape = (c.num_layers, batch, c.num_kv_heads, length, c.head_dim)
        self.k_cache = torch.zeros(shape, dtype=dtype, device=device)
        self.v_cache = torch.zeros(shape, dtype=dtype, device=device)
        self.max_batch, self.max_len = batch, length

    def forward(self, tokens: Tensor, pos: int, all_logits: bool = False) -> Tensor:
        """tokens: [B, S] at positions pos..pos+S-1 -> logits [B, V] of the last position
        ([B, S, V] with ``all_logits``). Writes K and V of the S positions to the cache."""
        B, S = tokens.shape
        if B > self.max_batch or pos + S > self.max_len:
            raise RidgelineError(f"batch {B} x {pos + S} tokens exceeds the cache ({self.max_batch} x {self.max_len})")
        cos, sin = self.cos[pos : pos + S], self.sin[pos : pos + S]
        with op("embed"):
            x = self.embed(tokens)
        held = []
        for i, layer in enumerate(self.layers):
            held.append(x)
            del x
            x = layer(held, self.k_cache[i, :B], self.v_cache[i, :B], pos, cos, sin)
        x = x if all_logits else x[:, -1]
        with op("final_norm"):
            x = self.final_norm(x)
        with op("lm_head"):
            return self.lm_head(x)

    def prefill(self, tokens: Tensor) -> Tensor:
        """The whole prompt [B, P] from position 0; the greedy next token [B]."""
        return self(tokens, 0).argmax(-1)

    def decode(self, token: Tensor, pos: int) -> Tensor:
        """One token per sequence [B] at position ``pos``; the greedy next token [B]."""
        logits = self(token[:, None], pos)
        with op("argmax"):  # greedy sampling: not an engine op
            return logits.argmax(-1)


@torch.no_grad()
def init_weights(model: Decoder, seed: int) -> None:
    """Normal weights with std 1/sqrt(fan_in) (activations stay O(1), no overflow in
    fp16), embeddings std 1, norms at one, an empty (zero) cache: deterministic for a
    seed on a device kind. Drawn on the model's device (a 7B model's weights in seconds on
    a GPU, not a minute of CPU draws); timings do not depend on the values, only on their
    not being zeros."""
    device = model.k_cache.device
    generator = torch.Generator(device=device).manual_seed(seed)
    for name, param in model.named_parameters():  # a tied lm_head appears once, as embed
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name.endswith("norm.bias"):
            param.zero_()
        else:
            std = 1.0 if name.startswith("embed") else 1.0 / math.sqrt(param.shape[-1])
            for row in range(0, param.shape[0], 4096):  # in slices: no full fp32 copy at once
                chunk = torch.randn(param[row : row + 4096].shape, generator=generator, device=device) * std
                param[row : row + 4096].copy_(chunk)
    model.k_cache.zero_()
    model.v_cache.zero_()
    cos, sin = rope_tables(model.config.head_dim, model.max_len)
    model.cos.copy_(cos)
    model.sin.copy_(sin)


# --- graph-captured decode (CUDA) -----------------------------------------------------


class DecodeGraphs:
    """The decode step captured in CUDA graphs over the static KV cache, as serving stacks
    run decode (gpt-fast, vLLM): one replay launches every kernel of a step, so the host's
    per-op dispatch is gone and only the device's time and its launch gaps remain.

    One graph per cached length ``first .. first + steps - 1``, captured ahead: each replays
    exactly the kernels that eager decode runs at that length (same shapes, same bytes; the
    cache is read up to the current length, not to its end), so graph and eager differ only
    in host and launch cost. The token is a static buffer: each graph reads it, and writes
    the greedy next token back into it. The graphs share one memory pool and must be replayed
    in order, as a generation does.
    """

    def __init__(self, model: Decoder, batch: int, first: int, steps: int):
        device = model.k_cache.device
        if device.type != "cuda":
            raise RidgelineError(
                "graph execution needs a CUDA device (a CPU runs no CUDA graphs); use --execution eager or compiled"
            )
        self.first, self.token = first, torch.zeros(batch, dtype=torch.long, device=device)
        pool = torch.cuda.graph_pool_handle()
        self.graphs = []
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up at every length: cuBLAS/cuDNN plans, caches
            for pos in range(first, first + steps):
                model.decode(self.token, pos)
        torch.cuda.current_stream().wait_stream(side)
        for pos in range(first, first + steps):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.token.copy_(model.decode(self.token, pos))
            self.graphs.append(graph)
        torch.cuda.synchronize()

    def __call__(self, token: Tensor, pos: int) -> Tensor:
        """One decode step at cached length ``pos`` (the graphs' order); the next token [B]."""
        if token.data_ptr() != self.token.data_ptr():
            self.token.copy_(token)
        self.graphs[pos - self.first].replay()
        return self.token
