"""Speculative steps in the simulator: acceptance 1 gives k + 1 tokens a step, the mean
tokens per step is the truncated geometric's, each step costs the engine's verify pass and
the draft's steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.engine.speculative import expected_tokens
from ridgeline.errors import RidgelineError
from ridgeline.io.resolve import load_model
from ridgeline.serving.arrivals import Arrivals, poisson
from ridgeline.serving.simulator import Scheduler, _run, kv_block_count, simulate_deployment
from ridgeline.serving.speculative import Speculation, kv_blocks_with_draft, maker, simulate_speculative
from ridgeline.serving.step_cost import build_step_cost, step_time

TARGET, DRAFT, DEVICE = "llama-3.2-1b", "qwen2-0.5b", "a6000"
runner = CliRunner()


@pytest.fixture
def d(llama_1b):
    return llama_1b


def _spec(d, k: int, a: float, seed: int = 0) -> Speculation:
    return Speculation(d.with_model(load_model(DRAFT)), k, a, seed)


@pytest.mark.parametrize("k", [1, 4, 7])
def test_acceptance_one_gives_k_plus_one_tokens_a_step(d, k):
    """A lone request of 1 + 3(k + 1) output tokens: its prompt step, then exactly three
    steps of k + 1 tokens each; the second costs the target's pass over k + 1 tokens with
    P + k + 1 cached plus the draft's k decode steps over P + k + 1 .. P + 2k cached."""
    prompt, out = 300, 1 + 3 * (k + 1)
    s = Scheduler()
    r = simulate_speculative(d, poisson(1.0, 1, prompt, out), _spec(d, k, 1.0), s)
    line = r.timeline
    assert line["tokens"].tolist() == [prompt] + [k + 1] * 3
    assert r.summary["speculative"]["tokens_per_verify"] == k + 1
    assert r.summary["speculative"]["accepted_tokens"] == 3 * k
    target = build_step_cost(d.model, d.plan, d.ceilings, s.token_budget, s.max_batch)
    small = _spec(d, k, 1.0).draft
    draft = build_step_cost(small.model, small.plan, small.ceilings, s.token_budget, s.max_batch)
    cached = prompt + k + 1  # the prompt, the first token and k accepted drafts
    by_hand = step_time(target, [], [(k + 1, cached)], 0, 0.0)
    by_hand += sum(draft.decode_time(1, float(cached + i)) for i in range(k))
    assert line["step_s"][2] == pytest.approx(by_hand, rel=1e-12)
    assert r.requests["output"][0] == out and np.isfinite(r.requests["latency_s"][0])


def _truncated_geometric(k: int, a: float) -> tuple[float, float]:
    """Mean and variance of T = min(G, k) + 1, P(G >= i) = a^i: P(T = j + 1) = a^j (1 - a)
    for j < k, P(T = k + 1) = a^k."""
    t = np.arange(1, k + 2)
    p = np.append(a ** np.arange(k) * (1 - a), a**k)
    mean = float(np.dot(t, p))
    return mean, float(np.dot((t - mean) ** 2, p))


@pytest.mark.parametrize("k, a", [(4, 0.6), (2, 0.85), (6, 0.3)])
def test_mean_tokens_per_step_is_the_truncated_geometric_mean(d, k, a):
    """Over the verifies no output cap truncates (k + 1 tokens verified, k + 1 or more still
    owed), the mean tokens a step is (1 - a^(k+1)) / (1 - a), within 4 standard errors of
    the truncated geometric's variance over that many draws."""
    n = 40
    arrivals = Arrivals(np.linspace(0.0, 0.5, n), np.full(n, 64), np.full(n, 1500))
    r = simulate_speculative(d, arrivals, _spec(d, k, a, seed=k), Scheduler(max_batch=64))
    spec = r.summary["speculative"]
    mean, var = _truncated_geometric(k, a)
    assert mean == pytest.approx(float(expected_tokens(k, a)), rel=1e-12)
    assert spec["full_verifies"] > 10000
    assert abs(spec["tokens_per_full_verify"] - mean) < 4 * np.sqrt(var / spec["full_verifies"])
    assert r.summary["output_tokens"] == n * 1500


