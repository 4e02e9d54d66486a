"""URL state, thin callbacks, uploads, static export and `ridgeline serve` (no browser)."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("dash")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:dash")

from dash import no_update
from dash.exceptions import PreventUpdate
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.cli import app as cli
from ridgeline.engine.workload import Settings
from ridgeline.io.catalog import HARDWARE_DIR, MODELS_DIR
from viewer import callbacks, data, figures, ids, state
from viewer.app import create_app


def upload_of(text: str | bytes, mime: str = "application/json") -> str:
    raw = text.encode() if isinstance(text, str) else text
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


# --- URL state ------------------------------------------------------------------------


def test_every_settings_field_has_a_control():
    keys = {c.key for c in state.controls() if c.section == "settings"}
    assert keys == {f.name for f in dataclasses.fields(Settings) if f.init}
    assert state.control("w_dtype").options == state.DTYPES and "tf32" not in state.DTYPES
    assert state.control("attention").kind == "choice" and "flash" in state.control("attention").options


def test_new_settings_fields_get_controls_from_their_type():
    @dataclasses.dataclass(frozen=True)
    class Later:
        speculative: bool = False  # draft model on
        chunk: int = 512  # prefill chunk
        scale: float = 1.5  # a factor
        out_dtype: str = "fp16"  # some new type
        kernel: str = "auto"  # free text

    made = {f.name: state.setting_control(f) for f in dataclasses.fields(Later)}
    assert [made[n].kind for n in ("speculative", "chunk", "scale", "out_dtype", "kernel")] == [
        "bool",
        "int",
        "float",
        "choice",
        "text",
    ]
    assert made["out_dtype"].options == state.DTYPES
    assert made["chunk"].default == 512 and made["chunk"].minimum == 1


def test_settings_help_comes_from_the_dataclass_comments():
    assert "KV" in state.control("kv_dtype").help


def test_query_round_trip_and_bad_values():
    s = state.parse_query("?model=llama-3-8b&batch=8&w_dtype=int4&devices=a6000,h100-sxm&tp=2")
    assert (s["model"], s["batch"], s["w_dtype"], s["devices"], s["tp"]) == (
        "llama-3-8b",
        8,
        "int4",
        ("a6000", "h100-sxm"),
        2,
    )
    assert state.parse_query(state.to_query(s)) == s
    bad = state.parse_query("?batch=-3&seq_len=abc&w_dtype=fp99&generate=2.5&sweep_x=nope")
    d = state.defaults()
    assert [bad[k] for k in ("batch", "seq_len", "w_dtype", "generate", "sweep_x")] == [
        d[k] for k in ("batch", "seq_len", "w_dtype", "generate", "sweep_x")
    ]
    assert state.page_from_path("/sweep") == "sweep" and state.page_from_path("/") == "analyze"
    assert state.settings_of(s) == Settings(w_dtype="int4", tp=2)


def test_url_says_hardware_or_device():
    assert state.parse_query("?hardware=h100-sxm")["device"] == "h100-sxm"
    assert state.parse_query("?device=l40s&hardware=h100-sxm")["device"] == "l40s"
    assert callbacks.url_message("?hardware=h100-sxm&batch=4", None) == ""
    out = callbacks.update_analyze("/", "?model=llama-2-7b&hardware=h100-sxm", None)
    assert out[0] == "" and "H100" in out[1]


def test_bad_url_values_get_a_message_and_the_defaults():
    search = "?model=/etc/passwd&batch=-4&sweep_dtypes=fp16,fp9&devices=a6000,nope"
    assert callbacks.url_message(search, None) == (
        "error: not understood in the URL: "
        "model='/etc/passwd' (expected a catalog model or one uploaded in this session; shown: the default, "
        "llama-2-7b); "
        "batch='-4' (expected a whole number from 1 to 65,536; the CLI takes more; shown: the default, 1); "
        f"sweep_dtypes='fp16,fp9' (expected at most 6 items of {', '.join(state.DTYPES)}; shown: fp16); "
        "devices='a6000,nope' (expected at most 8 catalog devices, host, or ones uploaded in this session; "
        "the CLI takes more; shown: a6000)"
    )
    parsed = state.parse_query(search)
    assert (parsed["model"], parsed["batch"], parsed["sweep_dtypes"], parsed["devices"]) == (
        "llama-2-7b",
        1,
        ("fp16",),
        ("a6000",),
    )
    # the controls show the defaults (no blank dropdown) and the URL stays, with its message
    keys = [c.key for c in state.controls()]
    values, url, *_ = callbacks.sync_state(None, "/analyze", search, "analyze", keys, [None] * len(keys), None)
    got = dict(zip(keys, values))
    assert got["model"] == "llama-2-7b" and got["batch"] == 1 and url is no_update
    # a good URL in another order is put in canonical order, and has no message
    values, url, *_ = callbacks.sync_state(None, "/", "?batch=4", "analyze", keys, [None] * len(keys), None)
    assert url == state.to_query(state.parse_query("?batch=4"))
    assert callbacks.url_message(url, None) == ""


def test_url_naming_an_upload_this_session_lacks():
    message = callbacks.url_message("?model=upload:mine", {"models": {}, "devices": {}})
    assert message.endswith(
        "model='upload:mine' (an upload this browser session no longer holds: upload the file again)"
    )
    assert callbacks.url_message("?model=upload:mine", {"models": {"mine": {}}}) == ""


def test_validation_page_hides_the_workload_sidebar():
    assert callbacks.sidebar_style("/validation") == {"display": "none"}
    assert all(callbacks.sidebar_style(f"/{p}") == {} for p in state.PAGES if p != "validation")


def test_sync_url_to_controls_and_back():
    keys = [c.key for c in state.controls()]
    values, search, path, tab, models, devices = callbacks.sync_state(
        None, "/layer", "?batch=16&kv_dtype=int8&stage=prefill", "analyze", keys, [None] * len(keys), None
    )
    got = dict(zip(keys, values))
    assert got["batch"] == 16 and got["kv_dtype"] == "int8" and got["stage"] == "prefill"
    assert got["sweep_dtypes"] == ["fp16", "int8", "int4"]
    assert tab == "layer" and path is no_update
    assert search == state.to_query(state.parse_query("?batch=16&kv_dtype=int8&stage=prefill"))
    # the layout's menus hold the catalog already; an upload adds itself
    assert models is no_update and devices is no_update
    uploads = {"models": {"mine": {}}, "devices": {}}
    *_, models, devices = callbacks.sync_state(None, "/layer", search, "layer", keys, values, uploads)
    assert models[-1] == "upload:mine" and "llama-2-7b" in models and "host" in devices
    # the same URL again: no control changes, so the browser re-renders none
    again, _, _, tab_again, *_ = callbacks.sync_state(None, "/layer", search, "layer", keys, values, None)
    assert all(v is no_update for v in again) and tab_again is no_update
    # a control changes: only the URL follows
    values2 = list(values)
    values2[keys.index("w_dtype")] = "int4"
    out = callbacks.sync_state(ids.state("w_dtype"), "/layer", search, "layer", keys, values2, None)
    assert all(v is no_update for v in out[0])
    assert state.parse_query(out[1])["w_dtype"] == "int4" and state.parse_query(out[1])["batch"] == 16
    # a tab changes: only the pathname follows
    out = callbacks.sync_state(ids.TABS, "/layer", search, "sweep", keys, values2, None)
    assert out[2] == "/sweep" and out[1] is no_update


# --- callbacks --------------------------------------------------------------------------

QUERY = "?model=llama-2-7b&device=a6000&batch=4&seq_len=1024&generate=64&w_dtype=int8"


def test_analyze_callback_shows_the_engines_numbers():
    out = callbacks.update_analyze("/analyze", QUERY, None)
    engine = rl.analyze("llama-2-7b", "a6000", batch=4, seq_len=1024, generate=64, settings=Settings(w_dtype="int8"))
    assert out[0] == ""
    assert list(out[2:7]) == list(figures.format_cards(engine).values())
    assert out[3] == rl.engine.units.format_time(engine.generation["tpot_s"])
    rows = out[-1]
    assert len(rows) == len(engine.prefill.ops) + len(engine.decode.ops)
    q = next(r for r in rows if r["stage"] == "decode" and r["name"] == "q_proj")
    assert q["time_us"] == pytest.approx(engine.decode.ops.set_index("name").loc["q_proj", "time_s"] * 1e6)
    with pytest.raises(PreventUpdate):
        callbacks.update_analyze("/sweep", QUERY, None)


def test_analyze_error_keeps_the_previous_view():
    out = callbacks.update_analyze("/", "?device=tpu-v5e&w_dtype=fp16&a_dtype=fp16&kv_dtype=fp16", None)
    assert out[0].startswith("error: ") and "tpu-v5e" in out[0] and "\n" not in out[0]
    assert all(v is no_update for v in out[1:])
    out = callbacks.update_analyze("/", "?model=upload:llama-9", None)
    assert "uploaded model 'llama-9' is not in this browser session" in out[0]


def test_layer_callback_click_highlights_the_op():
    err, elements, details, roof = callbacks.update_layer("/layer", QUERY + "&stage=decode", None, None)
    assert err == "" and details == "Click an op in the graph."
    node = next(e["data"] for e in elements if e["data"].get("id") == "down_proj")
    _, _, details, roof = callbacks.update_layer("/layer", QUERY + "&stage=decode", node, None)
    ring = next(t for t in roof.data if t.meta == "selected")
    assert (ring.x[0], ring.y[0]) == pytest.approx((node["intensity"], node["perf"]))
    assert "down_proj" in str(details)
    # a node clicked in the other stage is not carried over
    _, _, details, _ = callbacks.update_layer("/layer", QUERY + "&stage=prefill", node, None)
    assert details == "Click an op in the graph."


def test_sweep_and_compare_callbacks():
    err, fig = callbacks.update_sweep("/sweep", QUERY, None)
    assert err == "" and any(t.meta == "sweep:int4:tpot_s" for t in fig.data)
    err, fig, rows = callbacks.update_compare("/compare", QUERY + "&devices=a6000,h100-sxm", None)
    assert err == "" and [r["device"] for r in rows] == ["a6000", "h100-sxm"]


def test_validation_page_without_and_with_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "VALIDATION_DIR", tmp_path)
    monkeypatch.setattr(callbacks, "profile_figure", lambda key=None: None)
    out = callbacks.update_validation("/validation")
    assert out[0].startswith("No validation runs yet")
    assert out[4] == {"display": "none"}
    rows = [
        {
            "case": "linear 4096x4096",
            "kind": "linear",
            "measured_s": 2e-3,
            "predicted_spec_s": 1.5e-3,
            "predicted_calibrated_s": 1.9e-3,
        },
        {"case": "softmax", "kind": "softmax", "measured_s": 1e-4, "predicted_spec_s": 0.8e-4},
    ]
    (tmp_path / "kernels.json").write_text(json.dumps({"meta": {}, "rows": rows}))
    (tmp_path / "broken.json").write_text("{not json")
    out = callbacks.update_validation("/validation")
    assert out[0].startswith("2 measured cases from 1 file") and "broken.json" in out[0]
    assert out[4] == {"display": "block"}
    spec = next(t for t in out[1].data if t.meta == "pred:spec")
    assert list(spec.x) == [2e-3, 1e-4]


def test_validation_page_shows_one_device_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "VALIDATION_DIR", tmp_path)
    monkeypatch.setattr(callbacks, "profile_figure", lambda key=None: None)
    row = {"kind": "linear", "measured_s": 2e-3, "predicted_spec_s": 1e-3}
    for key, cases in (("cpu-x-1t", 2), ("cuda-y", 3)):
        rows = [{**row, "case": f"{key}-{i}"} for i in range(cases)]
        (tmp_path / f"{key}-2026.json").write_text(json.dumps({"meta": {"device_key": key}, "rows": rows}))
    (tmp_path / "no-meta.json").write_text(json.dumps([{**row, "case": "bare"}]))
    assert data.validation_devices(tmp_path) == ["all", "cpu-x-1t", "cuda-y", "no-meta"]
    assert callbacks.update_validation("/validation", "?runs=all")[0].startswith("6 measured cases from 3 file")
    out = callbacks.update_validation("/validation", "?runs=cuda-y")
    assert out[0].startswith("3 measured cases from 1 file(s) measured on cuda-y")
    assert [len(t.x) for t in out[1].data if t.meta == "pred:spec"] == [3]
    out = callbacks.update_validation("/validation", "?runs=gone")
    assert out[0].startswith("No results measured on 'gone'; choose one of: cpu-x-1t, cuda-y, no-meta")
    assert out[4] == {"display": "none"}


def test_kernel_rows_use_name_and_op_class_and_skip_failures():
    rows = [
        {
            "name": "linear-m1-k4096",
            "op_class": "gemv",
            "status": "ok",
            "measured_s": 1e-4,
            "predicted_spec_s": 0.8e-4,
            "predicted_calibrated_s": 0.95e-4,
        },
        {"name": "fp8-gemm", "op_class": "gemm", "status": "skipped", "measured_s": None},
    ]
    out = [r for row in rows for r in data.long_rows(row)]
    assert [(r["case"], r["kind"], r["measured_s"]) for r in out] == [("linear-m1-k4096", "gemv", 1e-4)]


def test_wide_e2e_rows_split_by_metric():
    row = {
        "model": "m",
        "batch": 1,
        "prompt": 128,
        "measured_ttft_s": 0.4,
        "measured_ttft_p20_s": 0.3,
        "predicted_spec_ttft_s": 0.8,
        "predicted_calibrated_ttft_s": None,
        "measured_tpot_s": 0.1,
        "predicted_spec_tpot_s": 0.07,
    }
    out = data.long_rows(row)
    assert [(r["kind"], r["measured_s"], r["predicted_spec_s"]) for r in out] == [
        ("e2e ttft", 0.4, 0.8),
        ("e2e tpot", 0.1, 0.07),
    ]
    assert out[0]["case"] == "model=m batch=1 prompt=128 ttft"


# --- uploads ----------------------------------------------------------------------------


def upload(kind, contents, filename, search=QUERY, uploads=None):
    trigger = ids.MODEL_UPLOAD if kind == "model" else ids.DEVICE_UPLOAD
    args = (contents, filename, None, None) if kind == "model" else (None, None, contents, filename)
    return callbacks.handle_upload(trigger, *args, search, uploads)


def test_model_upload_then_analysis_uses_it():
    text = (MODELS_DIR / "qwen2-0.5b.json").read_text()
    store, search, err = upload("model", upload_of(text), "my-qwen.json")
    assert err == "" and "my-qwen" in store["models"]
    s = state.parse_query(search)
    assert s["model"] == "upload:my-qwen" and s["batch"] == 4  # the rest of the view is kept
    out = callbacks.update_analyze("/", search, store)
    engine = rl.analyze("qwen2-0.5b", "a6000", batch=4, seq_len=1024, generate=64, settings=Settings(w_dtype="int8"))
    assert out[0] == "" and out[3] == figures.format_cards(engine)["tpot"]
    assert "upload:my-qwen" in data.model_options(store)


def test_device_upload():
    text = (HARDWARE_DIR / "h100-sxm.yaml").read_text().replace("name: h100-sxm", "name: my-gpu")
    store, search, err = upload("device", upload_of(text, "application/x-yaml"), "gpu.yaml")
    assert err == "" and state.parse_query(search)["device"] == "upload:my-gpu"
    out = callbacks.update_analyze("/", search, store)
    assert out[0] == "" and "H100" in out[1]


@pytest.mark.parametrize(
    "kind, text, filename, message",
    [
        ("model", '{"model_type": "llama", "hidden_size": ', "bad.json", "malformed JSON at line 1"),
        ("model", json.dumps({"model_type": "bert", "hidden_size": 768}), "bert.json", "unsupported model_type 'bert'"),
        ("model", "[1, 2]", "list.json", "expected a JSON object"),
        ("model", " " * 1_000_001, "big.json", "the limit is 1 MB"),
        ("device", "name: x\n  kind: [gpu", "bad.yaml", "malformed YAML"),
        ("device", "name: x\nkind: gpu\n", "short.yaml", "missing 'vendor'"),
    ],
)
def test_bad_uploads_show_one_line_and_change_nothing(kind, text, filename, message):
    store, search, err = upload(kind, upload_of(text), filename)
    assert store is no_update and search is no_update
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_binary_upload_is_refused():
    _, _, err = upload("model", upload_of(b"\xff\xfe\x00\x01"), "x.json")
    assert "not a readable text file" in err


def test_shared_url_naming_an_upload_explains_itself():
    out = callbacks.update_analyze("/", "?model=upload:gone", {"models": {}})
    assert "upload its config.json again" in out[0]


# --- the app, export, CLI -----------------------------------------------------------------


def test_create_app_registers_every_page():
    app = create_app()
    found = set()

    def walk(node):
        if hasattr(node, "id") and getattr(node, "id", None) is not None:
            found.add(json.dumps(node.id, sort_keys=True))
        children = getattr(node, "children", None)
        for child in children if isinstance(children, (list, tuple)) else [children]:
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)

    walk(app.layout())
    assert not [p for p in state.PAGES if json.dumps(ids.page(p)) in found]  # a page mounts when shown
    assert json.dumps(ids.PAGE) in found and json.dumps(ids.SIDEBAR) in found
    walk(app.validation_layout)  # what Dash checks the callbacks against: every page
    for page in state.PAGES:
        assert json.dumps(ids.page(page)) in found
    for c in state.controls():  # every URL setting has exactly its control in the page
        assert json.dumps(ids.state(c.key), sort_keys=True) in found
    outputs = " ".join(app.callback_map)
    for cid in (
        ids.ROOFLINE,
        ids.OP_TABLE,
        ids.LAYER_GRAPH,
        ids.SWEEP_GRAPH,
        ids.COMPARE_GRAPH,
        ids.VALIDATION_SCATTER,
        ids.UPLOADS,
    ):
        assert cid in outputs


def test_the_callback_benchmark_times_every_call():
    """``python -m viewer.bench`` times the Analyze update (engine + figures + table rows +
    the JSON Dash sends); its goal (< 100 ms) is a benchmark's, reported, not asserted here
    (no timing assertions in unit tests): this checks it runs and times each call."""
    from viewer.bench import time_analyze_callback

    times = time_analyze_callback(repeats=3)
    assert len(times) == 3 and all(t > 0 for t in times)


def test_the_callback_benchmark_covers_every_page():
    """``python -m viewer.bench --callbacks`` times each page's callbacks (the Serving page's
    bands and its Plan apart); each line gives the median, least and most."""
    from viewer.bench import callback_report, page_callbacks

    assert set(state.PAGES) <= set(page_callbacks()) and {"serving-bands", "plan"} <= set(page_callbacks())
    report = callback_report({"sweep": [0.03, 0.01, 0.02]})
    assert report == "sweep       median 20 ms (min 10, max 30, 3 views)"


def test_write_html_is_one_self_contained_file(tmp_path):
    from viewer.export import write_html

    a = rl.analyze("llama-2-7b", "a6000", batch=2, seq_len=256, generate=32)
    path = tmp_path / "report.html"
    write_html(a, path)
    text = path.read_text()
    assert text.count("<div id=") >= 3 and "Plotly.newPlot" in text
    assert not re.search(r"<script[^>]*src=", text)  # plotly.js is inlined, nothing fetched
    assert len(text) > 3_000_000
    assert figures.format_cards(a)["tpot"] in text and "gate_proj" in text
    assert "roof fp16" in text


def test_cli_analyze_html(tmp_path):
    path = tmp_path / "r.html"
    result = CliRunner().invoke(
        cli, ["analyze", "llama-3.2-1b", "-H", "a6000", "--generate", "8", "--html", str(path), "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    assert path.is_file() and "Plotly.newPlot" in path.read_text()


def test_cli_serve_binds_loopback_and_prints_the_url(monkeypatch):
    calls = {}

    class Fake:
        def run(self, **kwargs):
            calls.update(kwargs)

    monkeypatch.setattr("viewer.app.create_app", lambda: Fake())
    result = CliRunner().invoke(cli, ["serve", "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert calls == {"host": "127.0.0.1", "port": 8123, "debug": False, "dev_tools_disable_version_check": True}
    assert "http://127.0.0.1:8123/" in result.output


def test_cli_serve_under_waitress(monkeypatch):
    calls = {}

    class Fake:
        server = "the Flask app"

    monkeypatch.setattr("viewer.app.create_app", lambda: Fake())
    monkeypatch.setattr("waitress.serve", lambda app, **kwargs: calls.update(app=app, **kwargs))
    result = CliRunner().invoke(cli, ["serve", "--waitress", "--port", "8125", "--threads", "4"])
    assert result.exit_code == 0, result.output
    assert calls == {"app": "the Flask app", "host": "127.0.0.1", "port": 8125, "threads": 4}
    result = CliRunner().invoke(cli, ["serve", "--waitress", "--debug"])
    assert result.exit_code == 2 and "drop --debug or --waitress" in result.output


def test_cli_serve_without_waitress_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "waitress", None)
    result = CliRunner().invoke(cli, ["serve", "--waitress"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: this command needs waitress: pip install 'ridgeline[viewer]'"


@pytest.mark.slow
def test_cli_serve_waitress_answers_http():
    """The real server in a subprocess: the page comes back, from waitress."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "ridgeline.cli", "serve", "--waitress", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                    assert reply.status == 200 and reply.headers["Server"] == "waitress"
                    assert b"ridgeline" in reply.read()
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_cli_serve_port_in_use_is_one_line(monkeypatch):
    class Busy:
        def run(self, **kwargs):
            raise OSError(98, "Address already in use")

    monkeypatch.setattr("viewer.app.create_app", lambda: Busy())
    result = CliRunner().invoke(cli, ["serve", "--port", "8124"])
    assert result.exit_code == 2
    assert "cannot listen on 127.0.0.1:8124 (Address already in use); pick another --port" in result.output


