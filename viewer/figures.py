"""Pure figure builders: an ``Analysis`` (or a DataFrame from ``viewer.data``) -> a plotly
figure or dash-cytoscape elements. No Dash, no files: tested without a browser."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ridgeline.engine.analyze import Analysis
from ridgeline.engine.layers import head_ops, stage_ops
from ridgeline.engine.roofline import Ceilings, spec_ceilings
from ridgeline.engine.units import GIB, TERA, format_bytes, format_si, format_time
from ridgeline.report import plain_number, verdict

STAGES = ("prefill", "decode")
STAGE_SYMBOLS = {"prefill": "circle", "decode": "diamond"}
KIND_COLORS = {
    "linear": "#1f77b4",
    "attention": "#d62728",
    "softmax": "#ff7f0e",
    "norm": "#2ca02c",
    "elementwise": "#9467bd",
    "embed": "#8c564b",
    "comm": "#e377c2",
    "moe": "#17becf",
    "other": "#7f7f7f",
}
BOUND_COLORS = {"compute": "#d62728", "memory": "#1f77b4", "network": "#e377c2"}
BOUND_COLOR_NAMES = {"compute": "red", "memory": "blue", "network": "pink"}  # as the caption says them


def bound_caption() -> str:
    """The layer graph's colours in words, every bound's ('network': an all-reduce)."""
    named = [f"{BOUND_COLOR_NAMES[b]} {b}" + (": all-reduce" if b == "network" else "") for b in BOUND_COLORS]
    return f"colour = bound ({', '.join(named)})"


SERIES_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
MEMORY_PARTS = (
    ("weights_bytes", "weights", "#1f77b4"),
    ("kv_cache_bytes", "KV cache", "#ff7f0e"),
    ("activations_peak_bytes", "activations", "#2ca02c"),
)


GRID = "#e5e8ec"
SUBPLOT_TITLE_PX = 12  # subplot titles: four side by side fit a 800 px window
LEGEND_ROW_PX = 20  # one legend entry's height, for figures that grow to show every entry


def number(value: float, digits: int = 4) -> str:
    """``digits`` significant digits, never an exponent: 50200000 -> '50,200,000',
    0.000123 -> '0.000123'."""
    if value is None or not np.isfinite(value):
        return "-"
    if value == 0 or abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    decimals = min(digits - 1 - int(np.floor(np.log10(abs(value)))), 15)
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def time_text(seconds: float) -> str:
    """``format_time`` below 1000 s; above, plain seconds (no '5.02e+07 s')."""
    return format_time(seconds) if seconds is None or abs(seconds) < 1000 else f"{number(seconds)} s"


def bytes_text(size: float) -> str:
    """``format_bytes`` below 1000 GiB; above, plain GiB (no '1.91e+06GiB')."""
    return format_bytes(size) if size is None or abs(size) < 1000 * GIB else f"{number(size / GIB)} GiB"


def small_subplot_titles(fig: go.Figure) -> go.Figure:
    """Subplot titles at ``SUBPLOT_TITLE_PX``: call right after make_subplots, whose only
    annotations they are."""
    return fig.update_annotations(font_size=SUBPLOT_TITLE_PX)


def decades(fig: go.Figure, axis: str = "both") -> go.Figure:
    """Log axes labelled at each decade only, in SI prefixes (10G, 100G, 1T: no '2' or '5'
    between decades to misread, no '10^15' beside '100T')."""
    where = {"x": fig.update_xaxes, "y": fig.update_yaxes}
    for name in ("x", "y") if axis == "both" else (axis,):
        where[name](dtick=1, exponentformat="SI", minor={"ticks": "outside", "ticklen": 3, "showgrid": False})
    return fig


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis showing [lo, hi]: its decades where three or more fall in
    it, else 1, 2 and 5 times a power of ten, else every digit's (never a lone '0.1' label)."""
    powers = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    ticks: list[float] = []
    for digits in ((1,), (1, 2, 5), tuple(range(1, 10))):
        ticks = [float(f"{d}e{k}") for k in powers for d in digits if lo <= float(f"{d}e{k}") <= hi]
        if len(ticks) >= 3:
            return ticks
    return ticks


def kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, KIND_COLORS["other"])


MODEBAR_PX = 30  # the plot toolbar's row at the top right: titles start below it


def base_layout_props(title: str, height: int = 420, top: int = 75) -> dict:
    """Transparent backgrounds (the page's CSS theme shows through), light grid, a title
    below the toolbar's row (``top`` px above the plot leaves room for subplot titles), as
    a layout spec; ``base_layout`` applies it to a figure.

    plotly's default template is kept: setting another one costs ~8 ms per figure."""
    axis = {"gridcolor": GRID, "zeroline": False, "linecolor": GRID}
    return {
        "title": {
            "text": title,
            "x": 0.01,
            "xanchor": "left",
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": MODEBAR_PX + 4},
        },
        "height": height,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "margin": {"l": 60, "r": 20, "t": top, "b": 50},
        "legend": {"itemsizing": "constant"},
        "xaxis": dict(axis),
        "yaxis": dict(axis),
    }


def base_layout(fig: go.Figure, title: str, height: int = 420, top: int = 75) -> go.Figure:
    """``base_layout_props`` on ``fig``, its grid on every axis, in one update (three, the
    layout's then each kind of axis', took three times as long)."""
    props = base_layout_props(title, height, top)
    axis = props.pop("xaxis")
    del props["yaxis"]
    axes = [a.plotly_name for a in (*fig.select_xaxes(), *fig.select_yaxes())]
    return fig.update_layout(**props, **dict.fromkeys(axes, axis))


def vline_props(x: float, line: dict, name: str | None = None, row: int = 1) -> dict:
    """A vertical line at ``x`` across subplot ``row``'s height (one column of subplots), as
    a shape spec: what ``add_vline`` draws at a fraction of its cost (~10 ms each)."""
    axis = "" if row == 1 else str(row)
    return {
        "type": "line",
        "x0": x,
        "x1": x,
        "xref": f"x{axis}",
        "y0": 0,
        "y1": 1,
        "yref": f"y{axis} domain",
        "line": line,
        **({"name": name} if name else {}),
    }


def figure_of(spec: dict) -> go.Figure:
    """A figure from a spec built here, without plotly's check of every value on the way in
    (two thirds of the time of building it): the specs are this module's own, and a test
    holds that each sends the browser the JSON the checked figure does."""
    return go.Figure(spec, _validate=False)


# --- intervals (bands) ------------------------------------------------------------------

