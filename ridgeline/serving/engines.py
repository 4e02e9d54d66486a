"""The scheduler a serving engine runs (``ServingEngine``, hardware/engines): its policy, its
chunking, its limits on this GPU and in this context (server, offline API, bench tool), and
the KV cache its memory rule leaves. Settings a user gives win."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any

from typing_extensions import Doc

from ridgeline.engine.deployment import Deployment
from ridgeline.engine.memory import ONE_BYTE, kv_bytes_per_token, weight_bytes
from ridgeline.engine.serving_engine import ServingEngine, bench_requests, bench_sizing
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import kv_capacity_bytes

SCHEDULER_DEFAULTS = {"max_batch": 256, "token_budget": 2048}  # Scheduler's own, for an engine that states none


def engine_scheduler(
    d: Deployment,
    engine: ServingEngine,
    given: Mapping[str, Any] | None = None,
    context: str = "server",
    lengths: tuple[int, int] | None = None,
) -> Scheduler:
    """The Scheduler ``engine`` runs ``d`` with: its policy, chunking and host overlap; its
    max_batch and token_budget on ``d``'s device in ``context`` (TensorRT-LLM's bench tool
    sizes them from the data set's ``lengths``, prompt and output); its KV blocks where its
    memory rule is not vLLM's (``memory_utilization`` of the whole memory). ``given``
    Scheduler fields (None: not given) win."""
    given = {k: v for k, v in (given or {}).items() if v is not None}
    bench = context == "bench" and engine.scheduler.get("bench") == "trtllm-bench"
    fields: dict[str, Any] = {
        "policy": engine.policy,
        "chunked_prefill": bool(engine.scheduler.get("chunked_prefill", True)),
        "host_overlap": bool((engine.host or {}).get("overlap", False)),
        # the engine's prefix caching (trtllm-bench turns it off); a fixed --prefix-hit replaces it
        "prefix_cache": bool(engine.scheduler.get("prefix_cache")) and not bench and not given.get("prefix_hit"),
        **SCHEDULER_DEFAULTS,
        **(engine.limits(d.device, context) or {}),
    }
    if bench and lengths:
        fields["max_batch"], fields["token_budget"] = trtllm_bench_limits(d, *lengths)
    budget = int(given.get("token_budget", fields["token_budget"]))
    blocks = kv_blocks(d, engine, budget) if "kv_blocks" not in given else None
    if blocks is not None:
        fields["kv_blocks"] = blocks
    if engine.scheduler.get("max_running") == "kv_tokens_half":
        fields["max_batch"] = sglang_max_running(d, (blocks or 0) * d.plan.kv_block)
    if lengths and not fields["chunked_prefill"] and lengths[0] > budget:
        fields["chunked_prefill"] = True  # a prompt longer than a step's tokens cannot run whole
    s = Scheduler(**{**fields, **given})
    return replace(s, basis=scheduler_basis(d, engine, context, s, given))


def scheduler_basis(d: Deployment, engine: ServingEngine, context: str, s: Scheduler, given: Mapping) -> str:
    """Which defaults ``s`` took, in words: 'vLLM (V1 engine) server defaults for h200 (141
    GiB: at least 70 GiB and not an A100): 1024 sequences, 8192 batched tokens, prefix
    caching on', then the fields the user gave."""
    whose = engine.limits_basis(d.device, context) or f"{engine.scheduler.get('of', engine.full_name)} defaults"
    if context == "bench" and engine.scheduler.get("bench") == "trtllm-bench":
        whose = f"{engine.full_name} bench defaults (trtllm-bench's sizing from the data set's lengths)"
    caching = "on" if s.prefix_cache else "off"
    mine = [k for k in ("max_batch", "token_budget", "prefix_cache") if k in given] + ["prefix_hit"] * bool(
        s.prefix_hit
    )
    chosen = f"; given: {', '.join(mine)}" if mine else ""
    return f"{whose}: {s.max_batch} sequences, {s.token_budget} batched tokens, prefix caching {caching}{chosen}"


