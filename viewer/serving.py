"""The Serving page: latency percentiles against request rate, and KV occupancy over time.

The sidebar's model, device, roofline and settings, the prompt and generated tokens, and
the page's own controls (``serving_*`` in ``viewer.state``) come from the URL state;
each rate is one ``ridgeline.serving.simulator`` run of Poisson arrivals (seed 0), four more
where the profile has residuals (the percentiles' intervals, ``ridgeline.serving.intervals``,
shaded). Three layers as
on the other pages: ``serving_runs`` computes, the ``*_figure`` functions draw, and
``update_serving`` is the thin callback.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash.exceptions import PreventUpdate
from plotly.subplots import make_subplots

from ridgeline.api import deployment_runs, serving_scheduler, simulate_serving
from ridgeline.errors import RidgelineError
from ridgeline.serving.intervals import LEVELS
from ridgeline.serving.simulator import PERCENTILES
from viewer import ids
from viewer.data import hide_paths, view_memo
from viewer.figures import (
    BAND,
    SERIES_COLORS,
    band_props,
    base_layout_props,
    caption_props,
    figure_of,
    log_tick_props,
    number,
)
from viewer.state import controls, defaults, page_from_path, parse_query

MOST_RATES = 12
# the most work one page view may ask of the server: request-steps over every rate, each
# request's steps as if it ran alone (its prompt in token-budget chunks, then one step per
# output token). The default view asks 193,500; ``ridgeline simulate`` has no such bound.
MOST_REQUEST_STEPS = 2_000_000


def rates_of(text: str) -> list[float]:
    try:
        rates = sorted({float(r) for r in str(text).split(",") if r.strip()})
    except ValueError:
        raise RidgelineError(f"request rates must be numbers separated by commas, got '{text}'") from None
    if not rates or not all(math.isfinite(r) for r in rates) or rates[0] <= 0 or len(rates) > MOST_RATES:
        raise RidgelineError(f"give 1 to {MOST_RATES} positive request rates, got '{text}'")
    return rates


# the intervals of a run whose bands come later (``first_runs``): the caption says so
PENDING = {"none": "bands: being computed (four more runs per rate)", "pending": True}


def simulate_runs(state: Mapping[str, Any], uploads: Mapping[str, Any] | None, bands: bool) -> list:
    """One simulation per rate, with its intervals where ``bands`` (else ``PENDING`` where
    they take more runs): [(rate, SimResult, intervals)]. The work budget counts the bands'
    runs either way."""
    rates = rates_of(state["serving_rates"])
    check_work(state, len(rates))
    arrivals = ("serving_rates", "serving_requests")  # what the server does not depend on
    d, sched, runs = view_server({k: v for k, v in state.items() if k not in arrivals}, uploads)
    check_work(state, len(rates) * (1 + len(LEVELS) * (d.intervals is not None)))
    load = {
        "requests": state["serving_requests"],
        "prompt": state["seq_len"],
        "output_tokens": max(state["generate"], 1),
    }
    later = not bands and d.intervals is not None
    served = [simulate_serving(d, sched, rate=rate, intervals=not later, runs=runs, **load) for rate in rates]
    return [(rate, run["result"], PENDING if later else run["intervals"]) for rate, run in zip(rates, served)]


@view_memo()
def view_server(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None) -> tuple:
    """The view's deployment, the scheduler its engine runs (its policy, chunking, KV rule)
    with the page's batch and budget, and one runner of them: every run of the view (each
    rate's, its bands', a view that only changes them) shares the runner's table of step
    costs, built at its first run."""
    from viewer.data import deployment_for

    d = deployment_for(state, uploads)
    sched = serving_scheduler(d, {"max_batch": state["serving_max_batch"], "token_budget": state["serving_budget"]})
    return d, sched, kept_runs(deployment_runs(d, sched))


def kept_runs(runs: Callable) -> Callable:
    """``runs`` (``runs(arrivals, **keys)``) keeping each plain run's result (no keywords
    but the progress callback) by its arrivals: the bands' callback serves each rate's
    requests again before its four interval runs, and gets the page's first run back (the
    object ``runs_alone`` keeps already). Runs are seeded and pure, so a kept result is the
    one a new run would give. Interval runs are not kept, nor more than ``MOST_RATES`` runs
    (the oldest go first)."""
    kept: dict[tuple, Any] = {}

    def run(arrivals, progress=None, **keys):
        if keys or arrivals.hash_ids is not None:
            return runs(arrivals, progress=progress, **keys)
        key = (arrivals.time_s.tobytes(), arrivals.prompt.tobytes(), arrivals.output.tobytes())
        if key not in kept:
            while len(kept) >= MOST_RATES:
                kept.pop(next(iter(kept)))
            kept[key] = runs(arrivals, progress=progress)
        return kept[key]

    run.serves = runs.serves  # type: ignore[attr-defined]
    return run


@view_memo()
def serving_runs(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None) -> list:
    """One simulation per rate, with its intervals: [(rate, SimResult, intervals)], once
    per view (``view_memo``: the runs are seeded, so a view's are always the same)."""
    return simulate_runs(state, uploads, bands=True)


@view_memo()
def runs_alone(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None) -> list:
    """The view's runs with ``PENDING`` intervals where those take more runs, once per view."""
    return simulate_runs(state, uploads, bands=False)


def first_runs(state: Mapping[str, Any], uploads: Mapping[str, Any] | None = None) -> list:
    """What the page draws first: the view's runs with their intervals where they are kept
    already, else ``runs_alone`` (``update_serving_bands`` draws the bands next). The same
    results either way: the runs are seeded."""
    return serving_runs.peek(state, uploads) or runs_alone(state, uploads)


def request_steps(state: Mapping[str, Any], rates: int) -> int:
    """The page's work: requests x rates x (prompt chunks + output tokens)."""
    chunks = -(-int(state["seq_len"]) // max(int(state["serving_budget"]), 1))
    return rates * int(state["serving_requests"]) * (chunks + max(int(state["generate"]), 1))


def check_work(state: Mapping[str, Any], rates: int) -> None:
    """Refuse a view that asks more than ``MOST_REQUEST_STEPS`` before simulating anything."""
    work = request_steps(state, rates)
    if work > MOST_REQUEST_STEPS:
        raise RidgelineError(
            f"this view asks {work:,} request-steps (requests x rates x (prompt chunks + output tokens)); "
            f"the dashboard serves at most {MOST_REQUEST_STEPS:,}: lower them, or run 'ridgeline simulate'"
        )


LATENCY_KEYS = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "latency"))


