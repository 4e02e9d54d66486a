"""The results (reports/RESULTS.md and the section files it lists, reports/results/) hold the
figures the manuals used to quote, each equal to what the committed snapshots, profiles and
logs give when computed here independently, and the invariants those figures stood for (a
goal met, a kernel within a bound) still hold.

``tests/test_docs.py`` checks that the results are exactly what the generator writes; these
tests check that what it writes is right. Formatting helpers come from the generator
(``test_results_table_formats_a_recorded_row`` pins them); every value is computed here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from kernels.results.generate import abs_pct, ms, pct

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
VALIDATION = REPORTS / "validation"
SERVING = VALIDATION / "serving"
PROFILES = REPORTS / "profiles"
TEXT = "\n".join(p.read_text() for p in sorted((REPORTS / "results").glob("*.md")))  # every section
XEON = "cpu-intel-r-xeon-r-processor-f6m207-1t"
H200 = "cuda-nvidia-h200"


def section(title: str) -> str:
    """The text under the heading ``### {title}`` up to the next heading."""
    start = TEXT.index(f"\n### {title}\n")
    end = TEXT.find("\n#", start + 5)
    return TEXT[start : end if end > 0 else None]


def cells(text: str, first: str) -> list[list[str]]:
    """The cells of every table row of ``text`` whose first cell is ``first``."""
    return [
        [c.strip() for c in line.strip().strip("|").split(" | ")]
        for line in text.splitlines()
        if line.startswith(f"| {first} |")
    ]


def figures(title: str) -> dict[str, str]:
    """A 'Figures the manuals cite' table: figure -> value."""
    rows = [
        line.strip().strip("|").split(" | ")
        for line in section(f"Figures: {title}").splitlines()
        if line.startswith("| ")
    ]
    return {k.strip(): v.strip() for k, v in (r for r in rows if len(r) == 2) if k.strip() != "figure"}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def pair(median: float, p90: float) -> str:
    return f"{abs_pct(median)} / {abs_pct(p90)}"


def pair_of(errors) -> str:
    a = np.abs(np.asarray(errors, dtype=float))
    return f"{pair(float(np.median(a)), float(np.quantile(a, 0.9)))} over {a.size} cases"


def summary(snap: dict) -> dict:
    return {r["op_class"]: r for r in snap["summary"]}


def class_row(name: str, cls: str) -> list[str]:
    """A kernel table row of snapshot ``name`` for class ``cls``."""
    label = f"**{cls}**" if cls in ("all", "headline") else cls
    (row,) = cells(section(f"`{name}`"), label)
    return row


def assert_class(name: str, s: dict, cls: str) -> None:
    row = class_row(name, cls)
    assert row[1] == str(s[cls]["count"])
    cal = pair(s[cls]["calibrated_median_abs"], s[cls]["calibrated_p90_abs"])
    assert row[3] == f"{cal} / {pct(s[cls]['calibrated_bias'], 1)}", (name, cls)
    if s[cls].get("cv_count"):
        assert row[5] == f"{pair(s[cls]['cv_median_abs'], s[cls]['cv_p90_abs'])} ({s[cls]['cv_count']})", (name, cls)


def ok(snap: dict) -> list[dict]:
    return [r for r in snap["rows"] if r["status"] == "ok"]


def profile_row(name: str) -> list[str]:
    (row,) = cells(TEXT, f"`{name}`")
    return row


# Kernels on the first CPU (an AVX-512 EPYC)


