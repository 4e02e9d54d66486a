"""The server's settings: batch and token limits, KV cache, host terms, how a step's
attention is priced, and which scheduler policy (:mod:`ridgeline.serving.policies`)
chooses each step's work."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ridgeline.errors import InvalidWorkloadError

BATCH_ATTENTION = ("varlen", "masked", "gather")


@dataclass(frozen=True)
class Scheduler:
    """The server's settings (vLLM's names in brackets) and the policy that schedules with them."""

    max_batch: int = 256  # sequences per step [max_num_seqs]
    token_budget: int = 2048  # tokens per step, prefill chunks + decodes [max_num_batched_tokens]
    chunked_prefill: bool = True  # split prompts to fit the budget; off: a prompt runs whole
    prefix_hit: float = 0.0  # fraction of each prompt already in the prefix cache (whole blocks)
    prefix_cache: bool = False  # cache prompts' blocks by their ids (Arrivals.hash_ids), LRU-evicted
    # within the KV capacity (ridgeline.serving.prefix_cache) [enable_prefix_caching]
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
    policy: str = "vllm-v1"  # who chooses each step's chunks and admissions: a name registered
    # in ridgeline.serving.policies (vllm-v1, transformers, sarathi, static)
    basis: str = ""  # which defaults the limits and prefix caching took (an engine's on this
    # device: ridgeline.serving.engines.engine_scheduler); empty: set here or by hand

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
        if self.prefix_cache and self.prefix_hit:
            raise InvalidWorkloadError(
                "prefix-hit assumes a fixed cached fraction and prefix-cache models the cache; give one of them"
            )
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
