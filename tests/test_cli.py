"""The CLI through CliRunner: outputs, schema, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.cli import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_analyze_json_matches_python_api():
    result = run(
        "analyze",
        "llama-2-7b",
        "--hardware",
        "a6000",
        "--batch",
        "8",
        "--seq-len",
        "1024",
        "--generate",
        "256",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    api = rl.analyze("llama-2-7b", "a6000", batch=8, seq_len=1024, generate=256).to_dict()
    assert data.pop("verdict")["largest_batch"] == rl.max_batch("llama-2-7b", "a6000", 1024, 256)
    assert data == json.loads(json.dumps(api))
    assert set(data) == {
        "model",
        "hardware",
        "mode",
        "workload",
        "prefill",
        "decode",
        "generation",
        "memory",
        "basis",
        "intervals",
    }
    op = data["decode"]["ops"][0]
    for key in (
        "name",
        "count",
        "flops",
        "bytes",
        "weight_bytes",
        "act_read_bytes",
        "act_write_bytes",
        "kv_read_bytes",
        "kv_write_bytes",
        "intensity",
        "bound",
        "perf",
        "time_s",
    ):
        assert key in op
    assert set(data["generation"]) >= {"prompt", "generate", "ttft_s", "tpot_s", "total_s", "tokens_per_s"}
    assert set(data["memory"]) >= {
        "weights_bytes",
        "kv_cache_bytes",
        "activations_peak_bytes",
        "peak_bytes",
        "capacity_bytes",
        "fits",
    }
    assert set(data["prefill"]["total"]) >= {"flops", "bytes", "weight_bytes", "kv_read_bytes", "time_s"}


def test_analyze_csv_to_file(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text((rl.io.catalog.MODELS_DIR / "llama-3-8b.json").read_text())
    out = tmp_path / "run.csv"
    result = run(
        "analyze",
        "--config",
        str(cfg),
        "--hardware",
        "h100-sxm",
        "--generate",
        "128",
        "--format",
        "csv",
        "--output",
        str(out),
    )
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("stage,name,kind,count,flops,bytes")
    # 17 ops per stage (rope included; auto attention is transformers' sdpa, one fused
    # `attention` op for this MHA model), 2 stage totals, TTFT/TPOT/total
    assert len(lines) == 1 + 2 * 17 + 2 + 3
    assert lines[3].split(",")[1] == "q_proj"


def test_analyze_table():
    result = run("analyze", "llama-2-7b", "--hardware", "a6000", "--seq-len", "2048", "--generate", "128")
    assert result.exit_code == 0
    assert "sdpa-gqa attention (auto: transformers' sdpa path)" in result.stdout
    assert " attention " in result.stdout and "TTFT" in result.stdout and "fits" in result.stdout


def test_catalog_listings():
    hw = run("hardware", "list")
    header, *lines = hw.stdout.splitlines()
    assert header == "name\tdevice\tmemory\tbandwidth\tmatrix peaks (ops/s)"
    names = [line.split("\t")[0] for line in lines]
    assert len(names) >= 20 and {"a6000", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "rtx-4090"} <= set(names)
    models = run("models", "list")
    header, *lines = models.stdout.splitlines()
    assert header.startswith("name\ttype\tlayers\thidden")
    names = [line.split("\t")[0] for line in lines]
    assert {"llama-2-7b", "llama-3-8b", "falcon-7b", "opt-6.7b", "gpt-j-6b"} <= set(names)
    show = run("hardware", "show", "h100-sxm")
    assert "3350 GB/s" in show.stdout and "https://" in show.stdout
    show = run("models", "show", "llama-3-8b")
    assert "8.030 B" in show.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["analyze", "llama-2-7x", "--hardware", "a6000"], "unknown model 'llama-2-7x'. Did you mean: llama-2-7b"),
        (["analyze", "llama-2-7b", "--hardware", "h100"], "unknown hardware 'h100'. Did you mean: h100-pcie, h100-sxm"),
        (["analyze", "llama-2-7b", "--batch", "0"], "batch must be a positive whole number"),
        (["analyze", "llama-2-7b", "--seq-len", "-3"], "seq_len must be a positive whole number"),
        # no warning first: a device whose default type is said (bf16 on a TPU) still gets one line
        (
            ["analyze", "llama-2-7b", "-H", "tpu-v5e", "--seq-len", "-3"],
            "seq_len must be a positive whole number, got -3",
        ),
        (["analyze", "llama-2-7b", "--batch", "many"], "Invalid value for '--batch'"),
        (["analyze", "llama-2-7b", "--dtype", "fp7"], "unknown data type 'fp7'"),
        (["analyze", "llama-2-7b", "--hardware", "tpu-v5e", "--dtype", "fp16"], "tpu-v5e has no matrix units for fp16"),
        (["analyze", "llama-2-7b", "--format", "xml"], "--format must be one of"),
        (["analyze"], "name a model"),
        (["models", "show", "gpt-5"], "unknown model 'gpt-5'"),
    ],
)
def test_errors_are_one_line_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_bad_files(tmp_path):
    bad_json = tmp_path / "config.json"
    bad_json.write_text('{"model_type": "llama", "hidden_size": 4096,')
    result = run("analyze", "--config", str(bad_json))
    assert result.exit_code == 2 and "malformed JSON" in result.output
    bert = tmp_path / "bert.json"
    bert.write_text('{"model_type": "bert", "hidden_size": 768}')
    result = run("analyze", "--config", str(bert))
    assert result.exit_code == 2 and "unsupported model_type 'bert'; supported:" in result.output
    zero = tmp_path / "zero.json"
    zero.write_text('{"model_type": "llama", "hidden_size": 0}')
    result = run("analyze", "--config", str(zero))
    assert result.exit_code == 2 and "'hidden_size' must be a positive integer" in result.output
    yaml_file = tmp_path / "dev.yaml"
    yaml_file.write_text("name: x\n  kind: [\n")
    result = run("analyze", "llama-2-7b", "--hardware", str(yaml_file))
    assert result.exit_code == 2 and "malformed YAML at line 2" in result.output
    yaml_file.write_text("name: x\nvendor: y\nkind: gpu\nmemory_capacity_gib: 8\n")
    result = run("analyze", "llama-2-7b", "--hardware", str(yaml_file))
    assert result.exit_code == 2 and "missing 'memory_bandwidth_gb_s'" in result.output


def test_failed_run_leaves_no_output_file(tmp_path):
    out = tmp_path / "run.json"
    result = run("analyze", "llama-2-7x", "--format", "json", "--output", str(out))
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_cli_import_is_light():
    code = (
        "import sys, ridgeline.cli; heavy = {'torch', 'dash', 'plotly', 'pandas'} & "
        "set(sys.modules); print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_lists_every_command_without_importing_one():
    """`ridgeline --help` reads each command's short help from the tables (ridgeline.cli.app's
    COMMANDS, each plugin's): no command module, no engine, no numpy is imported."""
    code = (
        "import sys; from typer.testing import CliRunner; from ridgeline.cli import app; "
        "r = CliRunner().invoke(app, ['--help']); "
        "print(r.exit_code, sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'yaml', 'ridgeline')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=1) == [
        "0",
        "['ridgeline', 'ridgeline.cli', 'ridgeline.cli.app', 'ridgeline.errors', 'ridgeline.version']\n",
    ]


