"""Self-contained HTML validation report (plotly.js embedded, no network needed).

Three figures, pure functions of the snapshot: predicted vs measured (log-log, y = x with
+-10% and +-25% bands), signed error by op class for both modes, and the measured
roofline (achieved ops/s vs arithmetic intensity) over the spec and calibrated roofs.
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping
from typing import Any

import numpy as np

from kernels.validate.replay import MODES, percent

MODE_COLOURS = {"spec": "#d62728", "calibrated": "#1f77b4"}


def _plotly():
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError as err:  # pragma: no cover - plotly comes with the viewer extra
        from ridgeline.errors import RidgelineError

        raise RidgelineError("the HTML report needs plotly: pip install -e '.[viewer]'") from err
    return go, pio


def have_plotly() -> bool:
    import importlib.util

    return importlib.util.find_spec("plotly") is not None


def _ok(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Measured rows predicted in every mode (a row of a type the profile measured no
    class of stays unpriced in that mode: ``unpriced_<mode>`` says why)."""
    return [
        r for r in result["rows"] if r["status"] == "ok" and all(r.get(f"error_{mode}") is not None for mode in MODES)
    ]


def scatter_figure(result: Mapping[str, Any]):
    go, _ = _plotly()
    rows = _ok(result)
    fig = go.Figure()
    if not rows:
        return fig
    measured = np.array([r["measured_s"] for r in rows])
    lo, hi = measured.min() / 3, measured.max() * 3
    line = np.geomspace(lo, hi, 50)
    for band, alpha in ((0.25, 0.08), (0.10, 0.15)):
        fig.add_trace(
            go.Scatter(
                x=np.r_[line, line[::-1]],
                y=np.r_[line * (1 + band), line[::-1] * (1 - band)],
                fill="toself",
                line_width=0,
                fillcolor=f"rgba(0,128,0,{alpha})",
                name=f"±{band:.0%}",
                hoverinfo="skip",
            )
        )
    fig.add_trace(go.Scatter(x=line, y=line, mode="lines", line=dict(color="black", dash="dot"), name="y = x"))
    for mode in MODES:
        fig.add_trace(
            go.Scatter(
                x=measured,
                y=[r[f"predicted_{mode}_s"] for r in rows],
                mode="markers",
                marker=dict(color=MODE_COLOURS[mode], size=6, opacity=0.7),
                name=mode,
                text=[f"{r['name']}<br>{r['op_class']}, error {r[f'error_{mode}']:+.1%}" for r in rows],
                hovertemplate="%{text}<br>measured %{x:.3g} s<br>predicted %{y:.3g} s<extra></extra>",
            )
        )
    fig.update_layout(
        title="Predicted vs measured seconds per kernel call",
        xaxis=dict(type="log", title="measured (s)"),
        yaxis=dict(type="log", title="predicted (s)"),
        height=600,
    )
    return fig


def error_figure(result: Mapping[str, Any]):
    go, _ = _plotly()
    rows = _ok(result)
    fig = go.Figure()
    for mode in MODES:
        fig.add_trace(
            go.Box(
                x=[r["op_class"] for r in rows],
                y=[r[f"error_{mode}"] * 100 for r in rows],
                name=mode,
                marker_color=MODE_COLOURS[mode],
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                text=[r["name"] for r in rows],
            )
        )
    for y in (-25, -10, 10, 25):
        fig.add_hline(y=y, line=dict(color="green", dash="dot", width=1))
    fig.update_layout(
        boxmode="group",
        title="Signed error by op class (predicted / measured - 1)",
        yaxis_title="error (%)",
        height=500,
    )
    return fig


