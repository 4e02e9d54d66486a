"""What makes the dashboard fast, checked on values (no timing): memos that return the same
result and notice a changed file, and payloads cut without losing what they show."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("dash")

from dash import no_update  # noqa: E402

from viewer import callbacks, data, figures, ids, serving, state  # noqa: E402
from viewer.state import parse_query  # noqa: E402


def test_validation_files_are_read_once_and_again_when_one_changes(tmp_path):
    path = tmp_path / "kernels.json"
    row = {"case": "a", "kind": "linear", "measured_s": 2e-3, "predicted_spec_s": 1e-3}
    path.write_text(json.dumps({"meta": {"device_key": "cuda-y"}, "rows": [row]}))
    first, _ = data.load_validation(tmp_path)
    again, _ = data.load_validation(tmp_path)
    assert list(again["case"]) == ["a"] and again is not first  # a copy: a caller may change it
    before = data.read_validation.cache_info().hits
    data.load_validation(tmp_path)
    assert data.read_validation.cache_info().hits == before + 1
    path.write_text(json.dumps({"meta": {"device_key": "cuda-y"}, "rows": [row, {**row, "case": "b"}]}))
    os.utime(path, ns=(1, 1))  # a new modification time, whatever the clock's resolution
    assert list(data.load_validation(tmp_path)[0]["case"]) == ["a", "b"]


def test_view_memo_computes_a_view_once():
    calls = []

    @data.view_memo()
    def compute(view, uploads=None):
        calls.append(view["batch"])
        return [view["batch"] * 2]

    assert compute.peek({"batch": 3}) is None  # nothing computed yet, and peeking computes nothing
    assert compute({"batch": 3}) == [6] and compute({"batch": 3}, {}) == [6]
    assert compute.peek({"batch": 3}) == [6] and calls == [3]
    assert compute({"batch": 4}) == [8] and calls == [3, 4]
    # what JSON cannot hold is computed every time, not cached under a wrong key
    assert np.isnan(compute({"batch": float("nan")})[0]) and len(calls) == 3


def test_serving_runs_are_the_same_objects_for_the_same_view():
    view = parse_query("?model=llama-3.2-1b&seq_len=128&generate=8&serving_rates=2&serving_requests=20")
    assert serving.serving_runs(view) is serving.serving_runs(dict(view))


def test_a_serving_view_builds_its_step_costs_once_and_serves_a_rate_once(monkeypatch):
    """Every run of a view (each rate's, its bands', a view that only changes them) shares
    one table of step costs: the table is a function of the server, not of the arrivals.
    The bands' runs get each rate's first run back rather than serve its requests again."""
    from ridgeline.serving import simulator

    built = []
    real = simulator.step_cost_of
    monkeypatch.setattr(simulator, "step_cost_of", lambda d, s: built.append(s) or real(d, s))
    query = "?model=llama-3.2-1b&seq_len=96&generate=8&serving_requests=20&serving_max_batch=40"
    view = parse_query(f"{query}&serving_rates=2,5")
    first = serving.first_runs(view)  # the rates' runs, their bands pending
    banded = serving.serving_runs(view)  # again, with each rate's four interval runs
    assert all(a is b for (_, a, _), (_, b, _) in zip(first, banded))
    assert [b is serving.PENDING for *_, b in first] == [True, True] and "ttft_s" in banded[0][2]
    serving.serving_runs(parse_query(f"{query}&serving_rates=3&serving_requests=30"))
    assert len(built) == 1 and built[0].max_batch == 40
    serving.serving_runs(parse_query(f"{query.replace('=40', '=41')}&serving_rates=3"))  # another server
    assert len(built) == 2 and built[1].max_batch == 41


def test_serving_and_plan_figures_send_what_plotly_s_checked_figure_sends():
    """The Serving page's charts and the Plan's are built as specs (``figures.figure_of``):
    the JSON the browser gets is the checked figure's, bands, subplot titles and caption
    included."""
    import plotly.graph_objects as go
    from plotly.utils import PlotlyJSONEncoder

    from viewer import plan

    view = parse_query("?model=llama-3.2-1b&seq_len=96&generate=8&serving_requests=20&serving_rates=2,6")
    figs = [plan.plan_figure(plan.run_plan(view))]
    for runs in (serving.first_runs(view), serving.serving_runs(view)):
        figs += [serving.latency_figure(runs), serving.kv_figure(runs)]
    for fig in figs:
        sent = json.dumps(fig, cls=PlotlyJSONEncoder, sort_keys=True)
        assert sent == json.dumps(go.Figure(fig.to_dict()), cls=PlotlyJSONEncoder, sort_keys=True)
    assert [t.meta for t in figs[0].data][-2:] == ["pareto", "chosen"]
    fig = serving.latency_figure(runs)
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:3] == ["TTFT", "TPOT", "latency"] and titles[3].startswith("bands: 80 % intervals from")
    assert [t.xaxis for t in fig.data if t.name == "p50"] == ["x", "x2", "x3"]
    assert len([t for t in fig.data if (t.meta or "").startswith("band:")]) == 9


def test_kv_line_keeps_its_peak_in_at_most_kv_points():
    steps = np.arange(3000, dtype=float)
    occupancy = 50 + 40 * np.sin(steps / 200)
    occupancy[1234] = 99.5  # one step's spike
    x, y = serving.binned_peaks(steps * 1e-3, occupancy)
    assert len(x) == serving.KV_POINTS and x[0] == 0 and np.all(np.diff(x) > 0)
    assert y.max() == 99.5 and y.min() >= occupancy.min()
    short = serving.binned_peaks(steps[:10], occupancy[:10])
    assert np.array_equal(short[1], occupancy[:10])


def test_kv_figure_draws_each_run_s_peak():
    view = parse_query("?model=llama-3.2-1b&seq_len=256&generate=32&serving_rates=4&serving_requests=200")
    runs = serving.serving_runs(view)
    (line,) = serving.kv_figure(runs).data
    assert len(line.x) <= serving.KV_POINTS
    assert max(line.y) == pytest.approx(100 * runs[0][1].summary["kv_peak_fraction"])


def test_page_load_re_renders_only_controls_whose_value_changes():
    keys = [c.key for c in state.controls()]
    defaults = [state.component_value(state.control(k), state.defaults()[k]) for k in keys]
    values, *_ = callbacks.sync_state(None, "/sweep", "?batch=16", "analyze", keys, defaults, None)
    changed = {k: v for k, v in zip(keys, values) if v is not no_update}
    assert changed == {"batch": 16}


def test_validation_hover_names_each_case():
    frame = data.load_validation()[0]
    fig = figures.validation_scatter(frame)
    spec = next(t for t in fig.data if t.meta == "pred:spec")
    rows = frame[frame["predicted_spec_s"] > 0]
    assert [tuple(c) for c in spec.customdata[:3]] == list(zip(rows["case"][:3], rows["kind"][:3]))
    assert "%{customdata[0]}" in spec.hovertemplate


def test_only_the_shown_page_is_built_its_controls_holding_the_url_s_values():
    box = callbacks.show_page("/sweep", "?sweep_x=seq_len&sweep_dtypes=int8,int4")
    text = str(box)
    assert box.id == ids.page("sweep") and ids.SWEEP_GRAPH in text and ids.ROOFLINE not in text
    shown = {}

    def walk(node):
        if isinstance(getattr(node, "id", None), dict):
            shown[node.id["key"]] = node.value
        children = getattr(node, "children", None)
        for child in children if isinstance(children, (list, tuple)) else [children]:
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)

    walk(box)
    assert shown == {"sweep_x": "seq_len", "sweep_dtypes": ["int8", "int4"]}


def test_a_page_s_controls_mounting_sets_the_search_again_and_a_change_rewrites_it():
    """Mounted controls hold the URL's values: the search comes back as it is (which runs the
    page's callbacks), even one holding a value not understood (its message stays)."""
    search = "?sweep_x=seq_len&sweep_dtypes=int8,bogus"
    keys, mounted = ["sweep_x", "sweep_dtypes"], ["seq_len", ["int8"]]
    trigger = ids.state("sweep_x")
    out = callbacks.sync_state(trigger, "/sweep", search, "sweep", keys, mounted, None)
    assert out[1] == search and out[2:] == (no_update,) * 4
    out = callbacks.sync_state(trigger, "/sweep", search, "sweep", keys, ["batch", ["int8"]], None)
    assert parse_query(out[1])["sweep_x"] == "batch" and parse_query(out[1])["sweep_dtypes"] == ("int8",)