BAND = "80"  # the central interval the charts shade


def interval_caption(intervals: dict | None) -> str:
    """What a chart's bands rest on, or why it has none."""
    intervals = intervals or {"none": "none computed for this chart"}
    if intervals.get("pending"):  # the Serving page's, while its bands' runs go on
        return str(intervals["none"])
    if "none" in intervals:
        why = str(intervals["none"])
        return why if why.startswith("no measured interval") else f"no measured interval: {why}"
    bound = "; the datasheet roofline is a bound that measured kernels did not reach: a band may leave out its point"
    return f"bands: {BAND} % intervals from {intervals['basis']}" + (
        bound if intervals["basis"].startswith("spec") else ""
    )


CAPTION_CHARS = 100  # a caption line under a full-width chart: ~600 px of 11 px text, 1024 px windows
HALF_CAPTION_CHARS = 48  # under a chart half the page wide
CAPTION_TOP_PX = 58  # below the plot: clear of the x axis' tick labels and title
CAPTION_LINE_PX = 15


def caption_props(intervals: dict | None, chars: int = CAPTION_CHARS) -> tuple[dict, int]:
    """The bands' caption under the plot (``interval_caption``) as an annotation spec named
    'interval-caption', wrapped at ``chars`` characters a line (no line runs past the
    figure's right edge), below the x axis' title; and the bottom margin that holds it."""
    lines = textwrap.wrap(interval_caption(intervals), chars, break_on_hyphens=False)
    note = {
        "text": "<br>".join(lines),
        "name": "interval-caption",
        "xref": "paper",
        "yref": "paper",
        "x": 0,
        "y": 0,
        "xanchor": "left",
        "yanchor": "top",
        "yshift": -CAPTION_TOP_PX,
        "showarrow": False,
        "align": "left",
        "font": {"size": 11, "color": "#666"},
    }
    return note, CAPTION_TOP_PX + CAPTION_LINE_PX * len(lines) + 8


def faded(color: str, alpha: float = 0.2) -> str:
    """'#1f77b4' -> 'rgba(31,119,180,0.2)': a band's fill in its line's colour."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def band_props(x, lo, hi, color: str, meta: str, **where: Any) -> dict:
    """A shaded band between ``lo`` and ``hi`` along ``x``: one closed outline, along ``lo``
    and back along ``hi``, filled inside itself (``fill='toself'``), so only its own points
    shape it (a 'tonexty' fill follows whatever trace plotly takes for the previous one);
    no legend entry, no hover; as a trace spec. ``band_ends`` reads the ends back."""
    x, lo, hi = list(x), list(lo), list(hi)
    return {
        "type": "scatter",
        "x": [*x, *x[::-1]],
        "y": [*lo, *hi[::-1]],
        "mode": "lines",
        "fill": "toself",
        "fillcolor": faded(color),
        "line": {"width": 0, "color": color},
        "meta": meta,
        "showlegend": False,
        "hoverinfo": "skip",
        **where,
    }


def band_ends(trace: go.Scatter) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) along the band's x, from its outline (``band_props``)."""
    y = np.asarray(trace.y, dtype=float)
    n = len(y) // 2
    return y[:n], y[n:][::-1]


def op_factors(analysis: Analysis, stage: str) -> np.ndarray | None:
    """Each op's ``BAND`` interval as factors of its time, [ops, 2] in the stage's row
    order (``extra['intervals']['ops']``), or None without one."""
    per_op = (analysis.extra.get("intervals") or {}).get("ops", {}).get(stage)
    if not per_op:
        return None
    return np.array([f[BAND] for f in per_op], dtype=float)


# --- roofline -------------------------------------------------------------------------


def ridge_point(ceilings: Ceilings, dtype: str) -> float:
    """Intensity (ops/byte) where the bandwidth slope meets the ``dtype`` compute roof."""
    return ceilings.matrix_peak[dtype] / ceilings.bandwidth


def stage_points(analysis: Analysis, stage: str) -> pd.DataFrame:
    """One row per op of a stage with what the roofline plots (ops with no arithmetic, like
    the embedding gather, have intensity 0 and cannot sit on a log axis: dropped)."""
    frame = getattr(analysis, stage).ops.copy()
    factors = op_factors(analysis, stage)
    if factors is not None:  # a time interval [lo, hi] x t is a perf interval [p / hi, p / lo]
        frame["perf_lo"], frame["perf_hi"] = frame["perf"] / factors[:, 1], frame["perf"] / factors[:, 0]
    frame = frame[(frame["intensity"] > 0) & (frame["perf"] > 0)].copy()
    frame["stage"] = stage
    frame["total_s"] = frame["count"] * frame["time_s"]
    return frame


def _hover(frame: pd.DataFrame) -> list[str]:
    return [
        f"<b>{r.name}</b> ({r.stage}, {r.kind})<br>operations {format_si(r.flops)}"
        f"<br>bytes {format_si(r.bytes, 'B')}<br>intensity {number(r.intensity, 3)} ops/B"
        f"<br>perf {format_si(r.perf, 'op/s')}<br>time {time_text(r.time_s)} x {r.count}"
        f"<br>bound: {r.bound}"
        for r in frame.itertuples()
    ]


def tera_ops(peak: float) -> str:
    """A compute roof as datasheets give it: 155 Top/s, 1979 Top/s (no exponent)."""
    return f"{plain_number(peak / TERA)} Top/s"


def roof_traces(ceilings: Ceilings, x_min: float, x_max: float) -> list[dict]:
    """The bandwidth slope and one flat compute roof per matrix data type (from its ridge),
    as plotly trace specs."""
    bw = ceilings.bandwidth
    top = max(ceilings.matrix_peak.values())
    traces = [
        dict(
            type="scatter",
            x=[x_min, top / bw],
            y=[bw * x_min, top],
            mode="lines",
            name=f"bandwidth {format_si(bw, 'B/s')}",
            meta="bandwidth",
            line={"color": "#777", "width": 2},
            hoverinfo="name",
        )
    ]
    for dtype, peak in sorted(ceilings.matrix_peak.items(), key=lambda kv: -kv[1]):
        traces.append(
            dict(
                type="scatter",
                x=[peak / bw, x_max],
                y=[peak, peak],
                mode="lines",
                name=f"roof {dtype} {tera_ops(peak)}",
                meta=f"roof:{dtype}",
                line={"color": "#888", "width": 1.2},
                hoverinfo="name",
                legendgroup="roofs",
            )
        )
    for dtype, peak in ceilings.vector_peak.items():
        traces.append(
            dict(
                type="scatter",
                x=[peak / bw, x_max],
                y=[peak, peak],
                mode="lines",
                name=f"vector {dtype} {tera_ops(peak)}",
                meta=f"vector:{dtype}",
                legendgroup="roofs",
                line={"color": "#aaa", "width": 1, "dash": "dot"},
                hoverinfo="name",
            )
        )
    return traces