def roofline_figure(result: Mapping[str, Any]):
    go, _ = _plotly()
    rows = [r for r in _ok(result) if r["flops"] > 0 and r["bytes"] > 0]
    fig = go.Figure()
    if not rows:
        return fig
    intensity = np.array([r["flops"] / r["bytes"] for r in rows])
    x = np.geomspace(max(intensity.min() / 3, 1e-3), intensity.max() * 3, 200)
    for mode, dash in (("spec", "dash"), ("calibrated", "solid")):
        c = result["ceilings"][mode]
        for dtype, peak in sorted(c["matrix_peak"].items()):
            if dtype not in {r["op_dtype"] for r in rows}:
                continue
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=np.minimum(peak, x * c["bandwidth"]),
                    mode="lines",
                    line=dict(color=MODE_COLOURS[mode], dash=dash, width=1.5),
                    name=f"{mode} roof {dtype}",
                )
            )
    classes = sorted({r["op_class"] for r in rows})
    for cls in classes:
        part = [r for r in rows if r["op_class"] == cls]
        fig.add_trace(
            go.Scatter(
                x=[r["flops"] / r["bytes"] for r in part],
                y=[r["flops"] / r["measured_s"] for r in part],
                mode="markers+lines" if cls == "sweep" else "markers",
                name=f"measured {cls}",
                text=[r["name"] for r in part],
                marker=dict(size=7),
                hovertemplate="%{text}<br>%{x:.3g} ops/byte<br>%{y:.3g} ops/s<extra></extra>",
            )
        )
    fig.update_layout(
        title="Measured roofline over the spec and calibrated roofs",
        xaxis=dict(type="log", title="arithmetic intensity (ops/byte)"),
        yaxis=dict(type="log", title="achieved ops/s"),
        height=600,
    )
    return fig


def _summary_table(result: Mapping[str, Any]) -> str:
    head = (
        "<tr><th>op class</th><th>cases</th><th>noisy</th>"
        + "".join(f"<th>{m} median |err|</th><th>{m} p90</th><th>{m} bias</th>" for m in MODES)
        + "</tr>"
    )
    body = []
    for r in result["summary"]:
        cells = "".join(
            f"<td>{percent(r[f'{m}_median_abs'])}</td><td>{percent(r[f'{m}_p90_abs'])}</td>"
            f"<td>{percent(r[f'{m}_bias'], True)}</td>"
            for m in MODES
        )
        body.append(f"<tr><td>{_html.escape(r['op_class'])}</td><td>{r['count']}</td><td>{r['noisy']}</td>{cells}</tr>")
    return f"<table>{head}{''.join(body)}</table>"


def _state_line(meta: Mapping[str, Any]) -> str:
    """The machine's state against the profile while the cases ran (``kernels.calibrate.state``)."""
    from kernels.calibrate.state import recorded_line

    line = recorded_line(meta)
    return f"<p><b>{_html.escape(line)}</b></p>" if line else ""


def report_html(result: Mapping[str, Any]) -> str:
    _, pio = _plotly()
    meta = result["meta"]
    figures = [scatter_figure(result), error_figure(result), roofline_figure(result)]
    parts = [pio.to_html(f, full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figures)]
    problems = [r for r in result["rows"] if r["status"] != "ok"]
    problem_list = "".join(
        f"<li>{_html.escape(r['name'])}: {r['status']}: {_html.escape(r['reason'])}</li>" for r in problems
    )
    meta_rows = "".join(
        f"<tr><th>{_html.escape(str(k))}</th><td>{_html.escape(str(v))}</td></tr>"
        for k, v in meta.items()
        if not isinstance(v, dict)
    )
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>ridgeline validation: {_html.escape(meta.get("device_key", ""))}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} th{{background:#f4f4f4}}</style>
</head><body>
<h1>ridgeline validation — {_html.escape(str(meta.get("device", "")))}</h1>
<p>Held-out kernel shapes measured on the device and predicted by the roofline in two modes:
<b>spec</b> (datasheet / detected peaks: {_html.escape(str(meta.get("spec_device_full_name", "")))}) and
<b>calibrated</b> (profile {_html.escape(str(meta.get("profile", "")))}). Error = predicted / measured - 1.</p>
{_state_line(meta)}<h2>Summary</h2>{_summary_table(result)}
{"".join(parts)}
<h2>Cases not measured</h2><ul>{problem_list or "<li>none</li>"}</ul>
<h2>Provenance</h2><table>{meta_rows}</table>
</body></html>
"""


def main(argv: list[str] | None = None) -> int:
    """python -m kernels.validate.html SNAPSHOT.json [...]: (re)render the HTML beside each snapshot."""
    import json
    import sys
    from pathlib import Path

    from ridgeline.io.files import write_atomic

    for name in sys.argv[1:] if argv is None else argv:
        path = Path(name)
        write_atomic(path.with_suffix(".html"), report_html(json.loads(path.read_text())))
        print(f"wrote {path.with_suffix('.html')}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
