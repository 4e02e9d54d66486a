"""``ridgeline e2e`` on CPU with a small config: the plumbing, not the timings."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

from kernels.e2e.e2e import Case, compile_overhead, engine_settings, signed_error, write_rows
from ridgeline import analyze  # noqa: E402
from ridgeline.cli import app  # noqa: E402
from ridgeline.io.profile import calibrated_ceilings, load_profile
from ridgeline.io.resolve import load_device, load_model

PROFILE = """\
meta: {device: test, device_kind: cpu, spec_device: epyc-9654}
bandwidth_gb_s: 20.0
matrix_peak_tops: {fp32: 0.5, bf16: 1.0}
vector_peak_tops: {fp32: 0.05}
efficiency: {linear: {compute: 0.8, memory: 0.7}}
overhead_us: {default: 5.0}
"""

ARGS = [
    "e2e",
    "qwen2-0.5b",
    "--device",
    "cpu",
    "--layers",
    "2",
    "--batch",
    "1",
    "--prompt",
    "32",
    "--generate",
    "4",
    "--dtype",
    "fp32",
    "--repeats",
    "2",
    "--threads",
    "2",
    "--hardware",
    "epyc-9654",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e")
    (folder / "profile.yaml").write_text(PROFILE)
    out = folder / "e2e.json"
    result = CliRunner().invoke(app, [*ARGS, "--profile", str(folder / "profile.yaml"), "--output", str(out)])
    return result, json.loads(out.read_text()), folder


@pytest.mark.slow
def test_e2e_writes_rows_with_provenance(run):
    result, data, _ = run
    assert result.exit_code == 0, result.output
    assert "TTFT" in result.output and "TPOT" in result.output
    meta = data["meta"]
    for key in ("device", "device_key", "torch", "threads", "date", "commit", "cpu", "spec_hardware"):
        assert key in meta
    assert meta["threads"] == 2 and meta["device_key"].startswith("cpu-") and meta["device_key"].endswith("-2t")
    [row] = data["rows"]
    assert (
        row["model"],
        row["layers"],
        row["batch"],
        row["prompt"],
        row["generate"],
        row["dtype"],
        row["compile"],
    ) == ("qwen2-0.5b", 2, 1, 32, 4, "fp32", False)
    for key in ("measured_ttft_s", "measured_tpot_s", "measured_ttft_p20_s", "measured_tpot_p80_s"):
        assert row[key] > 0
    assert row["measured_ttft_p20_s"] <= row["measured_ttft_s"] <= row["measured_ttft_p80_s"]


def test_e2e_predictions_equal_analyze_for_the_same_inputs(run):
    _, data, folder = run
    [row] = data["rows"]
    config = replace(load_model("qwen2-0.5b"), num_layers=2)
    device = load_device("epyc-9654")
    kw = dict(batch=1, seq_len=32, generate=4, settings=engine_settings("fp32"))
    spec = analyze(config, device, **kw).generation
    ceilings = calibrated_ceilings(load_profile(folder / "profile.yaml"), device)
    cal = analyze(config, device, ceilings=ceilings, **kw).generation
    assert row["predicted_spec_ttft_s"] == pytest.approx(spec["ttft_s"], rel=1e-12)
    assert row["predicted_spec_tpot_s"] == pytest.approx(spec["tpot_s"], rel=1e-12)
    assert row["predicted_calibrated_ttft_s"] == pytest.approx(cal["ttft_s"], rel=1e-12)
    assert row["predicted_calibrated_tpot_s"] == pytest.approx(cal["tpot_s"], rel=1e-12)
    assert row["error_spec_tpot"] == pytest.approx(spec["tpot_s"] / row["measured_tpot_s"] - 1)
    assert engine_settings("bf16").attention == "flash"  # SDPA is a fused kernel
    assert cal["tpot_s"] > spec["tpot_s"]  # measured roofs are lower than the datasheet's


def test_e2e_with_a_missing_profile_is_one_line(tmp_path):
    """A profile named on the command line must exist (without --profile, a device with no
    profile gets empty calibrated columns and a note: ``calibrated_for``)."""
    result = CliRunner().invoke(
        app, [*ARGS, "--repeats", "1", "--profile", str(tmp_path / "none.yaml"), "--output", str(tmp_path / "o.json")]
    )
    assert result.exit_code == 2
    assert f"--profile {tmp_path / 'none.yaml'}: no such file" in result.output
    assert not (tmp_path / "o.json").exists() and "Traceback" not in result.output


def test_a_device_without_a_profile_gets_empty_calibrated_columns(tmp_path):
    from ridgeline.io.catalog import PROFILES_DIR
    from ridgeline.io.resolve import calibrated_for, load_device

    assert not (PROFILES_DIR / "cpu-nowhere-1t.yaml").exists()
    ceilings, path, note = calibrated_for("cpu-nowhere-1t", load_device("a6000"), None)
    assert ceilings is None and path.name == "cpu-nowhere-1t.yaml"
    assert note.startswith("calibrated: no measured profile at") and "calibrated predictions are empty" in note


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--dtype", "int8"], "--dtype must be one of fp32, bf16, fp16"),
        (["--layers", "99"], "--layers must be between 1 and 24"),
        (["--device", "cuda"], "torch sees no CUDA device"),
        (["--generate", "1"], "--generate must be at least 2"),
    ],
)
def test_e2e_errors_are_one_line(extra, message, tmp_path):
    import torch

    if "cuda" in extra and torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    result = CliRunner().invoke(app, [*ARGS, *extra, "--output", str(tmp_path / "o.json")])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_e2e_refuses_an_unwritable_output_before_timing(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    result = CliRunner().invoke(app, [*ARGS, "--output", str(blocked / "o.json")])
    assert result.exit_code == 2 and "measuring" not in result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1


def test_e2e_refuses_what_does_not_fit():
    result = CliRunner().invoke(app, ["e2e", "llama-3.1-405b", "--device", "cpu", "--dtype", "bf16"])
    assert result.exit_code == 2
    assert "try --layers" in result.output or "even one layer" in result.output


def test_rows_merge_by_configuration_and_compile_gap(tmp_path):
    path = tmp_path / "r.json"
    base = {
        "model": "m",
        "layers": 2,
        "batch": 1,
        "prompt": 8,
        "generate": 4,
        "dtype": "fp32",
        "measured_ttft_s": 0.2,
        "measured_tpot_s": 0.1,
        "engine_ops_per_decode_step": 50,
    }
    write_rows(path, {"date": "d"}, [{**base, "compile": False}])
    write_rows(path, {"date": "d"}, [{**base, "compile": True, "measured_tpot_s": 0.08, "measured_ttft_s": 0.15}])
    write_rows(path, {"date": "e"}, [{**base, "compile": False, "measured_tpot_s": 0.12}])
    data = json.loads(path.read_text())
    assert data["meta"] == {"date": "e"} and len(data["rows"]) == 2
    [gap] = compile_overhead(data["rows"])
    assert gap["tpot_saved_s"] == pytest.approx(0.04)
    assert gap["tpot_saved_per_op_s"] == pytest.approx(0.04 / 50)
    assert gap["ttft_saved_s"] == pytest.approx(0.05)
    assert signed_error(0.09, 0.1) == pytest.approx(-0.1) and signed_error(None, 0.1) is None
    assert Case(1, 8, 4).generate == 4


def test_repredict_recomputes_predictions_and_keeps_measurements(run, tmp_path):
    _, data, folder = run
    path = tmp_path / "copy.json"
    stale = {**data, "rows": [{**data["rows"][0], "predicted_spec_tpot_s": 1.0}]}
    path.write_text(json.dumps(stale))
    before_text = path.read_text()
    out = tmp_path / "new" / "rep.json"
    result = CliRunner().invoke(
        app, ["e2e", "--repredict", str(path), "--profile", str(folder / "profile.yaml"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert path.read_text() == before_text  # the input is never written over
    [row] = json.loads(out.read_text())["rows"]
    [before] = data["rows"]
    assert row["measured_tpot_s"] == before["measured_tpot_s"]
    assert row["predicted_spec_tpot_s"] == pytest.approx(before["predicted_spec_tpot_s"], rel=1e-12)
    assert row["predicted_calibrated_ttft_s"] == pytest.approx(before["predicted_calibrated_ttft_s"])


def test_busy_cores_is_a_core_count_and_waiting_is_bounded():
    import os

    from kernels.bench.timing import busy_cores, wait_for_quiet

    assert 0.0 <= busy_cores(0.05) <= (os.cpu_count() or 1) + 1e-9
    assert wait_for_quiet(0.0) < 0.5


def test_spec_of_the_host_scales_compute_with_the_threads_used():
    from ridgeline.io.host import detect_host
    from ridgeline.io.resolve import on_threads

    host = detect_host(measure=False, gpu=False)
    one = on_threads(host, 1)
    assert one.memory_bandwidth == host.memory_bandwidth
    assert one.matrix_peak["fp32"] == pytest.approx(host.matrix_peak["fp32"] / host.compute_units)
    assert on_threads(host, host.compute_units) is host and on_threads(host, None) is host
    assert on_threads(load_device("h100-sxm"), 1) == load_device("h100-sxm")