def test_the_first_cpu_figures():
    name = "cpu-amd-epyc-1t-2026-11-23.json"
    snap = load(VALIDATION / name)
    s = summary(snap)
    for cls in ("headline", "all", "reference", "gemm", "gemv", "sweep", "attention", "elementwise"):
        assert_class(name, s, cls)
    fig = figures(f"`{name}`")
    decode = [
        r["error_calibrated"]
        for r in ok(snap)
        if r["op_class"] == "attention" and r["stage"] == "decode" and r.get("backend") != "math"
    ]
    assert fig["decode attention, headline (fused, eager and transformers' paths)"] == pair_of(decode)
    fused = [
        abs(r["error_calibrated"])
        for r in ok(snap)
        if r.get("backend") == "flash" and r["stage"] == "decode" and r["dtype"] == "bf16"
    ]
    assert max(fused) < 0.04  # the fused bf16 decode kernel within 4 % on every case, MHA and GQA
    assert fig["fused bf16 decode attention, worst absolute error"] == abs_pct(max(fused))
    mha = [
        r["error_calibrated"]
        for r in ok(snap)
        if r.get("backend") == "flash" and r["stage"] == "prefill" and r["name"].startswith("llama-2-7b")
    ]
    assert fig["fused attention on llama-2-7b's MHA prompts, worst"] == pct(max(mha)) == "+57%"
    norms = [r["error_calibrated"] for r in ok(snap) if r["op_class"] == "norm" and r["stage"] == "prefill"]
    assert fig["prefill RMSNorm, lowest … highest"] == f"{pct(min(norms))} … {pct(max(norms))}"
    assert max(norms) < 0  # prefill RMSNorm is predicted too fast on every case


def test_the_first_cpu_attention_grid():
    """One query row per K/V head takes 2.5x as long as two (fused bf16, head_dim 128, both
    cache lengths); a one-row fp32 q.K^T reads keys about half as fast at head_dim 128 as at
    64; the calibration's re-measured grid points, first and kept time."""
    path = PROFILES / "cpu-amd-epyc-1t.calibration.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    t = {r["name"]: float(r["measured_s"]) for r in rows if r["measured_s"]}
    ratios, per_key = [], []
    for kv in (512, 2048):
        ratios.append(t[f"agrid/attention/r1xd128xkv{kv}/bf16/flash"] / t[f"agrid/attention/r2xd128xkv{kv}/bf16/flash"])
        per_key.append(
            (t[f"agrid/qk_matmul/r1xd128xkv{kv}/fp32"] / 128) / (t[f"agrid/qk_matmul/r1xd64xkv{kv}/fp32"] / 64)
        )
    assert [f"{r:.1f}" for r in ratios] == ["2.5", "2.5"]
    assert all(1.8 < k < 2.5 for k in per_key)
    fig = figures(f"`{path.name}`")
    assert (
        fig["fused bf16 decode attention, one query row per K/V head against two (head_dim 128; 512 / 2048 cached)"]
        == "2.5× / 2.5×"
    )
    assert fig["one-row fp32 q·Kᵀ, time per unit of head_dim at 128 against 64 (512 / 2048 cached)"] == " / ".join(
        f"{k:.2f}×" for k in per_key
    )
    again = [r for r in rows if r["first_s"] and r["measured_s"]]
    assert again and all(float(r["first_s"]) > float(r["measured_s"]) for r in again)  # the faster run is kept
    assert "`grid/m7x4864x896/bf16` 0.70 → 0.52 ms" in fig["calibration grid points measured again, first → kept"]


def test_the_h100_figures():
    name = "cuda-nvidia-h100-80gb-hbm3-2026-11-23.json"
    s = summary(load(VALIDATION / name))
    for cls in ("all", "headline"):
        assert_class(name, s, cls)
    refused = yaml.safe_load((PROFILES / "cuda-nvidia-h100-80gb-hbm3.yaml").read_text())["refused"]
    assert (
        profile_row("cuda-nvidia-h100-80gb-hbm3.yaml")[-1]
        == f"{len(refused)} (up to {max(r['wanted'] for r in refused):g})"
    )


def test_the_first_cpu_end_to_end():
    rows = [r for p in sorted(VALIDATION.glob("e2e-cpu-amd-epyc-1t-*.json")) for r in load(p)["rows"]]
    ttft = [r["error_calibrated_ttft"] for r in rows]
    tpot = [r["error_calibrated_tpot"] for r in rows]
    fig = figures("`e2e-cpu-amd-epyc-1t-*.json`")
    assert fig["calibrated TTFT error, lowest … highest"] == f"{pct(min(ttft))} … {pct(max(ttft))}"
    assert fig["calibrated TPOT error, lowest … highest"] == f"{pct(min(tpot))} … {pct(max(tpot))}"
    assert max(map(abs, ttft)) < 0.10 and max(map(abs, tpot)) < 0.15  # every row
    odd = [abs(r["error_calibrated_tpot"]) for r in rows if r["model"] == "qwen2-0.5b" and r["batch"] == 4]
    assert max(odd) < 0.13 and fig["qwen2-0.5b batch 4 TPOT, worst absolute error"] == abs_pct(max(odd))


