"""Scheduler policies (ridgeline.serving.policies): the registry, and each policy's schedule
worked out by hand on tiny traces whose every step takes 1 s."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels.servecheck.cb_server import ServerSettings, matching_scheduler
from ridgeline.api import simulate
from ridgeline.errors import RidgelineError
from ridgeline.serving.arrivals import Arrivals, poisson
from ridgeline.serving.policy import Policy, UnknownPolicyError, policy, policy_names, register
from ridgeline.serving.server import ServerState
from ridgeline.serving.simulator import Scheduler, _run, _Server

MODEL, DEVICE = "llama-3.2-1b", "a6000"


class OneSecondSteps(_Server):
    """A run whose every step takes 1 s; ``steps`` records each step's tokens per request
    (so every step is priced here, one by one: no run of decodes is computed at once)."""

    runs_at_once = False

    def cost_of(self, chunk: np.ndarray) -> float:
        self.steps.append(dict(zip(self.run[0].tolist(), chunk.tolist())))
        return 1.0


def run_steps(name: str, arrivals: Arrivals, blocks: int = 100, block: int = 4, **scheduler) -> OneSecondSteps:
    """Serve ``arrivals`` under policy ``name`` with 1-second steps (no sliding window)."""
    server = OneSecondSteps(
        arrivals,
        Scheduler(policy=name, **scheduler),
        SimpleNamespace(window=None, spans=None),
        blocks,
        block,
        policy(name),
    )
    server.steps = []
    server.line = _run(server, arrivals, None)
    return server


def trace(*requests: tuple[float, int, int]) -> Arrivals:
    """Requests as (arrival s, prompt tokens, output tokens)."""
    time_s, prompt, output = (np.array(column) for column in zip(*requests))
    return Arrivals(time_s.astype(float), prompt, output)


# --- the registry ------------------------------------------------------------------------


def test_every_policy_is_registered_under_its_name():
    assert policy_names() == ["sarathi", "sglang", "static", "transformers", "trtllm", "trtllm-max-util", "vllm-v1"]
    assert [policy(n).name for n in policy_names()] == policy_names()
    assert all(isinstance(policy(n), Policy) for n in policy_names())
    assert Scheduler().policy == "vllm-v1"
    assert matching_scheduler(ServerSettings()).policy == "transformers"


def test_an_unknown_policy_names_the_known_ones():
    message = "unknown scheduler policy 'vllm'; known: sarathi, sglang, static, transformers, trtllm, trtllm-max-util, vllm-v1"
    with pytest.raises(UnknownPolicyError, match=message):
        policy("vllm")
    with pytest.raises(RidgelineError, match="unknown scheduler policy 'fifo'; known: sarathi, "):
        simulate(MODEL, DEVICE, poisson(1.0, 2, 10, 2), Scheduler(policy="fifo"))


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="'static' is registered twice"):
        register("static")(type("Again", (Policy,), {"schedule": lambda self, server, now: None}))
    assert type(policy("static")).__name__ == "StaticFCFS"


def test_the_run_records_its_policy():
    r = simulate(MODEL, DEVICE, poisson(1.0, 2, 10, 2), Scheduler(policy="static"))
    assert r.meta["scheduler"]["policy"] == "static"


def test_transformers_runs_the_vllm_v1_loop_but_admits_after_a_preemption():
    """transformers' policy is vLLM V1's loop with the FIFO margin. The two ran bit for bit
    alike until vLLM V1's rule that a step which preempted admits nobody (issue 26, item 5b);
    transformers' FIFOScheduler keeps filling such a step, so the runs now part there."""
    arrivals = poisson(30.0, 200, 300, 40, seed=2)
    settings = dict(max_batch=16, token_budget=256, kv_blocks=120, admit_margin=0.15, batch_attention="gather")
    a = simulate("qwen2-0.5b", DEVICE, arrivals, Scheduler(policy="transformers", **settings))
    b = simulate("qwen2-0.5b", DEVICE, arrivals, Scheduler(**settings))
    assert a.summary["preemptions"] > 0 and b.summary["preemptions"] > 0
    assert not np.array_equal(a.requests["ttft_s"], b.requests["ttft_s"])


