"""The README and docs stay true: their command examples print what they quote, their links
stay inside the repository, the JSON output matches the published schema, every dashboard
URL key is documented, and reports/RESULTS.md is generated from the committed snapshots.

Examples are fenced ``bash`` blocks whose lines start with ``$ ``: the command runs in a
shell from the repository root (``ridgeline`` as ``python -m ridgeline``), and the lines
after it, up to the next ``$`` or the end of the block, must equal its output.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ridgeline as rl

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def examples(page: Path) -> list[tuple[str, str, list[str]]]:
    """(where, command, expected lines) for every ``$ `` line of a bash block."""
    found, block, where = [], None, ""
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            block = [] if line.strip() == "```bash" and block is None else None
            where = ""
            continue
        if block is None:
            continue
        if line.startswith("$ "):
            where = f"{page.relative_to(ROOT)}:{number}"
            found.append((where, line[2:], []))
        elif found and found[-1][0] == where:
            found[-1][2].append(line.rstrip())
    return found


ALL_EXAMPLES = [e for page in PAGES for e in examples(page)]


def run_example(command: str) -> list[str]:
    python = shlex.quote(sys.executable)
    shell = re.sub(r"(^|\|\s*)ridgeline ", rf"\1{python} -m ridgeline ", command)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    return [line.rstrip() for line in done.stdout.splitlines()]


def test_docs_have_examples():
    assert len(ALL_EXAMPLES) >= 8
    assert all(expected for _, _, expected in ALL_EXAMPLES), "an example quotes no output"


@pytest.mark.parametrize("where,command,expected", ALL_EXAMPLES, ids=[e[0] for e in ALL_EXAMPLES])
def test_example_prints_what_the_docs_quote(where, command, expected):
    assert run_example(command) == expected, f"{where}: the docs quote other output; run it and update"


def test_quickstart_is_two_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line for line in block.strip().splitlines() if line.strip()]
    assert len(lines) == 2
    assert "pip install -e ." in lines[0] and "ridgeline analyze" in lines[0]
    assert "pytest" in lines[1]


def test_readme_is_short_with_a_table_of_contents():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) < 11_000
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    for heading in headings:
        anchor = re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
        assert f"(#{anchor})" in text, f"table of contents lacks {heading!r}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_stay_inside_the_repository(page):
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "#")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links to a missing file: {target}"


SCHEMA_CASES = [
    ("llama-2-7b", "a6000", {"batch": 1, "seq_len": 2048, "generate": 128}),
    ("llama-2-7b", "a6000", {"generate": 1}),
    ("mixtral-8x7b", "h100-sxm", {"batch": 8, "generate": 16, "w_dtype": "int4", "group_size": 128}),
    ("deepseek-v2-lite", "h100-sxm", {"generate": 4, "attention": "flash"}),
    ("llama-2-70b", "h100-sxm", {"batch": 8, "generate": 4, "tp": 4, "pp": 2, "micro_batches": 2}),
]


@pytest.mark.parametrize("model,device,options", SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_json_output_matches_the_schema(model, device, options):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text())
    out = rl.analyze(model, device, **options).to_dict()
    text = json.dumps(out, allow_nan=False)  # NaN is not JSON
    jsonschema.validate(json.loads(text), schema)


def test_every_dashboard_url_key_is_documented():
    from viewer.state import controls

    text = (ROOT / "docs" / "dashboard.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.M))
    assert {c.key for c in controls()} <= documented


def test_results_md_is_generated_from_the_snapshots():
    from kernels.validate.results import RESULTS, render

    assert RESULTS.read_text() == render(), "reports/RESULTS.md is stale: python -m kernels.validate.results"


def test_results_table_formats_a_recorded_row():
    from kernels.validate.results import e2e_table

    row = {
        "model": "m",
        "layers": 2,
        "batch": 4,
        "prompt": 128,
        "compile": False,
        "measured_ttft_s": 16.6794,
        "measured_tpot_s": 0.0757,
        "predicted_spec_ttft_s": 17.5,
        "error_spec_ttft": 17.5 / 16.6794 - 1,
        "predicted_spec_tpot_s": None,
        "error_spec_tpot": None,
        "predicted_calibrated_ttft_s": 0.00512,
        "error_calibrated_ttft": -0.5,
        "predicted_calibrated_tpot_s": 0.0666,
        "error_calibrated_tpot": 0.0666 / 0.0757 - 1,
    }
    # 16679 ms measured, 17500 ms spec (+5 %), 5.12 ms calibrated (-50 %); TPOT 75.7 vs 66.6 (-12 %)
    assert e2e_table([row])[-1] == (
        "| m | 2 | 4 | 128 | eager | 16679 | 17500 (+5%) | 5.12 (-50%) | 75.7 | - | 66.6 (-12%) |"
    )


REPORTS = ROOT / "reports"


def pct_pair(median: float, p90: float) -> str:
    """How the docs quote a median / p90 pair: '1.6 % / 3.8 %'."""
    return f"{median * 100:.1f} % / {p90 * 100:.1f} %"


def class_pairs(summary: dict):
    """The calibrated median / p90 pair of an op class of a snapshot summary, as quoted."""
    return lambda cls: pct_pair(summary[cls]["calibrated_median_abs"], summary[cls]["calibrated_p90_abs"])


def signed(x: float) -> str:
    """How the docs quote a signed error: '+20 %', '−5 %'."""
    return f"{'+' if x >= 0 else '−'}{abs(x) * 100:.0f} %"


def test_measurement_doc_quotes_the_committed_kernel_results():
    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    cpu = json.loads((REPORTS / "validation" / "cpu-amd-epyc-1t-2026-11-23.json").read_text())
    summary = {r["op_class"]: r for r in cpu["summary"]}

    def cal(cls):
        return pct_pair(summary[cls]["calibrated_median_abs"], summary[cls]["calibrated_p90_abs"])

    head, every, ref = summary["headline"], summary["all"], summary["reference"]
    assert f"over the {head['count']} headline cases {cal('headline')}" in text
    assert "calibration rows " + pct_pair(head["cv_median_abs"], head["cv_p90_abs"]) in text
    assert f"over all {every['count']} cases, the {ref['count']} reference" in text
    assert f"math-backend cases included, {cal('all')}" in text
    for name, cls in (("GEMM", "gemm"), ("GEMV", "gemv"), ("sweep", "sweep")):
        assert f"{name} {cal(cls)}" in text, name
    assert f"reference math backend ({cal('reference')})" in text
    ok = [r for r in cpu["rows"] if r["status"] == "ok"]
    decode = np.abs(
        [
            r["error_calibrated"]
            for r in ok
            if r["op_class"] == "attention" and r["stage"] == "decode" and r.get("backend") != "math"
        ]
    )
    assert (f"at {pct_pair(np.median(decode), np.quantile(decode, 0.9))} over its {decode.size} cases") in text
    fused = [
        abs(r["error_calibrated"])
        for r in ok
        if r.get("backend") == "flash" and r["stage"] == "decode" and r["dtype"] == "bf16"
    ]
    assert max(fused) < 0.04 and "(the fused bf16 kernel within 4 % on every one" in text
    mha = [
        r["error_calibrated"]
        for r in ok
        if r.get("backend") == "flash" and r["stage"] == "prefill" and r["name"].startswith("llama-2-7b")
    ]
    assert f"up to {max(mha) * 100:.0f} % too slow" in text
    assert f"attention on prompts (p90 {summary['attention']['calibrated_p90_abs'] * 100:.0f} %" in text
    norms = [r["error_calibrated"] for r in ok if r["op_class"] == "norm" and r["stage"] == "prefill"]
    assert f"prefill RMSNorm ({signed(max(norms))} to {signed(min(norms))}" in text
    assert f"element-wise ops (p90 {summary['elementwise']['calibrated_p90_abs'] * 100:.0f} %" in text
    again = [r for r in ok if r.get("first_s") == r.get("first_s") and r.get("first_s")]
    assert (
        any(f"`{r['name']}`: {r['first_s'] * 1e3:.2f} → {r['measured_s'] * 1e3:.2f} ms" in text for r in again)
        or not again
    )
    h100 = json.loads((REPORTS / "validation" / "cuda-nvidia-h100-80gb-hbm3-2026-11-23.json").read_text())
    h = {r["op_class"]: r for r in h100["summary"]}
    for cls in ("all", "headline"):
        assert pct_pair(h[cls]["calibrated_median_abs"], h[cls]["calibrated_p90_abs"]) in text
    import yaml

    refused = yaml.safe_load((REPORTS / "profiles" / "cuda-nvidia-h100-80gb-hbm3.yaml").read_text())["refused"]
    assert f"(up to {max(r['wanted'] for r in refused):g}) for {len(refused)} terms" in text


def test_measurement_doc_quotes_the_committed_attention_grid():
    """The decode-attention grid's two quoted facts, from the committed calibration CSV: one
    query row per K/V head takes 2.5x as long as two (fused bf16, head_dim 128, both cache
    lengths); a one-row fp32 q.K^T reads keys about half as fast at head_dim 128 as at 64."""
    import pandas as pd

    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    rows = pd.read_csv(REPORTS / "profiles" / "cpu-amd-epyc-1t.calibration.csv").set_index("name")
    t = rows["measured_s"]
    for kv in (512, 2048):
        ratio = t[f"agrid/attention/r1xd128xkv{kv}/bf16/flash"] / t[f"agrid/attention/r2xd128xkv{kv}/bf16/flash"]
        assert f"{ratio:.1f}" == "2.5"
        per_key = (t[f"agrid/qk_matmul/r1xd128xkv{kv}/fp32"] / 128) / (t[f"agrid/qk_matmul/r1xd64xkv{kv}/fp32"] / 64)
        assert 1.8 < per_key < 2.5
    assert "takes 2.5× as long for one query row per K/V head as for two" in text
    assert "about half as fast at head_dim 128 as at 64" in text


def test_measurement_doc_quotes_the_committed_e2e():
    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    rows = [
        r
        for path in sorted((REPORTS / "validation").glob("e2e-cpu-amd-epyc-1t-*.json"))
        for r in json.loads(path.read_text())["rows"]
    ]
    ttft = [r["error_calibrated_ttft"] for r in rows]
    tpot = [r["error_calibrated_tpot"] for r in rows]
    assert f"TTFT within {signed(min(ttft))} … {signed(max(ttft))}" in text
    assert f"TPOT within {signed(min(tpot))} … {signed(max(tpot))} on every row" in text
    odd = [abs(r["error_calibrated_tpot"]) for r in rows if r["model"] == "qwen2-0.5b" and r["batch"] == 4]
    assert max(odd) < 0.13 and "is now within 13 %" in text


def serving_cells(comparison: dict) -> str:
    """One simulated row of docs/serving.md's tables: p50/p90 TTFT, p50/p90 latency."""
    cells = []
    for key, digits in (("ttft_s", 3), ("ttft_s", 3), ("latency_s", 2), ("latency_s", 2)):
        q = "p50" if len(cells) % 2 == 0 else "p90"
        cells.append(f"{comparison[key]['simulated'][q]:.{digits}f} s ({signed(comparison[key]['error'][q])})")
    return " | ".join(cells)


