"""Speculative decoding in the serving simulator: each decode step verifies k + 1 tokens.

A request in decode asks the scheduler for k + 1 tokens instead of one (the last emitted
token and k draft tokens), so they take their share of the step's token budget and KV
blocks as vLLM's lookahead slots do. The step is priced as the engine prices speculation
(``ridgeline.engine.speculative``, Leviathan et al., arXiv:2211.17192): the target's pass over
the k + 1 tokens of each sequence (``step_cost``'s chunk over its cache, the engine's decode
pass with ``q_len`` = k + 1), plus the draft model's k decode steps over the verifying
sequences, and the draft's own prefill of the step's prompt chunks.

Each draft token is accepted with probability a, independently, until the first rejection
(a seeded draw per verifying sequence per step): a step emits min(G, k) + 1 tokens, G
geometric (P(G >= i) = a^i), capped at the tokens the request still owes, whose mean is
(1 - a^(k+1)) / (1 - a) (``ridgeline.engine.speculative.expected_tokens``). The KV blocks of the rejected
positions are freed after the step. The draft shares the device: its weights come out of
the memory the KV cache gets, and each cached token holds the draft's KV beside the
target's. The draft is priced with per-sequence attention (``batch_attention`` "varlen")
whatever the target's setting; host terms are counted once a step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from ridgeline.engine.analyze import memory_totals
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.memory import kv_bytes_per_token
from ridgeline.engine.workload import Workload
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import SimResult, _run, _Server, kv_capacity_bytes, result_of, server_maker
from ridgeline.serving.step_cost import StepCost, build_step_cost, step_time

MAX_DRAFT_TOKENS = 64


@dataclass(frozen=True)
class Speculation:
    """A draft model proposing ``draft_tokens`` (k) tokens a step, each accepted with
    probability ``acceptance`` (a); ``seed`` seeds the acceptance draws."""

    draft: Deployment  # the draft model on the target's device and settings (Deployment.with_model)
    draft_tokens: int = 4
    acceptance: float = 0.7
    seed: int = 0

    def __post_init__(self) -> None:
        k = self.draft_tokens
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= MAX_DRAFT_TOKENS:
            raise InvalidWorkloadError(f"draft tokens must be a whole number from 0 to {MAX_DRAFT_TOKENS}, got {k!r}")
        if not 0.0 <= self.acceptance <= 1.0:  # also refuses NaN
            raise InvalidWorkloadError(f"acceptance must be between 0 and 1, got {self.acceptance}")

    def accepted(self, rng: np.random.Generator, drafted: np.ndarray) -> np.ndarray:
        """Draft tokens accepted out of ``drafted`` per sequence: min(G, drafted), G geometric."""
        if self.acceptance >= 1.0:
            return drafted
        runs = rng.geometric(1.0 - self.acceptance, size=len(drafted)) - 1  # acceptances before a rejection
        return np.minimum(runs, drafted)


class Speculating:
    """Mixin over a server class: decodes verify k + 1 tokens (see the module docstring)."""

    runs_at_once = False  # each decode step draws its acceptances

    def arm(self, spec: Speculation, draft_cost: StepCost, rng: np.random.Generator) -> None:
        self.spec, self.draft_cost, self.rng = spec, draft_cost, rng
        # verifying sequence-steps; emitted tokens; those of full verifies (k + 1 tokens
        # verified, k + 1 or more still owed), which no cap truncates
        self.verifies, self.emitted, self.full, self.full_emitted = 0, 0, 0, 0
        self.drafted, self.draft_accepted = 0, 0

    def pending(self, prompt: np.ndarray, gen: np.ndarray, done: np.ndarray) -> np.ndarray:
        need = prompt + gen - done
        return need + self.spec.draft_tokens * ((need == 1) & (gen > 0))

    def verifying(self, chunk: np.ndarray) -> np.ndarray:
        """The running requests that verify draft tokens this step (decodes given > 1 token)."""
        _rid, prompt, _out, gen, done = self.run
        return (prompt + gen - done == 1) & (gen > 0) & (chunk > 1)

    def cost_of(self, chunk: np.ndarray) -> float:
        return super().cost_of(chunk) + self.draft_s(chunk)

    def draft_s(self, chunk: np.ndarray) -> float:
        """The draft's seconds: its prefill of the step's prompt chunks, then one decode step
        per drafted position over the sequences still drafting."""
        _rid, prompt, _out, gen, done = self.run
        verify = self.verifying(chunk)
        other = (chunk > 0) & ~((prompt + gen - done == 1) & (gen > 0))  # prompt chunks, recomputations
        fresh = [int(c) for c in chunk[other & (done == 0)]]
        chunks = [(int(c), int(d)) for c, d in zip(chunk[other & (done > 0)], done[other & (done > 0)])]
        total = step_time(self.draft_cost, fresh, chunks, 0, 0.0) if fresh or chunks else 0.0
        drafts, cached = chunk[verify] - 1, done[verify]
        for i in range(int(drafts.max(initial=0))):
            going = drafts > i
            total += self.draft_cost.decode_time(int(going.sum()), float((cached[going] + i).sum()))
        return total

    def advance(self, chunk: np.ndarray, end: float) -> None:
        verify = self.verifying(chunk)
        if verify.any():
            rid, prompt, out, gen, done = self.run
            c, owed, cached = chunk[verify], out[verify] - gen[verify], done[verify]
            accepted = self.spec.accepted(self.rng, c - 1)
            m = np.minimum(accepted + 1, owed)
            self.used -= int(np.sum(self.kv_blocks(cached + c) - self.kv_blocks(cached + m)))
            self.computed += int(np.sum(c - m))  # the base advance counts the m kept
            self._count(c, m, accepted, owed)
            gen, chunk = gen.copy(), chunk.copy()
            gen[verify] += m - 1  # so that the base advance emits the last of the m
            chunk[verify] = m
            self.run = [rid, prompt, out, gen, done]
        super().advance(chunk, end)

    def _count(self, c: np.ndarray, m: np.ndarray, accepted: np.ndarray, owed: np.ndarray) -> None:
        full = (c == self.spec.draft_tokens + 1) & (owed >= c)
        self.verifies += len(c)
        self.emitted += int(m.sum())
        self.full += int(full.sum())
        self.full_emitted += int(m[full].sum())
        self.drafted += int(np.sum(c - 1))
        self.draft_accepted += int(np.minimum(accepted, m - 1).sum())

    def spec_summary(self) -> dict:
        return {
            "draft": self.spec.draft.model.name,
            "draft_tokens": self.spec.draft_tokens,
            "acceptance": self.spec.acceptance,
            "seed": self.spec.seed,
            "verifies": self.verifies,
            "tokens_per_verify": self.emitted / self.verifies if self.verifies else None,
            "full_verifies": self.full,
            "tokens_per_full_verify": self.full_emitted / self.full if self.full else None,
            "drafted_tokens": self.drafted,
            "accepted_tokens": self.draft_accepted,
        }


@cache
def speculating(kind: type[_Server]) -> type[_Server]:
    """``kind`` with speculative decodes (a server class made once per kind)."""
    return type(f"Speculating{kind.__name__}", (Speculating, kind), {})


def kv_blocks_with_draft(d: Deployment, spec: Speculation, s: Scheduler) -> int:
    """KV blocks when the draft shares the device: the target's room less the draft's
    weights, over both models' KV bytes per block."""
    if s.kv_blocks is not None:
        return int(s.kv_blocks)
    small = spec.draft
    room = kv_capacity_bytes(d.model, d.device, d.plan, s.token_budget)
    draft_weights = float(memory_totals(small.model, small.device, Workload(1, 1, 0), small.plan)["weights_bytes"])
    per_token = kv_bytes_per_token(d.model, d.plan) + kv_bytes_per_token(small.model, small.plan)
    blocks = int((room - draft_weights) // (d.plan.kv_block * per_token))
    if blocks < 1:
        raise InvalidWorkloadError(
            f"no room for a KV cache beside the draft {small.model.name}: {d.model.name} and its draft leave "
            f"{(room - draft_weights) / 2**30:.3g} GiB of {d.device.name}'s usable memory; "
            "use a smaller draft, more --tp or lower precision"
        )
    return blocks


def maker(
    d: Deployment, arrivals: Arrivals, s: Scheduler, spec: Speculation | None, kind: type[_Server] = _Server
) -> Callable[[int], _Server]:
    """Fresh servers of ``kind`` for ``arrivals`` on ``d`` (speculating with ``spec`` when
    given), one per call with the replica's index (which seeds its acceptance draws)."""
    if spec is None:
        make = server_maker(d, arrivals, s, kind)
        return lambda _i: make()
    make = server_maker(d, arrivals, s, speculating(kind), kv_blocks_with_draft(d, spec, s))
    draft = spec.draft
    draft_cost = build_step_cost(draft.model, draft.plan, draft.ceilings, s.token_budget, s.max_batch)

    def build(i: int) -> _Server:
        server = make()
        server.arm(spec, draft_cost, np.random.default_rng([spec.seed, i]))
        return server

    return build


def with_spec_summary(result: SimResult, servers: list) -> SimResult:
    """``result`` with the speculation counts of ``servers`` pooled under ``summary["speculative"]``."""
    if not servers or not isinstance(servers[0], Speculating):
        return result
    pooled = servers[0].spec_summary()
    for key in ("verifies", "full_verifies", "drafted_tokens", "accepted_tokens"):
        pooled[key] = sum(x.spec_summary()[key] for x in servers)
    emitted, full_emitted = sum(x.emitted for x in servers), sum(x.full_emitted for x in servers)
    pooled["tokens_per_verify"] = emitted / pooled["verifies"] if pooled["verifies"] else None
    pooled["tokens_per_full_verify"] = full_emitted / pooled["full_verifies"] if pooled["full_verifies"] else None
    return replace(result, summary={**result.summary, "speculative": pooled})


def simulate_speculative(
    d: Deployment,
    arrivals: Arrivals,
    spec: Speculation,
    scheduler: Scheduler | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Serve ``arrivals`` on one server of ``d`` whose decodes speculate with ``spec``."""
    s = scheduler or Scheduler()
    server = maker(d, arrivals, s, spec)(0)
    line = _run(server, arrivals, progress)
    return with_spec_summary(result_of(server, line, d, s), [server])
