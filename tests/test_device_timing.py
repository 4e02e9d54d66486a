"""Device-time measurement: graph-replay arithmetic, profiler kernel durations, host cost,
the GPU case set and the host-term profiler (CPU parts; CUDA parts marked ``gpu``)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from kernels.bench import timing
from kernels.bench.cases_gpu import MAX_KV_TOKENS, gpu_cases, is_reference, split_summary
from kernels.calibrate.host_profile import count_kernels, profile_terms, range_kernel_counts

CUDA = torch.cuda.is_available()
CPU_DEV = torch.autograd.DeviceType.CPU
CUDA_DEV = torch.autograd.DeviceType.CUDA


def event(name, device_type, us, kernels=0, children=()):
    """A stand-in for a torch.profiler FunctionEvent (the fields the code reads)."""
    return SimpleNamespace(
        name=name,
        device_type=device_type,
        kernels=[None] * kernels,
        cpu_children=list(children),
        time_range=SimpleNamespace(elapsed_us=lambda: us),
    )


def test_kernel_stats_counts_device_events_only():
    events = [
        event("aten::mm", CPU_DEV, 30.0),
        event("gemm", CUDA_DEV, 12.0),
        event("elementwise", CUDA_DEV, 3.0),
        event("gemm", CUDA_DEV, 12.0),
        event("elementwise", CUDA_DEV, 3.0),
    ]
    # two calls: (12 + 3 + 12 + 3) µs / 2 = 15 µs and 4 / 2 = 2 kernels per call
    per_call, kernels = timing.kernel_stats(events, 2, CUDA_DEV)
    assert per_call == pytest.approx(15e-6) and kernels == 2.0
    with pytest.raises(ValueError):
        timing.kernel_stats(events, 0, CUDA_DEV)


def test_kernel_stats_on_real_profiler_events():
    """The same arithmetic on events torch.profiler recorded here (CPU ops as the device)."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            torch.mm(x, x)
    mms = [e for e in prof.events() if e.name == "aten::mm"]
    per_call, count = timing.kernel_stats(mms, 5, CPU_DEV)
    assert count == 1.0
    assert per_call == pytest.approx(sum(e.time_range.elapsed_us() for e in mms) * 1e-6 / 5)


def test_device_samples_subtract_launch_gaps():
    # a replay of 100 calls in 1 ms: 10 µs per call, 3 kernels with a 1 µs gap each -> 7 µs
    assert timing.device_samples([1e-3, 2e-3], 100, 3, 1e-6) == pytest.approx([7e-6, 17e-6])
    assert timing.device_samples([1e-4], 100, 3, 1e-6) == [0.0]  # never negative


def test_launch_gap_and_agreement():
    assert timing.launch_gap_from(3.5e-6, 2.0e-6) == pytest.approx(1.5e-6)
    assert timing.launch_gap_from(1e-6, 2e-6) == 0.0
    assert timing.agreement(10.5, 10.0) == pytest.approx(0.05)
    assert timing.agreement(1.0, 0.0) == math.inf


def test_graph_calls_cover_every_set_and_the_target():
    assert timing.graph_calls(1e-6, 4) == 1000  # 1 ms / 1 µs
    assert timing.graph_calls(1e-3, 40) == 40  # every set once
    assert timing.graph_calls(1e-9, 1) == timing.GRAPH_MAX_CALLS


def test_host_seconds_times_calls_without_waiting():
    calls = []
    per_call = timing.host_seconds(lambda a: calls.append(a), [(1,), (2,)], 6, lambda: None)
    assert calls == [1, 2, 1, 2, 1, 2] and per_call >= 0


def test_measure_rejects_unknown_timing():
    with pytest.raises(ValueError, match="timing"):
        timing.measure(lambda: None, [()], timing="wall")


# --- the GPU case set ----------------------------------------------------------------