# Serving on the first CPU


def recorded(name: str, mode: str) -> list[str]:
    (row,) = [c for c in cells(TEXT, f"`serving/{name}`") if len(c) == 10 and c[4] == mode]
    return row


def repriced_row(name: str, mode: str) -> list[str]:
    (row,) = [c for c in cells(section("Priced again with today's engine"), f"`serving/{name}`") if c[1] == mode]
    return row


def step_row(name: str, stage: str) -> list[str]:
    (row,) = [c for c in cells(section("Where a step's time goes"), f"`serving/{name}`") if c[1] == stage]
    return row


def measured_cells(comparison: dict) -> list[str]:
    return [
        f"{ms(comparison[k]['measured'][q])} / {ms(comparison[k]['simulated'][q])} "
        f"({pct(comparison[k]['simulated'][q] / comparison[k]['measured'][q] - 1)})"
        for k in ("ttft_s", "latency_s")
        for q in ("p50", "p90")
    ]


def error_cells(comparison: dict) -> list[str]:
    return [pct(comparison[k]["error"][q]) for k in ("ttft_s", "latency_s") for q in ("p50", "p90")]


@pytest.mark.parametrize("rate", ["1rps", "0.5rps"])
def test_the_first_cpu_serving_runs(rate):
    from kernels.servecheck.cb_server import resimulate

    name = f"serving-cpu-amd-epyc-1t-qwen2-0.5b-{rate}-2026-11-23.json"
    run = load(SERVING / name)
    for mode in ("calibrated", "calibrated+overhead", "spec"):
        row = recorded(name, mode)
        assert row[5:9] == measured_cells(run["comparison"][mode])
        assert row[9] == f"{run['busy']['measured_cpu_s']:.1f} / {run['busy'][f'simulated_{mode}_s']:.1f}"
    live = resimulate(SERVING / name)
    b = live["step_breakdown"]
    stored = {k: f"{v:.2f}" for k, v in run["step_breakdown"].items() if "_predicted_calibrated_" in k}
    assert stored and stored == {k: f"{b[k]:.2f}" for k in stored}  # the file's split is today's price
    for stage in ("decode", "prefill"):
        row = step_row(name, stage)
        forward, attention = b[f"{stage}_forward_s"], b[f"{stage}_attention_s"]
        assert row[2:7] == [
            f"{b[f'{stage}_steps']:.0f}",
            f"{b[f'{stage}_tokens'] / b[f'{stage}_steps']:.2f}",
            f"{forward:.2f}",
            f"{attention:.2f}",
            f"{b[f'{stage}_other_s']:.2f}",
        ]
        for cell, how in zip(row[7:11], ("varlen", "masked", "gather", "none")):
            value = b[f"{stage}_predicted_calibrated_{how}_s"]
            against = forward - attention if how == "none" else forward
            assert cell == f"{value:.2f} ({pct(value / against - 1)})", (stage, how)
    if rate == "1rps":  # the gather policy prices decode attention close to what it measured
        gather = b["decode_predicted_calibrated_gather_s"] - b["decode_predicted_calibrated_none_s"]
        assert abs(gather / b["decode_attention_s"] - 1) < 0.15