@pytest.mark.parametrize("rate", ["1rps", "0.5rps"])
def test_serving_doc_quotes_the_committed_runs(rate):
    text = (ROOT / "docs" / "serving.md").read_text()
    run = json.loads(
        (REPORTS / "validation" / "serving" / f"serving-cpu-amd-epyc-1t-qwen2-0.5b-{rate}-2026-11-23.json").read_text()
    )
    for mode, label in (
        ("calibrated", "calibrated profile"),
        ("calibrated+overhead", "calibrated + host terms"),
        ("spec", "spec (host)"),
    ):
        busy = run["busy"][f"simulated_{mode}_s"]
        assert f"| simulated, {label} | {serving_cells(run['comparison'][mode])} | {busy:.1f} |" in text
    measured = run["comparison"]["calibrated"]
    assert (
        f"| transformers (measured) | {measured['ttft_s']['measured']['p50']:.3f} s | "
        f"{measured['ttft_s']['measured']['p90']:.3f} s | {measured['latency_s']['measured']['p50']:.2f} s"
    ) in text
    steps = run["step_breakdown"]
    if rate == "1rps":
        from kernels.servecheck.cb_server import resimulate

        live = resimulate(
            REPORTS
            / "validation"
            / "serving"  # the gather prices: not in the file
            / f"serving-cpu-amd-epyc-1t-qwen2-0.5b-{rate}-2026-11-23.json"
        )["step_breakdown"]
        for stage in ("decode", "prefill"):
            rest = steps[f"{stage}_forward_s"] - steps[f"{stage}_attention_s"]
            assert (
                f"{steps[f'{stage}_forward_s']:.2f} s | {steps[f'{stage}_attention_s']:.2f} s | "
                f"{rest:.2f} s | {steps[f'{stage}_other_s']:.2f} s |"
            ) in text
            predicted = [steps[f"{stage}_predicted_calibrated_{how}_s"] for how in ("varlen", "masked")]
            predicted += [live[f"{stage}_predicted_calibrated_{how}_s"] for how in ("gather", "none")]
            wanted = [steps[f"{stage}_forward_s"]] * 3 + [rest]
            assert " | ".join(f"{p:.2f} s ({signed(p / w - 1)})" for p, w in zip(predicted, wanted)) in text
        price = {
            how: live[f"decode_predicted_calibrated_{how}_s"] - live["decode_predicted_calibrated_none_s"]
            for how in ("varlen", "masked", "gather")
        }
        assert (
            f"comes to {price['gather']:.2f} s against {steps['decode_attention_s']:.2f} s measured "
            f"(per sequence {price['varlen']:.2f} s, masked {price['masked']:.2f} s)"
        ) in " ".join(text.split())
        chunks = live["prefill_predicted_calibrated_gather_s"] - live["prefill_predicted_calibrated_none_s"]
        assert (f"attention comes to {chunks:.2f} s against {steps['prefill_attention_s']:.2f} s measured") in " ".join(
            text.split()
        )
    else:
        rest = steps["decode_forward_s"] - steps["decode_attention_s"]
        assert (
            f"{int(steps['decode_steps'])} decode steps, {rest:.2f} s measured against "
            f"{steps['decode_predicted_calibrated_none_s']:.2f} s"
        ) in " ".join(text.split())


