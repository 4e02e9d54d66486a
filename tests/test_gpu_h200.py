"""The H200 session's code paths that run without a GPU: the GPU draw, the host terms of a
GPU run eager, and the committed H200 files (profile, draws, serving runs) and what the
docs quote of them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.bench.cases import Options, check_disjoint, held_out_overlap
from kernels.bench.cases_gpu import CUDA_BACKENDS, gpu_cases, gpu_drawn_cases
from ridgeline.api import simulate
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.simulator import Scheduler

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
H200 = "cuda-nvidia-h200"
SERVING = REPORTS / "validation" / "serving"
CUDA = Options(("fp32", "bf16", "fp16"), CUDA_BACKENDS, "cuda")


def _gpu_calibration():
    return gpu_cases("calibration", CUDA) + gpu_cases("calibration", CUDA, True)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10**6))
@pytest.mark.slow
def test_a_gpu_draw_is_held_out_from_the_gpu_calibration_in_every_dimension(seed):
    cases, drawn = gpu_drawn_cases(seed, CUDA)
    calibration = _gpu_calibration()
    check_disjoint(calibration, cases)
    assert not any(held_out_overlap(calibration, cases).values())
    assert {c.dtype for c in cases} == {"bf16"} and set(drawn["prefill"]) == {"bf16"}
    assert not set(drawn["models"]) & {"qwen2-7b", "phi-3-mini"}
    again, _ = gpu_drawn_cases(seed, CUDA)
    assert [c.name for c in again] == [c.name for c in cases]


def test_the_committed_draws_came_from_the_cpu_ranges_the_gpu_draw_has_left():
    """Seeds 1126 and 1127 were drawn with the CPU's ranges (contexts 128-464, below the old
    GPU calibration's 1536): the GPU draw now uses the GPU's, so the same seed draws anew."""
    for seed in (1126, 1127):
        snap = json.loads((REPORTS / "validation" / f"{H200}-2026-11-26-draw{seed}.json").read_text())
        assert max(length for _, length in snap["meta"]["draw"]["decode"]) < 512
        assert snap["meta"]["profile"] == f"reports/profiles/{H200}.yaml"
        assert not snap["meta"]["machine_state"]["drifted"]
        _, drawn = gpu_drawn_cases(seed, CUDA)
        assert drawn["ranges"] == "gpu" and drawn != snap["meta"]["draw"]


def test_the_h200_copy_roof_is_the_kernel_copy_not_the_memcpy():
    import yaml

    profile = yaml.safe_load((REPORTS / "profiles" / f"{H200}.yaml").read_text())
    copy = profile["measurements"]["copy"]
    rates = copy["runs_gb_s_by_kernel"]
    assert copy["kernel"] == "mul" and rates["mul"] > 1.5 * rates["copy_"]
    assert profile["bandwidth_gb_s"] == pytest.approx(max(copy["runs_gb_s"]), rel=1e-6)
    assert profile["meta"]["calibration_ok"] == 258 and profile["meta"]["mode"] == "full"


def test_host_overlap_makes_a_step_the_longer_of_forward_and_host():
    """One request, host terms far above the forward: with overlap every step takes the
    host's seconds exactly; without, the host's plus the forward's."""
    one = Arrivals(np.array([0.0]), np.array([64]), np.array([5]), "one")
    base = dict(max_batch=4, token_budget=256, step_overhead_s=0.5, request_overhead_s=0.25)
    apart = simulate("qwen2-0.5b", "h200", one, Scheduler(**base), dtype="bf16")
    overlap = simulate("qwen2-0.5b", "h200", one, Scheduler(**base, host_overlap=True), dtype="bf16")
    assert overlap.requests["latency_s"][0] == pytest.approx(5 * 0.75, rel=1e-12)
    forward = float(np.sum(apart.timeline["step_s"])) - 5 * 0.75
    assert 0 < forward < 0.05
    assert apart.requests["latency_s"][0] == pytest.approx(5 * 0.75 + forward, rel=1e-9)


def test_fit_overhead_of_a_gpu_run_fits_the_whole_step():
    from kernels.servecheck.cb_server import fit_overhead

    requests = [1, 2, 3, 4, 5, 6]
    steps = {
        "step_s": [0.05 + 0.002 * n for n in requests],
        "forward_s": [0.045 + 0.002 * n for n in requests],
        "query": [[1] * n for n in requests],
        "past": [[9] * n for n in requests],
        "attention_s": [0.0] * 6,
    }
    whole = fit_overhead([steps], whole_step=True)
    assert whole["step_overhead_s"] == pytest.approx(0.05) and whole["host_overlap"]
    assert whole["request_overhead_s"] == pytest.approx(0.002)
    beside = fit_overhead([steps])
    assert beside["step_overhead_s"] == pytest.approx(0.005) and "host_overlap" not in beside
    assert beside["request_overhead_s"] == pytest.approx(0.0, abs=1e-12)