@lru_cache(maxsize=1)
def latency_grid() -> str:
    """The layout of the latency figure's three subplots side by side, with their titles
    (make_subplots' axes, domains and title annotations), as JSON: made once, copied per
    figure."""
    titles = tuple(title for _, title in LATENCY_KEYS)
    return json.dumps(make_subplots(rows=1, cols=3, subplot_titles=titles).layout.to_plotly_json())


def latency_traces(runs: list, key: str, where: dict) -> list[dict]:
    """One subplot's traces: each percentile's band (where every run has intervals) and line."""
    rates = [rate for rate, *_ in runs]
    bands = [b for *_, b in runs]
    traces = []
    for i, q in enumerate(PERCENTILES):
        if all("none" not in b for b in bands):
            lo, hi = zip(*(b[key][f"p{q}"][BAND] for b in bands))
            traces.append(band_props(rates, lo, hi, SERIES_COLORS[i], f"band:{key}:p{q}", legendgroup=f"p{q}", **where))
        traces.append(
            {
                "type": "scatter",
                "x": rates,
                "y": [r.summary[key][f"p{q}"] for _, r, _ in runs],
                "mode": "lines+markers",
                "name": f"p{q}",
                "legendgroup": f"p{q}",
                "showlegend": where["xaxis"] == "x",
                "line": {"color": SERIES_COLORS[i]},
                "hovertemplate": f"p{q} %{{y:,.4r}} s at %{{x}}/s<extra></extra>",
                **where,
            }
        )
    return traces


def latency_figure(runs: list, height: int = 480) -> go.Figure:
    """p50/p90/p99 of TTFT, TPOT and end-to-end latency against the offered rate, each
    with its ``BAND`` % interval shaded where the runs have intervals. Built as one spec
    (``figure_of``), as the other pages' charts are."""
    grid = json.loads(latency_grid())
    layout = {**grid, **base_layout_props("Latency percentiles against request rate", height)}
    axes = layout.pop("xaxis"), layout.pop("yaxis")  # every axis gets the base's grid
    traces = []
    for col, (key, _) in enumerate(LATENCY_KEYS, start=1):
        ref = "" if col == 1 else str(col)
        more = latency_traces(runs, key, {"xaxis": f"x{ref}", "yaxis": f"y{ref}"})
        traces += more
        layout[f"xaxis{ref}"] = {**grid[f"xaxis{ref}"], "title": {"text": "requests/s"}, "type": "log", **axes[0]}
        ticks = log_tick_props([y for t in more for y in t["y"]])
        layout[f"yaxis{ref}"] = {**grid[f"yaxis{ref}"], "title": {"text": "seconds"}, "type": "log", **ticks, **axes[1]}
    note, bottom = caption_props(runs[0][2] if runs else None)
    layout["annotations"] = [*grid.get("annotations", ()), note]
    layout["height"] = height + bottom - layout["margin"]["b"]
    layout["margin"] = {**layout["margin"], "b": bottom}
    return figure_of({"data": traces, "layout": layout})


