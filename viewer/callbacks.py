"""Thin callbacks: read the URL state, call ``viewer.data``, draw with ``viewer.figures``.

Each handler is a module-level function taking plain values, so tests (and the timing
benchmark) call it directly; ``register`` wires them to the app.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from dash import ALL, Input, Output, State, ctx, no_update
from dash.exceptions import PreventUpdate

from ridgeline.engine.roofline import spec_ceilings
from ridgeline.errors import RidgelineError
from ridgeline.io.resolve import profile_path, recorded_ceilings
from viewer import data, figures, ids, layout
from viewer.state import (
    NOT_FOUND,
    PAGES,
    UPLOAD_PREFIX,
    coerce,
    component_value,
    control,
    page_from_path,
    parse_query,
    query_problems,
    to_query,
)

ERROR_PREFIX = "error: "


def show_page(pathname: str | None, search: str | None):
    """The components of the page the path names (or "no such page"), its controls holding
    the URL's values: only the shown page is in the browser's page, so a load mounts its
    graphs and no other page's."""
    return layout.page_content(pathname, parse_query(search))


def sync_state(
    trigger: Any,
    pathname: str | None,
    search: str | None,
    tab: str | None,
    keys: Sequence[str],
    values: Sequence[Any],
    uploads: Mapping | None,
) -> tuple:
    """Keep the URL and the controls in step, both ways.

    URL changed (page load, back/forward, an upload): controls take the URL's values.
    Tab changed: the pathname follows. A control changed: the URL's query follows.
    Returns (control values, search, pathname, tab, model options, device options).
    """
    keep = [no_update] * len(keys)
    if trigger == ids.TABS:
        path = f"/{tab}"
        return keep, no_update, path if page_from_path(pathname) != tab else no_update, no_update, no_update, no_update
    if isinstance(trigger, Mapping) and trigger.get("type") == ids.STATE:
        state = parse_query(search)
        if not any_changed(values, [component_value(control(k), state[k]) for k in keys]):
            # a page's controls mounted, holding the URL's values: the search, set again as it
            # is, runs the page's callbacks (Dash drops their first call when this one could
            # change the search and does not)
            return keep, search, no_update, no_update, no_update, no_update
        state.update({k: coerce(control(k), v) for k, v in zip(keys, values)})
        query = to_query(state)
        return keep, query if query != search else no_update, no_update, no_update, no_update, no_update
    state = parse_query(search)
    query = to_query(state)
    # a URL with values not understood stays as it is, so its message (url_message) stays
    keep_url = query == search or bool(query_problems(search))
    page = page_from_path(pathname)
    return (
        changed([component_value(control(k), state[k]) for k in keys], values),
        no_update if keep_url else query,
        no_update,
        page if page in PAGES and page != tab else no_update,
        *upload_options(uploads),
    )


def changed(new: Sequence[Any], old: Sequence[Any]) -> list:
    """``new`` with ``no_update`` where it equals ``old``: the browser re-renders only the
    controls whose value changes (a page load's controls mostly hold their value already)."""
    return [no_update if n == o else n for n, o in zip(new, old)]


def any_changed(new: Sequence[Any], old: Sequence[Any]) -> bool:
    return any(n is not no_update for n in changed(new, old))


def upload_options(uploads: Mapping | None) -> tuple:
    """The model and device menus' options, ``no_update`` without uploads (the layout's
    options are the catalog's already)."""
    if not any((uploads or {}).values()):
        return no_update, no_update
    return data.model_options(uploads), data.device_options(uploads)


def sidebar_style(pathname: str | None) -> dict[str, str]:
    """The workload sidebar does nothing on the Validation page: hidden there."""
    return {"display": "none"} if page_from_path(pathname) in ("validation", NOT_FOUND) else {}


