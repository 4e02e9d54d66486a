"""The mutable state of one simulated run: the requests, the running batch, the KV blocks.

A scheduler policy (:mod:`ridgeline.serving.policy`) reads and changes it once per step to
choose that step's work; the state prices the step (:mod:`ridgeline.serving.step_cost`) and
applies it. The simulator keeps it inside ``simulate`` and never returns it.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

import numpy as np

from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.prefix_cache import PrefixCache, cacheable_units, chain_keys
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.step_cost import StepCost, gather_step_time, masked_step_time, step_time

# pure decode steps computed at once (decode_run): at most, and at least (fewer run one by one)
MOST_AT_ONCE, FEWEST_AT_ONCE = 4096, 3


class ServerState:
    """The mutable state of one run (what a policy reads and changes)."""

    # whether runs of pure decode steps may be computed at once (decode_run); a server that
    # prices or applies a step otherwise (speculative decodes) says no
    runs_at_once: ClassVar[bool] = True

    def __init__(self, arrivals: Arrivals, scheduler: Scheduler, cost: StepCost, blocks: int, block: int):
        self.s, self.cost, self.blocks, self.block = scheduler, cost, blocks, block
        n = len(arrivals)
        self.arrival, self.prompt, self.output = arrivals.time_s, arrivals.prompt, arrivals.output
        self.admitted = np.full(n, np.nan)
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preempted = np.zeros(n, dtype=np.int64)
        self.hit_tokens = np.zeros(n, dtype=np.int64)
        self.done_of = np.zeros(n, dtype=np.int64)  # KV tokens computed, for preempted requests
        self.gen_of = np.zeros(n, dtype=np.int64)  # tokens emitted so far
        # the running requests, in admission order: id, prompt, output, emitted, cached
        self.run = [np.zeros(0, dtype=np.int64) for _ in range(5)]
        self.waiting: deque[int] = deque()
        self.used = 0
        self.computed = 0  # tokens run through the model, recomputation included
        self.recomputed = 0
        self.preemptions = 0  # preemptions so far (a policy compares it before and after a step's running part)
        self.pure = False  # this step only decodes (set by the policy)
        self.steady = False  # the last step only decoded and admitted nobody: so does this one
        self.ones = np.ones(scheduler.max_batch, dtype=np.int64)  # a steady step's chunk (read only)
        self.tokens = 0  # tokens this step computes (set by the policy)
        self.cache = None  # the prefix cache (Scheduler.prefix_cache), its units of hash_block tokens
        if scheduler.prefix_cache and arrivals.hash_ids is not None:  # without ids no prompt shares a block
            self.cache = PrefixCache(arrivals.hash_block, arrivals.hash_block // block)
            self.hash_ids = arrivals.hash_ids
            self.units = cacheable_units(arrivals.prompt, arrivals.hash_ids, arrivals.hash_block)
            self.offered = np.zeros(n, dtype=np.int64)  # units a running request offered the cache
            self.keys: dict[int, list[int]] = {}  # a request's unit keys, once looked up
            self.held: dict[int, list[int]] = {}  # a running request's cached units

    def kv_blocks(self, tokens):
        if self.cost.spans is not None:  # layers keeping different spans (StepCost.kv_kept)
            return np.ceil(self.cost.kv_kept(tokens) / self.block)
        kept = np.minimum(tokens, self.cost.window) if self.cost.window else tokens
        return -(-kept // self.block)

    def preempt_last(self) -> None:
        """Recompute policy: the request admitted last frees its blocks and goes back to
        the front of the queue; its emitted tokens stay emitted."""
        rid, _p, _n, gen, done = (a[-1] for a in self.run)
        self.release(int(rid), done)
        self.recomputed += int(done)
        self.preempted[rid] += 1
        self.preemptions += 1
        self.gen_of[rid], self.done_of[rid] = gen, 0
        self.run = [a[:-1] for a in self.run]
        self.waiting.appendleft(int(rid))
        self.steady = False

    def pending(self, prompt: np.ndarray, gen: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Tokens each running request would compute next: the rest of its prompt, or one
        decode token (a speculating server verifies more: :mod:`ridgeline.serving.speculative`)."""
        return prompt + gen - done

    def prefix_hit(self, r: int) -> tuple[int, int]:
        """Tokens of waiting request ``r`` already in the prefix cache, and how many of their
        KV blocks running requests already hold. A cached unit (a trace's hash id: 512
        tokens) is its KV blocks (32 of 16); the hit is whole blocks, at least one token
        left to compute, as vLLM caps it (issue 57 item 2: a 1024-token prompt whose two
        units are cached hits 1008 tokens and computes 16)."""
        gen = int(self.gen_of[r])
        if self.cache is None:  # a fixed fraction of each prompt (Scheduler.prefix_hit)
            return min(
                int(self.s.prefix_hit * self.prompt[r]) // self.block * self.block, int(self.prompt[r]) + gen - 1
            ), 0
        self.cache.fit(self.blocks - self.used)
        found, live = self.cache.match(self.keys_of(r)[: int(self.units[r])])
        cap = (int(self.prompt[r]) + gen - 1) // self.block * self.block
        return min(found * self.cache.tokens, cap), live * self.cache.blocks

    def keys_of(self, r: int) -> list[int]:
        if r not in self.keys:
            self.keys[r] = chain_keys(self.hash_ids[r], int(self.units[r]))
        return self.keys[r]

    def admit(self, now: float, hit: int, blocks: int, upto: int = 0) -> int:
        """The first waiting request leaves the queue with ``blocks`` more KV blocks in use
        and its first ``hit`` tokens from the prefix cache; the step computes its KV up to
        ``upto`` tokens. Returns its id."""
        r = self.waiting.popleft()
        self.used += blocks
        self.hit_tokens[r] += hit
        if np.isnan(self.admitted[r]):
            self.admitted[r] = now
        if self.cache is not None:
            held = self.keys_of(r)[: -(-hit // self.cache.tokens)]  # a unit the hit reaches into is in use
            self.cache.take(held)
            self.held[r], self.offered[r] = held, len(held)
            self.offer(r, upto)
            self.cache.fit(self.blocks - self.used)
        return r

    def offer(self, r: int, upto: int) -> None:
        """Request ``r``'s KV is computed up to ``upto`` tokens: its whole units so far are
        cached, held by it (vLLM caches a block when the step that fills it is scheduled)."""
        keys, held = self.keys_of(r), self.held[r]
        top = min(upto // self.cache.tokens, int(self.units[r]))
        for j in range(int(self.offered[r]), top):
            if self.cache.add(keys[j]):
                held.append(keys[j])
        self.offered[r] = max(top, int(self.offered[r]))

    def offer_chunks(self, chunk: np.ndarray) -> None:
        """The running requests' chunks this step: their KV up to ``done + chunk`` (:meth:`offer`)."""
        rid, done = self.run[0], self.run[4]
        for i in np.flatnonzero((chunk > 0) & (self.offered[rid] < self.units[rid])):
            self.offer(int(rid[i]), int(done[i] + chunk[i]))

    def release(self, r: int, done: int) -> None:
        """Request ``r`` leaves the batch with ``done`` tokens of KV: its own blocks are
        freed, its cached units kept (evictable once no running request holds them)."""
        self.used -= int(self.kv_blocks(done))
        if self.cache is not None:
            held = self.held.pop(r)
            self.used += (len(held) - self.cache.drop(held)) * self.cache.blocks
            self.offered[r] = 0

    def join(self, new: list[tuple[int, int, int, int]], chunk: np.ndarray) -> np.ndarray:
        """Admitted requests (id, emitted, cached, chunk) join the running batch after
        ``chunk``'s requests; returns the step's chunk, theirs appended."""
        self.pure = False
        ids, gens, hits, chunks = np.array(new, dtype=np.int64).T
        self.run = [
            np.concatenate(pair) for pair in zip(self.run, (ids, self.prompt[ids], self.output[ids], gens, hits))
        ]
        self.tokens += int(chunks.sum())
        return np.concatenate([chunk, chunks])

    def cost_of(self, chunk: np.ndarray) -> float:
        forward, host = self.forward_of(chunk), self.s.host_s(int(np.count_nonzero(chunk)))
        return max(forward, host) if self.s.host_overlap else forward + host

    def decode_costs(self, n: int, cached: np.ndarray) -> np.ndarray:
        """``cost_of`` of pure steps of ``n`` decodes whose cached lengths sum to each of ``cached``."""
        forward, host = self.decode_forwards(n, cached), self.s.host_s(n)
        return np.maximum(forward, host) if self.s.host_overlap else forward + host

    def decode_forwards(self, n: int, cached: np.ndarray) -> np.ndarray:
        """``one_pass`` of pure steps (``decode_time`` at each of ``cached``)."""
        return self.cost.decode_times(n, cached)

    def forward_of(self, chunk: np.ndarray) -> float:
        """The step's forward; with pipeline stages, its micro-batches in flight
        (:meth:`pipelined`)."""
        if self.cost.factor > 1:
            return self.pipelined(chunk)
        return self.one_pass(chunk, self.pure)

    def pipelined(self, chunk: np.ndarray) -> float:
        """A step over pp pipeline stages with pp micro-batches in flight (vLLM's virtual
        engines; ``layers.pipeline_factors``): the step's requests split into pp groups,
        interleaved, each through every stage (``one_pass``) while the others fill the
        other stages. A round ends when the slowest group's pass does (a stage is busy for
        the sum of the groups' stage times, pp passes' worth over pp, never longer): a
        compute-bound step takes about a pp-th of its one-batch pass, a weight-bound one
        (each group reads the stage's weights again) about all of it, one request alone its
        whole pass."""
        stages = int(round(self.cost.factor))
        active = np.flatnonzero(chunk > 0)
        longest = 0.0
        for g in range(stages):
            members = active[g::stages]
            if len(members):
                part = np.zeros_like(chunk)
                part[members] = chunk[members]
                longest = max(longest, self.one_pass(part, False))
        return longest

    def one_pass(self, chunk: np.ndarray, pure: bool) -> float:
        """The forward of ``chunk`` through every stage (``pure``: every running request
        decodes one token, the hot path)."""
        done = self.run[4]
        if self.s.batch_attention != "varlen":
            active = chunk > 0
            fresh = int(chunk[active & (done == 0)].sum())
            mix = (fresh, int(chunk.sum()) - fresh, int(active.sum()), float((done + chunk)[active].sum()))
            if self.s.batch_attention == "gather":
                return gather_step_time(self.cost, *mix, bool(np.any(done[active] > 0)))
            return masked_step_time(self.cost, *mix)
        if pure and self.cost.spans is None:
            cached = np.minimum(done, self.cost.window - 1) if self.cost.window else done
            return self.cost.decode_time(len(done), float(cached.sum()))
        decode = (chunk == 1) & (done > 0)
        cached = done[decode]
        if self.cost.window and self.cost.spans is None:
            cached = np.minimum(cached, self.cost.window - 1)
        other = np.flatnonzero((chunk > 0) & ~decode)
        sizes, lengths = chunk[other].tolist(), done[other].tolist()
        fresh = [c for c, d in zip(sizes, lengths) if d == 0]
        chunks = [(c, d) for c, d in zip(sizes, lengths) if d > 0]
        summed = float(cached.sum()) if self.cost.spans is None else self.cost.capped(cached)
        return step_time(self.cost, fresh, chunks, int(decode.sum()), summed)

    def advance(self, chunk: np.ndarray, end: float) -> None:
        """Apply a finished step: cached tokens grow; a request whose chunk completes its
        pending tokens emits one; requests with all their tokens leave."""
        rid, prompt, out, gen, done = self.run
        if self.pure:  # every request emits a token after its first
            self.computed += len(rid)
            done, gen = done + 1, gen + 1
        else:
            self.computed += int(chunk.sum())
            done = done + chunk
            emits = (chunk > 0) & (done == prompt + gen)
            gen = gen + emits
            self.first[rid[emits & (gen == 1)]] = end
        over = gen >= out
        if over.any():
            self.finish[rid[over]] = end
            self.gen_of[rid[over]] = gen[over]
            if self.cache is None:
                self.used -= int(np.sum(self.kv_blocks(done[over])))
            else:
                for r, d in zip(rid[over].tolist(), done[over].tolist()):
                    self.release(r, d)
            keep = ~over
            self.run = [a[keep] for a in (rid, prompt, out, gen, done)]
        else:
            self.run = [rid, prompt, out, gen, done]

    def decodes_next(self) -> bool:
        """Whether the next step is a pure decode step priced by ``decode_time`` (the
        policy's pure path: every running request decodes one token after its first, or
        the last step only decoded and admitted nobody), nobody waits, and no prefix cache,
        sliding window, pipeline or other attention path changes a step's price."""
        c = self.cost
        rid, prompt, _out, gen, done = self.run
        if not (self.runs_at_once and not self.waiting and self.cache is None and len(rid) > 0):
            return False
        if self.s.batch_attention != "varlen" or c.factor > 1 or c.spans is not None or c.window:
            return False
        return self.steady or (
            len(rid) <= self.s.token_budget and self.pending(prompt, gen, done).max() == 1 and gen.min() > 0
        )

    def decode_run(self, now: float, until: float, most: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Up to ``most`` pure decode steps from ``now`` at once (:meth:`decodes_next`), each
        as the policy's pure path and :meth:`advance` run it: those that start before
        ``until`` and find their KV blocks, up to the first that finishes a request (the
        last of them, applied by ``advance``). Returns their starts (and the last one's
        end), seconds and KV blocks used; none when fewer than ``FEWEST_AT_ONCE`` could run."""
        rid, prompt, out, gen, done = self.run
        n, left = len(rid), int((out - gen).min())  # step left - 1 finishes a request
        k = min(most, left)
        if k < FEWEST_AT_ONCE:
            return np.array([now]), np.zeros(0), np.zeros(0, dtype=np.int64)
        # step j's new blocks: the requests whose done + j cached tokens fill whole blocks
        per_residue = np.bincount(done % self.block, minlength=self.block)
        used = self.used + np.cumsum(per_residue[-np.arange(k) % self.block])
        total = int(done.sum())
        cached = np.arange(total, total + n * k, n).astype(float)  # each step's sum of cached lengths
        seconds = self.decode_costs(n, cached)
        starts = np.cumsum(np.concatenate([[now], seconds]))  # in order, as step after step adds
        # the first step that starts too late or finds no blocks (both never decrease)
        if starts[k - 1] >= until:
            k = int(np.searchsorted(starts[:k], until))
        if k and used[k - 1] > self.blocks:
            k = int(np.searchsorted(used[:k], self.blocks, "right"))
        if k:
            last = k == left  # the last step finishes requests: advance applies it
            self.used, self.tokens, self.pure, self.steady = int(used[k - 1]), n, True, True
            self.computed += n * (k - last)
            self.run = [rid, prompt, out, gen + (k - last), done + (k - last)]
            if last:
                self.advance(self.ones[:n], float(starts[k]))
        return starts[: k + 1], seconds[:k], used[:k]