def test_serving_doc_quotes_the_gather_resimulations():
    """The masked and gather rows of docs/serving.md's policy table: the committed runs'
    comparisons (simulated under gather, and the same again live) and
    kernels.servecheck.cb_server.resimulate under masked (measures nothing); the gather prompt-chunk
    steps' forward and the busy seconds quoted beside it."""
    from kernels.servecheck.cb_server import resimulate

    text = " ".join((ROOT / "docs" / "serving.md").read_text().split())

    def cells(c):
        return " | ".join(signed(c[k]["error"][q]) for k in ("ttft_s", "latency_s") for q in ("p50", "p90"))

    prefill = []
    for tag, label in (
        ("0.5rps", "0.5 request/s"),
        ("1rps", "1 request/s"),
        ("2rps-seed7", "2 requests/s (the calibration trace)"),
    ):
        path = REPORTS / "validation" / "serving" / f"serving-cpu-amd-epyc-1t-qwen2-0.5b-{tag}-2026-11-23.json"
        run = json.loads(path.read_text())
        gather = resimulate(path, batch_attention="gather")
        assert gather["scheduler"]["batch_attention"] == "gather"
        masked = resimulate(path, batch_attention="masked")
        assert run["scheduler"]["batch_attention"] == "gather"
        assert f"| {label}, masked | {cells(masked['comparison']['calibrated'])} |" in text
        assert f"| {label}, gather (committed) | {cells(run['comparison']['calibrated'])} |" in text
        assert cells(gather["comparison"]["calibrated"]) == cells(run["comparison"]["calibrated"])
        b = gather["step_breakdown"]
        prefill.append(signed(b["prefill_predicted_calibrated_gather_s"] / b["prefill_forward_s"] - 1))
        if tag == "1rps":
            assert (
                f"add up to {gather['busy']['simulated_calibrated_s']:.1f} s against transformers' "
                f"{gather['busy']['measured_cpu_s']:.1f} CPU s at 1 request/s"
            ) in text
    assert f"({prefill[1]} and {prefill[2]} on those steps' forward:" in text