def roofline_figure(
    analysis: Analysis,
    ceilings: Ceilings | None = None,
    highlight: tuple[str, str] | None = None,
    height: int = 480,
    legend_below: bool = False,
) -> go.Figure:
    """Log-log roofline: roofs of the device, one point per op (x = intensity, y = attainable
    perf), prefill circles and decode diamonds, coloured by op kind. ``highlight`` =
    (stage, op name) rings one point. Built as one spec that plotly checks once (adding
    traces and updating the layout one by one took three times as long)."""
    ceilings = ceilings or spec_ceilings(analysis.device)
    points = pd.concat([stage_points(analysis, s) for s in STAGES], ignore_index=True)
    dtype = analysis.plan.matrix_dtype
    ridge = ridge_point(ceilings, dtype)
    x_min = 10 ** np.floor(np.log10(max(min(points["intensity"].min(), ridge) / 2, 1e-3)))
    x_max = 10 ** np.ceil(np.log10(max(points["intensity"].max(), ridge) * 2))
    traces = [*roof_traces(ceilings, x_min, x_max), *op_traces(points), *highlight_traces(points, highlight)]
    ys = np.concatenate([np.asarray(t["y"], dtype=float) for t in traces])
    ys = ys[np.isfinite(ys) & (ys > 0)]
    powers = np.arange(np.floor(np.log10(ys.min())), np.ceil(np.log10(ys.max())) + 1)
    log_axis = {"type": "log", "dtick": 1, "minor": {"ticks": "outside", "ticklen": 3, "showgrid": False}}
    layout = base_layout_props(
        f"Roofline: {analysis.model.name} on {analysis.device.name} ({analysis.mode}, {dtype} matrix ops)", height
    )
    layout["xaxis"] = {
        **layout["xaxis"],
        **log_axis,
        "title": {"text": "arithmetic intensity (ops/byte)"},
        "range": [np.log10(x_min), np.log10(x_max)],
        "exponentformat": "none",
    }
    layout["yaxis"] = {
        **layout["yaxis"],
        **log_axis,
        "title": {"text": "attainable performance (ops/s)"},
        "exponentformat": "SI",
        "tickvals": 10.0**powers,
        "ticktext": [si_decade(int(k)) for k in powers],
    }
    layout["annotations"] = [
        {
            "x": np.log10(ridge),
            "y": np.log10(ceilings.matrix_peak[dtype]),
            "text": f"ridge {ridge:.0f} ops/B",
            "showarrow": True,
            "arrowhead": 2,
            "ay": 35,
        },
    ]
    if legend_below:
        layout["legend"] = {**layout["legend"], "orientation": "h", "y": -0.18, "x": 0, "font": {"size": 10}}
    else:
        note, bottom = caption_props(analysis.extra.get("intervals"))
        layout["annotations"].append(note)
        entries = sum(1 for t in traces if t.get("showlegend") is not False and t.get("name"))
        layout["legend"] = {**layout["legend"], "tracegroupgap": 0}
        layout["height"] = max(
            height + bottom - layout["margin"]["b"], entries * LEGEND_ROW_PX + layout["margin"]["t"] + bottom
        )
        layout["margin"] = {**layout["margin"], "b": bottom}
    return figure_of({"data": traces, "layout": layout})


def op_traces(points: pd.DataFrame) -> list[dict]:
    """One marker trace per stage and op kind, each followed by its ops' bands (``perf_band``)."""
    traces = []
    for stage in STAGES:
        for kind, group in points[points["stage"] == stage].groupby("kind", sort=False):
            traces.append(
                {
                    "type": "scatter",
                    "x": group["intensity"].to_numpy(),
                    "y": group["perf"].to_numpy(),
                    "mode": "markers",
                    "name": f"{kind} ({stage})",
                    "meta": f"ops:{stage}:{kind}",
                    "customdata": group["name"].to_numpy(),
                    "legendgroup": kind,
                    "marker": {
                        "symbol": STAGE_SYMBOLS[stage],
                        "size": 11,
                        "color": kind_color(kind),
                        "line": {"width": 1, "color": "white"},
                    },
                    "hovertext": _hover(group),
                    "hoverinfo": "text",
                }
            )
            if "perf_lo" in group:
                traces.append(perf_band(group, stage, kind))
    return traces


def highlight_traces(points: pd.DataFrame, highlight: tuple[str, str] | None) -> list[dict]:
    """A ring around the (stage, op name) point, if it is drawn."""
    if highlight is None:
        return []
    stage, name = highlight
    hit = points[(points["stage"] == stage) & (points["name"] == name)]
    if not len(hit):
        return []
    return [
        {
            "type": "scatter",
            "x": hit["intensity"].to_numpy(),
            "y": hit["perf"].to_numpy(),
            "mode": "markers",
            "name": f"selected: {name}",
            "meta": "selected",
            "hoverinfo": "skip",
            "marker": {"symbol": "circle-open", "size": 26, "line": {"width": 3, "color": "#ffbf00"}},
        }
    ]