@pytest.mark.slow
def test_the_first_cpu_gather_and_masked_resimulations():
    """Under gather (committed) and masked (priced again): the committed runs' comparisons and
    kernels.servecheck.cb_server.resimulate's, equal where they should be. Gather, with the
    CPU flash kernel's blocks of query rows, brings TTFT within the goal at every rate (p50
    within 15 %, p90 within 25 %; issue 29 item 8) and latency within 20 % (decode-only
    steps' dense ops are priced a few percent fast, which every output token carries)."""
    from kernels.servecheck.cb_server import resimulate

    for tag in ("0.5rps", "1rps", "2rps-seed7"):
        name = f"serving-cpu-amd-epyc-1t-qwen2-0.5b-{tag}-2026-11-23.json"
        run = load(SERVING / name)
        assert run["scheduler"]["batch_attention"] == "gather"
        gather = resimulate(SERVING / name, batch_attention="gather")
        masked = resimulate(SERVING / name, batch_attention="masked")
        assert error_cells(gather["comparison"]["calibrated"]) == error_cells(run["comparison"]["calibrated"])
        row = repriced_row(name, "calibrated")
        assert row[2:6] == error_cells(run["comparison"]["calibrated"])
        assert row[6] == f"{gather['busy']['simulated_calibrated_s']:.1f} / {gather['busy']['measured_cpu_s']:.1f}"
        assert repriced_row(name, "calibrated, masked")[2:6] == error_cells(masked["comparison"]["calibrated"])
        error = gather["comparison"]["calibrated"]
        assert abs(error["ttft_s"]["error"]["p50"]) <= 0.15 and abs(error["ttft_s"]["error"]["p90"]) <= 0.25, tag
        assert max(abs(error["latency_s"]["error"][q]) for q in ("p50", "p90")) <= 0.20, tag
    busy = resimulate(SERVING / "serving-cpu-amd-epyc-1t-qwen2-0.5b-1rps-2026-11-23.json")["busy"]
    assert abs(busy["simulated_calibrated_s"] / busy["measured_cpu_s"] - 1) < 0.02  # the total work is right


# The second CPU (an AVX2-only Zen 3)


