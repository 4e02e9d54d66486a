"""The transformers continuous-batching replay (skipped without transformers)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from kernels.servecheck.cb_server import (
    ServerSettings,
    build_model,
    compare,
    make_trace,
    matching_scheduler,
    replay_virtual,
)
from ridgeline.api import simulate


@pytest.mark.bench
@pytest.mark.slow
def test_virtual_replay_serves_every_token():
    """Two decoder layers of qwen2-0.5b with random weights, 6 requests: every request gets
    its output tokens; queueing <= TTFT <= latency; the first request finds an idle server."""
    torch.set_num_threads(1)
    model = build_model("qwen2-0.5b", 2, seed=0)
    trace = make_trace(6, 5.0, (16, 48), (2, 6), seed=1)
    out = replay_virtual(model, trace, ServerSettings(max_batch_tokens=64, max_requests_per_batch=4))
    np.testing.assert_array_equal(out["tokens"], trace.output)
    assert np.all(out["queue_s"] >= 0) and out["queue_s"][0] == 0
    assert np.all(out["queue_s"] <= out["ttft_s"]) and np.all(out["ttft_s"] <= out["latency_s"])
    assert out["cpu_s"] > 0


def test_trace_and_matching_scheduler():
    trace = make_trace(50, 2.0, (32, 64), (4, 8), seed=0)
    assert trace.time_s[0] == 0 and trace.prompt.min() >= 32 and trace.output.max() <= 8
    s = matching_scheduler(ServerSettings())
    assert (s.token_budget, s.max_batch, s.admit_margin, s.prefix_hit) == (256, 16, 0.15, 0.0)
    assert s.batch_attention == "gather"  # transformers' sdpa path as it runs (simulate.gather_ops)
    sim = simulate("qwen2-0.5b", "a6000", trace, s)
    table = compare({k: sim.requests[k] for k in ("ttft_s", "latency_s", "queue_s")}, sim)
    assert table["ttft_s"]["error"]["p50"] == 0.0  # the simulation against itself


def test_transformers_sdpa_on_cpu_repeats_kv_and_runs_the_flash_kernel():
    """What batch-attention gather models (simulate.gather_ops): transformers' sdpa path
    always passes its additive block-diagonal mask, so on a CPU it does not ask SDPA for
    grouped heads (repeat_kv copies K/V to every query head instead), and with that mask
    and bf16 tensors PyTorch picks its fused flash kernel, not the math backend."""
    from torch.nn.attention import SDPBackend
    from transformers.integrations.sdpa_attention import use_gqa_in_sdpa

    q = torch.zeros(1, 14, 6, 64, dtype=torch.bfloat16)
    kv = torch.zeros(1, 2, 80, 64, dtype=torch.bfloat16)
    mask = torch.zeros(1, 1, 6, 80, dtype=torch.bfloat16)
    assert not use_gqa_in_sdpa(mask, kv, kv)
    full = kv.repeat_interleave(7, dim=1)
    assert torch._fused_sdp_choice(q, full, full, mask, 0.0, False) == int(SDPBackend.FLASH_ATTENTION)


@pytest.mark.slow
def test_the_check_runs_fp32_where_bf16_has_no_kernel():
    """On an AVX2-only CPU bf16 products run a scalar fallback; the check builds fp32."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    assert next(build_model("qwen2-0.5b", 1, seed=0, dtype="fp32").parameters()).dtype == torch.float32
    result = CliRunner().invoke(app, ["simulate-check", "--dtype", "fp16"])
    assert result.exit_code == 2
    assert "--dtype 'fp16': transformers' check runs bf16 or fp32" in result.output