# r0 at 0 s, r1 at 0.5 s, 4 prompt and 3 output tokens each; budget 5 tokens, 3 blocks of 4
PREEMPTING = trace((0.0, 4, 3), (0.5, 4, 3))


def test_vllm_v1_admits_nobody_in_a_step_that_preempted():
    """vLLM V1's scheduler reads the waiting queue only ``if not preempted_reqs``
    (vllm/v1/core/sched/scheduler.py). Worked by hand, steps of 1 s:

    step 1 at 0 s: r0's 4 prompt tokens (1 block).
    step 2 at 1 s: r0 decodes (5 tokens: 2 blocks); r1 admitted with 4 of the budget's
        remaining 4 tokens (1 block): 3 blocks used.
    step 3 at 2 s: r0 (6 tokens, still 2 blocks) and r1 (5 tokens: a 2nd block) need 4
        blocks of 3, so r1, admitted last, is preempted (frees 1: 2 used). r1 would fit
        again (its first 4 of 5 tokens in 1 block, 4 tokens of budget left), but the step
        preempted: r0 runs alone.
    step 4 at 3 s: r0 finished (3 tokens at 1, 2, 3 s); r1 recomputes its 4 prompt
        tokens and the 1 emitted (5 tokens, 2 blocks), emitting its 2nd token at 4 s.
    step 5 at 4 s: r1's 3rd token at 5 s.
    transformers' policy re-admits r1 in step 3 (4 tokens), and step 4 is its last chunk."""
    s = run_steps("vllm-v1", PREEMPTING, blocks=3, max_batch=3, token_budget=5)
    assert s.steps == [{0: 4}, {0: 1, 1: 4}, {0: 1}, {1: 5}, {1: 1}]
    assert s.line["kv_blocks"] == [1, 3, 2, 2, 2]
    assert s.line["tokens"] == [4, 5, 1, 5, 1]
    np.testing.assert_array_equal(s.preempted, [0, 1])
    np.testing.assert_array_equal(s.finish, [3.0, 5.0])
    t = run_steps("transformers", PREEMPTING, blocks=3, max_batch=3, token_budget=5)
    assert t.steps == [{0: 4}, {0: 1, 1: 4}, {0: 1, 1: 4}, {1: 1}, {1: 1}]
    assert t.line["kv_blocks"] == [1, 3, 3, 2, 2]


def test_the_issue_26_run_preempts_as_vllm_v1():
    """Issue 26's reproduction (llama-2-7b on an a6000, flash, 400 Poisson requests at 2/s
    of 1024 + 512 tokens, seed 1, 800 KV blocks, budget 512): admitting in the step that
    preempted gave 11,026 preemptions and a TTFT p50 of 375 s; with vLLM V1's rule, 5,890
    and 289 s (the rule is exact, so the counts are too)."""
    arrivals = poisson(2.0, 400, 1024, 512, seed=1)
    r = simulate("llama-2-7b", "a6000", arrivals, Scheduler(token_budget=512, kv_blocks=800), attention="flash")
    assert r.summary["preemptions"] == 5890
    assert r.summary["ttft_s"]["p50"] == pytest.approx(289, abs=0.5)


# --- static batching ---------------------------------------------------------------------

# r0 and r1 at 0 s, r2 at 0.5 s, r3 at 1.5 s; budget 8 tokens, up to 3 requests, 4-token blocks
FOUR = trace((0.0, 3, 2), (0.0, 2, 3), (0.5, 4, 1), (1.5, 2, 2))