def _run(rate: int) -> Path:
    return SERVING / f"serving-{H200}-qwen2-0.5b-{rate}rps-2026-11-26.json"


def signed(x: float) -> str:
    return f"{'+' if x >= 0 else '−'}{abs(x) * 100:.0f} %"


def results_text() -> str:
    """Every file of the results (reports/results/), one after another."""
    return "\n".join(p.read_text() for p in sorted((REPORTS / "results").glob("*.md")))


def results_rows(heading: str, first: str) -> list[list[str]]:
    """Cells of the rows of a results section (reports/results/) whose first cell is ``first``."""
    text = results_text()
    part = text.split(f"\n### {heading}\n", 1)[1].split("\n#", 1)[0]
    return [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in part.splitlines()
        if line.startswith(f"| {first} |")
    ]


@pytest.mark.slow
def test_results_md_prices_the_h200_runs_again():
    """Each H200 run priced again (measures nothing) by the engine alone and with host terms
    fitted to the other rate's steps: RESULTS.md's rows, and the goal met for latency."""
    from kernels.servecheck.cb_server import overhead_from, resimulate

    for rate, other in ((8, 16), (16, 8)):
        data = json.loads(_run(rate).read_text())
        assert data["execution"] == "eager" and data["meta"]["device_key"] == H200
        terms = overhead_from(_run(other))
        assert terms["host_overlap"]
        live = resimulate(_run(rate), terms)
        c = live["comparison"]
        rows = {r[1]: r for r in results_rows("Priced again with today's engine", f"`serving/{_run(rate).name}`")}
        for mode in ("calibrated", "calibrated+overhead"):
            errors = [c[mode][k]["error"][q] for k in ("ttft_s", "latency_s") for q in ("p50", "p90")]
            busy = f"{live['busy']['simulated_' + mode + '_s']:.1f} / {data['busy']['measured_cpu_s']:.1f}"
            assert rows[mode][2:] == [f"{e:+.0%}" for e in errors] + [busy], (rate, mode)
            if mode == "calibrated":
                assert max(errors) < -0.9  # the engine alone misses the host-bound steps
            else:
                assert abs(errors[2]) <= 0.15 and abs(errors[3]) <= 0.25  # latency: the goal
    eight = overhead_from(_run(8))
    (row,) = results_rows("Host terms fitted to the recorded steps", f"`serving/{_run(8).name}`")
    assert row[1:4] == [
        f"{eight['step_overhead_s'] * 1e3:.2f}",
        f"{eight['request_overhead_s'] * 1e3:.2f}",
        f"{eight['rms_residual_s'] * 1e3:.2f}",
    ]


def test_results_md_quotes_the_h200_draw():
    def pair(r, p="calibrated"):
        return f"{r[p + '_median_abs'] * 100:.1f}% / {r[p + '_p90_abs'] * 100:.1f}%"

    name = f"{H200}-2026-11-26-draw1127.json"
    snap = json.loads((REPORTS / "validation" / name).read_text())
    t = {r["op_class"]: r for r in snap["summary"]}
    draw = snap["meta"]["draw"]
    assert draw["models"] == ["llama-2-7b", "llama-3-8b"] and draw["prefill"]["bf16"] == [[1, 464]]
    text = results_text()
    assert "Drawn with seed 1127: llama-2-7b and llama-3-8b; prompts (batch × tokens) bf16 1 × 464;" in text
    for cls in ("headline", "all", "gemm", "gemv", "quant", "elementwise", "attention"):
        label = f"**{cls}**" if cls in ("headline", "all") else cls
        (row,) = results_rows(f"`{name}`", label)
        assert row[1] == str(t[cls]["count"]) and row[3].startswith(pair(t[cls])), cls
    (row,) = results_rows(f"`{name}`", "**headline**")
    assert row[5] == f"{pair(t['headline'], 'cv')} ({t['headline']['cv_count']})"
    assert t["headline"]["calibrated_p90_abs"] > 0.15  # the goal is missed: attention at short contexts
    other = json.loads((REPORTS / "validation" / f"{H200}-2026-11-26-draw1126.json").read_text())
    (row,) = results_rows(f"`{H200}-2026-11-26-draw1126.json`", "**headline**")
    assert row[3].startswith(pair({r["op_class"]: r for r in other["summary"]}["headline"]))


@pytest.mark.parametrize(
    "args, words",
    [
        (["--clock", "device"], "--clock device goes with --device cuda"),
        (["--device", "cuda", "--clock", "cpu"], "--clock cpu goes with --device cpu"),
    ],
)
def test_simulate_check_refuses_a_clock_of_the_other_device(args, words):
    pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from ridgeline.cli import app

    result = CliRunner().invoke(app, ["simulate-check", *args])
    assert result.exit_code == 2 and words in " ".join(result.output.split())