@pytest.mark.bench
@pytest.mark.slow
def test_the_state_times_the_case_that_set_the_profiles_memory_roof():
    """measure_state re-times the very case that set the committed Zen 3 profile's roof (by
    name, from the calibration suite), with the copy, its GEMM and the dispatch."""
    import yaml

    from kernels.bench.suite import setup
    from kernels.calibrate.state import measure_state, state_ratios
    from ridgeline.io.catalog import PROFILES_DIR

    profile = yaml.safe_load((PROFILES_DIR / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
    now = measure_state(setup("cpu", 1, quick=True), profile, "cpu")
    assert {"copy", "stream", "fp32 GEMM", "dispatch"} <= set(now)
    assert all(now[k] > 0 for k in ("copy", "stream", "fp32 GEMM", "dispatch"))
    assert set(state_ratios(profile, [now])) == {"copy", "stream", "fp32 GEMM", "dispatch"}


def test_a_run_names_its_profile_in_this_checkout():
    """A run records the absolute path of its profile where it ran; resimulate finds the same
    committed file here, and falls back to the device key's profile for a user's own."""
    from ridgeline.io.catalog import REPORTS_DIR
    from ridgeline.io.resolve import recorded_profile

    there = "/elsewhere/checkout/reports/profiles/drift/cpu-amd-epyc-f25m1-1t-2026-11-24-evening.yaml"
    assert (
        recorded_profile({"profile": there})
        == REPORTS_DIR / "profiles" / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening.yaml"
    )
    assert recorded_profile({"profile": "/home/u/.local/share/ridgeline/profiles/cpu-x.yaml"}) is None
    assert recorded_profile({"profile": "/elsewhere/reports/profiles/gone.yaml"}) is None
    assert recorded_profile({}) is None


@pytest.mark.slow
def test_resimulate_prices_with_the_profile_it_is_given():
    """``--resimulate FILE --profile P`` prices the recorded trace with P (here the Zen 3's
    evening profile, its roofs measured lower that evening); without it, with the profile the
    run used."""
    from kernels.servecheck.cb_server import resimulate
    from ridgeline.io.catalog import PROFILES_DIR, REPORTS_DIR

    run = (
        REPORTS_DIR / "validation" / "serving" / "serving-cpu-amd-epyc-f25m1-1t-qwen2-0.5b-fp32-0.5rps-2026-11-24.json"
    )
    own = resimulate(run)["busy"]["simulated_calibrated_s"]
    named = resimulate(run, profile=PROFILES_DIR / "cpu-amd-epyc-f25m1-1t.yaml")["busy"]["simulated_calibrated_s"]
    evening = resimulate(run, profile=PROFILES_DIR / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening.yaml")
    assert own == named
    assert evening["busy"]["simulated_calibrated_s"] > own


def test_resimulate_refuses_a_profile_of_another_cpu():
    """A Xeon run priced with the Zen 3's profile: one line, exit 2, nothing printed."""
    from typer.testing import CliRunner

    from ridgeline.cli import app
    from ridgeline.io.catalog import PROFILES_DIR, REPORTS_DIR

    run = (
        REPORTS_DIR
        / "validation"
        / "serving"
        / "serving-cpu-intel-r-xeon-r-processor-f6m207-1t-qwen2-0.5b-0.25rps-2026-11-25.json"
    )
    result = CliRunner().invoke(
        app, ["simulate-check", "--resimulate", str(run), "--profile", str(PROFILES_DIR / "cpu-amd-epyc-f25m1-1t.yaml")]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: profile ") and result.output.count("\n") == 1
    assert "was measured on another CPU ('AMD EPYC', AuthenticAMD 25/1: avx2 fma" in result.output


def test_simulate_check_with_a_missing_profile_is_one_line(tmp_path):
    """A profile named on the command line must exist: no run without the prices asked for."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    result = CliRunner().invoke(
        app,
        [
            "simulate-check",
            "--dtype",
            "fp32",
            "--requests",
            "2",
            "--repeats",
            "1",
            "--profile",
            str(tmp_path / "none.yaml"),
        ],
    )
    assert result.exit_code == 2
    assert f"--profile {tmp_path / 'none.yaml'}: no such file" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_a_run_records_the_machine_state_against_its_profile(monkeypatch, tmp_path):
    """Before and after the replays, the profile's roofs (stubbed here at 0.8x and 0.6x of
    the committed Zen 3 profile's recorded rates) land in meta.machine_state."""
    import yaml

    import kernels.calibrate.state as state
    from kernels.servecheck.cb_server import run_check
    from ridgeline.io.catalog import PROFILES_DIR

    path = PROFILES_DIR / "cpu-amd-epyc-f25m1-1t.yaml"
    recorded = state.recorded_roofs(yaml.safe_load(path.read_text()))
    speeds = iter((0.8, 0.6))

    def stub(cfg, prof, device):
        s = next(speeds)
        return {k: v * s for k, v in recorded.items()}

    monkeypatch.setattr(state, "measure_state", stub)
    from ridgeline.io.profile import calibrated_ceilings, load_profile

    monkeypatch.setattr(
        "ridgeline.io.resolve.resolve_ceilings",  # on any host: no CPU signature check
        lambda spec, p: (calibrated_ceilings(load_profile(p), spec), ()),
    )
    result, _ = run_check(
        "qwen2-0.5b",
        layers=1,
        requests=2,
        rate=4.0,
        prompt=(8, 8),
        output=(2, 2),
        repeats=1,
        dtype="fp32",
        profile=path,
        out=tmp_path / "run.json",
    )
    machine = result["meta"]["machine_state"]
    assert len(machine["runs"]) == 2
    assert machine["ratios"] == {k: round((0.8 * 0.6) ** 0.5, 3) for k in recorded}
    assert machine["drifted"] == list(recorded)
