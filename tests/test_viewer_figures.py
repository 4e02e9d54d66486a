"""Figure builders of the dashboard, checked against the engine's numbers (no browser)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly")

import ridgeline as rl
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.roofline import spec_ceilings, time_op
from ridgeline.engine.units import GIB, format_bytes, format_time
from viewer import data, figures
from viewer.state import defaults


@pytest.fixture(scope="module")
def analysis():
    return rl.analyze("llama-2-7b", "a6000", batch=1, seq_len=512, generate=128)


@pytest.fixture(scope="module")
def unfused():
    """The same with transformers' eager attention: the score passes are nodes of their own."""
    return rl.analyze("llama-2-7b", "a6000", batch=1, seq_len=512, generate=128, attention="eager")


def trace(fig, meta):
    hits = [t for t in fig.data if t.meta == meta]
    assert len(hits) == 1, f"{meta}: {[t.meta for t in fig.data]}"
    return hits[0]


def test_roofline_ridge_is_peak_over_bandwidth_for_a6000_fp16(analysis):
    fig = figures.roofline_figure(analysis)
    roof = trace(fig, "roof:fp16")
    # A6000 datasheet: 155 TFLOPS fp16 dense, 768 GB/s (hardware/a6000.yaml)
    assert roof.x[0] == pytest.approx(155e12 / 768e9)
    assert roof.x[0] == pytest.approx(201.82, abs=0.01)
    assert roof.y == (155e12, 155e12)
    slope = trace(fig, "bandwidth")
    assert slope.y[1] / slope.x[1] == pytest.approx(768e9)
    assert slope.y[0] / slope.x[0] == pytest.approx(768e9)
    assert figures.ridge_point(spec_ceilings(analysis.device), "int8") == pytest.approx(310e12 / 768e9)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_roofline_points_are_the_engines_intensity_and_perf(analysis):
    fig = figures.roofline_figure(analysis)
    points = trace(fig, "ops:decode:linear")
    i = list(points.customdata).index("q_proj")
    # decode q_proj of Llama-2-7B, batch 1: y[1, 4096] = x[1, 4096] @ W[4096, 4096] in fp16
    flops = 2 * 4096 * 4096
    nbytes = 4096 * 4096 * 2 + 4096 * 2 + 4096 * 2
    assert points.x[i] == pytest.approx(flops / nbytes)
    assert points.y[i] == pytest.approx(flops / nbytes * 768e9)
    op = next(o for o in stage_ops(analysis.model, "decode", 1, 512, analysis.plan) if o.name == "q_proj")
    row = time_op(op, spec_ceilings(analysis.device))
    assert points.x[i] == pytest.approx(float(row["intensity"]))
    assert points.y[i] == pytest.approx(float(row["perf"]))


def test_roofline_markers_and_colours(analysis):
    fig = figures.roofline_figure(analysis)
    op_traces = [t for t in fig.data if str(t.meta).startswith("ops:")]
    for t in op_traces:
        _, stage, kind = t.meta.split(":")
        assert t.marker.symbol == figures.STAGE_SYMBOLS[stage]
        assert t.marker.color == figures.KIND_COLORS[kind]
    shown = sum(len(t.x) for t in op_traces)
    # every op with arithmetic is a point; the embedding gather (0 ops) cannot sit on a log axis
    expected = sum(int((getattr(analysis, s).ops["intensity"] > 0).sum()) for s in ("prefill", "decode"))
    assert shown == expected == 2 * (len(analysis.prefill.ops) - 1)
    assert "intensity" in op_traces[0].hovertext[0] and "bound" in op_traces[0].hovertext[0]


def test_roofline_highlight_rings_the_chosen_op(analysis):
    fig = figures.roofline_figure(analysis, highlight=("prefill", "gate_proj"))
    ring = trace(fig, "selected")
    row = analysis.prefill.ops.set_index("name").loc["gate_proj"]
    assert (ring.x[0], ring.y[0]) == pytest.approx((row["intensity"], row["perf"]))
    assert row["bound"] == "compute"  # 512 tokens x 4096 x 11008: far right of the ridge


def test_time_breakdown_sums_to_stage_totals(analysis):
    fig = figures.time_breakdown_figure(analysis)
    for stage in ("prefill", "decode"):
        bars = [t for t in fig.data if t.meta.startswith(f"time:{stage}:")]
        assert sum(t.y[0] for t in bars) == pytest.approx(getattr(analysis, stage).total["time_s"] * 1e3)
    linear = trace(fig, "time:decode:linear").y[0]
    ops = analysis.decode.ops
    assert linear == pytest.approx(
        1e3 * (ops.loc[ops.kind == "linear", "count"] * ops.loc[ops.kind == "linear", "time_s"]).sum()
    )
    assert fig.layout.barmode == "stack"