def test_static_batch_runs_to_completion_before_the_next():
    """Worked by hand, steps of 1 s:

    step 1 at 0 s: idle, so a batch forms from the queue: r0 (3 prompt tokens), r1 (2); both
        emit their first token at 1 s.
    step 2 at 1 s: r2 waits (arrived at 0.5 s) while r0 and r1 decode; r0 has its 2 tokens
        at 2 s and leaves.
    step 3 at 2 s: r2 and r3 wait while r1 decodes alone; r1 has its 3 tokens at 3 s.
    step 4 at 3 s: idle again: r2 (4 tokens) and r3 (2) form the next batch; r2's first
        token is its only one (leaves at 4 s).
    step 5 at 4 s: r3 decodes its second token (5 s).
    KV blocks of 4 tokens: 1 each for r0 and r1 (2, 2; r0's 4 tokens free 1 block: 1),
    then 1 each for r2 and r3 (2; r2 leaves: 1)."""
    s = run_steps("static", FOUR, max_batch=3, token_budget=8)
    assert s.steps == [{0: 3, 1: 2}, {0: 1, 1: 1}, {1: 1}, {2: 4, 3: 2}, {3: 1}]
    assert s.line["start_s"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert s.line["waiting"] == [0, 1, 2, 0, 0]
    assert s.line["tokens"] == [5, 2, 1, 6, 1]
    assert s.line["kv_blocks"] == [2, 2, 1, 2, 1]
    np.testing.assert_array_equal(s.admitted, [0.0, 0.0, 3.0, 3.0])
    np.testing.assert_array_equal(s.first, [1.0, 1.0, 4.0, 4.0])
    np.testing.assert_array_equal(s.finish, [2.0, 3.0, 4.0, 5.0])


def test_vllm_v1_admits_the_same_requests_into_running_batches():
    """The same trace under vLLM V1, by hand: r2 joins r0 and r1's decodes at 1 s (1 + 1 + 4
    tokens), r3 joins r1 at 2 s; one step fewer, and r2 done at 2 s instead of 4 s."""
    s = run_steps("vllm-v1", FOUR, max_batch=3, token_budget=8)
    assert s.steps == [{0: 3, 1: 2}, {0: 1, 1: 1, 2: 4}, {1: 1, 3: 2}, {3: 1}]
    np.testing.assert_array_equal(s.admitted, [0.0, 0.0, 1.0, 2.0])
    np.testing.assert_array_equal(s.finish, [2.0, 3.0, 2.0, 4.0])


def test_a_static_batch_is_what_the_budget_admits():
    """Budget 6, prompts of 4: step 1 admits r0 whole and r1's first 2 tokens, and that is the
    batch (budget spent); r2 and r3 wait. Step 2: r0 decodes its 2nd and last token, r1
    computes its last 2 prompt tokens (first token at 2 s); steps 3 and 4: r1 decodes alone
    (its 3rd token at 4 s). Step 5 at 4 s forms r2 + r3's batch: 4 + 2 tokens."""
    four = trace((0.0, 4, 2), (0.0, 4, 3), (0.0, 4, 1), (0.0, 4, 1))
    s = run_steps("static", four, max_batch=4, token_budget=6)
    assert s.steps[:5] == [{0: 4, 1: 2}, {0: 1, 1: 2}, {1: 1}, {1: 1}, {2: 4, 3: 2}]
    np.testing.assert_array_equal(s.admitted, [0.0, 0.0, 4.0, 4.0])


# --- Sarathi-Serve -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sarathi", "vllm-v1"])
def test_sarathi_chunks_prompts_around_the_decodes(name):
    """Budget 4 tokens. By hand, steps of 1 s:

    step 1 at 0 s: r0's prompt (2 tokens); first token at 1 s.
    step 2 at 1 s: r0 decodes (1), r1 (arrived 0.5 s) gets 3 of its 7 prompt tokens.
    step 3 at 2 s: r0 decodes first (1), then r1's next 3; r2 (arrived 1.5 s) finds no
        budget. r0 has its 3 tokens at 3 s.
    step 4 at 3 s: r1's last prompt token (1), r2's whole prompt (1): both emit at 4 s.
    step 5 at 4 s: both decode; done at 5 s.
    vLLM V1 schedules the same: its admission order already has the decodes first."""
    three = trace((0.0, 2, 3), (0.5, 7, 2), (1.5, 1, 2))
    s = run_steps(name, three, token_budget=4)
    assert s.steps == [{0: 2}, {0: 1, 1: 3}, {0: 1, 1: 3}, {1: 1, 2: 1}, {1: 1, 2: 1}]
    np.testing.assert_array_equal(s.first, [1.0, 4.0, 4.0])
    np.testing.assert_array_equal(s.finish, [3.0, 5.0, 5.0])


@pytest.mark.parametrize("name, chunk", [("vllm-v1", [4, 0]), ("sarathi", [3, 1])])
def test_sarathi_never_stalls_a_decode_behind_a_prompt(name, chunk):
    """A state where a prompt (A: 10 tokens, 4 computed, 6 to go) runs ahead of a decode
    (B: 3-token prompt, one token out) with a budget of 4. vLLM V1's admission order gives A
    the budget and B nothing (a stall); Sarathi gives B its token first, A the other 3."""
    s = ServerState(
        trace((0.0, 10, 5), (0.0, 3, 5)), Scheduler(token_budget=4), SimpleNamespace(window=None, spans=None), 50, 4
    )
    # the running requests: id, prompt, output, emitted, cached
    s.run = [np.array(v) for v in ([0, 1], [10, 3], [5, 5], [0, 1], [4, 3])]
    s.used = 2
    assert policy(name).schedule(s, 0.0).tolist() == chunk
    assert (s.tokens, s.pure, s.used) == (4, False, 3)  # A's 8th token opens its 2nd block


# --- every policy ------------------------------------------------------------------------


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["sarathi", "static", "transformers"]),
    budget=st.integers(16, 400),
    batch=st.integers(1, 8),
    blocks=st.integers(40, 150),
    seed=st.integers(0, 3),
)
def test_tokens_are_conserved_under_every_policy(name, budget, batch, blocks, seed):
    """As test_simulate's conservation, for the other policies: every request gets its
    tokens, the model runs each once plus what preemptions threw away, within the limits."""
    rng = np.random.default_rng(seed)
    n = 20
    prompt, out = rng.integers(1, 300, n), rng.integers(1, 40, n)
    arrivals = Arrivals(np.sort(rng.uniform(0, 2, n)), prompt, out)
    r = simulate(
        MODEL, DEVICE, arrivals, Scheduler(policy=name, max_batch=batch, token_budget=budget, kv_blocks=blocks)
    )
    s = r.summary
    assert np.all(np.isfinite(r.requests["latency_s"]))
    assert s["computed_tokens"] == int(np.sum(prompt + out - 1)) + s["recomputed_tokens"]
    assert np.all(r.timeline["kv_blocks"] <= blocks)
    assert np.all(r.timeline["running"] <= batch) and np.all(r.timeline["tokens"] <= budget)


def test_static_admits_only_an_idle_server():
    """Over a loaded random trace: every admission happens at a step that started with no
    request running (the step's recorded requests are all newly admitted)."""
    rng = np.random.default_rng(0)
    arrivals = Arrivals(np.sort(rng.uniform(0, 10, 40)), rng.integers(1, 30, 40), rng.integers(1, 10, 40))
    s = run_steps("static", arrivals, max_batch=4, token_budget=64)
    starts = np.array(s.line["start_s"])
    assert len(set(s.admitted)) > 5  # several batches
    for when in set(s.admitted):
        step = s.steps[int(np.flatnonzero(starts == when)[0])]
        assert all(s.admitted[r] == when for r in step)
