"""The api functions the CLI calls (ridgeline.api, the block used by the CLI): each checked
against the engine or simulator call it stands for, or against hand-worked combinations."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ridgeline import api
from ridgeline.api import analyze
from ridgeline.cli import app
from ridgeline.io.resolve import load_model, resolve
from ridgeline.serving import simulator
from ridgeline.serving.arrivals import poisson


@pytest.fixture(scope="module")
def d():
    return resolve("llama-2-7b", "a6000")


def test_setting_combinations_in_product_order_over_the_base():
    got = api.setting_combinations({"w_dtype": ["int4", "int8"], "tp": [1, 2]}, {"w_dtype": "fp16", "a_dtype": "bf16"})
    assert got == [
        {"a_dtype": "bf16", "w_dtype": "int4", "tp": 1},
        {"a_dtype": "bf16", "w_dtype": "int4", "tp": 2},
        {"a_dtype": "bf16", "w_dtype": "int8", "tp": 1},
        {"a_dtype": "bf16", "w_dtype": "int8", "tp": 2},
    ]
    assert api.setting_combinations({}, {"kv_dtype": "fp8"}) == [{"kv_dtype": "fp8"}]  # nothing listed: the base once


def test_sweep_settings_has_a_row_per_combination_and_point(d):
    frame = api.sweep_settings(d, {"w_dtype": ["int4", "fp16"], "tp": [1, 2]}, [1, 4], [256, 512])
    assert len(frame) == 2 * 2 * 2 * 2
    by = frame.set_index(["w_dtype", "tp", "batch", "seq_len"])["weights_bytes"]
    # int4 weights are about a quarter of fp16 (scales on top); tp 2 halves each device's share
    assert 0.25 < by["int4", 1, 1, 512] / by["fp16", 1, 1, 512] < 0.3
    assert by["fp16", 2, 4, 256] == pytest.approx(by["fp16", 1, 4, 256] / 2, rel=0.02)


def test_compare_settings_gives_the_dtype_where_not_listed():
    frame = api.compare_settings("llama-2-7b", ["a6000", "h100-sxm"], {"kv_dtype": ["fp8"]}, "bf16", generate=16)
    assert frame["hardware"].tolist() == ["a6000", "h100-sxm"]
    assert set(frame["settings"]) == {"w_dtype=bf16, a_dtype=bf16, kv_dtype=fp8"}


def test_analyze_with_draft_adds_speculative_figures_only_with_a_draft(d):
    plain = api.analyze_with_draft(d, batch=1, seq_len=128, generate=8, draft=None, draft_tokens=4, acceptance=0.7)
    assert "speculative" not in plain.extra
    assert plain.generation == analyze(d, batch=1, seq_len=128, generate=8).generation
    drafted = api.analyze_with_draft(
        d, batch=1, seq_len=128, generate=8, draft="llama-2-7b", draft_tokens=3, acceptance=0.5
    )
    expected = api.speculative(  # the generation's 8 tokens: speculation is priced over the same steps
        d,
        draft=d.with_model(load_model("llama-2-7b")),
        batch=1,
        seq_len=128,
        generate=8,
        draft_tokens=3,
        acceptance=0.5,
    )
    assert drafted.extra["speculative"] == expected


def test_simulate_serving_is_the_simulator_on_poisson_arrivals(d):
    sched = simulator.Scheduler(max_batch=16)
    run = api.simulate_serving(d, sched, rate=2.0, requests=30, prompt=256, output_tokens=32, seed=3, ttft_slo=10.0)
    direct = api.simulate(d, None, poisson(2.0, 30, 256, 32, 3), sched)
    assert run["result"].summary == direct.summary
    assert run["goodput"] == simulator.goodput(direct, 10.0, None)
    assert run["search"] is None


@pytest.mark.slow
def test_simulate_serving_search_serves_at_the_rate_found(d):
    sched = simulator.Scheduler(max_batch=16)
    arrivals = {"requests": 30, "prompt": 256, "output_tokens": 32, "seed": 1}
    run = api.simulate_serving(d, sched, **arrivals, rate=1.0, search=True, ttft_slo=2.0, percentile=90)
    found = run["search"]["max_rate"]
    assert found and found > 0
    direct = api.simulate(d, None, poisson(found, 30, 256, 32, 1), sched)
    assert run["result"].summary == direct.summary


def test_frontier_says_when_no_batch_meets_the_targets():
    """A TPOT target below even batch 1's (about 18 ms on an A6000) leaves nothing to pick."""
    result = CliRunner().invoke(app, ["frontier", "llama-2-7b", "--tpot-slo", "0.00001", "--format", "json"])
    assert result.exit_code == 0
    notes = json.loads(result.stdout)["notes"]
    assert notes[-2:] == ["largest batch that fits: 42", "no batch meets the targets"]