def test_gpu_cases_load_the_device_and_stay_disjoint():
    from kernels.bench.cases import check_disjoint

    calibration = gpu_cases("calibration") + gpu_cases("calibration", quick=True)
    validation = gpu_cases("validation")
    check_disjoint(calibration, validation)
    kinds = {(c.kernel, c.backend) for c in validation}
    for wanted in (
        ("fp8_matmul", ""),
        ("int4_weight_only", "g128"),
        ("sdpa", "flash"),
        ("sdpa", "cudnn"),
        ("sdpa", "efficient"),
        ("sdpa", "gqa"),
        ("sdpa", "repeat_kv"),
        ("rope_decoder", ""),
    ):
        assert wanted in kinds
    assert ("rope", "") not in kinds  # the complex-multiply rotary is out
    prefill = {int(c.recipe["length"]) for c in validation if c.stage == "prefill" and "length" in c.recipe}
    assert prefill == {384, 1536, 4608}  # between the grid's 256 ... 8192
    decode = [c for c in validation if c.stage == "decode"]
    assert max(int(c.recipe["batch"]) for c in decode) == 192
    assert max(int(c.recipe["length"]) for c in decode) == 24576
    assert all(int(c.recipe["batch"]) * int(c.recipe["length"]) <= MAX_KV_TOKENS for c in decode)
    models = {c.recipe.get("model") for c in validation} - {None}
    assert models == {"llama-3-8b", "llama-2-7b"}  # GQA and MHA
    from kernels.bench.cases import held_out_overlap

    assert not any(held_out_overlap(calibration, validation).values())  # every dimension


def test_reference_kernels_are_reported_apart():
    cases = gpu_cases("validation")
    refs = {(c.kernel, c.backend) for c in cases if is_reference(c)}
    assert refs == {("sdpa", "math"), ("int8_weight_only", "")}
    rows = [{"kernel": "linear", "backend": "", "error_calibrated": e} for e in (0.01, -0.03, 0.05)]
    rows += [
        {"kernel": "sdpa", "backend": "math", "error_calibrated": 0.9},
        {"kernel": "sdpa", "backend": "flash", "error_calibrated": None},
    ]
    out = split_summary(rows)
    assert out["headline"]["n"] == 3 and out["headline"]["median"] == pytest.approx(0.03)
    assert out["reference"] == {"n": 1, "median": pytest.approx(0.9), "p90": pytest.approx(0.9)}


def test_rope_benchmark_is_the_decoders_rotary():
    from kernels.bench.bench import apply_rope, make_bench, rope_tables
    from kernels.bench.cases_gpu import _decoder_rope_cases

    case = _decoder_rope_cases("qwen2-0.5b", "decode", 2, 64, "fp32", "validation")[0]
    bench = make_bench(case, "cpu", 2**16)
    q, k = bench.arg_sets[0]
    assert q.shape == (2, 14, 1, 64) and k.shape == (2, 2, 1, 64)  # [B, heads, S, D] views
    cos, sin = rope_tables(64, 65)
    out_q, _ = bench.fn(q, k)
    assert torch.equal(out_q, apply_rope(q, cos[64:65].float(), sin[64:65].float()))
    assert bench.check() < 1e-6


# --- host terms ------------------------------------------------------------------------


def test_range_kernel_counts_sum_children():
    # attention: its own 1 copy kernel + a child with 2 kernels; q_proj 1; a device-side copy
    # of the range (CUDA) is left out; two steps
    attn = event("attention", CPU_DEV, 0, kernels=1, children=[event("sdpa", CPU_DEV, 0, 2)])
    events = [
        attn,
        event("attention", CUDA_DEV, 0),
        event("q_proj", CPU_DEV, 0, 1),
        event("attention", CPU_DEV, 0, kernels=3),
        event("q_proj", CPU_DEV, 0, 1),
    ]
    assert count_kernels(attn) == 3
    out = range_kernel_counts(events, steps=2)
    assert out["attention"] == {"calls": 1.0, "kernels": 3.0}
    assert out["q_proj"] == {"calls": 1.0, "kernels": 1.0}