SI_PREFIXES = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def si_decade(power: int) -> str:
    """10**power in SI prefixes, to peta and beyond: 15 -> '1P', 14 -> '100T'."""
    base = 3 * (power // 3)
    return f"{10 ** (power - base)}{SI_PREFIXES.get(base, f'e{base}')}"


def perf_band(group: pd.DataFrame, stage: str, kind: str) -> dict:
    """Each op's attainable performance over its time's ``BAND`` interval: a vertical
    segment per op at its intensity (gaps between ops)."""
    n = len(group)
    x = np.column_stack([group["intensity"], group["intensity"], np.full(n, np.nan)]).ravel()
    y = np.column_stack([group["perf_lo"], group["perf_hi"], np.full(n, np.nan)]).ravel()
    return dict(
        type="scatter",
        x=x,
        y=y,
        mode="lines",
        meta=f"band:{stage}:{kind}",
        legendgroup=kind,
        showlegend=False,
        hoverinfo="skip",
        line={"color": faded(kind_color(kind), 0.6), "width": 5},
    )


# --- breakdowns -----------------------------------------------------------------------


def time_by_kind(analysis: Analysis) -> pd.DataFrame:
    """Seconds per op kind per stage (count x time per instance), kinds as rows."""
    frames = {
        s: getattr(analysis, s)
        .ops.assign(total_s=lambda f: f["count"] * f["time_s"])
        .groupby("kind", sort=False)["total_s"]
        .sum()
        for s in STAGES
    }
    return pd.DataFrame(frames).fillna(0.0)


def kind_intervals(analysis: Analysis) -> dict[str, pd.DataFrame]:
    """Per stage, each kind's seconds at the ends of its ops' ``BAND`` intervals (columns
    lo, hi), the ends added as if its ops' errors moved together; {} without intervals."""
    out = {}
    for stage in STAGES:
        factors = op_factors(analysis, stage)
        if factors is None:
            return {}
        ops = getattr(analysis, stage).ops
        total = (ops["count"] * ops["time_s"]).to_numpy()
        ends = pd.DataFrame({"lo": total * factors[:, 0], "hi": total * factors[:, 1], "kind": ops["kind"]})
        out[stage] = ends.groupby("kind", sort=False).sum()
    return out


# the analysis's interval behind each stage's bar: TTFT and TPOT with a generation, else the passes
STAGE_FIGURES = {"prefill": ("ttft_s", "prefill_s"), "decode": ("tpot_s", "decode_s")}


def stage_band(analysis: Analysis, stage: str) -> tuple[float, float] | None:
    """The stage's ``BAND`` interval as factors of its time: the analysis's own interval of
    TTFT or TPOT (of the pass without a generation), whose draws its ops' classes share;
    None without one."""
    intervals = analysis.extra.get("intervals") or {}
    with_generation, one_pass = STAGE_FIGURES[stage]
    if with_generation in intervals:
        key, point = with_generation, analysis.generation[with_generation]
    elif one_pass in intervals:
        key, point = one_pass, getattr(analysis, stage).total["time_s"]
    else:
        return None
    lo, hi = intervals[key][BAND]
    return lo / point, hi / point


def time_breakdown_figure(analysis: Analysis, height: int = 360) -> go.Figure:
    """Stacked bars: where a prefill pass and a decode step spend their time, by op kind;
    with intervals, one band beside each bar spanning the stage's interval in the bar's
    milliseconds, and each kind's interval in its hover. Two subplots side by side, laid
    out as make_subplots would and checked by plotly once."""
    table = time_by_kind(analysis)
    ends = kind_intervals(analysis)
    traces = []
    for kind, row in table.iterrows():
        for col, stage in enumerate(STAGES, start=1):
            band = ends[stage].loc[kind] * 1e3 if ends and kind in ends[stage].index else None
            traces.append(
                {
                    "type": "bar",
                    "x": [stage],
                    "y": [row[stage] * 1e3],
                    "name": kind,
                    "legendgroup": kind,
                    "showlegend": col == 1,
                    "marker": {"color": kind_color(kind)},
                    "meta": f"time:{stage}:{kind}",
                    "hovertemplate": f"{kind}: %{{y:,.4r}} ms ({100 * row[stage] / table[stage].sum():.1f}%)"
                    + (f", {BAND} %: {number(band['lo'])}–{number(band['hi'])} ms" if band is not None else "")
                    + "<extra></extra>",
                    **SIDE_BY_SIDE[col],
                }
            )
    for col, stage in enumerate(STAGES, start=1):
        factors = stage_band(analysis, stage)
        if factors is not None:
            traces.append({**total_band(stage, table[stage].sum() * 1e3, factors), **SIDE_BY_SIDE[col]})
    titles = (
        f"prefill: {time_text(table['prefill'].sum())}<br>{analysis.workload.seq_len} tokens",
        f"decode step:<br>{time_text(table['decode'].sum())}",
    )
    layout = base_layout_props("Time by op kind (count x time)", height, top=100)
    axis = layout.pop("xaxis")
    del layout["yaxis"]
    for col, (lo, hi) in enumerate(((0.0, 0.45), (0.55, 1.0)), start=1):
        suffix = "" if col == 1 else str(col)
        layout[f"xaxis{suffix}"] = {**axis, "domain": [lo, hi], "anchor": f"y{suffix}"}
        layout[f"yaxis{suffix}"] = {**axis, "domain": [0.0, 1.0], "anchor": f"x{suffix}"}
    layout["yaxis"]["title"] = {"text": "time (ms)"}
    note, bottom = caption_props(analysis.extra.get("intervals"), HALF_CAPTION_CHARS)
    layout["annotations"] = [
        *(subplot_title(t, (lo + hi) / 2) for t, (lo, hi) in zip(titles, ((0, 0.45), (0.55, 1)))),
        note,
    ]
    layout.update(barmode="stack", height=height + bottom - layout["margin"]["b"])
    layout["margin"] = {**layout["margin"], "b": bottom}
    return figure_of({"data": traces, "layout": layout})


SIDE_BY_SIDE = {1: {"xaxis": "x", "yaxis": "y"}, 2: {"xaxis": "x2", "yaxis": "y2"}}  # subplot -> its axes


def subplot_title(text: str, x: float) -> dict:
    """A subplot's title centred over it, as make_subplots places one (``SUBPLOT_TITLE_PX``)."""
    return {
        "text": text,
        "x": x,
        "xref": "paper",
        "xanchor": "center",
        "y": 1.0,
        "yref": "paper",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": SUBPLOT_TITLE_PX},
    }


def total_band(stage: str, ms: float, factors: tuple[float, float]) -> dict:
    """A stage bar's interval: a capped line from lo to hi (ms) at the bar's x (the caption
    names it; no legend entry), as a trace spec."""
    lo, hi = ms * factors[0], ms * factors[1]
    return {
        "type": "scatter",
        "x": [stage, stage],
        "y": [lo, hi],
        "mode": "lines+markers",
        "name": f"{BAND} % interval",
        "showlegend": False,
        "meta": f"band:{stage}",
        "line": {"color": "#333", "width": 3},
        "marker": {"symbol": "line-ew-open", "size": 14, "color": "#333"},
        "hovertemplate": f"{stage}: {BAND} % {number(lo)}–{number(hi)} ms<extra></extra>",
    }


def memory_figure(analysis: Analysis, height: int = 260) -> go.Figure:
    """One stacked bar (weights + KV cache + activation peak) against the device capacity
    (dashed) and what the runtime may use (dotted: out of memory starts there)."""
    mem = analysis.memory
    traces = [
        {
            "type": "bar",
            "y": ["memory"],
            "x": [mem[key] / GIB],
            "name": label,
            "orientation": "h",
            "marker": {"color": color},
            "meta": f"memory:{key}",
            "hovertemplate": f"{label}: {bytes_text(mem[key])}<extra></extra>",
        }
        for key, label, color in MEMORY_PARTS
    ]
    capacity, usable = mem["capacity_bytes"] / GIB, mem["usable_bytes"] / GIB
    verdict = "fits" if mem["fits"] else f"does NOT fit ({bytes_text(mem['shortfall_bytes'])} short)"
    layout = base_layout_props(f"Memory: peak {bytes_text(mem['peak_bytes'])}: {verdict}", height)
    layout["xaxis"].update(title={"text": "GiB"}, range=[0, 1.08 * max(capacity, mem["peak_bytes"] / GIB)])
    layout["barmode"] = "stack"
    layout["shapes"] = [
        vline_props(capacity, {"color": "#d62728", "width": 3, "dash": "dash"}, "capacity"),
        vline_props(usable, {"color": "#ff7f0e", "width": 2, "dash": "dot"}, "usable"),
    ]
    note = {"xref": "x", "yref": "y domain", "yanchor": "bottom", "showarrow": False}
    layout["annotations"] = [
        {**note, "x": capacity, "y": 1, "text": f"capacity {bytes_text(mem['capacity_bytes'])}"},
        {**note, "x": usable, "y": 0, "xanchor": "right", "text": f"usable {bytes_text(mem['usable_bytes'])}"},
    ]
    return figure_of({"data": traces, "layout": layout})


# --- sweep ----------------------------------------------------------------------------

SWEEP_ROWS = (
    ("ttft_s", "TTFT (ms)", 1e3),
    ("tpot_s", "TPOT (ms)", 1e3),
    ("tokens_per_s", "throughput (tokens/s)", 1.0),
    ("peak_bytes", "peak memory (GiB)", 1 / GIB),
)
AXIS_TITLES = {"batch": "batch size", "seq_len": "prompt length (tokens)"}


def oom_boundary(group: pd.DataFrame) -> float | None:
    """The largest x that fits, where a series' out-of-memory line goes: exact when the
    frame carries ``max_x`` (viewer.data computes it), else the last grid point that fits;
    None when every point fits, 0 when none does."""
    fits = group["fits"].to_numpy(bool)
    if fits.all():
        return None
    if "max_x" in group:
        return float(group["max_x"].iloc[0])
    first = int(np.argmax(~fits))
    return float(group["x"].iloc[first - 1]) if first else 0.0


def oom_label(w: str, boundary: float, axis: str) -> str:
    what = "batch" if axis == "batch" else "prompt"
    return f"{w}: nothing fits" if boundary < 1 else f"{w}: out of memory above {what} {boundary:.0f}"


@lru_cache(maxsize=4)
def column_grid(rows: int) -> str:
    """The layout of ``rows`` subplots in one column sharing their x axis (make_subplots'
    axes and domains), as JSON: made once, copied per figure."""
    return json.dumps(
        make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.04).layout.to_plotly_json()
    )


