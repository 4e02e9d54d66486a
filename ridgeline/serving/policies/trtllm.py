"""TensorRT-LLM's in-flight batching under GUARANTEED_NO_EVICT (``trtllm``).

Generation requests are scheduled first, then context requests, first come first served,
within ``max_batch`` (max_batch_size) and ``token_budget`` (max_num_tokens)
(docs/source/features/paged-attention-ifb-scheduler.md). The capacity scheduler admits a
request only when the KV blocks of its whole sequence, prompt and every output token, fit
beside those of the requests already running (GUARANTEED_NO_EVICT, the default
CapacitySchedulerPolicy), so a running request is never evicted. Context chunking is off by
default: a prompt runs whole in one step, and waits while the step's tokens left cannot hold
it. hardware/engines/trtllm.yaml cites each fact.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ridgeline.serving.policies.vllm_v1 import VllmV1
from ridgeline.serving.policy import register
from ridgeline.serving.server import ServerState


@register("trtllm")
class GuaranteedNoEvict(VllmV1):
    attention: ClassVar[str] = "paged"
    attention_source: ClassVar[str] = "TensorRT-LLM's attention backend: fused context attention, XQA generation"
    evicts: ClassVar[bool] = False

    def admissions(self, server: ServerState, now: float, running: int) -> list[tuple[int, int, int, int]]:
        """Waiting requests in arrival order while their whole sequences' blocks fit beside
        the running requests' whole sequences (their blocks reserved to the last token)."""
        s = server.s
        _rid, prompt, out, _gen, _done = server.run
        reserved = int(np.sum(server.kv_blocks(prompt + out)))
        budget = s.token_budget - server.tokens
        new = []
        while server.waiting and running + len(new) < s.max_batch and budget > 0:
            r = server.waiting[0]
            gen, (hit, held) = int(server.gen_of[r]), server.prefix_hit(r)
            whole = int(server.kv_blocks(int(server.prompt[r]) + int(server.output[r])))
            if reserved + whole > server.blocks:
                break
            need = int(server.prompt[r]) + gen - hit
            c = min(need, budget) if s.chunked_prefill else need
            if c > budget:
                break
            server.admit(now, hit, int(server.kv_blocks(hit + c)) - held, hit + c)
            reserved += whole
            budget -= c
            new.append((r, gen, hit, c))
        return new