def test_profile_terms_golden():
    eager = {
        "host_s": {"q_proj": 10e-6, "rope": 60e-6, "attention": 30e-6, "argmax": 5e-6},
        "kernels": {"q_proj": 1, "rope": 12, "attention": 3, "argmax": 1},
    }
    terms = profile_terms(eager, {"host_s": 4e-6, "kernels": 0.6}, 1.5e-6)
    # argmax is not an engine op; default = the median of 10, 30, 60 = 30 µs (of 1, 3, 12: 3)
    assert terms == {
        "launch_gap_us": 1.5,
        "host_us": {
            "eager": {"default": 30.0, "q_proj": 10.0, "rope": 60.0, "attention": 30.0},
            "compiled": {"default": 4.0},
        },
        "kernels_per_op": {
            "eager": {"default": 3, "q_proj": 1, "rope": 12, "attention": 3},
            "compiled": {"default": 0.6},
        },
    }


def test_profile_terms_load_into_ceilings():
    from ridgeline.io.profile import calibrated_ceilings
    from ridgeline.io.resolve import load_device

    eager = {"host_s": {"q_proj": 10e-6}, "kernels": {"q_proj": 1}}
    terms = profile_terms(eager, None, 1e-6)
    ceilings = calibrated_ceilings({"bandwidth_gb_s": 3000, **terms}, load_device("h100-sxm"))
    assert ceilings.host_s["eager"]["q_proj"] == pytest.approx(10e-6)
    assert ceilings.launch_gap_s == pytest.approx(1e-6)


def test_host_profile_dry_run_on_cpu(tmp_path):
    """The whole command on a tiny model: host terms measured, a CPU profile refused."""
    import yaml

    from kernels.calibrate import host_profile

    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, '
        '"num_attention_heads": 4, "num_key_value_heads": 2, '
        '"num_hidden_layers": 2, "vocab_size": 256, "hidden_act": "silu"}'
    )
    out = tmp_path / "terms.yaml"
    code = host_profile.main(
        [
            str(config),
            "--device",
            "cpu",
            "--prompt",
            "8",
            "--steps",
            "2",
            "--dtype",
            "fp32",
            "--no-compile",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    terms = yaml.safe_load(out.read_text())
    assert terms["launch_gap_us"] == 0.0  # no graphs on a CPU
    assert set(terms["host_us"]["eager"]) >= {"default", "q_proj", "attention", "lm_head"}
    assert "argmax" not in terms["host_us"]["eager"]
    assert (
        host_profile.main(
            [
                str(config),
                "--device",
                "cpu",
                "--no-compile",
                "--steps",
                "1",
                "--prompt",
                "4",
                "--profile",
                str(tmp_path / "p.yaml"),
            ]
        )
        == 2
    )


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_graph_replay_and_profiler_agree_on_cuda():
    x = [
        (
            torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
            torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
        )
    ]
    m = timing.measure(torch.mm, x, device="cuda", agree=True, budget_s=0.1)
    assert m.method == "cuda_graph" and m.extra["kernels"] >= 1
    assert timing.agreement(m.median_s, m.extra["profiler_s"]) < 0.1
    assert m.extra["host_s"] > 0 and m.extra["launch_gap_s"] >= 0


def test_calibrate_and_validate_measure_the_suites_cases_unless_given_the_gpu_set():
    import inspect

    from kernels.bench.cases import drawn_cases, suite_cases
    from kernels.bench.cases_gpu import gpu_case_set, gpu_drawn_cases
    from kernels.calibrate.calibrate import calibrate
    from kernels.validate.validate import validate

    for command in (calibrate, validate):
        default = inspect.signature(command).parameters["case_set"].default
        assert (default.cases, default.draw) == (suite_cases, drawn_cases)
    assert (gpu_case_set().cases, gpu_case_set().draw) == (gpu_cases, gpu_drawn_cases)