def test_memory_breakdown_against_capacity(analysis):
    fig = figures.memory_figure(analysis)
    mem = analysis.memory
    assert trace(fig, "memory:weights_bytes").x[0] == pytest.approx(mem["weights_bytes"] / GIB)
    assert trace(fig, "memory:kv_cache_bytes").x[0] == pytest.approx(mem["kv_cache_bytes"] / GIB)
    assert sum(t.x[0] for t in fig.data) == pytest.approx(mem["peak_bytes"] / GIB)
    # Llama-2-7B fp16 weights: 6.74e9 parameters x 2 bytes = 12.55 GiB
    assert mem["weights_bytes"] / GIB == pytest.approx(12.55, abs=0.01)
    assert fig.layout.shapes[0].x0 == 48  # the A6000's 48 GiB
    assert "fits" in fig.layout.title.text


def test_cards_are_the_engines_numbers(analysis):
    cards = figures.format_cards(analysis)
    gen = analysis.generation
    assert cards["ttft"] == format_time(gen["ttft_s"])
    assert cards["tpot"] == format_time(gen["tpot_s"])
    assert cards["throughput"] == f"{gen['tokens_per_s']:.4g} tok/s"
    assert cards["peak"] == format_bytes(analysis.memory["peak_bytes"])
    assert cards["fits"].startswith("yes")


def sweep_state(**over):
    state = defaults()
    state.update(
        model="llama-2-13b", device="a6000", seq_len=2048, generate=256, sweep_x="batch", sweep_dtypes=("fp16", "int4")
    )
    state.update(over)
    return state