# fmt: off
def options_scheduler(
    *,
    max_batch: Annotated[int | None, Doc("Sequences per step (default: the engine's on this GPU; pytorch: 256).")] = None,
    token_budget: Annotated[int | None, Doc("Tokens per step, prefill chunks + decodes (default: the engine's on this GPU; pytorch: 2048).")] = None,
    chunked_prefill: bool | None = None,
    prefix_hit: Annotated[float, Doc("Fraction of each prompt found in the prefix cache.")] = 0.0,
    prefix_cache: bool | None = None,
    kv_blocks: Annotated[int | None, Doc("Paged KV blocks (default: what memory leaves).")] = None,
    admit_margin: Annotated[float, Doc("New prompts wait below this fraction of free KV blocks (transformers: 0.15).")] = 0.0,
    step_overhead: Annotated[float, Doc("Host seconds per step beyond the forward (measured: simulate-check --fit-overhead).")] = 0.0,
    request_overhead: Annotated[float, Doc("Host seconds per request in a step, on top of --step-overhead.")] = 0.0,
    host_overlap: Annotated[bool, Doc("The host terms overlap the device's work (a GPU run eager): a step takes the longer of the forward and the host terms, not their sum.")] = False,
    batch_attention: Annotated[str, Doc("varlen: each sequence attends to its own keys (vLLM); masked: one attention over the whole step under a block-diagonal mask; gather: masked as transformers' sdpa path runs it (cache written and read back by index, GQA heads repeated).")] = "varlen",
    **_: Any,
) -> dict[str, Any]:
    """The Scheduler fields ``simulate``'s options set (host terms in seconds; None: the
    engine's, :func:`engine_scheduler`); the options it does not take are
    ``ridgeline.api.simulate_options``'."""
    policy = {"max_batch": max_batch, "token_budget": token_budget, "chunked_prefill": chunked_prefill}
    policy |= {"prefix_hit": prefix_hit, "prefix_cache": prefix_cache, "kv_blocks": kv_blocks}
    policy |= {"admit_margin": admit_margin, "host_overlap": host_overlap or None, "batch_attention": batch_attention}
    return {**policy, "step_overhead_s": step_overhead, "request_overhead_s": request_overhead}
# fmt: on


def trtllm_bench_limits(d: Deployment, prompt: int, output: int) -> tuple[int, int]:
    """trtllm-bench's max_batch_size and max_num_tokens for ``d`` (``bench_sizing``): the
    parameters at one byte each for FP8 weights, else two; the KV bytes a token adds over
    every layer and at least one K/V head per GPU, at one byte for an FP8 cache, else two."""
    c, p = d.model, d.plan
    params = weight_bytes(c, ONE_BYTE)
    per_weight = 1.0 if d.settings.w_dtype.startswith("fp8") else 2.0
    per_kv = 1.0 if d.settings.kv_dtype.startswith("fp8") else 2.0
    kv = 2 * c.num_layers * max(p.tp, c.num_kv_heads) * c.head_dim * per_kv
    requests = bench_requests(d.device.memory_capacity, p.tp * p.pp, params, per_weight, kv, prompt + output)
    return bench_sizing(requests, prompt, output, p.pp)


def kv_blocks(d: Deployment, engine: ServingEngine, token_budget: int) -> int | None:
    """KV blocks the engine's memory rule leaves on one device (None: vLLM's rule, the
    simulator's own): TensorRT-LLM's cache takes ``free_fraction`` of what the weights,
    the activations and the runtime leave; SGLang's static pool, the memory less its
    reserve (``ServingEngine.reserve_bytes``), holds the weights and the cache."""
    rule = engine.scheduler.get("memory", "utilization")
    if rule == "utilization":
        return None
    p = d.plan
    if rule == "free_fraction":
        free = kv_capacity_bytes(d.model, d.device, replace(p, memory_utilization=1.0), token_budget)
        room = float(engine.scheduler["free_fraction"]) * free
    else:
        pool = d.device.memory_capacity - engine.reserve_bytes(d.device, p.tp * p.pp)
        room = pool - weight_bytes(d.model, p)
    return max(int(room // (p.kv_block * kv_bytes_per_token(d.model, p))), 0)


def sglang_max_running(d: Deployment, kv_tokens: int) -> int:
    """SGLang's max_running_requests: min(KV tokens // 2, the request pool), the pool
    min(max(KV tokens / context length x 512, 2048), 4096)."""
    context = d.model.max_position_embeddings or 4096  # a config that states none: 4096 assumed
    pool = min(max(int(kv_tokens / context * 512), 2048), 4096)
    return max(min(kv_tokens // 2, pool), 1)