def log_tick_props(values: Sequence[float]) -> dict:
    """A log axis' ticks (``log_ticks``) over the positive finite ``values`` it shows, in plain
    numbers ('0.02', not '20m'), as an axis spec ({} when there are none)."""
    shown = np.asarray(values, dtype=float)
    shown = shown[np.isfinite(shown) & (shown > 0)]
    if not shown.size:
        return {}
    ticks = log_ticks(shown.min(), shown.max())
    return {"tickvals": ticks, "ticktext": [number(t, 3) for t in ticks]}


def sweep_series(w: str, group: pd.DataFrame, color: str, axis: str) -> tuple[list[dict], list[dict]]:
    """One weight type's traces (per subplot row: its band, its line; then the legend entry
    of its out-of-memory line) and shapes (the dotted out-of-memory line in each row)."""
    traces, shapes = [], []
    boundary = oom_boundary(group)
    fits = group["fits"].to_numpy(bool)
    for row, (col, _label, scale) in enumerate(SWEEP_ROWS, start=1):
        where = {"xaxis": "x" if row == 1 else f"x{row}", "yaxis": "y" if row == 1 else f"y{row}"}
        if f"{col}_lo{BAND}" in group:
            ends = (group[f"{col}_{end}{BAND}"] * scale for end in ("lo", "hi"))
            traces.append(band_props(group["x"], *ends, color, f"band:{w}:{col}", legendgroup=w, **where))
        traces.append(
            {
                "type": "scatter",
                "x": group["x"].to_numpy(),
                "y": (group[col] * scale).to_numpy(),
                "mode": "lines+markers",
                "name": f"weights {w}",
                "legendgroup": w,
                "showlegend": row == 1,
                "meta": f"sweep:{w}:{col}",
                "line": {"color": color},
                "marker": {"symbol": np.where(fits, "circle", "x-open"), "size": 8, "color": color},
                "customdata": np.where(fits, "fits", "out of memory"),
                "hovertemplate": f"{w}: %{{y:,.4r}} at {axis}=%{{x}} (%{{customdata}})<extra></extra>",
                **where,
            }
        )
        if boundary is not None:
            line = {"color": color, "dash": "dot", "width": 2}
            shapes.append(vline_props(max(boundary, float(group["x"].iloc[0])), line, row=row))
    if boundary is not None:
        traces.append(
            {
                "type": "scatter",
                "x": [None],
                "y": [None],
                "mode": "lines",
                "legendgroup": w,
                "name": oom_label(w, boundary, axis),
                "meta": f"oom:{w}",
                "line": {"color": color, "dash": "dot", "width": 2},
                "xaxis": "x",
                "yaxis": "y",
            }
        )
    return traces, shapes


