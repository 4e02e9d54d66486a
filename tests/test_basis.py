"""Every prediction says what it rests on, and no fallback is silent (issue 24, items 1-2).

Numbers are worked by hand from the committed profiles: the H200's (device time, graph
replay; host terms measured for eager only, keyed by engine op) and the H100's (eager CUDA
events, host-inclusive: no launch gap, no host term, no kernels per op)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from ridgeline.api import analyze
from ridgeline.cli import app
from ridgeline.engine.basis import device_key
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.roofline import op_host, op_kernels
from ridgeline.io.catalog import PROFILES_DIR
from ridgeline.io.profile import load_profile, timing_of
from ridgeline.io.resolve import load_device, resolve

H100 = str(PROFILES_DIR / "historical/cuda-nvidia-h100-80gb-hbm3-2026-11-23-eager.yaml")  # eager-timed
H200 = str(PROFILES_DIR / "cuda-nvidia-h200.yaml")
CPU = str(PROFILES_DIR / "cpu-amd-epyc-1t.yaml")
RUN = ["analyze", "llama-2-7b", "--seq-len", "512", "--generate", "128"]


def cli(*args: str):
    return CliRunner().invoke(app, [*RUN, *args])


def as_json(*args: str) -> dict:
    result = cli(*args, "-f", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_profile_says_how_it_was_timed():
    # the H100's 895 rows are CUDA events around eager calls; the H200's graph replays
    assert timing_of(load_profile(H100)) == "eager"
    assert timing_of(load_profile(H200)) == "device"
    assert timing_of(load_profile(CPU)) == "cpu"
    assert resolve("llama-2-7b", "h100-sxm", profile=H100).ceilings.timing == "eager"
    assert resolve("llama-2-7b", "h200", profile=H200).ceilings.timing == "device"
    # transferred: the timing travels with the fractions
    moved = resolve("llama-2-7b", "h100-sxm", profile=H200, transfer=True).ceilings
    assert (moved.mode, moved.timing) == ("transferred", "device")


@pytest.mark.parametrize("bad", ["graph-ish", 3])
def test_a_profile_with_an_unknown_timing_is_refused(tmp_path, bad):
    with open(H200) as handle:
        raw = yaml.safe_load(handle)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**raw, "timing": bad}))
    result = cli("-H", "h200", "--dtype", "bf16", "--profile", str(path))
    assert result.exit_code == 2
    assert "'timing' must be one of device, eager, cpu" in result.output


@pytest.mark.parametrize(
    "hardware, profile, execution, message",
    [
        # before: TPOT 11 ms in graph as in eager (a silent equality); 6.15 ms of it host time
        (
            "h100-sxm",
            H100,
            "graph",
            "error: the calibrated profile of h100-sxm cannot price graph execution: it was "
            "timed by eager CUDA events, host-inclusive, so it holds no device times for "
            "graph; use a device-time profile, or execution eager (set with --execution)\n",
        ),
        # before: 7.43 ms, faster than graph's 7.50 ms (no host, one launch per op)
        (
            "h200",
            H200,
            "compiled",
            "error: the calibrated profile of h200 cannot price compiled execution: it measured no "
            "compiled host terms (host_us.compiled; python -m kernels.calibrate.host_profile measures them); "
            "use execution graph or eager (set with --execution)\n",
        ),
    ],
)
def test_an_execution_mode_the_profile_has_no_terms_for_is_refused(hardware, profile, execution, message):
    result = cli("-H", hardware, "--dtype", "bf16", "--profile", profile, "--execution", execution)
    assert result.exit_code == 2
    assert result.output == message


def test_the_h100_profile_prices_compiled_as_its_eager_calls_and_says_so():
    compiled = as_json("-H", "h100-sxm", "--dtype", "bf16", "--profile", H100, "--execution", "compiled")
    eager = as_json("-H", "h100-sxm", "--dtype", "bf16", "--profile", H100, "--execution", "eager")
    assert compiled["generation"] == eager["generation"]  # the same number, named
    assert compiled["basis"]["execution"] == "compiled"
    assert compiled["basis"]["notes"][0] == (
        "compiled priced as eager: the profile was timed by eager CUDA events, host-inclusive "
        "and holds no compiled terms"
    )
    embed = "no measured class for embed@bf16: priced by datasheet roofs and the profile's default overhead"
    assert eager["basis"]["notes"] == [embed]


def test_the_h100_profile_prices_eager_and_says_so():
    auto = as_json("-H", "h100-sxm", "--dtype", "bf16", "--profile", H100)
    eager = as_json("-H", "h100-sxm", "--dtype", "bf16", "--profile", H100, "--execution", "eager")
    assert auto["generation"] == eager["generation"]
    # auto attention is transformers' sdpa path, one fused kernel a layer (eager: 11.915 ms,
    # its K/V copies and six score kernels, issue 26 item 3)
    assert auto["generation"]["tpot_s"] == pytest.approx(10.031e-3, rel=1e-3)
    basis = auto["basis"]
    assert (basis["ceilings"], basis["timing"], basis["execution"]) == ("calibrated", "eager", "eager")
    assert basis["timing_label"] == "eager CUDA events, host-inclusive"
    assert basis["notes"][0] == (
        "execution eager (auto): the profile was timed by eager CUDA "
        "events, host-inclusive, so it holds no device times for graph"
    )
    table = cli("-H", "h100-sxm", "--dtype", "bf16", "--profile", H100).stdout.splitlines()
    assert table[1] == (
        "basis: calibrated roofline, timed by eager CUDA events, host-inclusive; execution eager; engine pytorch"
    )


def test_fp16_uses_the_bf16_classes_of_the_same_hopper_rate_and_says_so():
    # before: fp16 (the CLI default) fell to the pooled 'linear' class, 36.566 us per GEMM
    # instead of linear@bf16's 6.026 us: TPOT 14.3 ms against 7.5 ms in bf16
    d = resolve("llama-2-7b", "h200", dtype="fp16", profile=H200)
    q_proj = next(op for op in stage_ops(d.model, "decode", 1, 512, d.plan) if op.name == "q_proj")
    assert q_proj.dtype == "fp16"
    assert d.ceilings.overhead(q_proj) == pytest.approx(6.026e-6)
    assert d.ceilings.terms(q_proj) == d.ceilings.efficiency["linear@bf16"]
    fp16 = as_json("-H", "h200", "--profile", H200)
    bf16 = as_json("-H", "h200", "--dtype", "bf16", "--profile", H200)
    # decode is memory-bound: the same classes give the same step within the measured GEMM
    # peaks' difference (fp16 656.7 against bf16 680.0 TOPS on the few compute-bound ops)
    assert fp16["generation"]["tpot_s"] == pytest.approx(bf16["generation"]["tpot_s"], rel=2e-3)
    assert fp16["generation"]["tpot_s"] == pytest.approx(6.193e-3, rel=1e-3)
    # eager attention runs one kernel more in bf16, the cast-up, and not in fp16 on a GPU
    # (issue 26 item 3: ATen's softmax reads fp16 itself)
    eager16 = as_json("-H", "h200", "--profile", H200, "--attention", "eager")
    eager = as_json("-H", "h200", "--dtype", "bf16", "--profile", H200, "--attention", "eager")
    upcast = next(op for op in eager["decode"]["ops"] if op["name"] == "softmax_upcast")
    assert "softmax_upcast" not in {op["name"] for op in eager16["decode"]["ops"]}
    less = eager["generation"]["tpot_s"] - upcast["count"] * upcast["time_s"]
    assert eager16["generation"]["tpot_s"] == pytest.approx(less, rel=2e-3)
    assert eager16["generation"]["tpot_s"] == pytest.approx(7.882e-3, rel=1e-3)
    assert fp16["basis"]["dtype_as"] == {"fp16": "bf16"} and bf16["basis"]["dtype_as"] == {}
    note = (
        "fp16 priced with the profile's measured bf16 classes: it measured no fp16 classes, "
        "and h200's datasheet gives both 989.4 TFLOP/s"
    )
    assert note in fp16["basis"]["notes"]
    assert f"note: {note}" in cli("-H", "h200", "--profile", H200).stdout.splitlines()


def small_h100_profile(tmp_path, linear_class: str) -> Path:
    """A device-timed H100 profile with an fp32 matrix peak and one measured linear class."""
    path = tmp_path / f"{linear_class}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "meta": {"spec_device": "h100-sxm"},
                "timing": "device",
                "bandwidth_gb_s": 3000.0,
                "matrix_peak_tops": {"fp32": 50.0},
                "efficiency": {linear_class: {"compute": 0.5, "memory": 0.9}},
            }
        )
    )
    return path


def test_a_type_with_no_measured_class_is_priced_by_the_nearest_measured_type_and_says_so(tmp_path):
    """An fp32-only profile (peak 50 TFLOP/s, linear@fp32 at 0.5 of compute, 0.9 of 3000 GB/s)
    prices fp16 with fp32's class on fp16's own roofs (issue 54): fp16's peak is the measured
    fp32 peak x the datasheet's fp16/fp32 ratio, 50 x 989.4 / 67 = 738.36 TFLOP/s; a q_proj
    of llama-2-7b (4096 x 4096) at 512 prompt tokens computes 2 x 512 x 4096^2 = 17.18 GFLOP
    at 0.5 x 738.36 = 369.2 TFLOP/s. Never refused, never a pool over every type."""
    path = small_h100_profile(tmp_path, "linear@fp32")
    result = cli("-H", "h100-sxm", "--profile", str(path))  # fp16: 2 bytes, not 4
    assert result.exit_code == 0, result.output
    assert (
        "note: fp16 priced with the profile's measured fp32 classes: it measured no fp16 classes, "
        "fp32 is the nearest type it measured: its fractions on fp16's own roofs"
    ) in result.output
    assert "priced at fp32's measured peak x the datasheet's fp16/fp32 ratio" in result.output
    d = resolve("llama-2-7b", "h100-sxm", profile=path)
    assert d.ceilings.matrix_peak["fp16"] == pytest.approx(50e12 * 989.4 / 67)
    assert d.ceilings.peak_as == {k: "fp32" for k in ("tf32", "bf16", "fp16", "fp8", "int8")}
    q = next(op for op in stage_ops(d.model, "prefill", 1, 512, d.plan) if op.name == "q_proj")
    assert d.ceilings.keys(q) == ("linear:q_proj@fp32", "linear:q_proj", "linear@fp32", "linear")
    assert d.ceilings.compute_roof(q) == pytest.approx(0.5 * 50e12 * 989.4 / 67)
    assert analyze("llama-2-7b", "h100-sxm", profile=path, dtype="fp32").extra["basis"]["dtype_as"] == {}


def test_unfused_attention_has_its_own_host_terms_not_sdpas():
    d = resolve("llama-2-7b", "h200", dtype="bf16", profile=H200, execution="eager", attention="eager")
    ops = {op.name: op for op in stage_ops(d.model, "decode", 1, 512, d.plan)}
    fused = resolve("llama-2-7b", "h200", dtype="bf16", profile=H200, attention="flash")
    sdpa = next(op for op in stage_ops(fused.model, "decode", 1, 512, fused.plan) if op.name == "attention")
    c = d.ceilings
    # fused SDPA keeps its measured 49.3992 us and 4 kernels; qk, softmax and sv (not
    # measured apart) take the profile's default, 15.7338 us and 1 kernel, never SDPA's
    assert op_host(c, sdpa, "eager") == pytest.approx(49.3992e-6)
    assert op_kernels(c, sdpa, "eager") == 4.0
    for name in ("qk_matmul", "softmax", "sv_matmul"):
        assert op_host(c, ops[name], "eager") == pytest.approx(15.7338e-6)
        assert op_kernels(c, ops[name], "eager") == 1.0
    unfused = ("-H", "h200", "--dtype", "bf16", "--profile", H200, "--attention", "eager")
    eager = as_json(*unfused, "--execution", "eager")
    graph = as_json(*unfused, "--execution", "graph")
    # before: 11.7270 ms eager, 7.4712 ms graph per decode step at 512 cached. The eager step
    # is host-bound, so it drops by the host taken off qk and sv: 32 x 2 x (49.3992 -
    # 15.7338) us; the graph step by their launch gaps: 32 x 2 x (4 - 1) x 0.1198 us. The
    # eager step gains the default host term of the 4 kernels transformers' eager attention
    # adds per layer (scale, mask, cast up, cast back; issue 26 item 3): 32 x 4 x 15.7338 us
    step = {"eager": eager["decode"]["total"]["time_s"], "graph": graph["decode"]["total"]["time_s"]}
    more = 128 * 15.7338e-6
    assert step["eager"] == pytest.approx(11.7270e-3 - 64 * (49.3992 - 15.7338) * 1e-6 + more, abs=2e-7)
    # the graph step gains those 4 kernels' device time and launch gaps, and the softmax's
    # fp32 bytes (9.0335 us before)
    ops = {op["name"]: op for op in graph["decode"]["ops"]}
    added = sum(32 * ops[n]["time_s"] for n in ("attn_scale", "attn_mask", "softmax_upcast", "softmax_downcast"))
    added += 128 * 0.1198e-6 + 32 * (ops["softmax"]["time_s"] - 9.0335e-6)
    assert step["graph"] == pytest.approx(7.4712e-3 - 64 * 3 * 0.1198e-6 + added, abs=2e-7)
    assert eager["generation"]["tpot_s"] == pytest.approx(11.586e-3, rel=1e-3)


def test_ops_priced_without_a_measured_term_are_named():
    unfused = ("-H", "h200", "--dtype", "bf16", "--profile", H200, "--execution", "eager", "--attention", "eager")
    out = as_json(*unfused)
    missing = {(e["op"], e["term"]): e["priced_by"] for e in out["basis"]["unmeasured"]}
    eager_ops = ("qk_matmul", "attn_scale", "attn_mask", "softmax_upcast", "softmax", "softmax_downcast", "sv_matmul")
    assert missing == {
        ("embed", "device"): "datasheet roofs",  # no embed class in the profile
        **{(op, term): "default" for op in eager_ops for term in ("eager host", "kernels per op")},
    }
    lines = cli(*unfused).stdout.splitlines()
    names = ", ".join(eager_ops)
    assert f"note: no measured eager host term for {names}: priced at the profile's default (15.7 µs per call)" in lines
    assert f"note: no measured kernel count for {names}: priced at the profile's default (1 per call)" in lines
    # fused attention: its host and kernels were measured; graph names only the kernels
    flash = as_json("-H", "h200", "--dtype", "bf16", "--profile", H200, "--attention", "flash")
    assert [(e["op"], e["term"]) for e in flash["basis"]["unmeasured"]] == [("embed", "device")]
    # auto, transformers' sdpa path: the H200's profile measured no sdpa_gqa class (the H100's
    # does: on CUDA enable_gqa runs the backend SDPA's dispatch picks, not the forced flash one)
    gqa = CliRunner().invoke(app, ["analyze", "llama-3-8b", "-H", "h200", "--dtype", "bf16", "--profile", H200])
    assert (
        "note: no measured class for sdpa_gqa, a kernel of its own: priced by the 'attention@bf16' class, "
        "other kernels' rate (a profile from today's calibrate measures it)"
    ) in gqa.stdout.splitlines()
    # fp8 (issue 54): the projections run the measured fp8 GEMM (torch._scaled_mm's class),
    # never the 'linear' class pooled over every type; fp8 attention (no fp8 class) takes the
    # nearest measured type's class, bf16's, and is named
    fp8 = as_json("-H", "h200", "--dtype", "fp8", "--profile", H200)
    assert fp8["basis"]["unmeasured"] == [
        {"op": "embed", "dtype": "fp16", "term": "device", "priced_by": "datasheet roofs"},
        {"op": "attention", "dtype": "fp8", "term": "type", "priced_by": "attention:attention@bf16"},
    ]
    d = resolve("llama-2-7b", "h200", dtype="fp8", profile=H200)
    q = next(op for op in stage_ops(d.model, "decode", 1, 512, d.plan) if op.name == "q_proj")
    assert d.ceilings.keys(q)[:2] == ("linear:q_proj@fp8", "linear:fp8_matmul@fp8")
    assert device_key(d.ceilings, q) == "linear:fp8_matmul@fp8"


def test_datasheet_roofs_say_eager_is_device_time_only():
    out = as_json("-H", "h100-sxm", "--dtype", "bf16", "--execution", "eager")
    assert out["basis"]["timing"] is None and out["basis"]["unmeasured"] == []
    note = "datasheet roofs hold no host time: eager is priced as device time only, as graph is"
    assert out["basis"]["notes"] == [note]
    assert as_json("-H", "h100-sxm", "--dtype", "bf16")["basis"]["notes"] == []


def test_the_basis_travels_through_the_python_api():
    a = analyze("llama-2-7b", "h200", 1, 512, 8, dtype="bf16", profile=H200)
    assert a.extra["basis"]["timing"] == "device" and a.extra["basis"]["execution"] == "graph"
    assert a.to_dict()["basis"] == a.extra["basis"]
    assert load_device("h200").matrix_peak["fp16"] == load_device("h200").matrix_peak["bf16"]


@pytest.mark.slow
def test_the_dashboard_shows_the_basis_and_refuses_what_the_cli_refuses():
    pytest.importorskip("dash")
    from viewer import callbacks

    query = "?model=llama-2-7b&device=h200&generate=16&profile=cuda-nvidia-h200"
    title = callbacks.update_analyze("/", query + "&execution=eager&attention=eager", None)[1].splitlines()
    assert title[1].startswith("verdict: TTFT is ")  # the CLI's verdict line, then the basis
    assert title[2] == (
        "basis: calibrated roofline, timed by device time (CUDA-graph replay / "
        "profiler kernel durations); execution eager; engine pytorch"
    )
    assert (
        "note: fp16 priced with the profile's measured bf16 classes: it measured no fp16 "
        "classes, and h200's datasheet gives both 989.4 TFLOP/s"
    ) in title
    assert (
        "note: no measured eager host term for qk_matmul, attn_scale, attn_mask, softmax, "
        "softmax_downcast, sv_matmul: priced at the profile's default (15.7 µs per call)"
    ) in title  # eager attention in fp16 on a GPU: no cast-up kernel before the softmax
    refused = callbacks.update_analyze("/", query + "&execution=compiled", None)
    assert refused[0].startswith("error: the calibrated profile of h200 cannot price compiled")
    h100 = "?model=llama-2-7b&device=h100-sxm&profile=cuda-nvidia-h100-80gb-hbm3"  # device time, eager terms
    assert "no compiled host terms" in callbacks.update_analyze("/", h100 + "&execution=compiled", None)[0]
    message = callbacks.update_validation("/validation", "?runs=cuda-nvidia-h100-80gb-hbm3")[0]
    assert (  # the runs of 2026-11-23 by eager events, the draw of 2026-11-26 in device time
        "Timed by: cuda-nvidia-h100-80gb-hbm3: eager CUDA events, host-inclusive and device time "
        "(CUDA-graph replay / profiler kernel durations)."
    ) in message


ROOT = Path(__file__).resolve().parent.parent


def flat(pages: str) -> str:
    """The text of the files ``pages`` names (a path, or a pattern: the results' files), its
    white space folded."""
    return " ".join(" ".join(p.read_text().split()) for p in sorted(ROOT.glob(pages)))


def test_docs_quote_the_basis_numbers():
    from ridgeline.engine.units import format_time

    text = flat("docs/settings.md")
    tpot = {
        d: analyze("llama-2-7b", "h200", 1, 512, 128, dtype=d, profile=H200).generation["tpot_s"]
        for d in ("fp16", "bf16")
    }
    assert f"gives TPOT {format_time(tpot['fp16'])} beside bf16's {format_time(tpot['bf16'])}" in text
    raw = load_profile(H200)
    sdpa = (
        f"SDPA's {raw['host_us']['eager']['attention']:.1f} µs and "
        f"{raw['kernels_per_op']['eager']['attention']:g} kernels each"
    )
    assert sdpa in text


def test_the_quant_class_is_quoted_with_and_without_the_reference_kernel():
    snap = json.loads((ROOT / "reports/validation/cuda-nvidia-h200-2026-11-26-draw1127.json").read_text())
    quant = next(r for r in snap["summary"] if r["op_class"] == "quant")
    rows = [r for r in snap["rows"] if r["status"] == "ok" and r["op_class"] == "quant"]
    assert {r["kernel"] for r in rows} - {"int8_weight_only"} == {"int4_weight_only", "int8_matmul", "fp8_matmul"}
    assert len(rows) == quant["count"] + 10  # the ten reference int8 weight-only rows
    err = np.abs([r["error_calibrated"] for r in rows])

    def pair(median, p90):
        return f"{median * 100:.1f} % / {p90 * 100:.1f} %"

    text = flat("reports/results/*.md")
    figure = f"| quant class with the reference int8 weight-only kernel | {np.median(err):.1%} / {np.quantile(err, 0.9):.1%} over {err.size} cases |"
    assert figure in text
    assert pair(np.median(err), np.quantile(err, 0.9)) == "9.8 % / 52.1 %"
    assert f"| quant | {quant['count']} |" in text


@pytest.mark.parametrize(
    "page, label",
    [
        ("README.md", "its first run eager CUDA events, host-inclusive"),
        ("docs/validation.md", "**H100 kernels (eager CUDA events, host-inclusive)**"),
        ("docs/e2e.md", "**H100 end to end (eager; calibrated from the eager, host-inclusive profile)**"),
        ("docs/calibration.md", "an eager-timed one (the H100's of 2026-11-23, in"),
        ("docs/dashboard.md", "the H100's of 2026-11-23: eager CUDA events, host-inclusive"),
        ("docs/validation.md", "the H100 run measured directly (eager, host-inclusive)"),
        (
            "reports/results/*.md",
            "profile `cuda-nvidia-h100-80gb-hbm3-2026-11-23-eager.yaml`; timed by eager CUDA events, host-inclusive.",
        ),
        (
            "reports/results/*.md",
            (
                "calibrated with profile `cuda-nvidia-h100-80gb-hbm3-2026-11-23-eager.yaml`, timed by eager CUDA events, host-inclusive."
            ),
        ),
    ],
)
def test_the_h100_data_is_labelled_where_it_is_quoted(page, label):
    assert label in flat(page)


def test_every_h100_section_of_results_md_says_how_it_was_timed():
    """The H100's runs of 2026-11-23 were timed by eager events; its run of 2026-11-26 in
    device time: each section says which, and never the other."""
    text = "\n".join(p.read_text() for p in sorted(ROOT.glob("reports/results/*.md")))
    sections = re.split(r"\n##+ ", text)[1:]  # a section ends at the next heading of any level
    h100 = [s for s in sections if "h100" in s.split("\n", 1)[0] and "in figures" not in s.split("\n", 1)[0]]
    eager = [s for s in h100 if "2026-11-23" in s.split("\n", 1)[0]]
    device = [s for s in h100 if "2026-11-26" in s.split("\n", 1)[0]]
    assert len(eager) == 6 and len(device) == 2
    assert all("timed by eager CUDA events, host-inclusive" in s and "device time" not in s for s in eager)
    assert all("device time" in s and "host-inclusive" not in s for s in device)


def test_the_transfer_help_labels_the_h100_profile():
    out = CliRunner().invoke(app, ["analyze", "--help"], env={"COLUMNS": "400"}).output
    assert "an eager-timed one, as the H100's of 2026-11-23, prices eager execution only" in " ".join(out.split())


def test_sweep_and_frontier_carry_the_basis_in_their_notes():
    sweep = CliRunner().invoke(
        app,
        [
            "sweep",
            "llama-2-7b",
            "-H",
            "h100-sxm",
            "--dtype",
            "bf16",
            "--batch",
            "1,8",
            "--generate",
            "16",
            "--profile",
            H100,
            "-f",
            "json",
        ],
    )
    assert sweep.exit_code == 0, sweep.output
    notes = json.loads(sweep.stdout)["notes"]
    assert notes[0] == (
        "basis: calibrated roofline, timed by eager CUDA events, host-inclusive; execution eager; engine pytorch"
    )
    frontier = CliRunner().invoke(app, ["frontier", "llama-2-7b", "-H", "h200", "--profile", H200, "-f", "json"])
    assert frontier.exit_code == 0, frontier.output
    assert any(
        n.startswith("note: fp16 priced with the profile's measured bf16 classes")
        for n in json.loads(frontier.stdout)["notes"]
    )
    refused = CliRunner().invoke(
        app,
        ["sweep", "llama-2-7b", "-H", "h100-sxm", "--batch", "1,8", "--profile", H100, "--execution", "eager,graph"],
    )
    assert refused.exit_code == 2 and "no device times for graph" in refused.output


def test_a_host_table_without_a_default_names_what_it_charges():
    from types import MappingProxyType

    from ridgeline.engine.basis import basis

    d = resolve("llama-2-7b", "h200", dtype="bf16", profile=H200, execution="eager")
    host = MappingProxyType({"eager": MappingProxyType({"rope": 60e-6})})
    c = replace(d.ceilings, host_s=host, kernels=MappingProxyType({}))
    ops = {"decode": stage_ops(d.model, "decode", 1, 512, d.plan)}
    b = basis(ops, c, d.device, "eager")
    assert op_host(c, ops["decode"][1], "eager") == 0.0  # attn_norm: no entry, no default
    assert any(
        n.startswith("no measured eager host term for embed, attn_norm, q_proj")
        and n.endswith("priced at no host time, as the table gives no default")
        for n in b["notes"]
    ), b["notes"]


@pytest.mark.parametrize(
    "args",
    [
        ("-H", "h200", "--profile", H200, "--execution", "eager"),  # fp16 stand-in
        ("-H", "h100-sxm", "--dtype", "bf16", "--profile", H100, "--execution", "compiled"),
        ("-H", "h100-sxm", "--profile", H200, "--transfer", "--dtype", "fp8"),  # pooled class
    ],
)
def test_calibrated_json_with_a_basis_matches_the_schema(args):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text())
    out = as_json(*args)
    assert out["basis"]["unmeasured"] and out["basis"]["notes"]
    jsonschema.validate(out, schema)


def test_a_matrix_type_without_a_measured_peak_is_named(tmp_path):
    path = small_h100_profile(tmp_path, "linear@bf16")
    out = as_json("-H", "h100-sxm", "--dtype", "bf16", "--profile", str(path))
    peaks = {e["op"] for e in out["basis"]["unmeasured"] if e["term"] == "matrix peak"}
    assert peaks == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
        "lm_head",
        "attention",  # llama-2-7b is MHA: transformers' sdpa path is plain SDPA
    }
    # the profile measured fp32's peak only: bf16's is it x the datasheet ratio (989.4 / 67)
    assert any(
        n.startswith("no measured matrix peak for q_proj@bf16")
        and n.endswith("priced at fp32's measured peak x the datasheet's bf16/fp32 ratio")
        for n in out["basis"]["notes"]
    )


def test_a_rate_no_vendor_publishes_is_said_where_an_answer_rests_on_it():
    """dgx-spark's fp16 and fp8 rates are derived from NVIDIA's one published figure (fp4),
    the Apple GPUs' from cores x ALUs x clock: an answer priced on them says so; one on a
    published rate (h100-sxm fp16, dgx-spark's fp4 weights still compute in fp16) does not
    claim it, and the note names the types the analysis runs."""
    derived = "dgx-spark's fp16 rate is derived, not published (its hardware file's notes say how)"
    assert derived in analyze("llama-3.2-1b", "dgx-spark").extra["basis"]["notes"]
    fp8 = analyze("llama-3.2-1b", "dgx-spark", dtype="fp8").extra["basis"]["notes"]
    assert [n for n in fp8 if "derived" in n] == [
        "dgx-spark's fp16, fp8 rates are derived, not published (its hardware file's notes say how)"
    ]  # fp8 matrix products; the rest of the pass (softmax, norms) in fp16
    assert not any("derived" in n for n in analyze("llama-3.2-1b", "h100-sxm").extra["basis"]["notes"])
    m4 = CliRunner().invoke(app, ["analyze", "llama-3.2-1b", "--hardware", "apple-m4-max"])
    assert "note: apple-m4-max's fp16 rate is derived, not published" in m4.output
