"""The deployment options and serving commands through the CLI."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.cli import app
from ridgeline.io.settings import parse_values

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_list_syntax():
    assert parse_values("1,2,4..256") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_values("512,1024..32768") == [512 * 2**i for i in range(7)]
    assert parse_values("1,2,3..6") == [1, 2, 3, 4, 5, 6]
    assert parse_values("16,8,4") == [16, 8, 4]


def test_analyze_options_reach_the_engine():
    result = run(
        "analyze",
        "llama-2-70b",
        "--hardware",
        "h100-sxm",
        "--tp",
        "2",
        "--w-bits",
        "4",
        "--group-size",
        "128",
        "--attention",
        "flash",
        "--generate",
        "16",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    api = rl.analyze(
        "llama-2-70b", "h100-sxm", generate=16, tp=2, w_dtype="int4", group_size=128, attention="flash"
    ).to_dict()
    data.pop("verdict")  # the CLI's verdict line (tests/test_cli.py)
    assert data == json.loads(json.dumps(api))
    assert data["workload"]["tp"] == 2 and data["workload"]["w_dtype"] == "int4"


def test_analyze_speculative_in_json():
    result = run(
        "analyze",
        "llama-2-13b",
        "--hardware",
        "a6000",
        "--draft",
        "llama-2-7b",
        "--draft-tokens",
        "3",
        "--acceptance",
        "0.6",
        "--format",
        "json",
    )
    spec = json.loads(result.stdout)["speculative"]
    assert spec["draft_tokens"] == 3
    assert spec["expected_tokens_per_step"] == pytest.approx((1 - 0.6**4) / 0.4)


def test_sweep_csv_rows_equal_analyses():
    result = run(
        "sweep",
        "llama-2-7b",
        "--hardware",
        "a6000",
        "--batch",
        "1,4..16",
        "--seq-len",
        "512,1024",
        "--w-bits",
        "16,4",
        "--generate",
        "32",
        "--format",
        "csv",
    )
    assert result.exit_code == 0, result.output
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(table) == 2 * 3 * 2
    row = next(r for r in table if r["w_dtype"] == "int4" and r["batch"] == "16" and r["seq_len"] == "1024")
    one = rl.analyze("llama-2-7b", "a6000", batch=16, seq_len=1024, generate=32, w_dtype="int4")
    assert float(row["tpot_s"]) == pytest.approx(one.generation["tpot_s"], rel=1e-12)


def test_compare_rows():
    result = run("compare", "llama-3-8b", "--hardware", "a6000,h100-sxm", "--w-bits", "16,4", "--format", "json")
    rows = json.loads(result.stdout)["rows"]
    assert [(r["hardware"], r["settings"]) for r in rows] == [
        ("a6000", "default"),
        ("a6000", "w_dtype=int4"),
        ("h100-sxm", "default"),
        ("h100-sxm", "w_dtype=int4"),
    ]
    h100 = rl.analyze("llama-3-8b", "h100-sxm", generate=128)
    assert rows[2]["tpot_s"] == pytest.approx(h100.generation["tpot_s"])


def test_frontier_reports_best_under_slo():
    result = run(
        "frontier",
        "llama-2-7b",
        "--hardware",
        "a6000",
        "--seq-len",
        "1024",
        "--generate",
        "128",
        "--tpot-slo",
        "0.03",
        "--format",
        "json",
    )
    data = json.loads(result.stdout)
    ok = [r for r in data["rows"] if r["meets_slo"]]
    assert all(r["tpot_s"] <= 0.03 for r in ok)
    best = max(ok, key=lambda r: r["tokens_per_s"])
    assert f"batch {best['batch']}," in data["notes"][-1]  # after the basis lines


@pytest.mark.parametrize(
    "args,message",
    [
        (["analyze", "llama-2-7b", "--w-bits", "3"], "--w-bits must be 16, 8, 4, 2 or 1"),
        (["analyze", "llama-2-7b", "--tp", "3"], "tp=3 does not divide 32 attention heads (set with --tp)"),
        (
            ["analyze", "llama-2-7b", "--ep", "2"],
            "ep > 1 needs a mixture-of-experts model; llama-2-7b is dense (set with --ep)",
        ),
        (["analyze", "llama-2-7b", "--attention", "sparse"], "unknown attention kernel 'sparse'"),
        (["analyze", "llama-2-7b", "--tp", "0"], "tp must be a whole number >= 1, got 0 (set with --tp)"),
        (
            ["sweep", "llama-2-7b", "--kv-block", "16,0"],
            "kv_block must be a whole number >= 1, got 0 (set with --kv-block)",
        ),
        (["analyze", "llama-2-7b", "--group-size", "-1"], "got -1 (set with --group-size)"),
        (["analyze", "llama-2-7b", "--memory-utilization", "1.5"], "got 1.5; e.g. 0.9 (set with --memory-utilization)"),
        (["analyze", "llama-2-7b", "--link-bw", "-1"], "must be a finite number >= 0, got -1.0 (set with --link-bw)"),
        (
            ["analyze", "llama-2-7b", "--link-bw", "nan"],
            "link bandwidth must be a finite number >= 0, got nan (set with --link-bw)",
        ),
        (
            ["analyze", "llama-2-7b", "--link-latency", "inf"],
            "link latency must be a finite number (< 0: the catalog's), got inf (set with --link-latency)",
        ),
        (
            ["analyze", "llama-2-7b", "--zero-points", "int"],
            "unknown zero-point layout 'int'; use one of: fp16, packed (set with --zero-points)",
        ),
        (["analyze", "llama-2-7b", "--w-bits", "4", "--w-dtype", "int8"], "not both"),
        (
            ["analyze", "llama-2-7b", "--draft", "llama-2-7b", "--acceptance", "1.5"],
            "acceptance must be between 0 and 1",
        ),
        (["analyze", "llama-2-70b", "--hardware", "a6000", "--tp", "2"], ""),
        (["sweep", "llama-2-7b", "--batch", "1,x"], "cannot read the list '1,x'"),
        (["analyze", "llama-2-7b", "--tp", "2,4"], "takes one value here"),
        (
            ["frontier", "llama-2-7b", "--generate", "1"],
            "needs generate >= 2 (TPOT needs decode steps) (set with --generate)",
        ),
    ],
)
def test_deployment_errors(args, message):
    result = run(*args)
    if not message:  # a6000 has PCIe in the catalog: works
        assert result.exit_code == 0
        return
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