def test_sweep_figure_values_and_oom_boundary():
    state = sweep_state()
    frame = data.sweep_frame(state)
    fig = figures.sweep_figure(frame)
    tpot = trace(fig, "sweep:fp16:tpot_s")
    assert list(tpot.x) == list(data.SWEEP_BATCHES)
    one = rl.analyze("llama-2-13b", "a6000", batch=8, seq_len=2048, generate=256)
    assert tpot.y[3] == pytest.approx(one.generation["tpot_s"] * 1e3)
    mem = trace(fig, "sweep:int4:peak_bytes")
    int4 = rl.analyze(
        "llama-2-13b", "a6000", batch=16, seq_len=2048, generate=256, settings=rl.Settings(w_dtype="int4")
    )
    assert mem.y[4] == pytest.approx(int4.memory["peak_bytes"] / GIB)
    fp16 = frame[frame.w_dtype == "fp16"]
    first_oom = int(fp16.loc[~fp16.fits, "batch"].min())
    assert rl.analyze("llama-2-13b", "a6000", batch=first_oom, seq_len=2048, generate=256).memory["fits"] is False
    assert rl.analyze("llama-2-13b", "a6000", batch=first_oom // 2, seq_len=2048, generate=256).memory["fits"] is True
    # a dotted line per subplot at the exact largest batch that fits (not between grid points)
    largest = rl.api.max_batch("llama-2-13b", "a6000", 2048, 256)
    assert first_oom // 2 < largest < first_oom
    assert rl.analyze("llama-2-13b", "a6000", batch=largest, seq_len=2048, generate=256).memory["fits"]
    assert not rl.analyze("llama-2-13b", "a6000", batch=largest + 1, seq_len=2048, generate=256).memory["fits"]
    lines = [
        s
        for s in fig.layout.shapes
        if s.line.dash == "dot" and s.line.color == trace(fig, "sweep:fp16:tpot_s").line.color
    ]
    assert len(lines) == 4 and all(s.x0 == largest for s in lines)
    assert trace(fig, "oom:fp16").name == f"fp16: out of memory above batch {largest}"
    assert "x-open" in list(trace(fig, "sweep:fp16:ttft_s").marker.symbol)
    # OOM labels live in the legend: no text drawn on the plot can collide
    assert not [a for a in fig.layout.annotations if "OOM" in (a.text or "")]


def test_sweep_oom_at_the_exact_prompt_length():
    frame = data.sweep_frame(sweep_state(sweep_x="seq_len", batch=16))
    for w, group in frame.groupby("w_dtype"):
        limit = int(group["max_x"].iloc[0])
        settings = rl.Settings(w_dtype=w)
        assert rl.analyze("llama-2-13b", "a6000", batch=16, seq_len=limit, generate=256, settings=settings).memory[
            "fits"
        ]
        assert not rl.analyze(
            "llama-2-13b", "a6000", batch=16, seq_len=limit + 1, generate=256, settings=settings
        ).memory["fits"]
    fig = figures.sweep_figure(frame)
    assert trace(fig, "oom:fp16").name.startswith("fp16: out of memory above prompt ")


def test_oom_boundary_cases():
    frame = pd.DataFrame({"x": [1, 2, 4, 8], "fits": [True, True, False, False]})
    assert figures.oom_boundary(frame) == 2.0  # no exact limit given: the last point that fits
    assert figures.oom_boundary(frame.assign(max_x=3)) == 3.0
    assert figures.oom_boundary(frame.assign(fits=True, max_x=8)) is None
    assert figures.oom_boundary(frame.assign(fits=False, max_x=0)) == 0.0
    assert figures.oom_label("int4", 0.0, "batch") == "int4: nothing fits"


def test_sweep_over_prompt_length():
    frame = data.sweep_frame(sweep_state(sweep_x="seq_len", batch=4))
    assert frame.attrs["axis"] == "seq_len"
    assert list(frame[frame.w_dtype == "int4"]["seq_len"]) == list(data.SWEEP_SEQ_LENS)
    assert set(frame["batch"]) == {4}
    fig = figures.sweep_figure(frame)
    assert fig.layout.xaxis4.title.text == "prompt length (tokens)"


def test_compare_figure_bars_match_each_device():
    state = defaults()
    state.update(model="llama-3-8b", batch=4, seq_len=1024, generate=64, devices=("a6000", "h100-sxm", "tpu-v5e"))
    frame = data.compare_frame(state)
    fig = figures.compare_figure(frame)
    tpot = trace(fig, "compare:tpot_s")
    h100 = rl.analyze("llama-3-8b", "h100-sxm", batch=4, seq_len=1024, generate=64)
    assert tpot.y[list(tpot.x).index("h100-sxm")] == pytest.approx(h100.generation["tpot_s"] * 1e3)
    peak = trace(fig, "compare:peak_bytes")
    assert peak.y[0] == pytest.approx(h100.memory["peak_bytes"] / GIB)  # same model: same bytes
    # the TPU cannot run fp16: its row carries the engine's one-line error and no bar
    tpu = frame.set_index("device").loc["tpu-v5e"]
    assert "fp16" in tpu["error"] and "tpu-v5e" not in list(tpot.x)


def test_layer_elements_follow_data_flow(unfused):
    analysis = unfused
    elements = figures.layer_elements(analysis, "decode")
    nodes = {e["data"]["id"]: e for e in elements if "source" not in e["data"]}
    edges = [e["data"] for e in elements if "source" in e["data"]]
    layer = {
        "attn_norm",
        "q_proj",
        "k_proj",
        "v_proj",
        "rope",
        "qk_matmul",
        "attn_scale",
        "attn_mask",
        "softmax",
        "softmax_downcast",
        "sv_matmul",
        "o_proj",
        "attn_add",
        "mlp_norm",
        "gate_proj",
        "up_proj",
        "mlp_act",
        "down_proj",
        "mlp_add",
    }
    assert set(nodes) == layer | {"x", "kv cache"}
    pairs = {(e["source"], e["target"]) for e in edges}
    assert {
        ("x", "attn_norm"),
        ("q_proj", "rope"),
        ("rope", "qk_matmul"),
        ("qk_matmul", "attn_scale"),  # transformers' eager: scale, mask, then the softmax
        ("attn_mask", "softmax"),
        ("gate_proj", "mlp_act"),
        ("up_proj", "mlp_act"),
        ("down_proj", "mlp_add"),
        ("kv cache", "qk_matmul"),
        ("v_proj", "kv cache"),
    } <= pairs
    for src, dst in pairs:  # producers sit above their consumers
        if "kv cache" not in (src, dst):
            assert nodes[src]["position"]["y"] < nodes[dst]["position"]["y"]
    rows = analysis.decode.ops.set_index("name")
    for name in layer:
        d = nodes[name]["data"]
        assert d["bound"] == rows.loc[name, "bound"]
        assert d["color"] == figures.BOUND_COLORS[d["bound"]]
        assert d["time_s"] == pytest.approx(rows.loc[name, "time_s"])
    slowest = max(layer, key=lambda n: rows.loc[n, "time_s"])
    assert nodes[slowest]["data"]["size"] == pytest.approx(56)
    assert all(nodes[n]["data"]["size"] <= 56 for n in layer)


LABEL_CHAR_PX = 10  # 16 px sans-serif: wider than its average glyph


@pytest.mark.parametrize("model", ["llama-2-7b", "falcon-7b", "mixtral-8x7b", "deepseek-v2-lite"])
@pytest.mark.parametrize("stage", ["prefill", "decode"])
def test_layer_node_labels_never_overlap(model, stage):
    """Each node with its label to the right (layout.CYTO_STYLE) is a box; no two boxes meet."""
    from viewer.layout import CYTO_STYLE

    node_style = CYTO_STYLE[0]["style"]
    assert (node_style["text-halign"], node_style["text-valign"]) == ("right", "center")
    a = rl.analyze(model, "a6000", batch=8, seq_len=1024)
    boxes = []
    for e in figures.layer_elements(a, stage):
        d = e["data"]
        if "source" in d:
            continue
        x, y = e["position"]["x"], e["position"]["y"]
        if e.get("classes") == "io":  # a 70 x 22 box with its label inside
            boxes.append((d["id"], x - 35, x + 35, y - 11, y + 11))
            continue
        r = d["size"] / 2
        right = x + r + node_style["text-margin-x"] + LABEL_CHAR_PX * len(d["label"])
        boxes.append((d["id"], x - r, right, y - max(r, 9), y + max(r, 9)))
    for i, (n1, l1, r1, t1, b1) in enumerate(boxes):
        for n2, l2, r2, t2, b2 in boxes[i + 1 :]:
            assert r1 <= l2 or r2 <= l1 or b1 <= t2 or b2 <= t1, (n1, n2)


def test_titles_sit_below_the_plot_toolbar(analysis):
    """The toolbar (top right, MODEBAR_PX high) never covers a title or a subplot title."""
    frame = data.sweep_frame(sweep_state())
    figs = [
        figures.roofline_figure(analysis),
        figures.time_breakdown_figure(analysis),
        figures.memory_figure(analysis),
        figures.sweep_figure(frame),
        figures.compare_figure(data.compare_frame({**defaults(), "devices": ("a6000", "l40s")})),
    ]
    for fig in figs:
        title = fig.layout.title
        assert (title.yref, title.yanchor, title.y) == ("container", "top", 1)
        assert title.pad.t >= figures.MODEBAR_PX
        subplot_titles = [a for a in fig.layout.annotations if a.yref == "paper" and a.y == 1.0]
        # title text (~20 px) below the toolbar, then the subplot titles (~20 px) above the plot
        assert fig.layout.margin.t >= figures.MODEBAR_PX + 20 + (20 if subplot_titles else 0)


def test_layer_elements_prefill_has_compute_bound_projections(unfused):
    nodes = {
        e["data"]["id"]: e["data"] for e in figures.layer_elements(unfused, "prefill") if "source" not in e["data"]
    }
    assert nodes["down_proj"]["bound"] == "compute" and nodes["softmax"]["bound"] == "memory"


def validation_frame():
    return pd.DataFrame(
        {
            "case": ["a", "b", "c"],
            "kind": ["linear", "linear", "softmax"],
            "measured_s": [1e-3, 2e-3, 1e-4],
            "predicted_spec_s": [0.9e-3, 1.0e-3, 0.5e-4],
            "predicted_calibrated_s": [1.1e-3, 2.1e-3, np.nan],
        }
    )


def test_validation_scatter_bands_and_identity():
    fig = figures.validation_scatter(validation_frame())
    identity = trace(fig, "identity")
    assert identity.x[0] == identity.y[0] and identity.x[1] == identity.y[1]
    band = trace(fig, "band:0.1")
    assert band.y[1] / band.x[1] == pytest.approx(1.1) and band.y[2] / band.x[2] == pytest.approx(0.9)
    assert trace(fig, "band:0.25").y[0] / trace(fig, "band:0.25").x[0] == pytest.approx(1.25)
    assert len(trace(fig, "pred:calibrated").x) == 2  # the NaN prediction is left out
    assert list(trace(fig, "pred:spec").y) == [0.9e-3, 1.0e-3, 0.5e-4]


def test_validation_errors_by_op_class():
    table = figures.relative_errors(validation_frame())
    assert table.loc["linear", "spec"] == pytest.approx((0.1 + 0.5) / 2)
    assert table.loc["softmax", "spec"] == pytest.approx(0.5)
    assert table.loc["linear", "calibrated"] == pytest.approx((0.1 + 0.05) / 2)
    fig = figures.validation_error_figure(validation_frame())
    assert list(trace(fig, "error:spec").y) == pytest.approx([30.0, 50.0])


def test_the_page_states_the_clis_verdict():
    """The Analyze page's title carries the verdict line the CLI prints (issue 30): what
    bounds TTFT and TPOT, and the largest batch that fits."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    a = rl.analyze("llama-2-70b", "a6000", seq_len=512, generate=128)
    cli = CliRunner().invoke(app, ["analyze", "llama-2-70b", "-H", "a6000", "--generate", "128"]).stdout
    line = next(x for x in cli.splitlines() if x.startswith("verdict: "))
    assert figures.analysis_title(a).splitlines()[1] == line
    assert line.endswith("not even batch 1 fits (512 + 128 tokens each)")