def url_message(search: str | None, uploads: Mapping | None) -> str:
    """One line naming each URL value that was not understood and what is shown instead,
    and uploads the URL names that this browser session no longer holds."""
    problems = query_problems(search)
    state = parse_query(search)
    for key, kind in (("model", "models"), ("device", "devices")):
        name = state[key]
        if name.startswith(UPLOAD_PREFIX) and name[len(UPLOAD_PREFIX) :] not in ((uploads or {}).get(kind) or {}):
            problems.append(f"{key}={name!r} (an upload this browser session no longer holds: upload the file again)")
    return (f"{ERROR_PREFIX}not understood in the URL: " + "; ".join(problems)) if problems else ""


def update_analyze(pathname: str | None, search: str | None, uploads: Mapping | None) -> tuple:
    """(error, title, card texts x5, roofline, time breakdown, memory, table rows).

    An error (unknown name, a setting the device cannot run) shows its one line and leaves
    everything else as it was."""
    if page_from_path(pathname) != "analyze":
        raise PreventUpdate
    state = parse_query(search)
    try:
        d = data.deployment_for(state, uploads)
        a, roofs = data.analysis_for(state, d), d.ceilings
        cards = figures.format_cards(a)
        return (
            "",
            figures.analysis_title(a),
            *cards.values(),
            figures.roofline_figure(a, roofs),
            figures.time_breakdown_figure(a),
            figures.memory_figure(a),
            figures.op_rows(a),
        )
    except RidgelineError as err:
        return (ERROR_PREFIX + data.hide_paths(str(err)), *[no_update] * 10)


def node_details(node: Mapping[str, Any]) -> list:
    from dash import html

    from ridgeline.engine.units import format_si, format_time

    rows = [
        ("op", f"{node['id']} ({node['kind']}, {node['stage']})"),
        ("operations", format_si(node["flops"])),
        ("bytes", format_si(node["bytes"], "B")),
        ("intensity", f"{node['intensity']:.3g} ops/byte"),
        ("attainable", format_si(node["perf"], "op/s")),
        ("time", f"{format_time(node['time_s'])} x {node['count']} = {format_time(node['time_s'] * node['count'])}"),
        ("bound", node["bound"]),
        ("dtype", node["dtype"]),
    ]
    return [html.Table([html.Tr([html.Th(k), html.Td(v)]) for k, v in rows])]


def update_layer(pathname: str | None, search: str | None, node: Mapping | None, uploads: Mapping | None) -> tuple:
    """(error, cytoscape elements, details, roofline with the clicked op ringed)."""
    if page_from_path(pathname) != "layer":
        raise PreventUpdate
    state = parse_query(search)
    stage = state["stage"]
    try:
        d = data.deployment_for(state, uploads)
        a, roofs = data.analysis_for(state, d), d.ceilings
        elements = figures.layer_elements(a, stage)
    except RidgelineError as err:
        return ERROR_PREFIX + data.hide_paths(str(err)), no_update, no_update, no_update
    names = {e["data"]["id"] for e in elements}
    picked = node if node and node.get("stage") == stage and node.get("id") in names else None
    if picked:  # the clicked node's numbers come fresh from this analysis
        picked = next(e["data"] for e in elements if e["data"]["id"] == picked["id"])
    details = node_details(picked) if picked else "Click an op in the graph."
    roof = figures.roofline_figure(
        a, roofs, highlight=(stage, picked["id"]) if picked else None, height=620, legend_below=True
    )
    return "", elements, details, roof


def update_sweep(pathname: str | None, search: str | None, uploads: Mapping | None) -> tuple:
    if page_from_path(pathname) != "sweep":
        raise PreventUpdate
    try:
        return "", figures.sweep_figure(data.sweep_frame(parse_query(search), uploads))
    except RidgelineError as err:
        return ERROR_PREFIX + data.hide_paths(str(err)), no_update