def sweep_figure(frame: pd.DataFrame, height: int = 820) -> go.Figure:
    """TTFT, TPOT, throughput and peak memory against batch or prompt length, one line per
    weight type; points that do not fit are hollow crosses and a dotted line (named in the
    legend, so labels never collide) marks the largest size that fits. Built as one spec
    that plotly checks once (adding traces and shapes one by one took four times as long)."""
    axis = frame.attrs.get("axis", "batch")
    traces, shapes = [], []
    for i, (w, group) in enumerate(frame.groupby("w_dtype", sort=False)):
        more_traces, more_shapes = sweep_series(w, group, SERIES_COLORS[i % len(SERIES_COLORS)], axis)
        traces += more_traces
        shapes += more_shapes
    capacity = float(frame["capacity_bytes"].iloc[0]) / GIB if len(frame) else 0
    last = len(SWEEP_ROWS)
    shapes.append(
        {
            "type": "line",
            "x0": 0,
            "x1": 1,
            "xref": f"x{last} domain",
            "y0": capacity,
            "y1": capacity,
            "yref": f"y{last}",
            "line": {"color": "#d62728", "dash": "dash"},
        }
    )
    title = f"Sweep: {frame.attrs.get('model', '')} on {frame.attrs.get('device', '')}"
    subplots = json.loads(column_grid(last))
    layout = {**subplots, **base_layout_props(title, height)}
    grid = layout.pop("xaxis"), layout.pop("yaxis")  # every axis gets the base's grid
    x_log = {"type": "log", "dtick": np.log10(2), "tickformat": "d"}
    for row, (_, label, _) in enumerate(SWEEP_ROWS, start=1):
        ref = "" if row == 1 else str(row)
        shown = [v for t in traces if t["yaxis"] == f"y{ref}" for v in t["y"]]
        layout[f"xaxis{ref}"] = {**subplots[f"xaxis{ref}"], **x_log, **grid[0]}
        y_log = {"title": {"text": label}, "type": "log", **log_tick_props(shown)}
        layout[f"yaxis{ref}"] = {**subplots[f"yaxis{ref}"], **y_log, **grid[1]}
    layout[f"xaxis{last}"]["title"] = {"text": AXIS_TITLES.get(axis, axis)}
    note, bottom = caption_props(frame.attrs.get("intervals"))
    # annotations on a log axis take log10 of the value (shapes take the value itself)
    layout["annotations"] = [
        {
            "x": 1,
            "xref": f"x{last} domain",
            "y": np.log10(capacity),
            "yref": f"y{last}",
            "text": f"capacity {capacity:.0f} GiB",
            "showarrow": False,
            "xanchor": "right",
            "yanchor": "bottom",
            "font": {"color": "#d62728"},
        },
        note,
    ]
    layout["shapes"] = shapes
    layout["height"] = height + bottom - layout["margin"]["b"]
    layout["margin"] = {**layout["margin"], "b": bottom}
    return figure_of({"data": traces, "layout": layout})


# --- compare --------------------------------------------------------------------------

COMPARE_COLUMNS = (
    ("ttft_s", "TTFT (ms)", 1e3),
    ("tpot_s", "TPOT (ms)", 1e3),
    ("tokens_per_s", "tokens/s", 1.0),
    ("peak_bytes", "peak memory (GiB)", 1 / GIB),
)


@lru_cache(maxsize=1)
def compare_grid() -> str:
    """The Compare figure's subplots (one per column of ``COMPARE_COLUMNS``, titled), as
    JSON: made once, copied per figure."""
    fig = make_subplots(
        rows=1,
        cols=len(COMPARE_COLUMNS),
        subplot_titles=[label.replace(" (", "<br>(") for _, label, _ in COMPARE_COLUMNS],
        horizontal_spacing=0.07,
    )
    return json.dumps(small_subplot_titles(fig).layout.to_plotly_json())


def compare_figure(frame: pd.DataFrame, height: int = 380) -> go.Figure:
    """One bar per device for each of TTFT, TPOT, throughput and peak memory (with each
    device's capacity as a marker); devices that failed are left out. One spec."""
    ok = frame[frame["error"].fillna("") == ""]
    colors = [SERIES_COLORS[i % len(SERIES_COLORS)] for i in range(len(ok))]
    traces = [
        {
            "type": "bar",
            "x": ok["device"].to_numpy(),
            "y": (ok[key].astype(float) * scale).to_numpy(),
            "marker": {"color": colors},
            "name": label,
            "meta": f"compare:{key}",
            "showlegend": False,
            "hovertemplate": "%{x}: %{y:,.4r}<extra></extra>",
            "xaxis": f"x{col if col > 1 else ''}",
            "yaxis": f"y{col if col > 1 else ''}",
        }
        for col, (key, label, scale) in enumerate(COMPARE_COLUMNS, start=1)
    ]
    last = len(COMPARE_COLUMNS)
    traces.append(
        {
            "type": "scatter",
            "x": ok["device"].to_numpy(),
            "y": (ok["capacity_bytes"].astype(float) / GIB).to_numpy(),
            "mode": "markers",
            "name": "capacity",
            "meta": "compare:capacity",
            "marker": {
                "symbol": "line-ew-open",
                "size": 30,
                "color": "#d62728",
                "line": {"width": 3, "color": "#d62728"},
            },
            "hovertemplate": "%{x} capacity: %{y:.0f} GiB<extra></extra>",
            "xaxis": f"x{last}",
            "yaxis": f"y{last}",
        }
    )
    subplots = json.loads(compare_grid())
    layout = {**subplots, **base_layout_props("Compare devices: same model, workload and settings", height, top=100)}
    grid = layout.pop("xaxis"), layout.pop("yaxis")
    for col in range(1, last + 1):
        ref = "" if col == 1 else str(col)
        layout[f"xaxis{ref}"] = {**subplots[f"xaxis{ref}"], **grid[0]}
        layout[f"yaxis{ref}"] = {**subplots[f"yaxis{ref}"], **grid[1]}
    return figure_of({"data": traces, "layout": layout})


# --- layer graph ----------------------------------------------------------------------

LAYER_INPUT = "x"
KV_CACHE = "kv cache"


def layer_ops_of(analysis: Analysis, stage: str) -> list:
    """The ops of one decoder layer (the stage's ops less embedding, final norm, lm_head)."""
    w = analysis.workload
    heads = {op.name for op in head_ops(analysis.model, 1, 1, analysis.plan)}
    ops = stage_ops(analysis.model, stage, w.batch, w.seq_len, analysis.plan)
    return [op for op in ops if op.name not in heads]


def data_flow_depths(ops: Sequence) -> dict[str, int]:
    """Longest path from the layer input to each op, following ``inputs``."""
    depth = {LAYER_INPUT: 0}
    for op in ops:  # ops come in data-flow order: producers precede consumers
        depth[op.name] = 1 + max((depth.get(i, 0) for i in op.inputs), default=0)
    return depth


NODE_MAX_PX = 56
ROW_PX = NODE_MAX_PX + 14  # two of the largest nodes stacked leave a gap
COLUMN_PX = 190  # the least distance between nodes side by side
LABEL_OFFSET_PX = 6  # a label starts this far right of its node (layout.CYTO_STYLE)
LABEL_CHAR_PX = 10  # per character of a 16 px label, rounded up
IO_LABELS = ("layer input", "KV cache")  # the boxes' labels (layer_elements)
IO_NODE_PX = 10 + LABEL_CHAR_PX * max(map(len, IO_LABELS))  # each fits inside its box