def test_the_listed_short_help_is_each_commands_own():
    import typer
    from typer.core import TyperCommand

    from ridgeline.cli import load_all
    from ridgeline.cli.app import listed

    group = typer.main.get_command(load_all())
    with group.make_context("ridgeline", ["analyze"]) as ctx:
        own = {name: group.get_command(ctx, name).get_short_help_str(10**4) for name in listed()}
    assert {name: TyperCommand(name=name, help=h).get_short_help_str(10**4) for name, h in listed().items()} == own
    assert set(own) == set(group.commands)  # every command registered is listed, and no other
    assert CliRunner().invoke(app, ["anlyze"]).output == "error: No such command 'anlyze'. Did you mean 'analyze'?\n"


# --- output paths (issue 12.3) ----------------------------------------------------------

WRITERS = [
    ["analyze", "llama-2-7b", "--format", "csv"],
    ["sweep", "llama-2-7b", "--batch", "1,2", "--format", "csv"],
    ["compare", "llama-2-7b", "--format", "json"],
    ["frontier", "llama-2-7b", "--format", "csv"],
]


@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_output_into_missing_folders_creates_them(tmp_path, command):
    out = tmp_path / "new" / "deeper" / "run.out"
    result = run(*command, "--output", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().strip()
    assert list(out.parent.iterdir()) == [out]  # no temporary file left beside it


@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    "target,reason",
    [
        ("/proc/ridgeline-test.out", "No such file or directory"),  # a virtual file system
        ("{tmp}", "it is a folder"),
        ("{tmp}/a-file/run.out", "part of its folder path is a file"),
    ],
)
def test_unwritable_output_is_one_line_exit_2(tmp_path, command, target, reason):
    (tmp_path / "a-file").write_text("keep me")
    target = target.format(tmp=tmp_path)
    result = run(*command, "--output", target)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: cannot write {target}: {reason}; choose another output path"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert (tmp_path / "a-file").read_text() == "keep me"


