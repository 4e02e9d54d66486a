"""Execution modes: graph, eager and compiled composition of device and host time."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline.api import analyze
from ridgeline.engine.ops import Op
from ridgeline.engine.roofline import composed_time, evaluate, queue_finish, spec_ceilings, step_order
from ridgeline.engine.workload import Settings
from ridgeline.errors import InvalidSpecError, InvalidWorkloadError
from ridgeline.io.profile import calibrated_ceilings
from ridgeline.io.resolve import load_device


def loop_finish(host, device):
    """The queue written as its recurrence: F_i = max(F_{i-1}, E_i) + d_i."""
    finish, enqueued = 0.0, 0.0
    for h, d in zip(host, device):
        enqueued += h
        finish = max(finish, enqueued) + d
    return finish


def test_queue_golden():
    # host 1, 1, 1 and device 5, 1, 1: E = 1, 2, 3; F1 = 1 + 5 = 6, F2 = max(6, 2) + 1 = 7,
    # F3 = max(7, 3) + 1 = 8 (device-bound: the first host call, then all device work)
    assert queue_finish([1, 1, 1], [5, 1, 1]) == pytest.approx(8.0)
    # host 4, 4, 4 and device 1, 1, 1: F = 5, 9, 13 = sum(h) + last d (host-bound)
    assert queue_finish([4, 4, 4], [1, 1, 1]) == pytest.approx(13.0)
    # mixed: host 1, 6, 1 and device 4, 1, 4: F1 = 5, F2 = max(5, 7) + 1 = 8,
    # F3 = max(8, 8) + 4 = 12; neither sum (8, 9) nor their total (17)
    assert queue_finish([1, 6, 1], [4, 1, 4]) == pytest.approx(12.0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 100, allow_subnormal=False), st.floats(0, 100, allow_subnormal=False)),
        min_size=1,
        max_size=30,
    )
)
def test_queue_matches_recurrence_and_bounds(pairs):
    host, device = (np.array(v) for v in zip(*pairs))
    finish = queue_finish(host, device)
    assert finish == pytest.approx(loop_finish(host, device), rel=1e-12, abs=1e-9)
    assert max(host.sum(), device.sum()) - 1e-9 <= finish <= host.sum() + device.sum() + 1e-9


def test_queue_broadcasts_over_workload_axes():
    host = np.array([[1.0], [6.0], [1.0]])  # (ops, 1)
    device = np.array([[4.0, 0.5], [1.0, 0.5], [4.0, 0.5]])
    # second column: host-bound, 1 + 6 + 1 + last 0.5 = 8.5
    assert queue_finish(host, device) == pytest.approx([12.0, 8.5])


def test_step_order_interleaves_layers():
    ops = [Op("embed", "embed", 1, 0), Op("a", "norm", 2, 0), Op("b", "linear", 2, 0), Op("head", "linear", 1, 0)]
    assert step_order(ops).tolist() == [0, 1, 2, 1, 2, 3]


H100 = load_device("h100-sxm")
# A profile with execution terms, numbers chosen for hand arithmetic (not a measurement):
# every op costs 10 µs of host per eager call, rope launches 12 kernels, gap 1 µs.
TERMS = {
    "bandwidth_gb_s": 3000.0,
    "matrix_peak_tops": {"bf16": 600.0},
    "launch_gap_us": 1.0,
    "host_us": {"eager": {"default": 10.0}, "compiled": {"default": 2.0}},
    "kernels_per_op": {"eager": {"default": 1, "rope": 12}, "compiled": {"default": 1}},
}


def test_profile_terms_load():
    c = calibrated_ceilings(TERMS, H100)
    assert c.launch_gap_s == pytest.approx(1e-6)
    assert c.host_s["eager"]["default"] == pytest.approx(1e-5)
    assert c.kernels["eager"]["rope"] == 12


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"launch_gap_us": -1}, "launch_gap_us"),
        ({"host_us": {"eager": {"rope": "fast"}}}, "host_us.eager.rope"),
        ({"kernels_per_op": [1, 2]}, "kernels_per_op"),
    ],
)
def test_profile_terms_refused(bad, message):
    with pytest.raises(InvalidSpecError, match=message):
        calibrated_ceilings({**TERMS, **bad}, H100)


def two_ops():
    # a 1 GB weight read (memory-bound: 1e9 / 3e12 = 333.3 µs) and a rope that moves 3 MB
    # (1 µs); one layer each
    return [
        Op("q_proj", "linear", 1, 2e6, weight_bytes=1e9, matrix=True, dtype="bf16"),
        Op("rope", "elementwise", 1, 0, act_read_bytes=3e6, dtype="bf16"),
    ]


def compose(execution, serial=False, ops=None):
    ceilings = replace(calibrated_ceilings(TERMS, H100), execution=execution, serial=serial)
    ops = ops or two_ops()
    return composed_time(ops, evaluate(ops, ceilings), ceilings, execution, serial)


def test_graph_is_device_time_plus_gaps():
    # (333.33 + 1 gap) + (1 + 12 gaps) = 334.33 + 13 = 347.33 µs; no host time
    out = compose("graph")
    assert out["time_s"] == pytest.approx(347.3333e-6, rel=1e-5)
    assert out["host_s"] == 0.0


def test_eager_queue_on_device_bound_step():
    # E = 10, 20 µs; device 334.33 and 13 µs: F = max(10 + 347.33, 20 + 13) = 357.33 µs
    assert compose("eager")["time_s"] == pytest.approx(357.3333e-6, rel=1e-5)


def test_eager_queue_on_host_bound_step():
    # 0.3 MB of weights instead (0.1 µs + 1 gap): E = 10, 20; F = max(10 + 1.1 + 13, 20 + 13)
    ops = [replace(two_ops()[0], weight_bytes=3e5), two_ops()[1]]
    assert compose("eager", ops=ops)["time_s"] == pytest.approx(33e-6, rel=1e-5)


def test_serial_cpu_adds_host_and_device():
    # one thread does both: 357.33 - 10 + ... = 347.33 device + 20 host = 367.33 µs
    assert compose("eager", serial=True)["time_s"] == pytest.approx(367.3333e-6, rel=1e-5)


def test_unknown_execution_refused():
    with pytest.raises(InvalidWorkloadError, match="unknown execution"):
        Settings(execution="fast")


def test_profile_without_terms_says_how_it_was_timed_or_is_refused():
    plain = {k: v for k, v in TERMS.items() if k in ("bandwidth_gb_s", "matrix_peak_tops")}
    with pytest.raises(InvalidSpecError, match="does not say how its kernels were timed"):
        calibrated_ceilings({**plain, "overhead_us": {"default": 5.0}}, H100)
    # device-timed without host terms: graph only; eager-timed: eager only (auto picks it)
    device = calibrated_ceilings({**plain, "timing": "device"}, H100)
    eager = calibrated_ceilings({**plain, "timing": "eager"}, H100)
    for ceilings, ok, refused in (
        (device, "graph", "eager"),
        (device, "graph", "compiled"),
        (eager, "eager", "graph"),
        (eager, "compiled", "graph"),
    ):
        analyze("llama-2-7b", H100, 1, 512, dtype="bf16", ceilings=ceilings, execution=ok)
        with pytest.raises(InvalidWorkloadError, match=f"cannot price {refused} execution"):
            analyze("llama-2-7b", H100, 1, 512, dtype="bf16", ceilings=ceilings, execution=refused)
    auto = analyze("llama-2-7b", H100, 1, 512, dtype="bf16", ceilings=eager)
    assert auto.settings.execution == "auto" and auto.extra["basis"]["execution"] == "eager"
    assert auto.extra["basis"]["notes"][0].startswith("execution eager (auto)")


def test_modes_order_and_generation_sum():
    ceilings = calibrated_ceilings(TERMS, H100)
    runs = {
        mode: analyze("llama-2-7b", H100, 1, 512, 33, dtype="bf16", ceilings=ceilings, execution=mode)
        for mode in ("graph", "eager", "compiled")
    }
    step = {m: r.decode.total["time_s"] for m, r in runs.items()}
    # graph pays no host; compiled launches fewer kernels (no 12-kernel rope) and less host
    assert step["graph"] <= step["eager"] and step["compiled"] <= step["eager"]
    assert step["eager"] <= runs["eager"].decode.total["device_s"] + runs["eager"].decode.total["host_s"]
    # decode over 32 steps: the Simpson sum stays within 1% of 32 single-step evaluations
    for mode, r in runs.items():
        each = [
            analyze("llama-2-7b", H100, 1, 512 + j, 0, dtype="bf16", ceilings=ceilings, execution=mode).decode.total[
                "time_s"
            ]
            for j in range(0, 32, 8)
        ]
        assert r.generation["tpot_s"] == pytest.approx(np.mean(each), rel=0.01)


def test_auto_is_graph_on_gpu_and_eager_on_cpu():
    ceilings = calibrated_ceilings(TERMS, H100)
    auto = analyze("llama-2-7b", H100, 1, 512, dtype="bf16", ceilings=ceilings)
    graph = analyze("llama-2-7b", H100, 1, 512, dtype="bf16", ceilings=ceilings, execution="graph")
    assert auto.decode.total["time_s"] == graph.decode.total["time_s"]
    cpu = replace(H100, kind="cpu", name="a-cpu")
    with pytest.raises(InvalidWorkloadError, match="runs no CUDA graphs"):
        analyze("llama-2-7b", cpu, 1, 512, dtype="bf16", execution="graph")


def test_spec_ceilings_ignore_execution():
    assert not spec_ceilings(H100).host_s
    a = analyze("llama-2-7b", "h100-sxm", 1, 512, 4, dtype="bf16", execution="eager")
    b = analyze("llama-2-7b", "h100-sxm", 1, 512, 4, dtype="bf16", execution="graph")
    assert a.generation == b.generation


def test_host_terms_by_op_name():
    table = MappingProxyType({"rope": 60e-6, "default": 1e-6})
    ceilings = replace(spec_ceilings(H100), host_s=MappingProxyType({"eager": table}))
    from ridgeline.engine.roofline import op_host

    assert op_host(ceilings, two_ops()[1], "eager") == pytest.approx(60e-6)
    assert op_host(ceilings, two_ops()[0], "eager") == pytest.approx(1e-6)
    assert op_host(ceilings, two_ops()[0], "graph") == 0.0


def test_cli_execution_option_and_json(tmp_path):
    import json

    import yaml
    from typer.testing import CliRunner

    from ridgeline.cli import app

    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump({**TERMS, "meta": {"spec_device": "h100-sxm"}}))
    base = [
        "analyze",
        "llama-2-7b",
        "-H",
        "h100-sxm",
        "--dtype",
        "bf16",
        "--generate",
        "8",
        "--profile",
        str(profile),
        "-f",
        "json",
    ]
    out = {}
    for mode in ("graph", "eager"):
        result = CliRunner().invoke(app, [*base, "--execution", mode])
        assert result.exit_code == 0, result.output
        out[mode] = json.loads(result.output)
        assert out[mode]["workload"]["execution"] == mode
    assert out["graph"]["decode"]["total"]["host_s"] == 0.0
    # llama-2-7b, transformers' sdpa attention (auto): 14 ops per layer (attn_norm,
    # q/k/v_proj, rope, attention, o_proj, attn_add, mlp_norm, gate/up_proj, mlp_act,
    # down_proj, mlp_add) x 32 layers + embed, final_norm, lm_head = 451 calls at 10 µs = 4.51 ms
    # (its eager attention: 20 ops per layer, 643 calls)
    assert out["eager"]["decode"]["total"]["host_s"] == pytest.approx(451 * 10e-6, rel=1e-9)
    bad = CliRunner().invoke(app, [*base, "--execution", "turbo"])
    assert bad.exit_code == 2 and "unknown execution 'turbo'" in bad.output


def test_dashboard_offers_the_execution_setting():
    from viewer.state import control

    c = control("execution")
    assert c.kind == "choice" and c.options == ("auto", "graph", "eager", "compiled")
    assert c.default == "auto"