def test_cli_serve_without_dash_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dash", None)
    monkeypatch.delitem(sys.modules, "viewer.app", raising=False)
    result = CliRunner().invoke(cli, ["serve"])
    assert result.exit_code == 2
    assert "pip install 'ridgeline[viewer]'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_importing_the_cli_loads_no_dash_or_plotly():
    """Importing the CLI loads no viewer module; registering serve (viewer.cli, viewer.entry)
    loads no dash: the dashboard's modules and dash load only when it runs."""
    code = (
        "import sys, ridgeline.cli; before = sorted(m for m in sys.modules if m.startswith('viewer')); "
        "ridgeline.cli.load_all(); "
        "print(before, sorted({m.split('.')[0] for m in sys.modules} & {'dash', 'plotly', 'dash_cytoscape'}), "
        "sorted(m for m in sys.modules if m.startswith('viewer')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] [] ['viewer', 'viewer.cli', 'viewer.entry']"


def test_calibrated_profile_changes_roofs_and_numbers(tmp_path, monkeypatch):
    import ridgeline.io.profile as rp

    monkeypatch.setattr(rp, "PROFILES_DIR", tmp_path)
    (tmp_path / "my-a6000.yaml").write_text(
        "meta: {spec_device: a6000, device_kind: cuda}\ntiming: eager\nbandwidth_gb_s: 600\n"
        "matrix_peak_tops: {fp16: 120}\noverhead_us: {default: 5}\n"
    )
    assert data.list_profiles() == ["my-a6000"]
    out = callbacks.update_analyze("/", QUERY.replace("w_dtype=int8", "w_dtype=fp16") + "&profile=my-a6000", None)
    assert out[0] == "" and "calibrated roofline" in out[1]
    roof = next(t for t in out[7].data if t.meta == "roof:fp16")
    assert roof.x[0] == pytest.approx(120e12 / 600e9) and roof.y[0] == pytest.approx(120e12)
    spec = callbacks.update_analyze("/", QUERY.replace("w_dtype=int8", "w_dtype=fp16"), None)
    assert out[3] != spec[3]  # TPOT: slower measured roofs and 5 µs per kernel
    missing = callbacks.update_analyze("/", QUERY + "&profile=nope", None)
    assert "no device profile 'nope'" in missing[0]


def test_profile_roofs_show_only_what_the_profile_measured():
    """The committed H100 profile measured fp32/bf16/fp16/int8/fp8 but not tf32: the figure
    labels the datasheet's tf32 as spec only, and the device is the profile's catalog entry."""
    fig = callbacks.profile_figure("cuda-nvidia-h100-80gb-hbm3")
    measured = [t.name for t in fig.data if t.name.startswith("measured")]
    assert "measured: roof bf16 733 Top/s" in measured
    assert not any("tf32" in name for name in measured)
    assert any(t.name == "spec: roof tf32 495 Top/s" for t in fig.data)
    # the H100 SXM datasheet's dense fp8: 1979 TFLOPS, written without an exponent
    assert any(t.name == "spec: roof fp8 1979 Top/s" for t in fig.data)
    assert fig.layout.title.text.endswith("(h100-sxm)")
