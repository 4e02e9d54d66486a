"""Static batching, first come first served (``static``): a batch is formed, runs to
completion, then the next is admitted.

When no request runs, waiting requests are admitted in arrival order as vLLM V1 admits them
(:mod:`.vllm_v1`: up to ``max_batch``, within the step's token budget and the KV blocks; a
prompt chunked to the budget left). The batch then runs alone: its prompts' remaining
chunks, then its decodes; a request that finishes leaves its slot empty, and nobody joins
until the last one has finished. For a framework's padded ``generate`` batch of B prompts
of P tokens, set ``token_budget >= B x P`` so that the whole batch is admitted at once.
"""

from __future__ import annotations

from ridgeline.serving.policies.vllm_v1 import VllmV1
from ridgeline.serving.policy import register


@register("static")
class StaticFCFS(VllmV1):
    def admits(self, running: int) -> bool:
        """Only an idle server admits: the running batch runs to completion first."""
        return running == 0