def compare_rows(frame) -> list[dict[str, Any]]:
    from ridgeline.engine.units import format_bytes, format_time

    rows = []
    for r in frame.itertuples():
        if r.error:
            rows.append(
                {
                    "device": r.device,
                    "roofline": "-",
                    "TTFT": "-",
                    "TPOT": "-",
                    "tokens/s": "-",
                    "peak memory": "-",
                    "fits": r.error,
                }
            )
            continue
        rows.append(
            {
                "device": r.device,
                "roofline": r.mode,
                "TTFT": format_time(r.ttft_s),
                "TPOT": format_time(r.tpot_s),
                "tokens/s": f"{r.tokens_per_s:.4g}",
                "peak memory": format_bytes(r.peak_bytes),
                "fits": f"{'yes' if r.fits else 'no'} (of {format_bytes(r.capacity_bytes)})",
            }
        )
    return rows


def update_compare(pathname: str | None, search: str | None, uploads: Mapping | None) -> tuple:
    if page_from_path(pathname) != "compare":
        raise PreventUpdate
    try:
        frame = data.compare_frame(parse_query(search), uploads)
    except RidgelineError as err:
        return ERROR_PREFIX + data.hide_paths(str(err)), no_update, no_update
    failed = frame[frame["error"] != ""]
    message = "; ".join(f"{r.device}: {r.error}" for r in failed.itertuples())
    return (ERROR_PREFIX + message if message else ""), figures.compare_figure(frame), compare_rows(frame)


def profile_figure(key: str | None = None):
    """A measured profile's roofline (``key``'s, else the first) over the datasheet of the
    device it was measured on (the one it records), if there is a profile; drawn once per
    version of the profile's file (``measured_figure``)."""
    profiles = data.list_profiles()
    if not profiles:
        return None
    return measured_figure(data.file_stamps([profile_path(key if key in profiles else profiles[0])]))


@lru_cache(maxsize=8)
def measured_figure(stamps: tuple[tuple[str, int, int], ...]):
    """``profile_figure``'s work for the profile file ``stamps`` names (``data.file_stamps``):
    the YAML is read again only when the file changes. Shared: callers must not change it."""
    device, raw, measured = recorded_ceilings(Path(stamps[0][0]))
    # only the peaks the profile measured (the engine fills the others from the datasheet)
    peaks = {
        k: v for k, v in measured.matrix_peak.items() if k in (raw.get("matrix_peak_tops") or {})
    } or measured.matrix_peak
    return figures.ceilings_figure(spec_ceilings(device), replace(measured, matrix_peak=peaks))


NO_VALIDATION = (
    "No validation runs yet in {folders}. Run the measurement layer's "
    "validation (e.g. 'ridgeline validate') to fill this page."
)


def update_validation(pathname: str | None, search: str | None = None) -> tuple:
    """(message, scatter, errors, roofs, and the three boxes' styles) for the results of the
    device the URL's ``runs`` names, or of all devices."""
    if page_from_path(pathname) != "validation":
        raise PreventUpdate
    everything, problems = data.load_validation()
    runs = parse_query(search)["runs"]
    frame = everything if runs == "all" else everything[everything["device"] == runs]
    hidden, shown = {"display": "none"}, {"display": "block"}
    try:
        roofs = profile_figure(None if runs == "all" else runs)
    except RidgelineError as err:
        roofs, problems = None, [*problems, data.hide_paths(str(err))]
    note = (" Unreadable: " + "; ".join(problems)) if problems else ""
    if frame.empty:
        empty = (
            NO_VALIDATION.format(folders=data.shown_folders())
            if everything.empty
            else (
                f"No results measured on '{runs}'; choose one of: "
                + ", ".join(sorted(everything["device"].unique()))
                + "."
            )
        )
        return (empty + note, no_update, no_update, roofs or no_update, hidden, hidden, shown if roofs else hidden)
    where = "" if runs == "all" else f" measured on {runs}"
    message = (
        f"{len(frame)} measured cases from {frame['file'].nunique()} file(s){where}, "
        f"read from {data.shown_folders()}.{timing_note(frame)}{note}"
    )
    return (
        message,
        *validation_figures(runs, data.validation_stamps()),
        roofs or no_update,
        shown,
        shown,
        shown if roofs else hidden,
    )


