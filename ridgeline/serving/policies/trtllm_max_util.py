"""TensorRT-LLM's in-flight batching under MAX_UTILIZATION (``trtllm-max-util``).

The capacity scheduler admits as many requests as the KV blocks hold now, not the blocks of
their whole sequences (GUARANTEED_NO_EVICT's reservation, :mod:`.trtllm`), and pauses the
request admitted last when the blocks run out; generation requests are scheduled before
context requests. That is vLLM V1's order and preemption (:mod:`.vllm_v1`), which this
policy runs. NVIDIA's MLPerf Inference harness sets it (``batch_scheduler_policy:
max_util``, with ``enable_chunked_context``: closed/NVIDIA/configs/B200-SXM-180GBx8/Offline/
llama2-70b.py in inference_results_v5.1); cpp/include/tensorrt_llm/executor/executor.h
defines the policy.
"""

from __future__ import annotations

from typing import ClassVar

from ridgeline.serving.policies.vllm_v1 import VllmV1
from ridgeline.serving.policy import register


@register("trtllm-max-util")
class MaxUtilization(VllmV1):
    attention: ClassVar[str] = "paged"
    attention_source: ClassVar[str] = "TensorRT-LLM's attention backend: fused context attention, XQA generation"
