"""The dashboard's interval bands (issue 27): on the roofline, the breakdown, the sweep and
the serving chart where the deployment has residuals, and the reason in the caption where not."""

from __future__ import annotations

import numpy as np
import pytest

import ridgeline as rl
from ridgeline.engine.intervals import fit_table
from ridgeline.io.resolve import resolve
from viewer import data, figures, serving
from viewer.state import defaults, parse_query, to_query

MODEL, DEVICE = "llama-3.2-1b", "a6000"
EVEN = np.linspace(-0.3, 0.3, 61)  # log ratios: the 10 % and 90 % quantiles are -0.24 and 0.24
WHY = "no measured interval: none for this test"


def with_table(log_ratios, **options):
    n = len(log_ratios)
    table = fit_table(log_ratios, [[]] * n, ["small"] * n, "hand-made residuals")
    return resolve(MODEL, DEVICE, intervals=(table, ""), **options)


def without_table(**options):
    return resolve(MODEL, DEVICE, intervals=(None, WHY), **options)


def bands_of(fig):
    return [t for t in fig.data if str(t.meta).startswith("band:")]


def caption(fig) -> str:
    (note,) = [a.text for a in fig.layout.annotations if a.name == "interval-caption"]
    return note.replace("<br>", " ")  # wrapped to the figure's width


def test_roofline_bands_are_each_ops_perf_over_its_time_interval():
    """Every op (pool only: one group) spans perf / e^0.24 .. perf / e^-0.24."""
    a = rl.analyze(with_table(EVEN), batch=1, seq_len=256, generate=16)
    fig = figures.roofline_figure(a)
    band = next(t for t in bands_of(fig) if t.meta == "band:decode:linear")
    points = next(t for t in fig.data if t.meta == "ops:decode:linear")
    lo, hi = np.asarray(band.y, dtype=float).reshape(-1, 3)[:, :2].T
    assert lo == pytest.approx(np.asarray(points.y) / np.exp(0.24), rel=1e-9)
    assert hi == pytest.approx(np.asarray(points.y) / np.exp(-0.24), rel=1e-9)
    shown = {t.meta.split(":", 1)[1] for t in fig.data if str(t.meta).startswith("ops:")}
    assert {t.meta.split(":", 1)[1] for t in bands_of(fig)} == shown  # one band trace per marker trace
    assert caption(fig) == "bands: 80 % intervals from hand-made residuals"
    spec = figures.interval_caption({"basis": "spec residuals from 2 gpu devices"})
    assert spec.endswith(
        "devices; the datasheet roofline is a bound that measured kernels did not reach: a band may leave out its point"
    )


@pytest.mark.parametrize("generate", [0, 16])
def test_breakdown_band_spans_its_bars_interval_in_ms(generate):
    """One band per stacked bar, in the bar's milliseconds: the stage's own interval (TTFT
    and TPOT with a generation, the passes without) scaled to the bar. Residuals centred on
    0 (quantiles -0.24 and 0.24): the band straddles the bar's top, never a multiple of it."""
    a = rl.analyze(with_table(EVEN), batch=1, seq_len=256, generate=generate)
    fig = figures.time_breakdown_figure(a)
    intervals = a.extra["intervals"]
    keys = {"prefill": "ttft_s", "decode": "tpot_s"} if generate else {"prefill": "prefill_s", "decode": "decode_s"}
    points = {"prefill": a.prefill.total["time_s"], "decode": a.decode.total["time_s"]}
    if generate:
        points["decode"] = a.generation["tpot_s"]
    for stage in ("prefill", "decode"):
        ms = sum(t.y[0] for t in fig.data if str(t.meta).startswith(f"time:{stage}:"))
        (band,) = [t for t in fig.data if t.meta == f"band:{stage}"]
        lo, hi = intervals[keys[stage]]["80"]
        assert list(band.x) == [stage, stage]
        assert band.y == pytest.approx((ms * lo / points[stage], ms * hi / points[stage]), rel=1e-12)
        assert band.y == pytest.approx((ms * np.exp(-0.24), ms * np.exp(0.24)), rel=0.03)
        assert band.y[0] < ms < band.y[1]
    assert all(t.error_y.array is None for t in fig.data)
    bar = next(t for t in fig.data if t.meta == "time:prefill:linear")
    assert "80 %: " in bar.hovertemplate  # each kind's own interval stays in its hover
    assert caption(fig).startswith("bands: 80 % intervals from hand-made residuals")


