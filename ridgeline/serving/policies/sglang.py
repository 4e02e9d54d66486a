"""SGLang's scheduler (``sglang``): a step is either a prefill batch or a decode batch.

When a prefill batch can be formed (a request still prefilling, or a waiting request whose
prompt's KV blocks fit), the step runs prompts only: the chunks left of requests already
prefilling, then waiting requests first come first served, chunked to the step's token
budget (chunked_prefill_size) and within ``max_batch`` (max_running_requests). Otherwise
every running request decodes one token. Mixing prefill chunks into decode steps is off by
default; when the KV pool cannot hold a decode step, the request admitted last is retracted
and recomputed later (python/sglang/srt/managers/scheduler.py, schedule_batch.py;
hardware/engines/sglang.yaml cites each). Not modelled: SGLang reserves room for the
outputs of running requests when admitting (its new-token ratio), so it admits no more
than this does, possibly fewer.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ridgeline.serving.policies.vllm_v1 import VllmV1
from ridgeline.serving.policy import register
from ridgeline.serving.server import ServerState


@register("sglang")
class PrefillFirst(VllmV1):
    attention: ClassVar[str] = "paged"
    attention_source: ClassVar[str] = "SGLang's default backend on Hopper is FlashAttention 3 over its paged cache"

    def schedule(self, server: ServerState, now: float) -> np.ndarray:
        """A prefill step when one can be formed, else a decode step (no admissions)."""
        chunk = self.prefill_chunks(server)
        server.tokens = int(chunk.sum())
        if server.waiting and len(chunk) < server.s.max_batch:
            new = self.admissions(server, now, len(chunk))
            if new:
                chunk = server.join(new, chunk)
        if int(chunk.sum()):
            server.pure = server.steady = False
            return chunk
        chunk = self.running(server)
        server.steady = server.pure and not server.cost.window
        return chunk

    def prefill_chunks(self, server: ServerState) -> np.ndarray:
        """The chunks left of running requests still in their prompt, in admission order,
        within the step's tokens and KV blocks; zero for decoding requests."""
        _rid, prompt, _out, gen, done = server.run
        need = np.where(gen == 0, server.pending(prompt, gen, done), 0)
        chunk = np.clip(server.s.token_budget - (np.cumsum(need) - need), 0, need)
        grow = int(np.sum(server.kv_blocks(done + chunk) - server.kv_blocks(done)))
        if server.used + grow > server.blocks:
            return np.zeros_like(need)
        server.used += grow
        return chunk