def test_acceptance_zero_gives_one_token_a_step(d):
    r = simulate_speculative(d, poisson(5.0, 20, 100, 50, seed=1), _spec(d, 3, 0.0))
    assert r.summary["speculative"]["tokens_per_verify"] == 1.0
    assert r.summary["speculative"]["accepted_tokens"] == 0


def test_same_seed_same_run_other_seed_other_draws(d):
    arrivals = poisson(8.0, 30, 200, 120, seed=2)
    one, two = (simulate_speculative(d, arrivals, _spec(d, 4, 0.7, seed=5)) for _ in range(2))
    other = simulate_speculative(d, arrivals, _spec(d, 4, 0.7, seed=6))
    assert np.array_equal(one.requests["latency_s"], two.requests["latency_s"])
    assert not np.array_equal(one.requests["latency_s"], other.requests["latency_s"])


def test_the_draft_takes_memory_from_the_cache(d):
    """The draft's weights leave less room, and each block holds both models' KV."""
    s = Scheduler()
    alone = kv_block_count(d.model, d.device, d.plan, s)
    assert 0 < kv_blocks_with_draft(d, _spec(d, 4, 0.7), s) < alone
    assert kv_blocks_with_draft(d, _spec(d, 4, 0.7), Scheduler(kv_blocks=77)) == 77


def test_kv_blocks_are_returned(d):
    """A tight cache with preemptions: every block taken is given back by the end."""
    arrivals = poisson(50.0, 60, 200, 150, seed=3)
    tight = Scheduler(max_batch=32, kv_blocks=90)
    server = maker(d, arrivals, tight, _spec(d, 5, 0.5))(0)
    _run(server, arrivals, None)
    assert server.used == 0 and server.preemptions > 0
    r = simulate_speculative(d, arrivals, _spec(d, 5, 0.5), tight)
    assert r.summary["preemptions"] == server.preemptions
    assert r.summary["output_tokens"] == 60 * 150
    assert np.all(np.isfinite(r.requests["latency_s"]))
    plain = simulate_deployment(d, arrivals, Scheduler(max_batch=32, kv_blocks=90))
    assert r.summary["steps"] < plain.summary["steps"]


@pytest.mark.parametrize(
    "k, a, message",
    [
        (-1, 0.5, "draft tokens must be a whole number from 0 to 64, got -1"),
        (65, 0.5, "draft tokens must be a whole number from 0 to 64, got 65"),
        (2.0, 0.5, "draft tokens must be a whole number from 0 to 64, got 2.0"),
        (4, 1.5, "acceptance must be between 0 and 1, got 1.5"),
        (4, float("nan"), "acceptance must be between 0 and 1, got nan"),
    ],
)
def test_bad_speculation_is_refused(d, k, a, message):
    with pytest.raises(RidgelineError) as err:
        _spec(d, k, a)
    assert str(err.value) == message


def test_cli_speculative(d):
    """``simulate --draft``: the speculation line, and JSON's summary.speculative as the API's."""
    args = ["simulate", TARGET, "-H", DEVICE, "--requests", "30", "--rate", "10", "--draft", DRAFT]
    args += ["--draft-tokens", "3", "--acceptance", "0.8"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert f"speculative ({DRAFT}, k=3, a=0.8)" in table.output
    data = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    api = simulate_speculative(d, poisson(10.0, 30, 512, 128, seed=0), _spec(d, 3, 0.8))
    assert data["summary"]["speculative"] == api.summary["speculative"]
    bad = runner.invoke(app, [*args, "--acceptance", "1.5"])
    assert bad.exit_code == 2 and "acceptance must be between 0 and 1, got 1.5" in bad.output