def test_html_into_missing_folder_and_unwritable(tmp_path):
    out = tmp_path / "reports" / "run.html"
    result = run("analyze", "llama-2-7b", "--html", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    result = run("analyze", "llama-2-7b", "--html", "/proc/ridgeline-test.html")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: cannot write /proc/ridgeline-test.html: No such file or directory; choose another output path"
    ]


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    """A disk that fills up mid-write: the old file stays whole, no temporary file stays."""
    import errno
    import os

    out = tmp_path / "run.csv"
    out.write_text("the previous run\n")

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)
    result = run("analyze", "llama-2-7b", "--format", "csv", "--output", str(out))
    assert result.exit_code == 2
    assert f"cannot write {out}: No space left on device" in result.output
    assert out.read_text() == "the previous run\n"
    assert list(tmp_path.iterdir()) == [out]


# --- config files that are not config files (issue 12.5) --------------------------------


def test_config_that_is_not_a_file(tmp_path):
    import os

    cases = {
        "/dev/zero": "/dev/zero: is not a regular file (a device, pipe or socket); pass a file",
        str(tmp_path): f"{tmp_path}: a folder without a config.json; pass the config file",
        str(tmp_path / "none.json"): f"{tmp_path / 'none.json'}: no such config file",
    }
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opening it would block forever
    cases[str(fifo)] = f"{fifo}: is not a regular file (a device, pipe or socket); pass a file"
    for path, message in cases.items():
        result = run("analyze", "--config", path)
        assert result.exit_code == 2, path
        assert result.output.strip().splitlines() == [f"error: {message}"]
    result = run("analyze", "llama-2-7b", "--hardware", "/dev/zero")
    assert result.exit_code == 2
    assert result.output.strip() == ("error: /dev/zero: is not a regular file (a device, pipe or socket); pass a file")


def test_config_folder_with_config_json(tmp_path):
    (tmp_path / "config.json").write_text((rl.io.catalog.MODELS_DIR / "llama-3-8b.json").read_text())
    result = run("analyze", "--config", str(tmp_path), "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == tmp_path.name  # named after its folder


def test_huge_config_is_refused_without_reading_it(tmp_path, monkeypatch):
    big = tmp_path / "config.json"
    with big.open("wb") as handle:  # 1 GB, sparse: no disk used
        handle.truncate(10**9)
    read = []
    real_open = type(big).open

    def spy(self, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: read.append(n) or real_read(n)
        return handle

    monkeypatch.setattr(type(big), "open", spy)
    for args in (["--config", str(big)], ["llama-2-7b", "--hardware", str(big.with_suffix(".yaml"))]):
        if args[0] == "llama-2-7b":
            big.rename(big.with_suffix(".yaml"))
        result = run("analyze", *args)
        assert result.exit_code == 2
        assert "file is 1,000 MB; the limit is 1 MB" in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert read and set(read) == {1_000_001}  # at most 1 MB + 1 byte read, never the whole file


# --- terminal tables (issue 12.6) --------------------------------------------------------


def run_at(columns: int, *args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns)})


