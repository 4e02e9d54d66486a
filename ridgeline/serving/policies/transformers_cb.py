"""transformers' continuous-batching server as it runs (``transformers``): its
``FIFOScheduler``, which ``kernels/servecheck/cb_server.py`` replays and compares with.

As the simulator models it, the scheduling is vLLM V1's loop (:mod:`.vllm_v1`): running
requests in admission order, prompts chunked to the token budget, the last admitted
preempted when blocks run out (waiting requests may still join that step: the loop the
servecheck replays were matched with; vLLM V1 admits none then), and new prompts held
while fewer than ``admit_margin`` of the blocks are free (transformers' safety margin:
``cb_server.matching_scheduler`` sets 0.15). What sets transformers apart is the step's cost: its sdpa attention path, priced
under ``Scheduler(batch_attention="gather")`` (:mod:`ridgeline.serving.transformers_sdpa`).
Settings that match a given server: ``cb_server.matching_scheduler``.
"""

from __future__ import annotations

from ridgeline.serving.policies.vllm_v1 import VllmV1
from ridgeline.serving.policy import register


@register("transformers")
class TransformersFIFO(VllmV1):
    """vLLM V1's loop with the admission margin, as transformers' FIFOScheduler runs it."""

    admit_after_preemption = True
    attention = "flash"
    attention_source = "transformers' sdpa path: PyTorch's fused scaled_dot_product_attention"
