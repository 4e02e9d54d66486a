"""MLPerf Inference scenarios (``simulate --scenario``): LoadGen's percentile and bounds worked
by hand, the rate search on deterministic cases, the data set's length generator against its
cited statistics, bad input, and the RESULTS.md section against a recomputation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from ridgeline.api import mlperf_lengths
from ridgeline.cli import app
from ridgeline.serving import scenarios
from ridgeline.serving.scenarios import SCENARIOS, dataset_lengths, highest_rate, loadgen_percentile, meets

ROOT = Path(__file__).resolve().parent.parent
MLPERF = ROOT / "reports" / "mlperf"
runner = CliRunner()


def test_loadgen_percentile_is_the_order_statistic_at_floor_n_p():
    # loadgen/results.cc: sorted[n * p]
    assert loadgen_percentile(np.arange(1.0, 101.0), 0.99) == 100.0  # index 99 of 100
    assert loadgen_percentile(np.arange(1.0, 201.0), 0.99) == 199.0  # index 198 of 200
    assert loadgen_percentile(np.array([3.0, 1.0, 2.0, 4.0]), 0.5) == 3.0  # index 2 of [1, 2, 3, 4]
    assert loadgen_percentile(np.array([np.nan, 5.0]), 0.99) == 5.0  # one-token requests have no TPOT


def test_the_scenarios_carry_mlperf_conf_bounds():
    assert (SCENARIOS["server"].ttft_s, SCENARIOS["server"].tpot_s) == (2.0, 0.2)
    assert (SCENARIOS["interactive"].ttft_s, SCENARIOS["interactive"].tpot_s) == (0.45, 0.04)
    assert SCENARIOS["offline"].ttft_s is None and SCENARIOS["offline"].min_queries == 24576


def requests_at(ttft: float, tpot: float, n: int = 100) -> dict[str, np.ndarray]:
    """n requests, all fast but the slowest one, which has the given TTFT and TPOT."""
    return {"ttft_s": np.r_[np.full(n - 1, 0.1), ttft], "tpot_s": np.r_[np.full(n - 1, 0.01), tpot]}


def test_both_bounds_apply_at_the_99th_percentile():
    server = SCENARIOS["server"]
    # 100 requests: the p99 is the slowest one (index 99)
    assert meets(requests_at(2.0, 0.2), server)  # at the bounds: valid
    assert not meets(requests_at(2.01, 0.1), server)
    assert not meets(requests_at(1.0, 0.21), server)
    # 200 requests: index 198, so the single slowest one does not count
    slow = {"ttft_s": np.r_[np.full(199, 0.1), 9.0], "tpot_s": np.r_[np.full(199, 0.01), 9.0]}
    assert meets(slow, server)
    assert not meets(requests_at(0.5, 0.05), SCENARIOS["interactive"])  # 450 ms and 40 ms
    assert meets(requests_at(9.0, 9.0), SCENARIOS["offline"])  # no bounds


def test_the_rate_search_returns_the_highest_rate_meeting_both_bounds():
    """A deterministic server whose slowest request has TTFT 0.5 x rate and TPOT 0.04 x rate:
    TTFT meets 2 s up to rate 4, TPOT meets 200 ms up to rate 5, so the answer is 4."""
    server = SCENARIOS["server"]
    found = highest_rate(lambda r: meets(requests_at(0.5 * r, 0.04 * r), server), start=1.0)
    assert 4.0 / 1.02 <= found["max_rate"] <= 4.0
    assert all(t["meets"] == (t["rate"] <= 4.0) for t in found["tried"])
    # from above, and the TPOT bound binding (TTFT meets up to 10, TPOT up to 2.5)
    found = highest_rate(lambda r: meets(requests_at(0.2 * r, 0.08 * r), server), start=100.0)
    assert 2.5 / 1.02 <= found["max_rate"] <= 2.5
    assert highest_rate(lambda r: False, start=1.0)["max_rate"] == 0.0


@pytest.fixture(scope="module")
def lengths():
    return mlperf_lengths()


def test_the_generator_reproduces_the_data_set_statistics(lengths):
    n = lengths["samples"]
    prompt, output = dataset_lengths(lengths, n, seed=0, generated=False)
    for drawn, cited in ((prompt, lengths["prompt_tokens"]), (output, lengths["reference_output_tokens"])):
        assert drawn.mean() == pytest.approx(cited["mean"], rel=0.02)
        assert cited["min"] <= drawn.min() and drawn.max() <= cited["max"]
        for q in (10, 50, 90):
            assert np.percentile(drawn, q) == pytest.approx(cited["percentiles"][q], rel=0.05, abs=2)


def test_generated_outputs_have_the_reference_runs_tokens_per_sample(lengths):
    _, output = dataset_lengths(lengths, lengths["samples"], seed=0)
    assert output.mean() == pytest.approx(lengths["generated_tokens_per_sample"], rel=0.02)
    assert 1 <= output.min() and output.max() <= lengths["max_new_tokens"]


def test_the_first_samples_do_not_depend_on_how_many_are_drawn(lengths):
    short, long = dataset_lengths(lengths, 50, seed=3), dataset_lengths(lengths, 500, seed=3)
    for a, b in zip(short, long):
        np.testing.assert_array_equal(a, b[:50])


def test_the_cited_summary_is_consistent(lengths):
    for key in ("prompt_tokens", "reference_output_tokens"):
        q = lengths[key]["percentiles"]
        assert len(q) == 101 and q == sorted(q)
        assert (q[0], q[-1]) == (lengths[key]["min"], lengths[key]["max"])
    assert lengths["sources"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--scenario", "sever"], "unknown scenario 'sever'; choose one of: server, interactive, offline."),
        (["--scenario", "server", "--instances", "0"], "--instances must be at least 1, got 0"),
        (["--scenario", "server", "--duration", "0"], "--duration must be a positive number of seconds, got 0"),
        (["--scenario", "offline", "--search", "--ttft-slo", "1"], "drop --search, --ttft-slo"),
        (["--scenario", "offline", "--requests", "0"], "--requests must be at least 1, got 0"),
    ],
)
def test_bad_scenario_input_is_one_line(args, message):
    result = runner.invoke(app, ["simulate", "llama-3.2-1b", "-H", "h100-sxm", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_a_server_run_meets_its_bounds_and_scales_with_instances():
    args = ["simulate", "llama-3.2-1b", "-H", "a6000", "--scenario", "interactive", "--duration", "5"]
    one = json.loads(runner.invoke(app, [*args, "--requests", "50", "-f", "json"]).output)["mlperf"]
    two = json.loads(runner.invoke(app, [*args, "--requests", "50", "--instances", "2", "-f", "json"]).output)
    two = two["mlperf"]
    assert one["latency"]["ttft_s"] <= 0.45 and one["latency"]["tpot_s"] <= 0.04
    # one copy at rate / 2 each: the same search from half the start finds rates within its tolerance
    assert two["rate_per_instance"] == pytest.approx(one["rate_per_instance"], rel=0.03)
    assert two["tokens_per_s"] == pytest.approx(2 * two["tokens_per_s_per_instance"], rel=1e-12)
    assert one["tokens_per_s"] == pytest.approx(one["rate_per_instance"] * one["mean_output_tokens"], rel=1e-12)


def test_an_offline_run_is_tokens_over_its_makespan():
    args = ["simulate", "llama-3.2-1b", "-H", "a6000", "--scenario", "offline", "--duration", "1"]
    data = json.loads(runner.invoke(app, [*args, "--requests", "64", "-f", "json"]).output)
    times = data["requests"]
    tokens = sum(times["output"])
    assert min(times["arrival_s"]) == max(times["arrival_s"]) == 0.0
    assert data["mlperf"]["tokens_per_s"] == pytest.approx(tokens / max(times["finish_s"]), rel=1e-9)
    assert data["summary"]["duration_s"] >= 1.0  # samples added until the run lasts --duration


def test_the_results_section_divides_each_prediction_by_its_published_figure():
    published = yaml.safe_load((MLPERF / "llama2-70b.yaml").read_text())
    predicted = json.loads((ROOT / "reports" / "results" / "mlperf-predictions.json").read_text())["predictions"]
    text = (ROOT / "reports" / "results" / "mlperf.md").read_text()
    start = text.index("## MLPerf Inference")
    rows = [line.strip("|").split(" | ") for line in text[start:].splitlines() if line.startswith("| 5.0-")]
    assert len(rows) == len(predicted) == sum(len(s["tokens_per_s"]) for s in published["systems"].values())
    for row, p in zip(rows, predicted):
        system = published["systems"][p["system"]]
        paid = system["tokens_per_s"][p["scenario"]]
        assert row[0].strip() == system["result_id"] and row[2] == p["scenario"]
        assert float(row[4].replace(",", "")) == pytest.approx(paid, abs=0.05)
        assert float(row[6]) == pytest.approx(p["tokens_per_s"] / paid, abs=0.005)
        assert p["settings"]["tp"] == system["tp"] and p["settings"]["instances"] == system["instances"]


def test_scenario_names_are_exact():
    with pytest.raises(scenarios.UnknownScenarioError, match="Did you mean: offline"):
        scenarios.scenario("Offline")


def test_a_batch_larger_than_the_token_budget_decodes_at_most_the_budget():
    """TensorRT-LLM's configs run a batch above max_num_tokens (H200: 2048 and 1536); a step of
    decodes alone then holds at most the budget's tokens (the step cost's decode table used to
    index past its token table)."""
    from ridgeline.api import simulate
    from ridgeline.serving.simulator import Scheduler

    arrivals = scenarios.offline_arrivals(np.full(40, 8), np.full(40, 6))
    result = simulate("llama-3.2-1b", "a6000", arrivals, Scheduler(max_batch=64, token_budget=32))
    assert (result.requests["output"] == 6).all() and max(result.timeline["tokens"]) <= 32
