"""Bad input found by trying the tool as a new user (issue 30): each is one line and exit 2
on the CLI, and a RidgelineError naming the setting in the API."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.cli import app

SIM = ["simulate", "llama-3.2-1b", "-H", "a6000", "--requests", "20", "--rate", "1"]


def _one_line_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and says in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf"])
@pytest.mark.parametrize("flag", ["--ttft-slo", "--tpot-slo"])
def test_slos_must_be_positive_seconds(flag, value):
    name = flag[2:].replace("-", "_")
    _one_line_exit_2([*SIM, flag, value, "--search"], f"{name} must be a positive number of seconds, got")
    _one_line_exit_2(["frontier", "llama-2-7b", flag, value], f"(set with {flag})")
    with pytest.raises(rl.RidgelineError, match=f"{name} must be a positive number of seconds"):
        rl.frontier("llama-2-7b", "a6000", **{name: float(value)})


@pytest.mark.parametrize("slo", ["--tpot-slo", "--ttft-slo"])
def test_a_nan_slo_is_refused_without_a_search_too(slo):
    """Issue 30 item 4: ``--tpot-slo nan`` once said "100.0 % met the SLOs"."""
    _one_line_exit_2([*SIM, slo, "nan"], f"{slo[2:].replace('-', '_')} must be a positive number of seconds, got nan")


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_plan_slos_are_validated_the_same_way(value):
    args = ["plan", "llama-3-8b", "--workload", "poisson:rate=20,prompt=512,output=256,n=100", "--devices", "h100-sxm"]
    says = "must be positive" if value == "-1" else "must be a positive, finite number"
    _one_line_exit_2([*args, "--slo", f"ttft={value},tpot=0.05"], f"the ttft SLO {says}, got '{value}'")
    _one_line_exit_2([*args, "--slo", f"ttft=0.5,tpot={value}"], f"the tpot SLO {says}, got '{value}'")


def test_a_rate_search_needs_a_target_and_no_target_claims_no_goodput():
    _one_line_exit_2([*SIM, "--search"], "the rate search needs a latency target: ttft_slo or tpot_slo")
    plain = CliRunner().invoke(app, SIM)
    assert plain.exit_code == 0 and "goodput" not in plain.output and "met the SLOs" not in plain.output
    with_slo = CliRunner().invoke(app, [*SIM, "--ttft-slo", "10"])
    assert with_slo.exit_code == 0 and "met the SLOs" in with_slo.output


@pytest.mark.parametrize(
    "values, says",
    [
        ("4,2..256", "the range '4,2..256' does not rise to its end"),
        ("1,2..1", "the range '1,2..1' does not rise to its end"),
        ("2..256", "cannot read the list '2..256'"),
        (",", "cannot read the list ','"),
        ("2,3..1000000", "gives more than 100,000 values"),
    ],
)
def test_descending_empty_or_unbounded_ranges_are_refused(values, says):
    _one_line_exit_2(["sweep", "llama-2-7b", "--batch", values], says)


def test_ranges_still_expand():
    from ridgeline.io.settings import parse_values

    assert parse_values("1,2..16") == [1, 2, 4, 8, 16]
    assert parse_values("100,300..1000") == [100, 300, 900]  # 300 = 3 x 100: geometric
    assert parse_values("2,3..6") == [2, 3, 4, 5, 6]  # arithmetic
    assert parse_values("16,8,4") == [16, 8, 4]


def test_a_misspelt_api_keyword_gets_did_you_mean():
    with pytest.raises(rl.RidgelineError, match=r"unknown keyword 'w_dtpye' for analyze: did you mean 'w_dtype'"):
        rl.analyze("llama-2-7b", "a6000", w_dtpye="int4")
    with pytest.raises(rl.RidgelineError, match=r"unknown keyword 'zzz' for analyze. Valid names: model, hardware"):
        rl.analyze("llama-2-7b", "a6000", zzz=1)


def test_a_snapshot_is_not_repredicted_with_another_devices_profile(tmp_path):
    """Issue 30 item 6: the Xeon's snapshot with the Zen 4 profile is one line, exit 2, naming
    both devices; nothing is written."""
    from ridgeline.io.catalog import PROFILES_DIR, VALIDATION_DIR

    snapshot = VALIDATION_DIR / "cpu-intel-r-xeon-r-processor-f6m207-1t-2026-11-25.json"
    profile = PROFILES_DIR / "cpu-amd-epyc-f25m17-1t.yaml"
    args = ["validate", "--repredict", str(snapshot), "--profile", str(profile), "--output-dir", str(tmp_path)]
    _one_line_exit_2(
        args,
        "cpu-amd-epyc-f25m17-1t.yaml: measured on cpu-amd-epyc-f25m17-1t, but "
        "cpu-intel-r-xeon-r-processor-f6m207-1t-2026-11-25.json was measured on cpu-intel-r-xeon-r-processor-f6m207-1t",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_gpu_snapshot_is_not_repredicted_with_the_other_gpus_profile(tmp_path):
    """Issue 30 item 6 on the GPUs: the H100's snapshot with the H200's profile."""
    from ridgeline.io.catalog import PROFILES_DIR, VALIDATION_DIR

    snapshot = VALIDATION_DIR / "cuda-nvidia-h100-80gb-hbm3-2026-11-23.json"
    args = ["validate", "--repredict", str(snapshot), "--profile", str(PROFILES_DIR / "cuda-nvidia-h200.yaml")]
    _one_line_exit_2(
        [*args, "--output-dir", str(tmp_path)],
        "cuda-nvidia-h200.yaml: measured on cuda-nvidia-h200, but cuda-nvidia-h100-80gb-hbm3-2026-11-23.json was "
        "measured on cuda-nvidia-h100-80gb-hbm3: re-predict it with a profile of cuda-nvidia-h100-80gb-hbm3",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, says",
    [
        (["--batch", "1000000000000000000"], "batch 1000000000000000000 is over the limit of 1048576 sequences"),
        (["--seq-len", "100000000"], "seq_len + generate = 100000000 tokens is over the limit of 16777216 a sequence"),
        (
            ["--batch", "1000000", "--seq-len", "8192"],
            "batch x (seq_len + generate) = 8192000000 tokens is over the limit of 4294967296",
        ),
    ],
)
def test_sizes_past_the_documented_limits_are_refused_before_any_arithmetic(args, says):
    """Issue 59 item 2: --batch 1e18 overflowed numpy's int64 (exit 0, a RuntimeWarning,
    'KV cache -3.24e+15GiB', '-10.29 tokens/s'); each limit is docs/limits.md's."""
    _one_line_exit_2(["analyze", "llama-2-7b", *args], f"{says} (docs/limits.md) (set with --")
    _one_line_exit_2(["sweep", "llama-2-7b", *args], says)
    with pytest.raises(rl.RidgelineError, match=re.escape(says)):
        rl.analyze("llama-2-7b", "a6000", **{a[2:].replace("-", "_"): int(v) for a, v in zip(args[::2], args[1::2])})