@lru_cache(maxsize=16)
def validation_figures(runs: str, stamps: tuple[tuple[str, int, int], ...]) -> tuple:
    """(scatter, errors) of the results measured on ``runs`` (or all) in the files ``stamps``
    names (``data.validation_stamps``): drawn once per version of the files. Shared: callers
    must not change them."""
    everything = data.read_validation(stamps)[0].copy()
    frame = everything if runs == "all" else everything[everything["device"] == runs]
    return figures.validation_scatter(frame), figures.validation_error_figure(frame)


def waterfall_choices(pathname: str | None, search: str | None, current: str | None = None) -> tuple:
    """(options, value, box style) of the waterfall menu: every e2e and serving check
    measured on the device the URL's ``runs`` names (or all), keeping ``current`` when listed."""
    if page_from_path(pathname) != "validation":
        raise PreventUpdate
    runs = parse_query(search)["runs"]
    shown = [e for e in data.load_waterfalls() if runs == "all" or e["device"] == runs]
    options = [{"label": data.waterfall_key(e), "value": data.waterfall_key(e)} for e in shown]
    values = [o["value"] for o in options]
    value = current if current in values else (values[0] if values else None)
    return options, value, {"display": "block" if options else "none"}


def update_waterfall(key: str | None):
    """The chosen run's waterfall (``figures.waterfall_figure``)."""
    entry = next((e for e in data.load_waterfalls() if data.waterfall_key(e) == key), None)
    if entry is None:
        raise PreventUpdate
    return figures.waterfall_figure(entry)


def timing_note(frame) -> str:
    """How each shown device's measurements were timed, from its kernel rows' own methods
    (eager events hold the host's dispatch, so they are not device time: the H100's of
    2026-11-23), else from its profile."""
    shown = []
    for key in sorted(frame["device"].unique()):
        rows = frame.loc[frame["device"] == key]
        labels = (data.method_labels(rows["method"]) if "method" in rows else []) or [data.timing_label(key)]
        shown += [f"{key}: {' and '.join(label for label in labels if label)}"] if any(labels) else []
    return f" Timed by: {'; '.join(shown)}." if shown else ""


def handle_upload(
    trigger: str,
    model_contents: str | None,
    model_name: str | None,
    device_contents: str | None,
    device_name: str | None,
    search: str | None,
    uploads: Mapping | None,
) -> tuple:
    """(uploads store, URL search, error line). A bad file changes nothing but the error."""
    kind = "model" if trigger == ids.MODEL_UPLOAD else "device"
    contents, filename = (model_contents, model_name) if kind == "model" else (device_contents, device_name)
    if not contents:
        raise PreventUpdate
    parse = data.parse_model_upload if kind == "model" else data.parse_device_upload
    try:
        name, raw = parse(contents, filename or f"uploaded {kind}")
    except RidgelineError as err:
        return no_update, no_update, ERROR_PREFIX + data.hide_paths(str(err))
    store = copy.deepcopy(dict(uploads or {}))
    store.setdefault(f"{kind}s", {})[name] = raw
    state = parse_query(search)
    state[kind] = data.UPLOAD_PREFIX + name
    return store, to_query(state), ""