def node_size(time_s: float, t_max: float, lo: float = 20, hi: float = NODE_MAX_PX) -> float:
    """Node diameter in px: area grows with time."""
    return lo + (hi - lo) * float(np.sqrt(time_s / t_max)) if t_max > 0 else lo


def layer_elements(analysis: Analysis, stage: str) -> list[dict[str, Any]]:
    """dash-cytoscape elements for one decoder layer: a node per op (colour = bound, size =
    time, placed by data-flow depth), edges from ``inputs``, and the KV cache as a node."""
    ops = layer_ops_of(analysis, stage)
    rows = {r["name"]: r for r in getattr(analysis, stage).records()}
    depth = data_flow_depths(ops)
    t_max = max(rows[op.name]["time_s"] for op in ops)
    next_x: dict[int, float] = {}  # per row: where the next node may sit, clear of labels
    elements: list[dict[str, Any]] = [
        {"data": {"id": LAYER_INPUT, "label": "layer input"}, "classes": "io", "position": {"x": 0, "y": 0}}
    ]
    for op in ops:
        r, d = rows[op.name], depth[op.name]
        size = node_size(r["time_s"], t_max)
        x = next_x.get(d, 0.0)
        label_end = x + size / 2 + LABEL_OFFSET_PX + LABEL_CHAR_PX * len(op.name)
        next_x[d] = max(x + COLUMN_PX, label_end + 24 + NODE_MAX_PX / 2)
        data = {
            "id": op.name,
            "label": op.name,
            "stage": stage,
            "kind": op.kind,
            "bound": r["bound"],
            "time_s": r["time_s"],
            "count": r["count"],
            "flops": r["flops"],
            "bytes": r["bytes"],
            "intensity": r["intensity"],
            "perf": r["perf"],
            "dtype": r["dtype"],
            "color": BOUND_COLORS.get(r["bound"], "#777"),
            "size": size,
            "time": format_time(r["time_s"]),
        }
        elements.append({"data": data, "classes": r["bound"], "position": {"x": x, "y": ROW_PX * d}})
        elements += [
            {"data": {"id": f"{src}->{op.name}", "source": src, "target": op.name}} for src in op.inputs if src in depth
        ]
    if any(op.kv_write_bytes or op.kv_read_bytes for op in ops):
        y = ROW_PX * (max(depth.values()) // 2)
        elements.append(
            {"data": {"id": KV_CACHE, "label": "KV cache"}, "classes": "io", "position": {"x": -COLUMN_PX, "y": y}}
        )
        for op in ops:
            if np.any(op.kv_write_bytes):
                elements.append(
                    {"data": {"id": f"{op.name}->kv", "source": op.name, "target": KV_CACHE}, "classes": "kv"}
                )
            if np.any(op.kv_read_bytes):
                elements.append(
                    {"data": {"id": f"kv->{op.name}", "source": KV_CACHE, "target": op.name}, "classes": "kv"}
                )
    return elements


# --- validation -----------------------------------------------------------------------

PREDICTIONS = (("predicted_spec_s", "spec", "#1f77b4"), ("predicted_calibrated_s", "calibrated", "#d62728"))


def validation_scatter(frame: pd.DataFrame, height: int = 520) -> go.Figure:
    """Predicted vs measured time per case (log-log) with y = x and ±10% / ±25% bands."""
    fig = go.Figure()
    values = frame[[c for c in ("measured_s", "predicted_spec_s", "predicted_calibrated_s")]].to_numpy(float)
    finite = values[np.isfinite(values) & (values > 0)]
    lo, hi = (finite.min() / 2, finite.max() * 2) if finite.size else (1e-6, 1.0)
    line = np.array([lo, hi])
    for band, color in ((0.25, "rgba(255,165,0,0.22)"), (0.10, "rgba(44,160,44,0.28)")):
        fig.add_trace(
            go.Scatter(
                x=np.r_[line, line[::-1]],
                mode="lines",
                y=np.r_[line * (1 + band), line[::-1] * (1 - band)],
                fill="toself",
                fillcolor=color,
                line={"width": 0},
                name=f"±{band:.0%}",
                meta=f"band:{band}",
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(x=line, y=line, mode="lines", name="y = x", meta="identity", line={"color": "#444", "dash": "dash"})
    )
    for col, label, color in PREDICTIONS:
        rows = frame[frame[col] > 0]
        if len(rows):
            fig.add_trace(
                go.Scatter(
                    x=rows["measured_s"],
                    y=rows[col],
                    mode="markers",
                    name=label,
                    meta=f"pred:{label}",
                    marker={"color": color, "size": 8, "opacity": 0.8},
                    # the browser formats the hover (thousands of cases: no Python string each)
                    customdata=np.column_stack([rows["case"].astype(str), rows["kind"].astype(str)]),
                    hovertemplate=f"%{{customdata[0]}} (%{{customdata[1]}})<br>measured %{{x:.3s}}s"
                    f"<br>{label} %{{y:.3s}}s<extra></extra>",
                )
            )
    fig.update_xaxes(type="log", title="measured time (s)")
    fig.update_yaxes(type="log", title="predicted time (s)")
    return decades(base_layout(fig, f"Predicted vs measured ({len(frame)} cases)", height))


def relative_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Median |predicted - measured| / measured per op kind, for each prediction."""
    out = {}
    for col, label, _ in PREDICTIONS:
        err = (frame[col] - frame["measured_s"]).abs() / frame["measured_s"]
        out[label] = err.groupby(frame["kind"]).median()
    return pd.DataFrame(out)


def validation_error_figure(frame: pd.DataFrame, height: int = 360) -> go.Figure:
    """Median relative error by op class, spec vs calibrated."""
    table = relative_errors(frame)
    fig = go.Figure()
    for _col, label, color in PREDICTIONS:
        fig.add_trace(
            go.Bar(
                x=table.index,
                y=table[label] * 100,
                name=label,
                marker_color=color,
                meta=f"error:{label}",
                hovertemplate="%{x}: %{y:.1f}%<extra></extra>",
            )
        )
    for target, color in ((10, "#2ca02c"), (25, "orange")):  # in the legend: no label over a tall bar
        fig.add_trace(
            go.Scatter(
                x=[0, 1],
                y=[target, target],
                xaxis="x2",
                mode="lines",
                name=f"{target} % line",
                meta=f"target:{target}",
                line={"dash": "dot", "color": color},
                hoverinfo="skip",
            )
        )
    fig.update_layout(xaxis2={"overlaying": "x", "range": [0, 1], "visible": False})
    fig.update_yaxes(title="median |error| (%)")
    fig.update_layout(barmode="group")
    return base_layout(fig, "Error by op class", height)


WATERFALL_PARTS = (
    ("kernel_efficiency", "kernel efficiency"),
    ("launch_host", "launch and host"),
    ("scheduler_batching", "scheduler and batching"),
    ("queueing", "queueing"),
    ("preemption", "preemption"),
    ("remainder", "remainder"),
)  # kernels.e2e.waterfall.PARTS, in its order


def waterfall_figure(entry: dict[str, Any], height: int = 420) -> go.Figure:
    """From the spec prediction to the measurement: each part a step (ms), the notes in the
    hover; a part the record could not separate is drawn at 0 and says so."""
    notes = entry.get("notes") or {}
    x = ["spec", *(label for _, label in WATERFALL_PARTS), "measured"]
    y = [entry["spec_s"], *(entry["parts"][key] for key, _ in WATERFALL_PARTS), entry["measured_s"]]
    text = ["datasheet roofline", *(notes.get(key, "") for key, _ in WATERFALL_PARTS), "measured"]
    fig = go.Figure(
        go.Waterfall(
            x=x,
            y=[v * 1e3 for v in y],
            measure=["absolute", *["relative"] * len(WATERFALL_PARTS), "total"],
            hovertext=text,
            hovertemplate="%{x}: %{y:,.3r} ms<br>%{hovertext}<extra></extra>",
            meta="waterfall",
            connector={"line": {"color": "#999"}},
            increasing={"marker": {"color": "#d62728"}},
            decreasing={"marker": {"color": "#2ca02c"}},
            totals={"marker": {"color": "#1f77b4"}},
        )
    )
    fig.update_yaxes(title="ms")
    title = f"Where the time goes: {entry['run']}, {entry['case']} {entry['metric']}".replace(" ,", ",")
    return base_layout(fig, title, height)


def ceilings_figure(spec: Ceilings, measured: Ceilings, height: int = 420) -> go.Figure:
    """The measured roofline (solid) over the datasheet one (dashed)."""
    peaks = list(spec.matrix_peak.values()) + list(measured.matrix_peak.values())
    x_min = 10 ** np.floor(np.log10(min(peaks) / max(spec.bandwidth, measured.bandwidth) / 100))
    x_max = 10 ** np.ceil(np.log10(max(peaks) / min(spec.bandwidth, measured.bandwidth) * 10))
    fig = go.Figure()
    for roofs, label, dash in ((spec, "spec", "dash"), (measured, "measured", "solid")):
        for trace in roof_traces(roofs, x_min, x_max)[: 1 + len(roofs.matrix_peak)]:
            color = "#1f77b4" if label == "measured" else "#999"
            fig.add_trace(
                {
                    **trace,
                    "name": f"{label}: {trace['name']}",
                    "meta": f"{label}:{trace['meta']}",
                    "line": {**trace["line"], "dash": dash, "color": color},
                }
            )
    fig.update_xaxes(type="log", title="arithmetic intensity (ops/byte)")
    fig.update_yaxes(type="log", title="ops/s")
    decades(fig)
    ys = np.array([y for t in fig.data for y in t.y], dtype=float)
    powers = np.arange(np.floor(np.log10(ys.min())), np.ceil(np.log10(ys.max())) + 1)
    # SI prefixes to peta and beyond, as the Analyze roofline labels them (plotly writes '10^15')
    fig.update_yaxes(tickvals=10.0**powers, ticktext=[si_decade(int(k)) for k in powers])
    fig.update_xaxes(exponentformat="none")
    return base_layout(fig, f"Measured roofline over the datasheet one ({spec.device})", height)


CARD_TITLES = (
    ("ttft", "TTFT"),
    ("tpot", "TPOT"),
    ("throughput", "Throughput"),
    ("peak", "Peak memory"),
    ("fits", "Fits"),
)
# per-op table: (row key, header, number format: None text, "si" 1.23G, "g" 4 significant,
# "d" whole number)
TABLE_COLUMNS = (
    ("stage", "stage", None),
    ("name", "op", None),
    ("kind", "kind", None),
    ("count", "count", "d"),
    ("flops", "ops", "si"),
    ("bytes", "bytes moved", "si"),
    ("intensity", "ops/byte", "g"),
    ("perf", "perf (op/s)", "si"),
    ("bound", "bound", None),
    ("time_us", "time (µs)", "g"),
    ("total_ms", "x count (ms)", "g"),
    ("dtype", "dtype", None),
)


def op_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """Both stages' per-op rows for the table (time per instance in µs, whole pass in ms)."""
    rows = []
    for stage in STAGES:
        for r in getattr(analysis, stage).records():
            rows.append({**r, "stage": stage, "time_us": r["time_s"] * 1e6, "total_ms": r["count"] * r["time_s"] * 1e3})
    return rows


def analysis_title(a: Analysis) -> str:
    """The analysis in one line, the CLI's verdict (what bounds each stage, the largest batch
    that fits), then what it rests on (``ridgeline.engine.basis``: the timing of
    its profile, the execution priced, each note) a line each."""
    from ridgeline.engine.basis import basis_lines

    w, s = a.workload, a.settings
    title = (
        f"{a.model.name} on {a.device.full_name} ({a.mode} roofline): batch {w.batch}, "
        f"{w.seq_len} prompt + {w.generate} generated tokens; weights {s.w_dtype}, "
        f"activations {s.a_dtype}, KV {s.kv_dtype}, matrix ops in {a.plan.matrix_dtype}"
    )
    return "\n".join([title, verdict(a), *basis_lines(a.extra.get("basis"))])


def format_cards(analysis: Analysis) -> dict[str, str]:
    """The summary cards' texts, exactly as the page shows them."""
    gen, mem = analysis.generation, analysis.memory
    return {
        "ttft": time_text(gen["ttft_s"]) if gen else time_text(analysis.prefill.total["time_s"]),
        "tpot": time_text(gen["tpot_s"]) if gen and gen["tpot_s"] is not None else "-",
        "throughput": f"{number(gen['tokens_per_s'])} tok/s" if gen else "-",
        "peak": bytes_text(mem["peak_bytes"]),
        "fits": (
            f"yes, of {bytes_text(mem['capacity_bytes'])}"
            if mem["fits"]
            else f"no: {bytes_text(mem['shortfall_bytes'])} short"
        ),
    }