def test_at_the_limits_every_byte_count_and_rate_is_positive_and_no_numpy_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for batch, seq_len in ((1048576, 4096 - 2), (256, 16777216 - 2)):
            frame = rl.sweep("llama-2-7b", "h100-sxm", batch=batch, seq_len=seq_len, generate=2)
            assert (frame.select_dtypes("number").to_numpy() > 0).all(), frame.T


def test_a_run_past_the_request_limit_is_refused_up_front_with_its_memory():
    """Issue 59 item 3: --requests 1000000000 grew to 24 GB and was killed; a run past the
    limit is refused before any arrival is drawn, naming the memory it would need."""
    from ridgeline.serving.arrivals import poisson

    says = (
        "--requests 10000000 would need about 25 GB of memory (2.5 KB a request); "
        "the limit is 1000000 requests (docs/limits.md)"
    )
    _one_line_exit_2([*SIM[:4], "--requests", "10000000"], says)
    _one_line_exit_2([*SIM[:4], "--requests", "10000000", "--scenario", "offline"], says)
    with pytest.raises(rl.RidgelineError, match=re.escape(says)):
        poisson(1.0, 10_000_000, 512, 128)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "llama-2-7b", "-f", "json", "-o", "/proc/a.json", "--draft", "no-such-model"],
        ["analyze", "llama-2-7b", "--html", "/proc/a.html", "--draft", "no-such-model"],
        ["sweep", "llama-2-7b", "-f", "csv", "-o", "/proc/s.csv", "--batch", "2000000"],
        ["compare", "llama-2-7b", "-H", "a6000,no-such-gpu", "-f", "csv", "-o", "/proc/c.csv"],
        ["frontier", "llama-2-7b", "-f", "csv", "-o", "/proc/f.csv", "--generate", "1"],
        [*SIM, "-f", "csv", "-o", "/proc/s.csv", "--trace", "/no/such/trace.csv"],
        [*SIM, "--timeline", "/proc/t.csv", "--trace", "/no/such/trace.csv"],
        ["plan", "llama-3-8b", "--devices", "h100-sxm,no-such-gpu", "-o", "/proc/p.json"],
    ],
    ids=lambda a: f"{a[0]} {next(x for x in a if x.startswith('/proc'))}",
)
def test_every_output_path_is_checked_before_the_work(args):
    """Issue 59 item 4: `plan -o /proc/p.json` ran the whole search before it found the path
    unwritable. Each command's output paths are checked first: the error is the path's, not
    the one the work (an unknown device, a missing trace, a size past its limit) would raise."""
    path = next(x for x in args if x.startswith("/proc"))
    _one_line_exit_2(args, f"error: cannot write {path}: No such file or directory; choose another output path")
    if "-f" in args:  # and a table asked to go to a file, before the work too
        table = [("table" if a in ("csv", "json") else a.replace("/proc", "/tmp")) for a in args]
        _one_line_exit_2(table, "error: Invalid value: --output needs --format json or csv")


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["sweep", "llama-2-7b", "--batch", "0,1,2"],
            "batch must be a positive whole number, got 0 in 0,1,2 (set with --batch)",
        ),
        (
            ["plan", "llama-3-8b", "--devices", "h100"],
            "unknown hardware 'h100'. Did you mean: h100-pcie, h100-sxm, v100? Run 'ridgeline hardware list' for the names --devices takes.",
        ),
        (
            ["plan", "llama-9x"],
            "unknown model 'llama-9x'. Did you mean: llama-3-8b, llama-2-7b, llama-3-70b? "
            "Run 'ridgeline models list', or give the path of a config.json as the model.",
        ),
        (
            ["plan", "llama-3-8b", "--slo", "ttft=inf"],
            "the ttft SLO must be a positive, finite number, got 'inf'",
        ),
    ],
)
def test_a_message_says_what_was_given_and_what_is_accepted_in_the_users_terms(args, line):
    """Issue 59 item 5: 'got array([0, 1, 2])'; plan's hint of --hardware, which plan does not
    take; 'must be positive, got 'inf''. (A trace's 'nan' cell: tests/test_traces_formats.py.)"""
    result = CliRunner().invoke(app, args)
    assert (result.exit_code, result.output) == (2, f"error: {line}\n")


@pytest.mark.slow
def test_a_trace_past_the_request_limit_is_refused_while_it_is_read(tmp_path):
    """Issue 59 item 3, for traces: the count is checked a chunk at a time, before the run."""
    trace = tmp_path / "big.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "1,8,2\n" * 1_000_001)
    _one_line_exit_2(
        [*SIM[:4], "--trace", str(trace)],
        f"{trace}'s first 1000001 requests would need about 2.5 GB of memory (2.5 KB a request); "
        "the limit is 1000000 requests (docs/limits.md)",
    )