def test_figures_built_as_one_spec_send_what_plotly_s_checked_figure_sends(monkeypatch):
    """``figures.figure_of`` skips plotly's check of each value: the JSON the browser gets is
    the same as the checked figure's, for every figure built that way."""
    import plotly.graph_objects as go
    from plotly.utils import PlotlyJSONEncoder

    specs = []
    real = figures.figure_of
    monkeypatch.setattr(figures, "figure_of", lambda spec: specs.append(spec) or real(spec))
    view = parse_query("?model=llama-2-7b&device=h200&profile=cuda-nvidia-h200&batch=8&sweep_x=seq_len")
    d = data.deployment_for(view)
    a = data.analysis_for(view, d)
    figures.roofline_figure(a, d.ceilings, highlight=("decode", "o_proj"))
    figures.time_breakdown_figure(a)
    figures.memory_figure(a)
    figures.sweep_figure(data.sweep_frame(view))  # bands, an out-of-memory line
    figures.sweep_figure(data.sweep_frame(parse_query("?model=llama-3-70b&device=a6000")))  # nothing fits
    figures.compare_figure(data.compare_frame(parse_query("?devices=a6000,h100-sxm,tpu-v5e")))  # one fails
    assert len(specs) == 6
    for spec in specs:
        sent = json.dumps(real(spec), cls=PlotlyJSONEncoder, sort_keys=True)
        assert sent == json.dumps(go.Figure(spec), cls=PlotlyJSONEncoder, sort_keys=True)


