"""The Serving page's Plan section: ``ridgeline.api.plan`` over a small space, its Pareto set
(cost per million output tokens against goodput) and the chosen deployment.

The sidebar's model, prompt and generated tokens, the Serving form's max batch and token
budget, and the section's own controls (``plan_*`` in ``viewer.state``) come from the URL
state. The search runs here, in the server's process (one worker), within the work budget
``viewer.serving.MOST_REQUEST_STEPS``, counted over every deployment enumerated before any
is simulated; ``ridgeline plan`` searches the full space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from dash import no_update
from dash.exceptions import PreventUpdate

from ridgeline.api import plan
from ridgeline.errors import RidgelineError
from ridgeline.serving.bounds import KV_DTYPES, W_DTYPES, Load, Slo, Space, computes
from viewer import ids
from viewer.data import hide_paths, view_memo
from viewer.figures import SERIES_COLORS, base_layout_props, figure_of
from viewer.serving import MOST_REQUEST_STEPS, section_defaults
from viewer.state import coerce, control, page_from_path, parse_query, plain


def plan_types(devices: Sequence[str]) -> tuple[list[str], list[str]]:
    """The weight and KV types the form offers for ``devices``: ``ridgeline plan``'s, fp8 and
    fp4 only where one of them has that matrix rate (``computes``: the rule the search applies
    to each device, so a type chosen is searched on the devices that have it)."""
    from viewer.data import catalog_device

    specs = [catalog_device(name) for name in devices]
    return tuple([t for t in types if any(computes(t, d) for d in specs)] for types in (W_DTYPES, KV_DTYPES))


def plan_type_options(devices: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The callback: the devices menu's value (empty: the default's) -> the types' options."""
    return plan_types(coerce(control("plan_devices"), devices))


def plan_space(state: Mapping[str, Any]) -> dict[str, Any]:
    """The dimensions searched (``Space``'s): the chosen counts, weight and KV types, the
    Serving form's max batch and token budget."""
    return {
        "counts": tuple(sorted(int(c) for c in state["plan_counts"])),
        "w_dtypes": tuple(state["plan_w_dtypes"]),
        "kv_dtypes": tuple(state["plan_kv_dtypes"]),
        "max_batches": (int(state["serving_max_batch"]),),
        "token_budgets": (int(state["serving_budget"]),),
    }


def plan_load(state: Mapping[str, Any]) -> Load:
    return Load(
        rate=float(state["plan_rate"]),
        prompt=int(state["seq_len"]),
        output=max(int(state["generate"]), 1),
        requests=int(state["plan_requests"]),
    )


