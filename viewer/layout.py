"""The page structure: a sidebar of workload and deployment controls (generated from the
control table in ``viewer.state``), page tabs, and one container holding the shown page's
components only (``page_content``, built when the URL's path changes: the browser mounts
no hidden page's graphs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash_cytoscape as cyto
from dash import dash_table, dcc, html
from dash.dash_table.Format import Format, Scheme

from ridgeline.io.resolve import list_devices, list_models
from viewer import ids
from viewer.figures import CARD_TITLES, IO_NODE_PX, LABEL_OFFSET_PX, TABLE_COLUMNS, bound_caption
from viewer.state import NOT_FOUND, PAGE_TITLES, PAGES, Control, component_value, controls, defaults, page_from_path

FORMATS = {
    "si": Format(precision=3, scheme=Scheme.decimal_si_prefix),
    "g": Format(precision=4, scheme=Scheme.decimal_or_exponent),
    "d": Format(precision=0, scheme=Scheme.fixed),
}
IO_FONT_PX = 13  # the layer input and KV cache boxes' labels, inside the box
CYTO_STYLE = [
    # labels right of their node: the layout leaves that side free (figures.layer_elements)
    {
        "selector": "node",
        "style": {
            "label": "data(label)",
            "background-color": "data(color)",
            "width": "data(size)",
            "height": "data(size)",
            "font-size": 16,
            "text-valign": "center",
            "text-halign": "right",
            "text-margin-x": LABEL_OFFSET_PX,
            "color": "#888",
        },
    },
    {
        "selector": ".io",
        "style": {
            "shape": "round-rectangle",
            "background-color": "#999",
            "width": IO_NODE_PX,
            "height": 22,
            "font-size": IO_FONT_PX,
            "text-valign": "center",
            "text-halign": "center",
            "text-margin-x": 0,
            "color": "#fff",
        },
    },
    {
        "selector": "edge",
        "style": {
            "curve-style": "bezier",
            "target-arrow-shape": "triangle",
            "width": 1.5,
            "line-color": "#999",
            "target-arrow-color": "#999",
        },
    },
    {"selector": ".kv", "style": {"line-style": "dashed", "line-color": "#ff9f1c", "target-arrow-color": "#ff9f1c"}},
    {"selector": ":selected", "style": {"border-width": 4, "border-color": "#ffbf00"}},
]


def control_component(c: Control, options: list | None = None, value: Any = None):
    """The Dash component for one control holding ``value`` (its default when None); its
    id is ``ids.state(c.key)``."""
    value = component_value(c, c.default if value is None else value)
    cid = ids.state(c.key)
    if c.kind in ("choice", "multi"):
        opts = list(options if options is not None else c.options)
        if c.kind == "choice" and 0 < len(opts) <= 4 and c.section != "workload":
            return dcc.RadioItems(id=cid, options=opts, value=value, inline=True, className="radio")
        return dcc.Dropdown(
            id=cid, options=opts, value=value, clearable=False, multi=c.kind == "multi", className="dropdown"
        )
    if c.kind == "bool":
        return dcc.Checklist(id=cid, options=[{"label": c.label, "value": c.key}], value=value)
    if c.kind in ("int", "float"):
        return dcc.Input(
            id=cid,
            type="number",
            value=value,
            min=c.minimum,
            debounce=True,
            step=1 if c.kind == "int" else "any",
            className="number",
        )
    return dcc.Input(id=cid, type="text", value=value, debounce=True)


def labelled(c: Control, options: list | None = None, value: Any = None) -> html.Div:
    return html.Div(
        [html.Label(c.label, title=c.help, htmlFor=str(c.key)), control_component(c, options, value)],
        className="control",
        title=c.help,
    )


def section_controls(section: str, options: dict | None = None, state: Mapping[str, Any] | None = None) -> list:
    """The controls of ``section``, holding ``state``'s values (the defaults' without)."""
    options, state = options or {}, state or {}
    return [labelled(c, options.get(c.key), state.get(c.key)) for c in controls() if c.section == section]


def upload(cid: str, text: str, accept: str) -> dcc.Upload:
    return dcc.Upload(id=cid, children=html.Div(text), accept=accept, className="upload", multiple=False)


def sidebar() -> html.Div:
    from viewer.data import list_profiles

    options = {"model": list_models(), "device": list_devices() + ["host"], "profile": ["spec", *list_profiles()]}
    return html.Div(
        [
            html.H3("Workload"),
            *section_controls("workload", options),
            html.H3("Deployment"),
            *section_controls("settings"),
            html.H3("Your own files"),
            upload(ids.MODEL_UPLOAD, "Upload a config.json", ".json,application/json"),
            upload(ids.DEVICE_UPLOAD, "Upload a device YAML", ".yaml,.yml"),
            html.Div(id=ids.UPLOAD_ERROR, className="error", role="alert"),
        ],
        id=ids.SIDEBAR,
        className="sidebar",
    )


def error_line(cid: str) -> html.Div:
    return html.Div(id=cid, className="error", role="alert")


def graph(cid: str, height: int | None = None) -> dcc.Graph:
    style = {"height": f"{height}px"} if height else {}
    return dcc.Graph(id=cid, config={"displaylogo": False}, style=style)


def page_top(title: str, section: str, error_id: str, state: Mapping[str, Any]) -> list:
    """What every page starts with: its one-line title, its section's controls, its error line."""
    return [
        html.Div(title, className="page-title"),
        html.Div(section_controls(section, state=state), className="page-controls"),
        error_line(error_id),
    ]