def kv_figure(runs: list, height: int = 360) -> go.Figure:
    """KV-cache occupancy over time, one line per rate."""
    traces = []
    for i, (rate, r, _) in enumerate(runs):
        start_s, percent = binned_peaks(r.timeline["start_s"], 100 * r.timeline["kv_fraction"])
        traces.append(
            {
                "type": "scatter",
                "x": start_s,
                "y": percent,
                "mode": "lines",
                "name": f"{number(rate)}/s",
                "line": {"color": SERIES_COLORS[i % len(SERIES_COLORS)], "shape": "hv"},
                "hovertemplate": f"{number(rate)}/s: %{{y:.1f}} % at %{{x:,.3r}} s<extra></extra>",
            }
        )
    layout = base_layout_props("KV-cache occupancy over time", height)
    layout["xaxis"] = {**layout["xaxis"], "title": {"text": "seconds"}}
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": "KV blocks used (%)"}, "rangemode": "tozero"}
    return figure_of({"data": traces, "layout": layout})


KV_POINTS = 400  # per line: a run has a step per few milliseconds (3,000 at 5 requests/s)


def binned_peaks(x: np.ndarray, y: np.ndarray, most: int = KV_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``most`` points of a step line: each of ``most`` runs of consecutive steps
    becomes its first step's x and its highest y (the peak is kept, the browser draws
    fewer points; the JSON shrinks by the same factor)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) <= most:
        return x, y
    starts = np.linspace(0, len(x), most, endpoint=False).astype(int)
    return x[starts], np.maximum.reduceat(y, starts)


def summary_line(runs: list) -> str:
    rate, last, _ = runs[-1]
    s = last.summary
    return (
        f"{last.meta['model']} on {last.meta['hardware']} ({last.meta['mode']}): at {number(rate)} "
        f"requests/s, {number(s['requests_per_s'], 3)} served/s, {number(s['output_tokens_per_s'])} "
        f"output tokens/s, {s['preemptions']} preemptions, KV peak {s['kv_peak_fraction']:.0%}."
    )


def section_defaults(state: Mapping[str, Any], section: str) -> dict[str, Any]:
    """``state`` with the controls of ``section`` (the page's own form) at their defaults."""
    return {**state, **{c.key: c.default for c in controls() if c.section == section}}


@lru_cache(maxsize=1)
def default_runs() -> list:
    """The default view's runs (every key at its default), computed once per process."""
    return serving_runs(defaults())


def runs_or_defaults(state: Mapping[str, Any], uploads: Mapping | None, runs_of: Callable = serving_runs) -> tuple:
    """(runs, error line): ``runs_of`` the view. Bad input draws what the docs promise
    instead, with its error: the form's defaults on the sidebar's deployment, else the
    default view."""
    try:
        return runs_of(state, uploads), ""
    except RidgelineError as err:
        error = f"error: {hide_paths(str(err))}"
    try:
        return runs_of(section_defaults(state, "serving"), uploads), f"{error}; the form's defaults are drawn"
    except RidgelineError:
        return default_runs(), f"{error}; the default view is drawn"


def update_serving(pathname: str | None, search: str | None, uploads: Mapping | None) -> tuple:
    """(error, summary line, latency figure, KV figure) of the view's ``first_runs``: its
    numbers show before its bands' runs (``update_serving_bands``)."""
    if page_from_path(pathname) != "serving":
        raise PreventUpdate
    runs, error = runs_or_defaults(parse_query(search), uploads, first_runs)
    return error, summary_line(runs), latency_figure(runs), kv_figure(runs)


def update_serving_bands(_shown: Any, pathname: str | None, search: str | None, uploads: Mapping | None):
    """The latency figure with its bands, once the page shows the view's first runs (its
    summary line changed); nothing where those held their intervals already."""
    if page_from_path(pathname) != "serving":
        raise PreventUpdate
    state = parse_query(search)
    shown, _ = runs_or_defaults(state, uploads, first_runs)
    if not any(bands is PENDING for *_, bands in shown):
        raise PreventUpdate
    return latency_figure(runs_or_defaults(state, uploads)[0])


def register(app) -> None:
    from dash import Input, Output, State

    app.callback(
        Output(ids.SERVING_ERROR, "children"),
        Output(ids.SERVING_SUMMARY, "children"),
        Output(ids.SERVING_LATENCY, "figure"),
        Output(ids.SERVING_KV, "figure"),
        Input(ids.URL, "pathname"),
        Input(ids.URL, "search"),
        State(ids.UPLOADS, "data"),
    )(update_serving)
    app.callback(
        Output(ids.SERVING_LATENCY, "figure", allow_duplicate=True),
        Input(ids.SERVING_SUMMARY, "children"),
        State(ids.URL, "pathname"),
        State(ids.URL, "search"),
        State(ids.UPLOADS, "data"),
        prevent_initial_call=True,
    )(update_serving_bands)