def test_no_table_no_bands_and_the_reason_shown():
    a = rl.analyze(without_table(), batch=1, seq_len=256, generate=16)
    roof, breakdown = figures.roofline_figure(a), figures.time_breakdown_figure(a)
    assert not bands_of(roof) and caption(roof) == WHY
    assert all(t.error_y.array is None for t in breakdown.data) and caption(breakdown) == WHY
    assert not [t for t in breakdown.data if str(t.meta).startswith("band:")]
    frame = rl.sweep(without_table(), batch=[1, 8], seq_len=[256], generate=16)
    frame.attrs["intervals"] = data.with_bands(frame, rl.api.sweep_bands(without_table(), frame, 16))
    assert frame.attrs["intervals"] == {"none": WHY}


def sweep_state(**changes):
    return {**defaults(), "model": MODEL, "device": DEVICE, "batch": 4, "seq_len": 256, "generate": 16, **changes}


@pytest.mark.parametrize("generate", [0, 16])
def test_sweep_bands_zero_spread_are_the_line(monkeypatch, generate):
    """Residuals all 0: each band's ends are the plotted line itself."""
    monkeypatch.setattr(data, "deployment_for", lambda state, uploads=None: with_table(np.zeros(40)))
    fig = figures.sweep_figure(data.sweep_frame(sweep_state(generate=generate, sweep_dtypes=["fp16"])))
    for col in ("ttft_s", "tpot_s", "tokens_per_s"):
        line = next(t for t in fig.data if t.meta == f"sweep:fp16:{col}")
        band = next(t for t in fig.data if t.meta == f"band:fp16:{col}")
        lo, hi = figures.band_ends(band)
        assert list(lo) == pytest.approx(list(line.y), rel=1e-12)
        assert list(hi) == pytest.approx(list(line.y), rel=1e-12)
        assert band.fill == "toself" and list(band.x) == [*line.x, *line.x[::-1]]


def test_sweep_bands_with_spread_bracket_the_line(monkeypatch):
    """Spread evenly around 0: lo < line < hi at every point; one class, so TTFT's band is
    the pool's own 10 % and 90 % quantiles (of 512 draws) times the line."""
    monkeypatch.setattr(data, "deployment_for", lambda state, uploads=None: with_table(EVEN))
    frame = data.sweep_frame(sweep_state(sweep_dtypes=["fp16", "int4"]))
    fig = figures.sweep_figure(frame)
    for w in ("fp16", "int4"):
        for col in ("ttft_s", "tpot_s", "tokens_per_s"):
            line = np.asarray(next(t for t in fig.data if t.meta == f"sweep:{w}:{col}").y)
            lo, hi = figures.band_ends(next(t for t in fig.data if t.meta == f"band:{w}:{col}"))
            assert np.all(lo < line) and np.all(line < hi)
    ttft = frame["ttft_s"].to_numpy()
    assert frame["ttft_s_lo80"].to_numpy() == pytest.approx(ttft * np.exp(-0.24), rel=0.02)
    assert frame["ttft_s_hi80"].to_numpy() == pytest.approx(ttft * np.exp(0.24), rel=0.02)
    assert caption(fig).startswith("bands: 80 % intervals from hand-made residuals; per point")


QUERY = to_query({**parse_query(""), "model": MODEL, "device": DEVICE, "seq_len": 128, "generate": 16})


def swap_serving_deployment(monkeypatch, deployment) -> None:
    """``serving_runs`` on ``deployment`` whatever the view, with memos of its own for the
    test (the page's keep a view's server and runs, and must not keep these)."""
    monkeypatch.setattr(data, "deployment_for", lambda state, uploads=None: deployment)
    monkeypatch.setattr(serving, "view_server", data.view_memo()(serving.view_server.__wrapped__))
    monkeypatch.setattr(serving, "serving_runs", data.view_memo()(serving.serving_runs.__wrapped__))


def test_serving_bands_and_caption(monkeypatch):
    swap_serving_deployment(monkeypatch, with_table(EVEN, attention="flash"))
    state = {**parse_query(QUERY), "serving_rates": "4,16", "serving_requests": 40}
    runs = serving.serving_runs(state)
    fig = serving.latency_figure(runs)
    assert len(bands_of(fig)) == 3 * 3  # TTFT, TPOT, latency x p50, p90, p99
    lo, hi = figures.band_ends(next(t for t in fig.data if t.meta == "band:latency_s:p99"))
    points = [r.summary["latency_s"]["p99"] for _, r, _ in runs]
    assert all(a <= p <= b for a, p, b in zip(lo, points, hi))
    assert caption(fig).startswith("bands: 80 % intervals from hand-made residuals; 4 more runs")


def test_serving_without_table_shows_why(monkeypatch):
    swap_serving_deployment(monkeypatch, without_table(attention="flash"))
    state = {**parse_query(QUERY), "serving_rates": "4", "serving_requests": 20}
    fig = serving.latency_figure(serving.serving_runs(state))
    assert not bands_of(fig) and caption(fig) == WHY