def analyze_page(state: Mapping[str, Any]) -> html.Div:
    cards = [
        html.Div(
            [html.Div(title, className="card-title"), html.Div("-", id=ids.card(key), className="card-value")],
            className="card",
        )
        for key, title in CARD_TITLES
    ]
    columns = [
        {"id": cid, "name": name, "type": "numeric" if fmt else "text", **({"format": FORMATS[fmt]} if fmt else {})}
        for cid, name, fmt in TABLE_COLUMNS
    ]
    return html.Div(
        [
            html.Div(id=ids.ANALYZE_TITLE, className="page-title"),
            error_line(ids.ANALYZE_ERROR),
            html.Div(cards, id=ids.CARDS, className="cards"),
            graph(ids.ROOFLINE),
            html.Div(
                [html.Div(graph(ids.TIME_BREAKDOWN), className="half"), html.Div(graph(ids.MEMORY), className="half")],
                className="row",
            ),
            html.H3("Per-op table (one instance; 'x count' is the whole pass)"),
            dash_table.DataTable(
                id=ids.OP_TABLE,
                columns=columns,
                data=[],
                sort_action="native",
                filter_action="native",
                export_format="csv",
                page_size=50,
                style_table={"overflowX": "auto"},
                style_as_list_view=True,
                style_cell={"fontFamily": "inherit", "padding": "4px 8px"},
            ),
        ]
    )


def layer_page(state: Mapping[str, Any]) -> html.Div:
    return html.Div(
        [
            *page_top(
                f"One decoder layer in data-flow order: {bound_caption()}, "
                "size = time. Click an op for its numbers and its point on the roofline.",
                "layer",
                ids.LAYER_ERROR,
                state,
            ),
            html.Div(
                [
                    html.Div(
                        cyto.Cytoscape(
                            id=ids.LAYER_GRAPH,
                            elements=[],
                            layout={"name": "preset", "fit": True, "padding": 30},
                            stylesheet=CYTO_STYLE,
                            style={"height": "760px", "width": "100%"},
                            userZoomingEnabled=True,
                            minZoom=0.3,
                            maxZoom=2.5,
                        ),
                        className="half graph-box",
                    ),
                    html.Div(
                        [html.Div(id=ids.LAYER_DETAILS, className="details"), graph(ids.LAYER_ROOFLINE)],
                        className="half",
                    ),
                ],
                className="row",
            ),
        ]
    )


def sweep_page(state: Mapping[str, Any]) -> html.Div:
    return html.Div(
        [
            *page_top(
                "Latency, throughput and memory for several weight types; hollow crosses and "
                "dotted lines: out of memory.",
                "sweep",
                ids.SWEEP_ERROR,
                state,
            ),
            graph(ids.SWEEP_GRAPH),
        ]
    )


def compare_page(state: Mapping[str, Any]) -> html.Div:
    devices = {"devices": list_devices() + ["host"]}
    return html.Div(
        [
            html.Div("The workload and settings of the sidebar on several devices.", className="page-title"),
            html.Div(section_controls("compare", devices, state), className="page-controls"),
            error_line(ids.COMPARE_ERROR),
            graph(ids.COMPARE_GRAPH),
            dash_table.DataTable(
                id=ids.COMPARE_TABLE,
                data=[],
                style_as_list_view=True,
                style_cell={"fontFamily": "inherit", "padding": "4px 8px"},
            ),
        ]
    )