def register(app) -> None:
    state_values = Input({"type": ids.STATE, "key": ALL}, "value")
    store = State(ids.UPLOADS, "data")

    @app.callback(
        Output({"type": ids.STATE, "key": ALL}, "value"),
        Output(ids.URL, "search"),
        Output(ids.URL, "pathname"),
        Output(ids.TABS, "value"),
        Output(ids.state("model"), "options"),
        Output(ids.state("device"), "options"),
        Input(ids.URL, "pathname"),
        Input(ids.URL, "search"),
        Input(ids.TABS, "value"),
        state_values,
        store,
    )
    def _sync(pathname, search, tab, values, uploads):
        keys = [item["id"]["key"] for item in ctx.inputs_list[3]]
        trigger = ctx.triggered_id if ctx.triggered else None
        return sync_state(trigger, pathname, search, tab, keys, values, uploads)

    app.callback(Output(ids.PAGE, "children"), Input(ids.URL, "pathname"), State(ids.URL, "search"))(show_page)
    app.callback(Output(ids.SIDEBAR, "style"), Input(ids.URL, "pathname"))(sidebar_style)
    app.callback(Output(ids.URL_ERROR, "children"), Input(ids.URL, "search"), store)(url_message)

    url = [Input(ids.URL, "pathname"), Input(ids.URL, "search")]
    app.callback(
        Output(ids.ANALYZE_ERROR, "children"),
        Output(ids.ANALYZE_TITLE, "children"),
        *[Output(ids.card(k), "children") for k in ("ttft", "tpot", "throughput", "peak", "fits")],
        Output(ids.ROOFLINE, "figure"),
        Output(ids.TIME_BREAKDOWN, "figure"),
        Output(ids.MEMORY, "figure"),
        Output(ids.OP_TABLE, "data"),
        *url,
        store,
    )(update_analyze)
    app.callback(
        Output(ids.LAYER_ERROR, "children"),
        Output(ids.LAYER_GRAPH, "elements"),
        Output(ids.LAYER_DETAILS, "children"),
        Output(ids.LAYER_ROOFLINE, "figure"),
        *url,
        Input(ids.LAYER_GRAPH, "tapNodeData"),
        store,
    )(update_layer)
    app.callback(Output(ids.SWEEP_ERROR, "children"), Output(ids.SWEEP_GRAPH, "figure"), *url, store)(update_sweep)
    app.callback(
        Output(ids.COMPARE_ERROR, "children"),
        Output(ids.COMPARE_GRAPH, "figure"),
        Output(ids.COMPARE_TABLE, "data"),
        *url,
        store,
    )(update_compare)
    app.callback(
        Output(ids.VALIDATION_MESSAGE, "children"),
        Output(ids.VALIDATION_SCATTER, "figure"),
        Output(ids.VALIDATION_ERRORS, "figure"),
        Output(ids.VALIDATION_ROOFS, "figure"),
        Output(f"{ids.VALIDATION_SCATTER}-box", "style"),
        Output(f"{ids.VALIDATION_ERRORS}-box", "style"),
        Output(f"{ids.VALIDATION_ROOFS}-box", "style"),
        *url,
    )(update_validation)
    app.callback(
        Output(ids.VALIDATION_WATERFALL_RUN, "options"),
        Output(ids.VALIDATION_WATERFALL_RUN, "value"),
        Output(f"{ids.VALIDATION_WATERFALL}-box", "style"),
        *url,
        State(ids.VALIDATION_WATERFALL_RUN, "value"),
    )(waterfall_choices)
    app.callback(Output(ids.VALIDATION_WATERFALL, "figure"), Input(ids.VALIDATION_WATERFALL_RUN, "value"))(
        update_waterfall
    )

    @app.callback(
        Output(ids.UPLOADS, "data"),
        Output(ids.URL, "search", allow_duplicate=True),
        Output(ids.UPLOAD_ERROR, "children"),
        Input(ids.MODEL_UPLOAD, "contents"),
        State(ids.MODEL_UPLOAD, "filename"),
        Input(ids.DEVICE_UPLOAD, "contents"),
        State(ids.DEVICE_UPLOAD, "filename"),
        State(ids.URL, "search"),
        store,
        prevent_initial_call=True,
    )
    def _upload(model_contents, model_name, device_contents, device_name, search, uploads):
        return handle_upload(
            ctx.triggered_id, model_contents, model_name, device_contents, device_name, search, uploads
        )