def plan_work(state: Mapping[str, Any], deployments: int) -> int:
    """Request-steps if every deployment enumerated were simulated: deployments x requests x
    (prompt chunks + output tokens), as the Serving page counts its own."""
    chunks = -(-int(state["seq_len"]) // int(state["serving_budget"]))
    return deployments * int(state["plan_requests"]) * (chunks + max(int(state["generate"]), 1))


def check_plan_work(state: Mapping[str, Any], deployments: int) -> None:
    work = plan_work(state, deployments)
    if work > MOST_REQUEST_STEPS:
        raise RidgelineError(
            f"this plan could simulate {deployments} deployments x {int(state['plan_requests']):,} requests = "
            f"{work:,} request-steps; the dashboard serves at most {MOST_REQUEST_STEPS:,}: choose fewer devices, "
            "counts, weight types or requests, or run 'ridgeline plan'"
        )


@view_memo()
def run_plan(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None):
    """``ridgeline.api.plan`` for the state (a ``PlanResult``), refused before any work
    past the budget; once per view (``view_memo``)."""
    from viewer.data import catalog_device, resolve_model

    dimensions = plan_space(state)
    devices = list(state["plan_devices"])
    space = Space(tuple(catalog_device(name) for name in devices), **dimensions)
    check_plan_work(state, space.size)
    slo = Slo(ttft_s=float(state["plan_ttft"]), tpot_s=float(state["plan_tpot"]))
    model = resolve_model(state["model"], uploads)
    return plan(model, devices, plan_load(state), slo, executor="local", workers=1, **dimensions)


def summary_line(result) -> str:
    """What was enumerated, pruned and simulated, and the chosen deployment."""
    counts = result.counts
    pruned = sum(counts["pruned"].values())
    line = (
        f"{result.meta['model']}: {counts['enumerated']} deployments enumerated, {pruned} pruned "
        f"(by the bounds, or dominated), {counts['simulated']} simulated on datasheet rooflines at "
        f"{plain(result.meta['load']['rate'])} requests/s."
    )
    if result.chosen is None:
        return line + " None can meet the SLO at this rate."
    return f"{line} Chosen: {label(result.frame.loc[result.chosen])}."


def update_plan(pathname: str | None, search: str | None, uploads: Mapping | None) -> tuple:
    """(error, summary line, Pareto figure)."""
    if page_from_path(pathname) != "serving":
        raise PreventUpdate
    state = parse_query(search)
    try:
        result = run_plan(state, uploads)
    except RidgelineError as err:  # the section's defaults, as the Serving form does
        try:
            result = run_plan(section_defaults(state, "plan"), uploads)
        except RidgelineError:
            return f"error: {hide_paths(str(err))}", no_update, no_update
        return (
            f"error: {hide_paths(str(err))}; the section's defaults are drawn",
            summary_line(result),
            plan_figure(result),
        )
    return "", summary_line(result), plan_figure(result)


def register(app) -> None:
    from dash import Input, Output, State

    app.callback(
        Output(ids.PLAN_ERROR, "children"),
        Output(ids.PLAN_SUMMARY, "children"),
        Output(ids.PLAN_GRAPH, "figure"),
        Input(ids.URL, "pathname"),
        Input(ids.URL, "search"),
        State(ids.UPLOADS, "data"),
    )(update_plan)
    app.callback(  # the page is built with its devices' types (layout.serving_page): changes only
        Output(ids.state("plan_w_dtypes"), "options"),
        Output(ids.state("plan_kv_dtypes"), "options"),
        Input(ids.state("plan_devices"), "value"),
        prevent_initial_call=True,
    )(plan_type_options)


def plan_figure(result, height: int = 420) -> go.Figure:
    """Every simulated deployment (cost per million output tokens, goodput), the Pareto front
    as a line through its points, and the chosen deployment as a star; built as one spec
    (``figure_of``), as the other charts are."""
    frame = result.frame
    done = frame[frame["reason"] == ""]
    traces = []
    for i, (device, group) in enumerate(done.groupby("device", sort=True)):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        marker = {"color": color, "size": 9, "opacity": 0.7}
        traces.append(points(group, name=device, meta=f"simulated:{device}", mode="markers", marker=marker))
    front = frame.loc[result.pareto]
    traces.append(
        points(
            front,
            name="Pareto set",
            meta="pareto",
            mode="lines+markers",
            line={"color": "#444", "shape": "hv", "dash": "dot"},
            marker={"symbol": "circle-open", "size": 14, "color": "#444", "line": {"width": 2}},
        )
    )
    if result.chosen is not None:
        star = {"symbol": "star", "size": 20, "color": "#ffbf00", "line": {"width": 1, "color": "#444"}}
        traces.append(points(frame.loc[[result.chosen]], name="chosen", meta="chosen", mode="markers", marker=star))
    # the axes span the points (not 0 to the largest): a few deployments fill the chart
    layout = base_layout_props("Plan: cost against goodput (the Pareto set: nothing cheaper serves more)", height)
    for axis, column, title in (
        ("xaxis", "usd_per_million_tokens", "USD per million output tokens"),
        ("yaxis", "goodput_rps", "goodput (requests/s meeting the SLO)"),
    ):
        span = padded_range(done[column])
        layout[axis] = {**layout[axis], "title": {"text": title}, **({"range": span} if span else {})}
    return figure_of({"data": traces, "layout": layout})


def points(rows: pd.DataFrame, **trace) -> dict:
    """A scatter trace of deployments ``rows`` (cost, goodput), each hover naming it (``label``)."""
    return {
        "type": "scatter",
        "x": rows["usd_per_million_tokens"].to_numpy(),
        "y": rows["goodput_rps"].to_numpy(),
        **trace,
        "hovertext": [label(r) for r in rows.to_dict("records")],
        "hoverinfo": "text",
    }


def padded_range(values: pd.Series, share: float = 0.12) -> list[float] | None:
    """[least, most] of ``values`` widened by ``share`` of their span on each side (of the
    value itself where all are equal), never below 0; None (plotly's own) without values."""
    shown = pd.to_numeric(values, errors="coerce").dropna()
    if shown.empty:
        return None
    lo, hi = float(shown.min()), float(shown.max())
    pad = share * (hi - lo) if hi > lo else share * max(abs(hi), 1e-9)
    return [max(lo - pad, 0.0) if lo >= 0 else lo - pad, hi + pad]


def label(row: Mapping[str, Any]) -> str:
    """One deployment in words, as ``ridgeline plan`` names the chosen one."""
    return (
        f"{row['gpus']} x {row['device']} (tp {row['tp']}, pp {row['pp']}), weights {row['w_dtype']}, "
        f"KV {row['kv_dtype']}, max batch {row['max_batch']}, chunk {row['token_budget']}: "
        f"${row['usd_per_million_tokens']:.3f} per million output tokens, goodput {row['goodput_rps']:.2f} req/s"
    )
