"""A serving engine's description (TensorRT-LLM, vLLM, SGLang, gpt-fast, PyTorch): what it
fuses, which attention it runs, how it launches kernels, its scheduler and that scheduler's
defaults per GPU. Loaded from ``hardware/engines/*.yaml`` by ``ridgeline.io.engines``; each
fact there cites the engine's code or docs. Pure: the rules here pick among those facts for a
device, a context and a parallel layout; nothing is fitted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ridgeline.engine.device import DeviceSpec

MIB = float(1 << 20)
GIB = float(1 << 30)
CONTEXTS = ("server", "offline", "bench")  # how the engine was started: its server, its offline API, its bench tool


@dataclass(frozen=True)
class ServingEngine:
    """One engine's facts, as ridgeline uses them."""

    name: str
    full_name: str
    version: str
    settings: Mapping[str, Any]  # the Settings fields it sets when the user does not
    scheduler: Mapping[str, Any]  # policy, chunked_prefill, prefix_cache, memory, limits ...
    host: Mapping[str, Any] = field(default_factory=dict)  # overlap, note
    graphs: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def policy(self) -> str:
        return str(self.scheduler.get("policy", "vllm-v1"))

    def limits(self, device: DeviceSpec, context: str = "server") -> dict[str, int] | None:
        """max_batch and token_budget for ``device``, from the first of the context's rules
        that matches (``min_memory_gib``, a device name it ``exclude``s), or the token
        budget by the device's memory; None where the engine states none for the context."""
        rule = self.limits_rule(device, context)
        if rule is not None:
            return {"max_batch": int(rule["max_batch"]), "token_budget": int(rule["token_budget"])}
        by_memory = self.scheduler.get("token_budget_by_memory_mib")
        if by_memory:
            return {"token_budget": int(first_below(by_memory, device.memory_capacity / MIB)["tokens"])}
        return None

    def limits_rule(self, device: DeviceSpec, context: str = "server") -> Mapping[str, Any] | None:
        """The first of the context's limits rules that ``device`` matches (a context the
        engine states nothing of: its server's); None where it states no rules."""
        table = self.scheduler.get("limits") or {}
        rules = table.get(context) or table.get("server")
        return next(r for r in rules if rule_matches(r, device)) if rules else None

    def limits_basis(self, device: DeviceSpec, context: str = "server") -> str | None:
        """Why ``device`` gets the limits it gets, in words: 'vLLM (V1 engine) server defaults
        for h100-sxm (80 GiB: at least 70 GiB and not an A100)'; None without rules."""
        rule = self.limits_rule(device, context)
        if rule is None:
            return None
        table = self.scheduler["limits"]
        stated = context if table.get(context) else "server"
        gib = device.memory_capacity / GIB
        why = rule_reason(rule, table[stated], device)
        return f"{self.scheduler.get('of', self.full_name)} {stated} defaults for {device.name} ({gib:.4g} GiB: {why})"

    def reserve_bytes(self, device: DeviceSpec, gpus: int) -> float:
        """SGLang's memory held back from the static pool (weights and KV cache):
        (base + per GPU x tp x pp) GiB by the device's memory."""
        rule = first_below(self.scheduler["reserve_by_memory_mib"], device.memory_capacity / MIB)
        return (float(rule["base_gib"]) + float(rule["per_gpu_gib"]) * gpus) * GIB


def rule_matches(rule: Mapping[str, Any], device: DeviceSpec) -> bool:
    """A limits rule applies to ``device``: at least ``min_memory_gib`` of memory, and none of
    the names it ``exclude``s in the device's name (vLLM checks "a100" in the device name)."""
    if device.memory_capacity < float(rule.get("min_memory_gib", 0)) * GIB:
        return False
    names = f"{device.name} {device.full_name}".lower()
    return not any(str(x).lower() in names for x in rule.get("exclude", ()))


def rule_reason(rule: Mapping[str, Any], rules, device: DeviceSpec) -> str:
    """Why ``rule`` is the first of ``rules`` that ``device`` matches: the conditions it asks
    (the first rule), or what failed in each rule before it ('under 70 GiB', 'an A100')."""
    earlier = list(rules)[: list(rules).index(rule)]
    if not earlier:
        terms = [f"at least {rule['min_memory_gib']:g} GiB"] if "min_memory_gib" in rule else []
        terms += [f"not an {str(x).upper()}" for x in rule.get("exclude", ())]
        return " and ".join(terms) or "any device"
    return "; ".join(rule_failure(r, device) for r in earlier)


def rule_failure(rule: Mapping[str, Any], device: DeviceSpec) -> str:
    """What in ``rule`` ``device`` fails: too little memory, or a name it excludes."""
    if device.memory_capacity < float(rule.get("min_memory_gib", 0)) * GIB:
        return f"under {rule['min_memory_gib']:g} GiB"
    names = f"{device.name} {device.full_name}".lower()
    return " and ".join(f"an {str(x).upper()}" for x in rule.get("exclude", ()) if str(x).lower() in names)


def first_below(rules, memory_mib: float) -> Mapping[str, Any]:
    """The first rule whose ``below`` bound the memory is under (a rule without one: any)."""
    return next(r for r in rules if r.get("below") is None or memory_mib < float(r["below"]))


# trtllm-bench's rounding (finetune_setting, optimistic tuning): (below, multiple, least)
BATCH_ROUNDING = ((256, 32, 64), (1024, 128, 1), (None, 256, 1))
TOKEN_ROUNDING = ((4096, 256, 2048), (8192, 512, 1), (None, 1024, 1))


def rounded_up(value: float, rules) -> int:
    """``value`` up to a multiple of the first rule whose bound it is below, at least its least."""
    below, multiple, least = next(r for r in rules if r[0] is None or value < r[0])
    return int(max(least, multiple * math.ceil(value / multiple)))


def bench_sizing(requests: float, prompt: int, output: int, pp: int) -> tuple[int, int]:
    """trtllm-bench's max_batch_size and max_num_tokens for a data set of ``prompt`` and
    ``output`` tokens, from the requests the KV memory holds (tensorrt_llm/bench/build/
    tuning.py, finetune_setting, optimistic tuning): the batch is min(requests, 4096) / pp,
    the tokens min(batch x (1 + prompt / output), 32768); the batch rounds up to a multiple
    of 32 (at least 64) below 256, of 128 below 1024, else of 256; the tokens to 256 (at
    least 2048) below 4096, to 512 below 8192, else to 1024."""
    batch = min(requests, 4096) / pp
    tokens = min(batch * (1 + prompt / output), 32768)
    return rounded_up(batch, BATCH_ROUNDING), rounded_up(tokens, TOKEN_ROUNDING)


def bench_requests(
    memory_bytes: float, gpus: int, params: float, weight_bytes: float, kv_bytes_per_token: float, seq: int
) -> float:
    """trtllm-bench's estimate of the requests the KV cache holds (calc_engine_setting): 0.95
    of (memory x GPUs - parameters x bytes per weight), in GiB as it computes, over the KV
    bytes of one request of ``seq`` tokens (over every layer and K/V head, at least one K/V
    head per GPU)."""
    available = memory_bytes / GIB * gpus - params * weight_bytes / GIB
    return 0.95 * available / (kv_bytes_per_token / GIB * seq)