TABLE_COMMANDS = {
    "analyze": (
        ["analyze", "llama-2-7b", "--generate", "128"],
        [
            "op",
            "count",
            "ops",
            "bytes moved (B)",
            "ops/byte",
            "perf (ops/s)",
            "bound",
            "time each",
            "dtype",
            "total (x count)",
        ],
    ),
    "sweep": (
        ["sweep", "llama-2-7b", "--batch", "1,2,4..64", "--generate", "128", "--w-bits", "16,4"],
        [
            "w dtype",
            "batch",
            "prefill (s)",
            "decode step (ms)",
            "TTFT (s)",
            "TPOT (ms)",
            "total (s)",
            "tokens/s",
            "weights (GiB)",
            "KV cache (GiB)",
            "act. peak (GiB)",
            "peak memory (GiB)",
        ],
    ),
    "frontier": (
        ["frontier", "llama-2-7b"],
        [
            "batch",
            "prefill (s)",
            "decode step (ms)",
            "TTFT (s)",
            "TPOT (ms)",
            "total (s)",
            "tokens/s",
            "KV cache (GiB)",
            "act. peak (GiB)",
            "peak memory (GiB)",
        ],
    ),
    "compare": (
        ["compare", "llama-2-7b"],
        ["hardware", "TTFT (ms)", "TPOT (ms)", "tokens/s", "prefill (ms)", "decode step (ms)"],
    ),
}


@pytest.mark.parametrize(
    "name,columns",
    [(name, 100) for name in TABLE_COMMANDS] + [(name, 80) for name in ("analyze", "frontier", "compare")],
)  # sweep's 12 columns need ~94
def test_table_headers_whole_with_units(name, columns):
    """Headers may wrap between words, never be cut short (the old 'decode_ste…')."""
    args, headers = TABLE_COMMANDS[name]
    result = run_at(columns, *args)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and "e+" not in result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= columns
    words = " ".join(lines).split()
    for header in headers:
        for word in header.split():
            assert word in words, (header, word)


@pytest.mark.parametrize("name", TABLE_COMMANDS)
def test_narrow_terminal_never_cuts_text(name):
    result = run_at(60, *TABLE_COMMANDS[name][0])
    assert result.exit_code == 0 and "…" not in result.output


def test_frontier_pick_has_no_exponent():
    # the old note said 'TTFT 4.87e+03 ms'
    result = run_at(100, "frontier", "llama-2-7b")
    assert "best throughput meeting the targets: batch 42, 631.1 tokens/s, TPOT 50.9 ms, TTFT 4.07 s" in result.output
    assert "the same in every row: prompt tokens 1024, weights 12.6 GiB, fits yes" in result.output


def test_analyze_verdict():
    result = run_at(300, "analyze", "llama-2-7b", "--hardware", "a6000", "--generate", "128")
    verdict = [line for line in result.output.splitlines() if line.startswith("verdict:")]
    # decode at batch 1: weights 6.74e9 params x 2 B = 13.5 GB against a KV cache of
    # 2 (k, v) x 32 layers x 4096 x 512 tokens x 2 B = 0.27 GB: weights 98 % of the bytes
    largest = rl.api.max_batch("llama-2-7b", "a6000", 512, 128)
    assert verdict == [
        "verdict: TTFT is compute-bound (89% of prefill time; linear ops do 99% of the "
        "operations), TPOT is memory-bound (100% of decode time; weights are 98% of the bytes "
        f"moved); largest batch that fits: {largest} (512 + 128 tokens each)"
    ]
    # 70B in fp16 (129 GiB) on a 48 GiB card. Batch 64 x 4096 cached tokens: the KV cache read
    # per step is 64 x 4096 x 524,288 B (2 x 32 layers x 4096 x 2 B per token) = 137 GB against
    # 13.5 GB of weights: 137 / 150.5 = 91 % (auto attention is a fused SDPA kernel: no score
    # matrix through memory)
    result = run_at(300, "analyze", "llama-2-70b", "-H", "a6000", "--generate", "16")
    assert "; not even batch 1 fits (512 + 16 tokens each)" in result.output
    result = run_at(300, "analyze", "llama-2-7b", "--batch", "64", "--seq-len", "4096", "--generate", "16")
    assert "TPOT is memory-bound (100% of decode time; the KV cache is 91% of the bytes moved)" in result.output
    # the largest batch: it fits, one more does not
    assert rl.analyze("llama-2-7b", "a6000", batch=largest, generate=128).memory["fits"]
    assert not rl.analyze("llama-2-7b", "a6000", batch=largest + 1, generate=128).memory["fits"]