def test_validation_figures_are_drawn_once_per_version_of_the_files(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "VALIDATION_DIR", tmp_path)
    monkeypatch.setattr(callbacks, "profile_figure", lambda key=None: None)
    path = tmp_path / "kernels.json"
    row = {"case": "a", "kind": "linear", "measured_s": 2e-3, "predicted_spec_s": 1e-3}
    path.write_text(json.dumps({"meta": {"device_key": "cuda-y"}, "rows": [row]}))
    first = callbacks.update_validation("/validation", "?batch=2")
    again = callbacks.update_validation("/validation", "?batch=3")  # another view, the same files
    assert again[1] is first[1] and again[2] is first[2]
    path.write_text(json.dumps({"meta": {"device_key": "cuda-y"}, "rows": [row, {**row, "case": "b"}]}))
    os.utime(path, ns=(1, 1))
    changed = callbacks.update_validation("/validation", "?batch=2")
    spec = next(t for t in changed[1].data if t.meta == "pred:spec")
    assert changed[1] is not first[1] and len(spec.x) == 2


def test_a_view_asked_for_again_while_it_is_computed_is_computed_once():
    """The Serving page's bands callback and a reload of the page ask for the same view at
    once: the second request waits for the first's result."""
    import threading

    started, release, calls, results = threading.Event(), threading.Event(), [], []

    @data.view_memo()
    def compute(view, uploads=None):
        calls.append(view["batch"])
        started.set()
        release.wait(10)
        return [view["batch"]]

    first = threading.Thread(target=lambda: results.append(compute({"batch": 1})))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.append(compute({"batch": 1})))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first
    release.set()
    first.join(10)
    second.join(10)
    assert calls == [1] and len(results) == 2 and results[0] is results[1]
