"""Static export: the Analyze page's charts and op table in one self-contained HTML file.

``ridgeline analyze ... --html report.html`` calls :func:`write_html`. plotly.js is inlined
once, so the file opens offline; it is written atomically.
"""

from __future__ import annotations

import html
from pathlib import Path

from ridgeline.engine.analyze import Analysis
from ridgeline.io.files import write_atomic
from viewer import figures
from viewer.figures import CARD_TITLES, TABLE_COLUMNS, analysis_title, op_rows

STYLE = """
body { font-family: -apple-system, "Segoe UI", Roboto, Arial, sans-serif; margin: 16px 24px;
       color: #1d2330; background: #fff; }
@media (prefers-color-scheme: dark) { body { color: #e3e6eb; background: #14171c; }
  .card { background: #1d2128 !important; border-color: #343a45 !important; }
  .js-plotly-plot .plotly .main-svg text { fill: #e3e6eb !important; } }
h1 { font-size: 20px; } .muted { color: #5b6475; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { flex: 1; min-width: 140px; background: #f5f6f8; border: 1px solid #d9dde3;
        border-radius: 8px; padding: 10px 14px; }
.card .t { font-size: 12px; text-transform: uppercase; color: #5b6475; }
.card .v { font-size: 22px; font-weight: 600; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #d9dde388; text-align: right; }
th { position: sticky; top: 0; background: inherit; }
td.text, th.text { text-align: left; }
"""


def _cell(value, numeric: str | None) -> str:
    if not numeric:
        return html.escape(str(value))
    from ridgeline.engine.units import format_si

    if numeric == "d":
        return str(int(value))
    return format_si(value) if numeric == "si" else f"{value:.4g}"


def op_table_html(analysis: Analysis) -> str:
    """Both stages' per-op rows as a plain HTML table (the dashboard's columns)."""
    head = "".join(f'<th class="{"" if fmt else "text"}">{html.escape(name)}</th>' for _, name, fmt in TABLE_COLUMNS)
    body = []
    for row in op_rows(analysis):
        cells = "".join(
            f'<td class="{"" if fmt else "text"}">{_cell(row[key], fmt)}</td>' for key, _, fmt in TABLE_COLUMNS
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(analysis: Analysis) -> str:
    """The whole report as one HTML string (plotly.js inlined in the first chart)."""
    cards = figures.format_cards(analysis)
    card_html = "".join(
        f'<div class="card"><div class="t">{title}</div><div class="v">{html.escape(cards[key])}</div></div>'
        for key, title in CARD_TITLES
    )
    charts = [
        figures.roofline_figure(analysis),
        figures.time_breakdown_figure(analysis),
        figures.memory_figure(analysis),
    ]
    chart_html = "".join(
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        for i, fig in enumerate(charts)
    )
    title = html.escape(analysis_title(analysis)).replace("\n", "<br>")
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>ridgeline: "
        f"{html.escape(analysis.model.name)} on {html.escape(analysis.device.name)}</title>"
        f"<style>{STYLE}</style></head><body><h1>ridgeline</h1><p class='muted'>{title}</p>"
        f"<div class='cards'>{card_html}</div>{chart_html}"
        f"<h2>Per-op table</h2><p class='muted'>time per instance (µs); 'x count' is the "
        f"whole pass (ms)</p>{op_table_html(analysis)}</body></html>"
    )


def write_html(analysis: Analysis, path: str | Path) -> None:
    write_atomic(path, render_html(analysis))
