"""Trace loading and the ``ridgeline simulate`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.io.traces import load_trace
from ridgeline.serving.arrivals import poisson

runner = CliRunner()


def test_csv_trace(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,10,3\n0.1,20,4\n")
    t = load_trace(path)
    np.testing.assert_array_equal(t.time_s, [0.0, 0.4])  # sorted, from the first arrival
    np.testing.assert_array_equal(t.prompt, [20, 10])
    np.testing.assert_array_equal(t.output, [4, 3])


def test_jsonl_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival": 0, "prompt": 5, "output": 2}\n{"arrival": 2, "prompt": 6, "output": 1}\n')
    t = load_trace(path)
    assert list(t.prompt) == [5, 6] and t.rate == pytest.approx(0.5)


def test_azure_trace_columns(tmp_path):
    """The Azure LLM inference trace's header and date format."""
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    t = load_trace(path)
    assert t.time_s[1] == pytest.approx(50.9951690 - 46.6805900, abs=1e-6)
    assert list(t.prompt) == [374, 396] and list(t.output) == [44, 109]


@pytest.mark.parametrize(
    "text, message",
    [
        ("when,prompt_tokens,output_tokens\n0,1,1\n", "no arrival time column"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1,0\n", "output tokens < 1"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1.5,2\n", "whole token counts"),
        ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
    ],
)
def test_bad_traces(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(RidgelineError, match=message):
        load_trace(path)


def test_poisson_rate_and_seed():
    a = poisson(10.0, 20000, 100, 10, seed=1)
    assert a.rate == pytest.approx(10.0, rel=0.03)  # 1/sqrt(20000) = 0.7 % standard error
    assert np.array_equal(a.time_s, poisson(10.0, 20000, 100, 10, seed=1).time_s)


def test_cli_json(tmp_path):
    out = tmp_path / "sim.json"
    timeline = tmp_path / "steps.csv"
    result = runner.invoke(
        app,
        [
            "simulate",
            "llama-3.2-1b",
            "-H",
            "a6000",
            "--rate",
            "20",
            "--requests",
            "50",
            "--prompt",
            "200",
            "--output-tokens",
            "20",
            "--ttft-slo",
            "0.1",
            "-f",
            "json",
            "-o",
            str(out),
            "--timeline",
            str(timeline),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["summary"]["requests"] == 50 and len(data["requests"]["ttft_s"]) == 50
    assert data["summary"]["output_tokens"] == 50 * 20
    assert 0 <= data["goodput"]["slo_attainment"] <= 1
    assert timeline.read_text().startswith("start_s,step_s,kv_blocks")


def test_cli_csv_trace_and_table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n0.01,50,3\n")
    result = runner.invoke(app, ["simulate", "llama-3.2-1b", "-H", "a6000", "--trace", str(path), "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("arrival_s,prompt,output,queue_s,ttft_s")
    assert len(result.output.splitlines()) == 3
    table = runner.invoke(app, ["simulate", "llama-3.2-1b", "-H", "a6000", "--trace", str(path)])
    assert table.exit_code == 0 and "TTFT" in table.output and "goodput" not in table.output  # no SLO given


@pytest.mark.slow
def test_cli_search(tmp_path):
    result = runner.invoke(
        app,
        [
            "simulate",
            "llama-3.2-1b",
            "-H",
            "a6000",
            "--requests",
            "200",
            "--prompt",
            "256",
            "--output-tokens",
            "32",
            "--ttft-slo",
            "0.2",
            "--percentile",
            "90",
            "--search",
            "-f",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)["search"]
    assert found["max_rate"] > 0 and any(not t["meets"] for t in found["tried"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rate", "-1"], "--rate must be a positive"),
        (["--trace", "missing.csv"], "no trace file"),
        (["--search"], "needs a latency target: ttft_slo or tpot_slo, seconds (set with --ttft-slo)"),
        (["--prefix-hit", "1.5"], "prefix-hit must be in"),
        (["--micro-batches", "2"], "one micro-batch"),
        (["--percentile", "0"], "--percentile must be in (0, 100], got 0.0"),
        (
            ["--percentile", "101", "-H", "tpu-v5e"],
            "--percentile must be in (0, 100], got 101.0",
        ),  # no dtype note first
    ],
)
def test_cli_errors_are_one_line(args, message):
    result = runner.invoke(app, ["simulate", "llama-3.2-1b", "-H", "a6000", "--requests", "5", *args])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_resimulate_reproduces_the_committed_transformers_run():
    """Simulating the committed run's trace again gives the comparison it recorded (the
    engine, the profile and the scheduler mapping have not drifted since the run)."""
    from pathlib import Path

    from kernels.servecheck.cb_server import resimulate

    path = (
        Path(__file__).resolve().parent.parent
        / "reports"
        / "validation"
        / "serving"
        / "serving-cpu-amd-epyc-1t-qwen2-0.5b-1rps-2026-11-23.json"
    )
    recorded = json.loads(path.read_text())
    again = resimulate(path)
    assert set(again["comparison"]) == set(recorded["comparison"])
    for mode in recorded["comparison"]:
        for key in ("ttft_s", "latency_s"):
            assert again["comparison"][mode][key]["simulated"]["p50"] == pytest.approx(
                recorded["comparison"][mode][key]["simulated"]["p50"], rel=1e-9
            )
    result = runner.invoke(app, ["simulate-check", "--resimulate", "missing.json"])
    assert result.exit_code == 2 and "no serving run at missing.json" in result.output


def test_the_policy_chooses_the_attention_and_the_output_says_which(tmp_path):
    """Issue 26, item 5a: one 2048-token prompt (2 output tokens) of llama-2-7b on an a6000.
    The simulator priced it with eager attention (TTFT 234.5 ms) unless told otherwise,
    while it models vLLM V1, which runs FlashAttention: 199.6 ms with flash (the engine's
    prefill of 2048 tokens plus one decode step; the default now gives exactly that run)."""
    path = tmp_path / "t1.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,2048,2\n")
    runs = {}
    for extra in ([], ["--attention", "flash"], ["--attention", "eager"]):
        result = runner.invoke(
            app, ["simulate", "llama-2-7b", "-H", "a6000", "--trace", str(path), "-f", "json", *extra]
        )
        assert result.exit_code == 0, result.output
        runs[" ".join(extra)] = json.loads(result.stdout)
    default, flash, eager = runs[""], runs["--attention flash"], runs["--attention eager"]
    assert default["summary"]["ttft_s"]["p50"] == flash["summary"]["ttft_s"]["p50"]
    assert default["summary"]["ttft_s"]["p50"] == pytest.approx(0.1996, rel=1e-3)
    assert eager["summary"]["ttft_s"]["p50"] > 0.2
    assert default["meta"]["attention"].startswith("flash: the vllm-v1 policy's default (vLLM V1")
    assert eager["meta"]["attention"] == "eager: as set (the vllm-v1 policy's default is flash)"
    table = runner.invoke(app, ["simulate", "llama-2-7b", "-H", "a6000", "--trace", str(path)])
    assert "attention flash: the vllm-v1 policy's default" in table.stdout


def test_the_python_api_takes_the_policy_attention_too():
    from ridgeline.api import simulate
    from ridgeline.serving.arrivals import Arrivals
    from ridgeline.serving.scheduler import Scheduler

    one = Arrivals(np.array([0.0]), np.array([2048]), np.array([2]))
    r = simulate("llama-2-7b", "a6000", one)
    assert r.meta["settings"]["attention"] == "flash"
    assert r.summary["ttft_s"]["p50"] == pytest.approx(0.1996, rel=1e-3)
    t = simulate("llama-2-7b", "a6000", one, Scheduler(policy="transformers"))
    assert t.meta["attention"].startswith("flash: the transformers policy's default (transformers' sdpa path")