def validation_page(state: Mapping[str, Any]) -> html.Div:
    from viewer.data import validation_devices

    runs = {"runs": validation_devices()}
    return html.Div(
        [
            html.Div(id=ids.VALIDATION_MESSAGE, className="page-title"),
            html.Div(section_controls("validation", runs, state), className="page-controls"),
            html.Div(graph(ids.VALIDATION_SCATTER), id=f"{ids.VALIDATION_SCATTER}-box"),
            html.Div(graph(ids.VALIDATION_ERRORS), id=f"{ids.VALIDATION_ERRORS}-box"),
            html.Div(graph(ids.VALIDATION_ROOFS), id=f"{ids.VALIDATION_ROOFS}-box"),
            html.Div(
                [
                    dcc.Dropdown(id=ids.VALIDATION_WATERFALL_RUN, options=[], clearable=False, className="dropdown"),
                    graph(ids.VALIDATION_WATERFALL),
                ],
                id=f"{ids.VALIDATION_WATERFALL}-box",
            ),
        ]
    )


def priced_devices() -> list[str]:
    from ridgeline.io.prices import price_list

    return list(price_list()["usd_per_gpu_hour"])


def plan_options(state: Mapping[str, Any]) -> dict[str, list[str]]:
    """The Plan form's menus: the priced devices, and the types the chosen ones compute."""
    from viewer.plan import plan_types

    w_dtypes, kv_dtypes = plan_types(state["plan_devices"])
    return {"plan_devices": priced_devices(), "plan_w_dtypes": w_dtypes, "plan_kv_dtypes": kv_dtypes}


def serving_page(state: Mapping[str, Any]) -> html.Div:
    return html.Div(
        [
            *page_top(
                "Continuous batching under Poisson arrivals: each rate is one simulated run "
                "of the sidebar's model, device, settings, prompt and generated tokens.",
                "serving",
                ids.SERVING_ERROR,
                state,
            ),
            html.Div(id=ids.SERVING_SUMMARY),
            graph(ids.SERVING_LATENCY),
            graph(ids.SERVING_KV),
            html.H3("Plan: the cheapest deployments that serve this load within its SLO"),
            html.Div(
                "ridgeline plan over a small space: the sidebar's model, prompt and generated tokens, the "
                "form's max batch and token budget, the form's types (fp8 and fp4 where a device has the rate), "
                "datasheet rooflines; cost from the shipped price list.",
                className="page-title",
            ),
            html.Div(section_controls("plan", plan_options(state), state), className="page-controls"),
            error_line(ids.PLAN_ERROR),
            html.Div(id=ids.PLAN_SUMMARY),
            graph(ids.PLAN_GRAPH),
        ]
    )


PAGE_BUILDERS = {
    "analyze": analyze_page,
    "layer": layer_page,
    "sweep": sweep_page,
    "compare": compare_page,
    "validation": validation_page,
    "serving": serving_page,
}


def not_found() -> html.Div:
    """What a path that is no page shows: the pages, linked."""
    links = [dcc.Link(PAGE_TITLES[p], href="/" if p == "analyze" else f"/{p}") for p in PAGES]
    listed = [item for link in links for item in (link, ", ")][:-1]
    return html.Div([html.H2("No such page"), html.P(["The pages: ", *listed, "."])], id=ids.NOT_FOUND)


def page_content(pathname: str | None, state: Mapping[str, Any] | None = None) -> html.Div:
    """The components of the page ``pathname`` names (``not_found`` for no page), its controls
    holding ``state``'s values (the URL's: ``viewer.state.parse_query``)."""
    page = page_from_path(pathname)
    if page == NOT_FOUND:
        return not_found()
    return html.Div(PAGE_BUILDERS[page](state or defaults()), id=ids.page(page))


def every_page() -> html.Div:
    """The shell with every page in it: what Dash checks the callbacks' ids against
    (``app.validation_layout``), since only the shown page is in the page at a time."""
    return html.Div([build_layout(), not_found(), *(page_content(f"/{p}") for p in PAGES)])


def build_layout() -> html.Div:
    return html.Div(
        [
            dcc.Location(id=ids.URL, refresh=False),
            dcc.Store(id=ids.UPLOADS, storage_type="session", data={"models": {}, "devices": {}}),
            html.Header(
                [
                    html.H1("ridgeline"),
                    dcc.Tabs(
                        id=ids.TABS,
                        value="analyze",
                        className="tabs",
                        children=[dcc.Tab(label=PAGE_TITLES[p], value=p) for p in PAGES],
                    ),
                ],
                className="header",
            ),
            html.Div(
                [
                    sidebar(),
                    html.Main(
                        [
                            error_line(ids.URL_ERROR),
                            html.Div(id=ids.PAGE, className="page"),
                        ],
                        className="main",
                    ),
                ],
                className="body",
            ),
        ],
        className="app",
    )
