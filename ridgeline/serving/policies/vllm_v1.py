"""vLLM V1's scheduler with chunked prefill: the simulator's default policy (``vllm-v1``).

Each step has a token budget (``Scheduler.token_budget``, vLLM's max_num_batched_tokens)
and a sequence limit (``max_batch``, max_num_seqs). The running requests come first, in
admission order: each gets its pending tokens (one for a decode; the rest of its prompt,
chunked) while the budget lasts. When the paged KV cache cannot hold the step, the request
admitted last is preempted and later recomputed from scratch. A step that preempted admits
nobody (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``: the waiting queue is
only read ``if not preempted_reqs``). Otherwise waiting requests are admitted first come, first served while the step has sequences, tokens and KV blocks to
spare (and, with ``admit_margin``, while that fraction of the blocks is free); a prompt is
chunked to the budget left, or waits whole without ``chunked_prefill``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ridgeline.serving.policy import Policy, register
from ridgeline.serving.server import ServerState


@register("vllm-v1")
class VllmV1(Policy):
    # whether waiting requests may join a step that preempted (vLLM V1: no)
    admit_after_preemption: ClassVar[bool] = False
    steady_runs: ClassVar[bool] = True

    def schedule(self, server: ServerState, now: float) -> np.ndarray:
        """Chunks for the running requests (preempting when blocks run out), then admissions
        (none in a step that preempted, unless ``admit_after_preemption``)."""
        before = server.preemptions
        chunk = self.running(server)
        if server.cache is not None and not server.pure:  # cached when scheduled, as vLLM does
            server.offer_chunks(chunk)
        preempted = server.preemptions > before
        if self.admits(len(chunk)) and (self.admit_after_preemption or not preempted):
            new = self.admissions(server, now, len(chunk))
            if new:
                chunk = server.join(new, chunk)
        server.steady = server.pure and not server.cost.window
        return chunk

    def ahead(self, need: np.ndarray, gen: np.ndarray) -> np.ndarray:
        """Tokens the step gives other running requests before each one: admission order."""
        return np.cumsum(need) - need

    def admits(self, running: int) -> bool:
        """Whether waiting requests may join a step that already runs ``running`` requests."""
        return True

    def running(self, server: ServerState) -> np.ndarray:
        """The running requests' tokens this step, preempting the last admitted while the
        KV blocks do not hold the step; reserves the blocks."""
        s = server.s
        while True:
            rid, prompt, _out, gen, done = server.run
            if server.steady and not server.cost.window:  # the hot path: nothing to look at
                server.pure = len(rid) > 0
                chunk = server.ones[: len(rid)]
                grow = int(np.count_nonzero(done % server.block == 0))
                if server.used + grow <= server.blocks or len(rid) == 0:
                    break
                server.preempt_last()
                continue
            need = server.pending(prompt, gen, done)
            # the common step: every running request decodes one token after its first
            server.pure = 0 < len(rid) <= s.token_budget and need.max() == 1 and gen.min() > 0
            if server.pure and not server.cost.window:
                chunk = need
                grow = int(np.count_nonzero(done % server.block == 0))
            else:
                chunk = np.clip(s.token_budget - self.ahead(need, gen), 0, need)
                grow = int(np.sum(server.kv_blocks(done + chunk) - server.kv_blocks(done)))
            if server.used + grow <= server.blocks or len(rid) == 0:
                break
            server.preempt_last()
        server.used += grow
        server.tokens = len(rid) if server.pure else int(chunk.sum())
        return chunk

    def admissions(self, server: ServerState, now: float, running: int) -> list[tuple[int, int, int, int]]:
        """Waiting requests admitted first come, first served: (id, emitted, cached, chunk)."""
        s = server.s
        budget = s.token_budget - server.tokens
        margin_ok = (server.blocks - server.used) >= s.admit_margin * server.blocks
        new = []
        while server.waiting and running + len(new) < s.max_batch and budget > 0:
            if not margin_ok and (running or new):
                break
            r = server.waiting[0]
            gen, (hit, held) = int(server.gen_of[r]), server.prefix_hit(r)
            need = int(server.prompt[r]) + gen - hit
            c = min(need, budget) if s.chunked_prefill else need
            if c > budget:
                break
            blocks = int(server.kv_blocks(hit + c)) - held  # the hit's blocks in use are shared
            if server.used + blocks > server.blocks:
                break
            server.admit(now, hit, blocks, hit + c)
            budget -= c
            new.append((r, gen, hit, c))
        return new