def test_the_second_cpu_figures():
    profile = yaml.safe_load((PROFILES / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
    name = "cpu-amd-epyc-f25m1-1t-2026-11-24.json"
    snap = load(VALIDATION / name)
    assert snap["meta"]["cpu_signature"] in section(f"`{name}`")
    ratios = [profile["meta"]["skipped"][d].split()[3] for d in ("bf16", "fp16", "int8")]
    assert all(float(r.rstrip("x")) > 3 for r in ratios)  # no native kernel: skipped
    row = profile_row("cpu-amd-epyc-f25m1-1t.yaml")
    assert row[9] == "bf16 ({}), fp16 ({}), int8 ({})".format(*ratios)
    assert row[8] == "-"  # an AVX2 profile measured before the softmax tail series: none
    stream = profile["measurements"]["stream"]
    assert profile["bandwidth_gb_s"] == stream["gb_s"] > stream["copy_gb_s"]  # the read stream is the roof
    assert row[2:6] == [
        str(profile["meta"]["calibration_cases"]),
        f"{profile['bandwidth_gb_s']:g}",
        f"{stream['copy_gb_s']:.1f}",
        f"{stream['gb_s']:.1f} (`{stream['case']}`)",
    ]
    assert row[6] == f"fp32 {profile['matrix_peak_tops']['fp32']:.4g}"
    assert f"{len(snap['rows'])} of {len(snap['rows'])} cases measured" in section(f"`{name}`")
    s = summary(snap)
    for cls in ("headline", "all", "gemm", "gemv", "sweep", "attention"):
        assert_class(name, s, cls)
    assert s["headline"]["calibrated_bias"] < 0  # too fast
    fig = figures(f"`{name}`")
    assert fig["fp32 residual add, fraction of the read roof it reaches (profile)"] == (
        f"{profile['efficiency']['elementwise:attn_add@fp32']['memory']:.2f}"
    )
    assert profile["efficiency"]["elementwise:attn_add@fp32"]["memory"] > 1  # the write-free cap
    prompt = [
        r["flops"] / r["measured_s"] / 1e9
        for r in ok(snap)
        if r["name"].startswith("llama-3-8b/prefill") and r["op_class"] == "gemm"
    ]
    assert fig["llama-3-8b prompt GEMMs, GFLOP/s"] == f"{min(prompt):.0f}–{max(prompt):.0f}"
    assert max(prompt) < profile["matrix_peak_tops"]["fp32"] * 1e3
    skinny = [r["error_calibrated"] for r in ok(snap) if r["op_class"] == "gemv" and "/b1x" not in r["name"]]
    assert fig["skinny products (more than one row), most too fast"] == pct(min(skinny))


def gate(run: str) -> dict:
    return load(next((VALIDATION / "gate-runs").glob(f"{run}-*.json")))


@pytest.mark.parametrize("run", [f"run{i}" for i in range(1, 10)])
def test_every_gate_run_is_listed_with_its_verdict(run):
    from kernels.validate.gate import verdict

    snap = gate(run)
    every = summary(snap)["all"]
    path = next((VALIDATION / "gate-runs").glob(f"{run}-*.json"))
    (row,) = cells(TEXT, f"`{path.name}`")
    assert row[1] == (snap["meta"].get("cpu_signature") or snap["meta"]["device"])
    assert row[5] == str(len(snap["rows"]))
    assert row[6] == pair(every["calibrated_median_abs"], every["calibrated_p90_abs"])
    if every.get("cv_count"):
        assert row[7] == f"{pair(every['cv_median_abs'], every['cv_p90_abs'])} ({every['cv_count']})"
    assert row[9] == ("fails" if verdict(snap) else "passes")
    assert (run == "run4") == bool(verdict(snap))  # only the run on the overloaded machine fails


def test_the_gate_runs_on_the_second_and_third_cpu():
    seven, eight, nine = (summary(gate(r)) for r in ("run7", "run8", "run9"))
    assert_class(next((VALIDATION / "gate-runs").glob("run7-*.json")).relative_to(VALIDATION).as_posix(), seven, "gemv")
    assert seven["gemv"]["calibrated_bias"] > 0  # run 7's GEMVs too slow against the copy roof
    assert eight["all"]["calibrated_p90_abs"] < seven["all"]["calibrated_p90_abs"]  # the read-stream roof
    snap = gate("run9")
    assert "amx" not in snap["meta"]["cpu_signature"] and not snap["meta"]["skipped"]
    assert snap["meta"]["profile_meta"]["calibration_cases"] == 620 and len(snap["rows"]) == 121
    name = "gate-runs/run9-cpu-intel-r-xeon-r-processor-f6m207-1t-2026-11-25-quick.json"
    fig = figures(f"`{name}`")
    int8 = max(r["error_calibrated"] for r in ok(snap) if ".int8wo/" in r["name"] and "/b1x" in r["name"])
    norm = max(r["error_calibrated"] for r in ok(snap) if r["name"].endswith("/decode/b8x768/attn_norm/fp16"))
    assert fig["one-row weight-only int8 products, worst"] == pct(int8) == "+91%"
    assert fig["decode RMSNorm in fp16 (8 × 768), worst"] == pct(norm)
    assert_class(name, nine, "all")


@pytest.mark.parametrize("tag", ["0.25rps-roofs", "0.25rps", "0.5rps"])
def test_the_second_cpu_serving_runs(tag):
    name = f"serving-cpu-amd-epyc-f25m1-1t-qwen2-0.5b-fp32-{tag}-2026-11-24.json"
    d = load(SERVING / name)
    row = recorded(name, "calibrated")
    assert row[5:9] == measured_cells(d["comparison"]["calibrated"])
    assert row[9] == f"{d['busy']['measured_cpu_s']:.1f} / {d['busy']['simulated_calibrated_s']:.1f}"
    assert d["comparison"]["calibrated"]["latency_s"]["error"]["p50"] < -0.15  # the goal is missed there
    if tag == "0.25rps-roofs":
        roofs = d["meta"]["roofs"]
        before, after = roofs["before"]["stream_gb_s"], roofs["after"]["stream_gb_s"]
        assert f"Read stream before and after the replays: {before:.1f} and {after:.1f} GB/s" in TEXT
        profile = yaml.safe_load((PROFILES / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
        assert max(before, after) < profile["bandwidth_gb_s"]  # the machine was slower than its profile


def test_the_drifted_state():
    """Both Zen 3 profiles' roofs, the day's speed ratio of their calibration cases, and the
    evening validations' recorded state and errors."""
    morning = yaml.safe_load((PROFILES / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
    evening = yaml.safe_load((PROFILES / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening.yaml").read_text())
    for name, p in (
        ("cpu-amd-epyc-f25m1-1t.yaml", morning),
        ("drift/cpu-amd-epyc-f25m1-1t-2026-11-24-evening.yaml", evening),
    ):
        row = profile_row(name)
        assert row[3] == f"{p['bandwidth_gb_s']:g}" and row[6] == f"fp32 {p['matrix_peak_tops']['fp32']:.4g}"
    assert evening["bandwidth_gb_s"] < 0.5 * morning["bandwidth_gb_s"]
    import pandas as pd

    then = pd.read_csv(PROFILES / "cpu-amd-epyc-f25m1-1t.calibration.csv", index_col="name")
    now = pd.read_csv(PROFILES / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening.calibration.csv", index_col="name")
    speed = (then.measured_s / now.measured_s).dropna()
    lo, mid, hi = (f"{q:.2f}" for q in speed.quantile([0.1, 0.5, 0.9]))
    (value,) = figures(
        "`cpu-amd-epyc-f25m1-1t.calibration.csv` against `drift/cpu-amd-epyc-f25m1-1t-2026-11-24-evening.calibration.csv`"
    ).values()
    assert value == f"{mid}x ({lo}x … {hi}x) over {len(speed)} cases"
    for tag in ("evening", "evening-2"):
        name = f"drift/cpu-amd-epyc-f25m1-1t-2026-11-24-{tag}.json"
        snap = load(VALIDATION / name)
        r = snap["meta"]["machine_state"]["ratios"]
        assert ", ".join(f"{k} {v:.2f}x" for k, v in r.items()) in section(f"`{name}`")
        assert snap["meta"]["machine_state"]["drifted"]
        s = summary(snap)
        assert_class(name, s, "headline")
        assert s["headline"]["calibrated_bias"] > 0.2  # every case predicted too slow: the drift
    morning_snap = summary(load(VALIDATION / "cpu-amd-epyc-f25m1-1t-2026-11-24.json"))
    second = summary(load(VALIDATION / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening-2.json"))
    assert second["headline"]["cv_p90_abs"] > morning_snap["headline"]["cv_p90_abs"]  # calibrated in a moving state


# The third CPU (an Intel Xeon)


def test_the_third_cpu_figures():
    profile = yaml.safe_load((PROFILES / f"{XEON}.yaml").read_text())
    name = f"{XEON}-2026-11-25.json"
    snap = load(VALIDATION / name)
    text = section(f"`{name}`")
    assert f"({snap['meta']['cpu_signature']})" in text
    assert not profile["meta"]["skipped"].get("bf16") and profile["meta"]["threads"] == 1
    assert f"{len(snap['rows'])} of {len(snap['rows'])} cases measured" in text
    assert f"fitted on {profile['meta']['calibration_cases']} calibration cases" in text
    peaks = profile["matrix_peak_tops"]
    fig = figures(f"`{name}`")
    assert fig["bf16 matrix peak / fp32 matrix peak (profile)"] == f"{peaks['bf16'] / peaks['fp32']:.2f}"
    s = summary(snap)
    for cls in ("headline", "all", "gemm", "gemv", "quant", "norm", "elementwise", "softmax", "attention"):
        assert_class(name, s, cls)
    assert s["headline"]["calibrated_median_abs"] <= 0.05 and s["headline"]["calibrated_p90_abs"] <= 0.15  # goal met
    state = snap["meta"]["machine_state"]
    assert not state["drifted"] and round(max(abs(r - 1) for r in state["ratios"].values()) * 100) <= 5
    err = {r["name"]: r["error_calibrated"] for r in ok(snap)}
    flash = max(v for k, v in err.items() if k.startswith("llama-2-7b/prefill") and k.endswith("/flash"))
    assert fig["fused attention on llama-2-7b's MHA prompts, worst"] == pct(flash)
    adds = [err[f"llama-3-8b/decode/b8x768/attn_add/{d}"] for d in ("fp16", "bf16")]
    assert fig["decode residual add, 8 × 768, fp16 / bf16"] == " / ".join(map(pct, adds))
    assert fig["llama-3-8b prompt SiLU × mul in fp32 (1 × 320)"] == pct(err["llama-3-8b/prefill/b1x320/mlp_act/fp32"])
    stream = profile["measurements"]["stream"]
    assert stream["case"].startswith("grid/m1x") and stream["case"].endswith("/fp32")
    assert profile["bandwidth_gb_s"] == stream["gb_s"] > stream["copy_gb_s"]
    assert not [r for r in profile["refused"] if r["class"] == "linear@fp32"]
    assert profile["meta"]["refit"]["from"] == f"reports/profiles/{XEON}.yaml"
    assert snap["meta"]["repredicted"]["profile"] == f"reports/profiles/{XEON}.yaml"
    touch = profile["first_touch_gb_s"]
    assert profile_row(f"{XEON}.yaml")[7] == f"{touch:.2f} ({64 * 2**20 / touch / 1e6:.0f} ms for 64 MiB)"
    assert 64 * 2**20 / touch > 5 * 64 * 2**20 / (profile["bandwidth_gb_s"] * 1e9)  # faulting in > 5x moving the bytes


XEON_SERVING = ("fp32-0.125rps", "fp32-0.25rps", "0.25rps")


@pytest.mark.parametrize("tag", XEON_SERVING)
@pytest.mark.slow
def test_the_third_cpu_serving_runs(tag):
    """Measured, as simulated when taken (the file), and priced again with the committed
    (refitted) profile; the goal is met in each, and the decode steps' split."""
    from kernels.servecheck.cb_server import resimulate

    name = f"serving-{XEON}-qwen2-0.5b-{tag}-2026-11-25.json"
    d, live = load(SERVING / name), resimulate(SERVING / name)
    assert d["meta"]["profile"] == f"reports/profiles/{XEON}.yaml"
    assert not d["meta"]["machine_state"]["drifted"]
    row = recorded(name, "calibrated")
    assert row[5:9] == measured_cells(d["comparison"]["calibrated"])
    assert row[9] == f"{d['busy']['measured_cpu_s']:.1f} / {d['busy']['simulated_calibrated_s']:.1f}"
    assert repriced_row(name, "calibrated")[2:7] == [
        *error_cells(live["comparison"]["calibrated"]),
        f"{live['busy']['simulated_calibrated_s']:.1f} / {live['busy']['measured_cpu_s']:.1f}",
    ]
    for res in (d, live):
        errors = [
            abs(e)
            for e in (
                res["comparison"]["calibrated"][k]["error"][q] for k in ("ttft_s", "latency_s") for q in ("p50", "p90")
            )
        ]
        assert errors[0] <= 0.15 and errors[2] <= 0.15 and errors[1] <= 0.25 and errors[3] <= 0.25, tag
    b = live["step_breakdown"]
    n, meas, pred = b["decode_steps"], b["decode_forward_s"], b["decode_predicted_calibrated_gather_s"]
    row = step_row(name, "decode")
    assert row[2:5] == [f"{n:.0f}", f"{b['decode_tokens'] / n:.2f}", f"{meas:.2f}"]
    assert row[9] == f"{pred:.2f} ({pct(pred / meas - 1)})"
    assert row[11] == f"{(meas - pred) / n * 1e3:.1f}"


def test_the_third_cpu_fresh_draw():
    name = f"{XEON}-2026-11-25-draw1125.json"
    snap = load(VALIDATION / name)
    draw = snap["meta"]["draw"]
    assert draw["seed"] == 1125 and not snap["meta"]["machine_state"]["drifted"]
    prompts = "; ".join(f"{dt} " + " and ".join(f"{b} × {t}" for b, t in w) for dt, w in draw["prefill"].items())
    assert (
        f"Drawn with seed 1125: {' and '.join(draw['models'])}; prompts (batch × tokens) {prompts}; "
        "decode (batch × cached tokens) {} × {} and {} × {}.".format(*draw["decode"][0], *draw["decode"][1])
    ) in section(f"`{name}`")
    s = summary(snap)
    assert s["all"]["count"] == len(snap["rows"])
    for cls in ("headline", "all"):
        assert_class(name, s, cls)
    err = {r["name"]: r["error_calibrated"] for r in ok(snap)}
    worst = max(err, key=lambda k: abs(err[k]))
    assert "/prefill/" in worst and "/sdpa/" in worst
    fig = figures(f"`{name}`")
    assert fig["worst case"] == f"`{worst}` {pct(err[worst])}"
    act = min(v for k, v in err.items() if "/prefill/" in k and k.endswith("mlp_act/fp32"))
    assert fig["prompt SiLU × mul in fp32, most too fast"] == pct(act)


# Coverage: the serving level and the misses (issue 27)


def coverage_row(key: str, level: str) -> list[str]:
    """The coverage table's row of ``key`` at ``level``."""
    table = TEXT.split("## Intervals: coverage on held-out data")[1].split("\n### ")[0]
    (row,) = [r for r in cells(table, key) if r[1] == level]
    return row


def test_the_serving_coverage_recomputed_from_the_runs():
    """The H200's serving checks, simulated again here: its measured TTFT and TPOT p50 and
    p90 against the simulator's intervals, as the coverage table gives them."""
    from kernels.servecheck.cb_server import _load_run
    from kernels.validate.serving_coverage import measured_tpot, run_intervals
    from ridgeline.engine.intervals import IntervalTable
    from ridgeline.serving.simulator import percentiles

    profile = PROFILES / f"{H200}.yaml"
    table = IntervalTable.from_dict(yaml.safe_load(profile.read_text())["intervals"])
    inside = []
    for path in sorted(SERVING.glob(f"serving-{H200}-*.json")):
        data = _load_run(path)
        _, intervals = run_intervals(path, data, profile, table)
        measured = {"ttft_s": np.asarray(data["measured"]["ttft_s"], float), "tpot_s": measured_tpot(data)}
        for figure, values in measured.items():
            for stat in ("p50", "p90"):
                lo, hi = intervals[figure][stat]["80"]
                inside.append(lo <= percentiles(values)[stat] <= hi)
    row = coverage_row(H200, "serving")
    assert row[2] == str(len(inside)) == "8"
    assert row[5] == f"{np.mean(inside):.0%}" + ("" if 0.7 <= np.mean(inside) <= 0.9 else " (misses)")


def test_every_miss_of_the_coverage_files_is_printed_with_its_cause():
    printed = TEXT.split("### Misses and their causes")[1].split("\n## ")[0]
    for path in sorted((REPORTS / "results").glob("coverage-*.json")):
        data = load(path)
        for miss in data["misses"]:
            assert (
                f"| {data['device_key']} | {miss['level']} | {miss['figure']} | {miss['band']} | "
                f"{miss['value']:.1%} | {miss['cause'].replace('|', '/')} |" in printed
            )
        for name, level in data["levels"].items():  # a level outside a band is a miss, and only then
            for c in (50, 80):
                listed = any(m["level"] == name and m["figure"] == f"{c} % interval" for m in data["misses"])
                assert listed == (level["n"] > 0 and not level[f"holds_{c}"])


def test_a_long_section_is_cut_between_its_items_each_part_opening_with_the_table_header():
    from kernels.results.pages import Section, cut, index_line, section

    table = Section("t", ["## T", "", "intro", ""], [[f"| {i} |"] for i in range(6)], ["| n |", "|---|"])
    # the head and header are 23 bytes, each row 6 more: at most 40 a part
    assert cut(table, limit=40) == [
        ["## T", "", "intro", "", "| n |", "|---|", "| 0 |", "| 1 |"],
        ["| n |", "|---|", "| 2 |", "| 3 |", "| 4 |", "| 5 |"],
    ]
    assert (
        index_line(table, ["t.md", "t-2.md"], "results") == "- [T](results/t.md) (continued: [part 2](results/t-2.md))"
    )
    cut_at_subsections = section("s", ["## S", "", "x", "### a", "1", "### b", "2"])
    assert (cut_at_subsections.head, cut_at_subsections.items) == (["## S", "", "x"], [["### a", "1"], ["### b", "2"]])
    assert section("s", []) is None and section("s", ["## S"]).items == []