def test_measurement_doc_quotes_the_second_cpu():
    """The Zen 3 paragraph: skip ratios, roofs, held-out figures, all from the committed
    profile and snapshot of that CPU."""
    import yaml

    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    profile = yaml.safe_load((REPORTS / "profiles" / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
    snap = json.loads((REPORTS / "validation" / "cpu-amd-epyc-f25m1-1t-2026-11-24.json").read_text())
    assert f"signature `{snap['meta']['cpu_signature']}`" in text
    ratios = [profile["meta"]["skipped"][d].split()[3] for d in ("bf16", "fp16", "int8")]
    assert "int8 products run {}×, {}× and {}× slower".format(*(r.rstrip("x") for r in ratios)) in text
    assert "Zen 3 ({}×, {}× and {}× in its committed profile)".format(*(r.rstrip("x") for r in ratios)) in text
    bounds = " ".join((REPORTS / "validation" / "BOUNDS.md").read_text().split())
    assert "int8 products run {}×, {}× and {}× slower".format(*(r.rstrip("x") for r in ratios)) in bounds
    for run, words in (("run7", "passed at"), ("run8", "passed at")):
        gate = json.loads(
            (REPORTS / "validation" / "gate-runs" / f"{run}-cpu-amd-epyc-f25m1-1t-2026-11-24-quick.json").read_text()
        )
        every = {r["op_class"]: r for r in gate["summary"]}
        pair = pct_pair(every["all"]["calibrated_median_abs"], every["all"]["calibrated_p90_abs"])
        assert f"{words} {pair}" in bounds, run
        if run == "run7":
            gemv = pct_pair(every["gemv"]["calibrated_median_abs"], every["gemv"]["calibrated_p90_abs"])
            assert f"its GEMVs {gemv} too slow" in bounds
    lomo = {r["op_class"]: r for r in gate["summary"]}["all"]
    assert f"leave-one-model-out {pct_pair(lomo['cv_median_abs'], lomo['cv_p90_abs'])}" in bounds
    meta = profile["meta"]
    assert f"{meta['calibration_cases']} and {len(snap['rows'])} cases" in text
    stream = profile["measurements"]["stream"]
    assert f"The copy moves {stream['copy_gb_s']:.1f} GB/s" in text
    assert f"8192 × 2048 fp32 product reads {stream['gb_s']:.1f} GB/s" in text
    assert f"copy {stream['copy_gb_s']:.1f} GB/s, a 64 MiB fp32 GEMV {stream['gb_s']:.1f} GB/s" in text
    assert f"against a {profile['matrix_peak_tops']['fp32'] * 1e3:.1f} GFLOP/s GEMM roof" in text
    assert f"reach {profile['efficiency']['elementwise:attn_add@fp32']['memory']:.2f} of the read roof" in text
    summary = {r["op_class"]: r for r in snap["summary"]}
    cal = class_pairs(summary)
    head = summary["headline"]
    assert f"over the {head['count']} headline cases {cal('headline')}" in text
    assert "leave-one-model-out " + pct_pair(head["cv_median_abs"], head["cv_p90_abs"]) in text
    assert f"over all {summary['all']['count']}, {cal('all')}" in text
    for name, cls in (("GEMM", "gemm"), ("GEMV", "gemv"), ("sweep", "sweep"), ("prefill attention", "attention")):
        assert f"{name} {cal(cls)}" in text, name
    assert head["calibrated_bias"] < 0 and f"The bias is −{-head['calibrated_bias'] * 100:.1f} %" in text
    ok = [r for r in snap["rows"] if r["status"] == "ok"]
    prompt = [
        r["flops"] / r["measured_s"] / 1e9
        for r in ok
        if r["name"].startswith("llama-3-8b/prefill") and r["op_class"] == "gemm"
    ]
    assert f"ran at {min(prompt):.0f}–{max(prompt):.0f} GFLOP/s" in text
    skinny = [r["error_calibrated"] for r in ok if r["op_class"] == "gemv" and "/b1x" not in r["name"]]
    assert f"ran up to {-min(skinny) * 100:.0f} % slower" in text


def test_serving_doc_quotes_the_second_cpu_runs():
    text = (ROOT / "docs" / "serving.md").read_text()
    folder = REPORTS / "validation" / "serving"
    for tag, label in (
        ("0.25rps-roofs", "0.25/s, roofs recorded"),
        ("0.25rps", "0.25/s"),
        ("0.5rps", "0.5/s (overloaded)"),
    ):
        d = json.loads((folder / f"serving-cpu-amd-epyc-f25m1-1t-qwen2-0.5b-fp32-{tag}-2026-11-24.json").read_text())
        c = d["comparison"]["calibrated"]
        cells = [signed(c[k]["error"][q]) for k in ("ttft_s", "latency_s") for q in ("p50", "p90")]
        busy = f"{d['busy']['measured_cpu_s']:.1f} / {d['busy']['simulated_calibrated_s']:.1f}"
        assert f"| {label} | {' | '.join(cells)} | {busy} |" in text, label
    roofs = json.loads(
        (folder / "serving-cpu-amd-epyc-f25m1-1t-qwen2-0.5b-fp32-0.25rps-roofs-2026-11-24.json").read_text()
    )["meta"]["roofs"]
    assert f"read {roofs['before']['stream_gb_s']:.1f} and {roofs['after']['stream_gb_s']:.1f} GB/s" in " ".join(
        text.split()
    )


def test_measurement_doc_quotes_the_drifted_state():
    """The machine's state paragraph: both Zen 3 profiles' roofs, the day's speed ratio of
    their calibration cases, and the evening validation's recorded state and errors."""
    import pandas as pd
    import yaml

    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    drift = REPORTS / "profiles" / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening"
    morning = yaml.safe_load((REPORTS / "profiles" / "cpu-amd-epyc-f25m1-1t.yaml").read_text())
    evening = yaml.safe_load(drift.with_suffix(".yaml").read_text())
    assert (
        f"memory roof of {morning['bandwidth_gb_s']} GB/s and an fp32 peak of "
        f"{morning['matrix_peak_tops']['fp32']} TFLOP/s"
    ) in text
    assert (f"the same CPU read {evening['bandwidth_gb_s']} GB/s and {evening['matrix_peak_tops']['fp32']}") in text
    then = pd.read_csv(REPORTS / "profiles" / "cpu-amd-epyc-f25m1-1t.calibration.csv", index_col="name")
    now = pd.read_csv(drift.with_suffix(".calibration.csv"), index_col="name")
    speed = (then.measured_s / now.measured_s).dropna()
    lo, mid, hi = (f"{q:.2f}" for q in speed.quantile([0.1, 0.5, 0.9]))
    assert f"its {len(speed)} calibration cases ran at {mid}x their morning speed" in text
    assert f"{lo}x to {hi}x between the 10th and 90th percentiles" in text
    snap = json.loads((REPORTS / "validation" / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening.json").read_text())
    r = snap["meta"]["machine_state"]["ratios"]
    assert (
        f"copy {r['copy']:.2f}x, stream {r['stream']:.2f}x, fp32 GEMM {r['fp32 GEMM']:.2f}x "
        f"and dispatch {r['dispatch']:.2f}x"
    ) in text
    head = next(s for s in snap["summary"] if s["op_class"] == "headline")
    assert (
        f"headline median {head['calibrated_median_abs'] * 100:.1f} %, bias {head['calibrated_bias'] * 100:+.1f} %"
    ) in text


def test_measurement_doc_quotes_the_second_drifted_validation():
    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    folder = REPORTS / "validation"
    snap = json.loads((folder / "drift" / "cpu-amd-epyc-f25m1-1t-2026-11-24-evening-2.json").read_text())
    morning = json.loads((folder / "cpu-amd-epyc-f25m1-1t-2026-11-24.json").read_text())
    r = snap["meta"]["machine_state"]["ratios"]
    assert f"(copy {r['copy']:.2f}x, stream {r['stream']:.2f}x)" in text

    def head(result):
        return next(s for s in result["summary"] if s["op_class"] == "headline")

    h, m = head(snap), head(morning)
    assert (
        f"headline median of {h['calibrated_median_abs'] * 100:.1f} %, bias {h['calibrated_bias'] * 100:+.1f} %"
    ) in text
    assert (
        f"leave-one-model-out figure, {h['cv_median_abs'] * 100:.1f} % / {h['cv_p90_abs'] * 100:.1f} %, "
        f"against the morning profile's {m['cv_median_abs'] * 100:.1f} % / {m['cv_p90_abs'] * 100:.1f} %"
    ) in text


def test_bounds_quote_the_third_cpu_gate_run():
    """BOUNDS.md's Xeon paragraph: signature, case counts, figures and tail of run 9."""
    bounds = " ".join((REPORTS / "validation" / "BOUNDS.md").read_text().split())
    gate = json.loads(
        (
            REPORTS / "validation" / "gate-runs" / "run9-cpu-intel-r-xeon-r-processor-f6m207-1t-2026-11-25-quick.json"
        ).read_text()
    )
    assert f"(`{gate['meta']['cpu_signature']}`, 260 MiB L3" in bounds
    assert "amx" not in gate["meta"]["cpu_signature"] and not gate["meta"]["skipped"]
    assert (
        f"{gate['meta']['profile_meta']['calibration_cases']} cases, {len(gate['rows'])} validation cases"
    ) in bounds
    every = {r["op_class"]: r for r in gate["summary"]}["all"]
    assert f"passed at {pct_pair(every['calibrated_median_abs'], every['calibrated_p90_abs'])}" in bounds
    assert f"leave-one-model-out {pct_pair(every['cv_median_abs'], every['cv_p90_abs'])}" in bounds
    ok = [r for r in gate["rows"] if r["status"] == "ok"]
    int8 = max(r["error_calibrated"] for r in ok if ".int8wo/" in r["name"] and "/b1x" in r["name"])
    norm = max(r["error_calibrated"] for r in ok if r["name"].endswith("/decode/b8x768/attn_norm/fp16"))
    assert f"one-row weight-only int8 products, up to {int8 * 100:.0f} % too slow" in bounds
    assert f"decode RMSNorm in fp16 (up to {norm * 100:.0f} % too slow)" in bounds
    measurement = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    assert f"one-row int8 products on the Xeon of 2026-11-25 up to {int8 * 100:.0f} % too slow" in measurement


XEON = "cpu-intel-r-xeon-r-processor-f6m207-1t"


def test_measurement_doc_quotes_the_third_cpu():
    """The Xeon paragraph and the first-touch figures: from the committed profile and its
    validation snapshot (measured right after it, in a state the snapshot records)."""
    import yaml

    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    profile = yaml.safe_load((REPORTS / "profiles" / f"{XEON}.yaml").read_text())
    snap = json.loads((REPORTS / "validation" / f"{XEON}-2026-11-25.json").read_text())
    assert f"signature `{snap['meta']['cpu_signature']}`" in text
    assert not profile["meta"]["skipped"].get("bf16") and profile["meta"]["threads"] == 1
    meta = profile["meta"]
    assert f"fp32, bf16, fp16 and int8: {meta['calibration_cases']} and {len(snap['rows'])} cases" in text
    peaks = profile["matrix_peak_tops"]
    assert f"bf16 products at {peaks['bf16'] / peaks['fp32']:.2f} of fp32's rate" in text
    summary = {r["op_class"]: r for r in snap["summary"]}
    cal = class_pairs(summary)
    head = summary["headline"]
    assert f"over the {head['count']} Xeon headline cases {cal('headline')}" in text
    assert "Xeon leave-one-model-out " + pct_pair(head["cv_median_abs"], head["cv_p90_abs"]) in text
    for name, cls in (
        ("GEMM", "gemm"),
        ("GEMV", "gemv"),
        ("quant", "quant"),
        ("norm", "norm"),
        ("element-wise", "elementwise"),
        ("softmax", "softmax"),
        ("attention", "attention"),
    ):
        assert f"{name} {cal(cls)}" in text, name
    state = snap["meta"]["machine_state"]
    assert not state["drifted"]
    worst = max(state["ratios"].values(), key=lambda r: abs(np.log(r)))
    assert f"its roofs within {abs(worst - 1) * 100:.0f} % of the profile's" in text
    err = {r["name"]: r["error_calibrated"] for r in snap["rows"] if r["status"] == "ok"}
    flash = max(v for k, v in err.items() if k.startswith("llama-2-7b/prefill") and k.endswith("/flash"))
    adds = [err[f"llama-3-8b/decode/b8x768/attn_add/{d}"] for d in ("fp16", "bf16")]
    assert f"MHA prompts up to {flash * 100:.0f} % too slow" in text
    assert "in fp16/bf16 ({:+.0f} %, {:+.0f} %)".format(*(a * 100 for a in adds)) in text
    assert (
        f"fp32 prompt SiLU × mul ({err['llama-3-8b/prefill/b1x320/mlp_act/fp32'] * 100:.0f} %)".replace("-", "−")
        in text
    )
    stream = profile["measurements"]["stream"]
    assert stream["case"].startswith("grid/m1x") and stream["case"].endswith("/fp32")
    assert profile["bandwidth_gb_s"] == stream["gb_s"] > stream["copy_gb_s"]
    assert (
        f"one-row fp32 products read {stream['gb_s']:.1f} GB/s against the copy's {stream['copy_gb_s']:.1f} GB/s"
    ) in text
    assert not [r for r in profile["refused"] if r["class"] == "linear@fp32"]
    assert profile["meta"]["refit"]["from"] == f"reports/profiles/{XEON}.yaml"
    assert snap["meta"]["repredicted"]["profile"] == f"reports/profiles/{XEON}.yaml"
    touch, roof = profile["first_touch_gb_s"], profile["bandwidth_gb_s"]
    assert f"fresh pages came at {touch:.2f} GB/s against a memory roof of {roof:.1f} GB/s" in text
    assert f"a 64 MiB output takes {64 * 2**20 / touch / 1e6:.0f} ms to fault in" in text


XEON_SERVING = (("fp32-0.125rps", "fp32, 0.125/s"), ("fp32-0.25rps", "fp32, 0.25/s"), ("0.25rps", "bf16, 0.25/s"))


def test_serving_doc_quotes_the_third_cpu_runs():
    """The Xeon runs: measured, as simulated when they were taken (the file), and priced
    again with the committed profile (``resimulate``, measures nothing); the goal is met in
    each, and the decode steps' unpriced time per step."""
    from kernels.servecheck.cb_server import resimulate

    text = (ROOT / "docs" / "serving.md").read_text()
    for tag, label in XEON_SERVING:
        path = REPORTS / "validation" / "serving" / f"serving-{XEON}-qwen2-0.5b-{tag}-2026-11-25.json"
        d, live = json.loads(path.read_text()), resimulate(path)
        assert d["meta"]["profile"] == f"reports/profiles/{XEON}.yaml"
        assert not d["meta"]["machine_state"]["drifted"]
        c = d["comparison"]["calibrated"]
        measured = [
            f"{c[k]['measured'][q]:.{n}f} s" for k, n in (("ttft_s", 3), ("latency_s", 2)) for q in ("p50", "p90")
        ]
        assert (
            f"| {label}, transformers (measured) | {' | '.join(measured)} | {d['busy']['measured_cpu_s']:.1f} |" in text
        )
        for name, res in (("as calibrated", d), ("committed (refitted)", live)):
            cc = res["comparison"]["calibrated"]
            errors = [cc[k]["error"][q] for k in ("ttft_s", "latency_s") for q in ("p50", "p90")]
            assert abs(errors[0]) <= 0.15 and abs(errors[2]) <= 0.15, (label, name)
            assert abs(errors[1]) <= 0.25 and abs(errors[3]) <= 0.25, (label, name)
            row = f"| {label}, simulated, profile {name} | {' | '.join(map(signed, errors))} | "
            assert row + f"{res['busy']['simulated_calibrated_s']:.1f} |" in text, row
        b = live["step_breakdown"]
        n, meas, pred = b["decode_steps"], b["decode_forward_s"], b["decode_predicted_calibrated_gather_s"]
        assert (
            f"| {label} | {n:.0f} | {b['decode_tokens'] / n:.2f} | {meas:.2f} s | {pred:.2f} s "
            f"({signed(pred / meas - 1)}) | {(meas - pred) / n * 1e3:.1f} ms |"
        ) in text


def test_measurement_doc_quotes_the_fresh_draw():
    """The Xeon's fresh draw: what was drawn, its figures and its tail, from the snapshot."""
    text = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    snap = json.loads((REPORTS / "validation" / f"{XEON}-2026-11-25-draw1125.json").read_text())
    draw = snap["meta"]["draw"]
    assert draw["seed"] == 1125 and not snap["meta"]["machine_state"]["drifted"]
    assert f"{' and '.join(draw['models'])}, prompts" in text
    p = {d: "{} × {}".format(*w[0]) for d, w in draw["prefill"].items()}
    assert f"prompts {p['fp32']} in fp32, {p['bf16']} in bf16 and {p['fp16']} in fp16" in text
    assert "decode at {} × {} and {} × {}".format(*draw["decode"][0], *draw["decode"][1]) in text
    summary = {r["op_class"]: r for r in snap["summary"]}
    head, every = summary["headline"], summary["all"]
    assert f"{len(snap['rows'])} cases" in text
    assert f"headline {class_pairs(summary)('headline')} over {head['count']} cases" in text
    assert f"all {class_pairs(summary)('all')}" in text and every["count"] == len(snap["rows"])
    err = {r["name"]: r["error_calibrated"] for r in snap["rows"] if r["status"] == "ok"}
    worst = max(err, key=lambda k: abs(err[k]))
    assert "/prefill/" in worst and "/sdpa/" in worst and f"(up to {signed(err[worst])}," in text
    act = min(v for k, v in err.items() if "/prefill/" in k and k.endswith("mlp_act/fp32"))
    assert f"fp32 prompt SiLU × mul ({signed(act)})" in text