def test_analyze_csv_carries_the_totals():
    import io

    import pandas as pd

    result = run("analyze", "llama-2-7b", "--generate", "128", "--format", "csv")
    frame = pd.read_csv(io.StringIO(result.stdout))
    api = rl.analyze("llama-2-7b", "a6000", generate=128)
    totals = frame[frame["kind"] == "total"].set_index(["stage", "name"])
    assert list(totals.index) == [
        ("prefill", "total"),
        ("decode", "total"),
        ("generation", "ttft"),
        ("generation", "tpot"),
        ("generation", "total"),
    ]
    for stage in ("prefill", "decode"):
        for key in ("flops", "bytes", "weight_bytes", "kv_read_bytes", "time_s"):
            assert totals.loc[(stage, "total"), key] == pytest.approx(getattr(api, stage).total[key])
    for key in ("ttft", "tpot", "total"):
        assert totals.loc[("generation", key), "time_s"] == pytest.approx(api.generation[f"{key}_s"])
    assert len(frame[frame["kind"] != "total"]) == 2 * 17  # the op rows are all still there


def test_any_refused_file_is_one_line(monkeypatch, tmp_path):
    """What the system refuses below the CLI (a folder a measurement command creates, a file
    it writes) is one line naming the path, exit 2, never a traceback."""

    def refuse(result, path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("viewer.export.write_html", refuse)
    target = tmp_path / "locked" / "report.html"
    result = run("analyze", "llama-2-7b", "--html", str(target))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {target}: Permission denied"]


def test_analyze_table_needs_no_pandas():
    """The table view (verdict included) reads records, so `ridgeline analyze` stays fast."""
    code = (
        "import sys; from typer.testing import CliRunner; from ridgeline.cli import app; "
        "r = CliRunner().invoke(app, ['analyze', 'llama-2-7b', '--generate', '16']); "
        "print(r.exit_code, 'verdict:' in r.output, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True", "False"]


@pytest.mark.parametrize(
    "path, message", [("/dev/zero", "is not a regular file"), ("/tmp", "is a folder; pass the file itself")]
)
def test_profile_that_is_not_a_file(path, message):
    result = CliRunner().invoke(app, ["analyze", "llama-2-7b", "-H", "a6000", "--profile", path])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


def test_json_carries_the_verdict_the_table_prints():
    args = ("analyze", "llama-2-70b", "-H", "a6000", "--generate", "128")
    line = next(x for x in run(*args).stdout.splitlines() if x.startswith("verdict: "))
    verdict = json.loads(run(*args, "-f", "json").stdout)["verdict"]
    assert verdict["text"] == line.removeprefix("verdict: ")
    assert (verdict["prefill_bound"], verdict["decode_bound"], verdict["largest_batch"]) == ("compute", "memory", 0)


def test_csv_counts_are_whole_numbers_as_in_json():
    """Issue 30 item 9: ``count`` was 1.0 in the CSV and 1 in the JSON."""
    csv_lines = run("analyze", "llama-2-7b", "--format", "csv").stdout.splitlines()
    column = csv_lines[0].split(",").index("count")
    counts = [line.split(",")[column] for line in csv_lines[1:] if ",total,total," not in line]
    assert counts[:2] == ["1", "32"] and all(c.isdigit() for c in counts)
    ops = json.loads(run("analyze", "llama-2-7b", "--format", "json").stdout)["prefill"]["ops"]
    assert [str(op["count"]) for op in ops] == counts[: len(ops)]


def test_calibrate_help_says_where_a_refit_and_its_rows_go():
    """Issue 30 item 9: ``--refit`` writes ./<stem>.refit.yaml, which ``--help`` did not say."""
    text = " ".join(run("calibrate", "--help").stdout.split())
    assert "with --refit: ./<stem>.refit.yaml" in text
    assert "its calibration rows go beside it, .calibration.csv for .yaml" in text


def test_a_headline_interval_has_no_exponent():
    """An interval past 1000 of the point's unit read '80 %: 1.4e+03–3.09e+03' (issue 30 item
    11's exponent notation, in the CLI's headline): whole numbers there, as plain_number writes."""
    args = ["analyze", "llama-2-7b", "--seq-len", "4096", "--generate", "128", "--attention", "eager"]
    ttft = next(line for line in run(*args).stdout.splitlines() if line.startswith("TTFT "))
    lo, hi = (v * 1e3 for v in json.loads(run(*args, "-f", "json").stdout)["intervals"]["ttft_s"]["80"])
    assert hi >= 1000 and "e+" not in ttft
    assert f"(80 %: {lo:.0f}–{hi:.0f})" in ttft
