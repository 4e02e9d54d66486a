"""Sarathi-Serve's stall-free batching (``sarathi``; Agrawal et al., OSDI 2024, Algorithm 2).

Every step first gives each decoding request its one token, then the prompts still being
prefilled their next chunks (in admission order), then admits waiting requests, first come
first served, into what is left of the token budget: a running decode is never held back
by a prompt. Preemption, KV blocks and admission are vLLM V1's (:mod:`.vllm_v1`). In the
steps the simulator reaches, vLLM V1's admission order already puts decodes first (a prompt
left partly computed is the last request admitted), so the two schedule alike there; this
policy makes the order explicit.
"""

from __future__ import annotations

import numpy as np

from ridgeline.serving.policies.vllm_v1 import VllmV1
from ridgeline.serving.policy import register


@register("sarathi")
class Sarathi(VllmV1):
    def ahead(self, need: np.ndarray, gen: np.ndarray) -> np.ndarray:
        """Tokens before each running request: the decodes first, then the prompts."""
        order = np.argsort(~((need == 1) & (gen > 0)), kind="stable")
        ahead = np.empty_like(need)
        ahead[order] = np.cumsum(need[order]) - need[order]
        return ahead
