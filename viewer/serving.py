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

import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash.exceptions import PreventUpdate
from plotly.subplots import make_subplots

from ridgeline.api import serving_scheduler, simulate_serving
from ridgeline.errors import RidgelineError
from ridgeline.serving.intervals import LEVELS
from ridgeline.serving.simulator import PERCENTILES
from viewer import ids
from viewer.data import hide_paths, view_memo
from viewer.figures import BAND, SERIES_COLORS, add_caption, band_trace, base_layout, label_log_axis, number
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
    from viewer.data import deployment_for

    rates = rates_of(state["serving_rates"])
    check_work(state, len(rates))
    d = deployment_for(state, uploads)
    check_work(state, len(rates) * (1 + len(LEVELS) * (d.intervals is not None)))
    # the engine's scheduler (its policy, chunking, KV rule), with the page's batch and budget
    sched = serving_scheduler(d, {"max_batch": state["serving_max_batch"], "token_budget": state["serving_budget"]})
    load = {
        "requests": state["serving_requests"],
        "prompt": state["seq_len"],
        "output_tokens": max(state["generate"], 1),
    }
    later = not bands and d.intervals is not None
    runs = [simulate_serving(d, sched, rate=rate, intervals=not later, **load) for rate in rates]
    return [(rate, run["result"], PENDING if later else run["intervals"]) for rate, run in zip(rates, runs)]


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


def latency_figure(runs: list, height: int = 480) -> go.Figure:
    """p50/p90/p99 of TTFT, TPOT and end-to-end latency against the offered rate, each
    with its ``BAND`` % interval shaded where the runs have intervals."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT", "TPOT", "latency"))
    rates = [rate for rate, *_ in runs]
    bands = [b for *_, b in runs]
    for col, key in enumerate(("ttft_s", "tpot_s", "latency_s"), start=1):
        for i, q in enumerate(PERCENTILES):
            if all("none" not in b for b in bands):
                lo, hi = zip(*(b[key][f"p{q}"][BAND] for b in bands))
                band = band_trace(rates, lo, hi, SERIES_COLORS[i], f"band:{key}:p{q}", legendgroup=f"p{q}")
                fig.add_trace(band, row=1, col=col)
            ys = [r.summary[key][f"p{q}"] for _, r, _ in runs]
            fig.add_trace(
                go.Scatter(
                    x=rates,
                    y=ys,
                    mode="lines+markers",
                    name=f"p{q}",
                    legendgroup=f"p{q}",
                    showlegend=col == 1,
                    line={"color": SERIES_COLORS[i]},
                    hovertemplate=f"p{q} %{{y:,.4r}} s at %{{x}}/s<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="requests/s", type="log", row=1, col=col)
        fig.update_yaxes(title_text="seconds", type="log", row=1, col=col)
        shown = [y for t in fig.data if t.yaxis == ("y" if col == 1 else f"y{col}") for y in t.y]
        label_log_axis(fig, "y", shown, row=1, col=col)
    base_layout(fig, "Latency percentiles against request rate", height)
    return add_caption(fig, bands[0] if bands else None)


def kv_figure(runs: list, height: int = 360) -> go.Figure:
    """KV-cache occupancy over time, one line per rate."""
    fig = go.Figure()
    for i, (rate, r, _) in enumerate(runs):
        start_s, percent = binned_peaks(r.timeline["start_s"], 100 * r.timeline["kv_fraction"])
        fig.add_trace(
            go.Scatter(
                x=start_s,
                y=percent,
                mode="lines",
                name=f"{number(rate)}/s",
                line={"color": SERIES_COLORS[i % len(SERIES_COLORS)], "shape": "hv"},
                hovertemplate=f"{number(rate)}/s: %{{y:.1f}} % at %{{x:,.3r}} s<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="seconds")
    fig.update_yaxes(title_text="KV blocks used (%)", rangemode="tozero")
    return base_layout(fig, "KV-cache occupancy over time", height)


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
