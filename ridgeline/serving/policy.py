"""The scheduler seam: what a policy is, and the registry the simulator finds policies in.

A policy chooses each step's work: how many tokens every running request computes (its
next prompt chunk, or one decode token), which running requests are preempted when the KV
cache runs out, and which waiting requests join. ``simulate`` looks the policy up by
``Scheduler.policy`` and calls its :meth:`Policy.schedule` once per step. Each policy is
one module of :mod:`ridgeline.serving.policies` that registers its class::

    @register("my-policy")
    class MyPolicy(Policy):
        def schedule(self, server, now): ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.server import ServerState

_POLICIES: dict[str, type[Policy]] = {}


class UnknownPolicyError(InvalidWorkloadError):
    def __init__(self, name: str, known: list[str]):
        self.name = name
        super().__init__(f"unknown scheduler policy {name!r}; known: {', '.join(known)}")


class Policy(ABC):
    """One scheduling policy; stateless (a run's state is the :class:`ServerState`)."""

    name: ClassVar[str]
    # the attention setting a run of this policy gets when none is given, and why
    attention: ClassVar[str] = "flash"
    attention_source: ClassVar[str] = "vLLM V1's default backend on CUDA is FlashAttention"
    # whether it preempts running requests (then recomputes them): TensorRT-LLM's
    # GUARANTEED_NO_EVICT never does
    evicts: ClassVar[bool] = True
    # whether a step in which every running request decodes and nobody waits is
    # ``VllmV1.running``'s pure path alone (no admission, no other work), so that runs of
    # them may be computed at once (``simulator.run_decodes``)
    steady_runs: ClassVar[bool] = False

    @abstractmethod
    def schedule(self, server: ServerState, now: float) -> np.ndarray:
        """Choose the step that starts at ``now``: preempt (``server.preempt_last``) and
        admit (``server.admit``, ``server.join``) as the policy says, reserve the step's KV
        blocks in ``server.used``, set ``server.tokens`` (tokens computed) and
        ``server.pure`` (True only when every running request decodes one token after its
        first), and return the tokens each request of ``server.run`` computes, in its order."""


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator: make a policy known to ``simulate`` as ``name``."""

    def add(cls: type[Policy]) -> type[Policy]:
        if name in _POLICIES:
            raise ValueError(f"scheduler policy {name!r} is registered twice")
        cls.name = name
        _POLICIES[name] = cls
        return cls

    return add


def policy(name: str) -> Policy:
    """The registered policy called exactly ``name``."""
    if name not in _POLICIES:
        raise UnknownPolicyError(name, policy_names())
    return _POLICIES[name]()


def default_attention(name: str) -> str:
    """The attention setting policy ``name`` runs when none is given (``Policy.attention``)."""
    return policy(name).attention


def attention_note(name: str, attention: str) -> str:
    """Which attention a run of policy ``name`` was priced with, and whose choice it was."""
    rule = policy(name)
    if attention == rule.attention:
        return f"{attention}: the {name} policy's default ({rule.attention_source})"
    return f"{attention}: as set (the {name} policy's default is {rule.attention})"


def policy_names() -> list[str]:
    return sorted(_POLICIES)
