"""The dashboard's polish (issue 30 item 11), asserted on the figure objects: what each
screenshot showed wrong, fixed where the figure is built."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("dash")

from dash.exceptions import PreventUpdate

import ridgeline as rl
from viewer import callbacks, data, figures, ids, layout, state

PAGE_PX = 800 - 278 - 36  # an 800 px window less the sidebar (250 + padding) and the main's padding


@pytest.fixture(scope="module")
def analysis():
    return rl.analyze("llama-2-7b", "a6000", batch=8, seq_len=1024, generate=256)


def test_the_roofline_legend_never_scrolls(analysis):
    fig = figures.roofline_figure(analysis)
    entries = sum(1 for t in fig.data if t.showlegend is not False and t.name)
    assert any(t.name == "attention (prefill)" for t in fig.data)
    assert fig.layout.legend.tracegroupgap == 0
    assert fig.layout.height >= entries * figures.LEGEND_ROW_PX + fig.layout.margin.t + fig.layout.margin.b


def test_log_axes_one_notation_and_decades_only(analysis):
    fig = figures.roofline_figure(analysis)
    assert fig.layout.yaxis.exponentformat == "SI" and fig.layout.yaxis.dtick == 1
    labels = list(fig.layout.yaxis.ticktext)  # a6000: 10 G up to the int4 roof's 1P decade
    assert labels[-3:] == ["10T", "100T", "1P"] and not [t for t in labels if "e" in t or "^" in t]
    assert [figures.si_decade(k) for k in (-1, 0, 14, 15, 16)] == ["100m", "1", "100T", "1P", "10P"]
    assert fig.layout.xaxis.exponentformat == "none" and fig.layout.xaxis.dtick == 1


def test_layer_boxes_hold_their_labels_and_the_caption_names_every_colour():
    io = next(rule["style"] for rule in layout.CYTO_STYLE if rule["selector"] == ".io")
    assert io["width"] >= io["font-size"] * 0.6 * len("layer input") + 10
    caption = figures.bound_caption()
    for bound in figures.BOUND_COLORS:
        assert f"{figures.BOUND_COLOR_NAMES[bound]} {bound}" in caption
    assert "all-reduce" in caption


def test_memory_draws_capacity_and_usable(analysis):
    fig = figures.memory_figure(analysis)
    xs = sorted(round(shape.x0, 6) for shape in fig.layout.shapes)
    gib = 2**30
    assert xs == sorted(round(analysis.memory[k] / gib, 6) for k in ("capacity_bytes", "usable_bytes"))
    texts = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("capacity ") for t in texts) and any(t.startswith("usable ") for t in texts)


def test_error_targets_sit_in_the_legend_not_over_the_bars():
    frame = data.load_validation()[0]
    fig = figures.validation_error_figure(frame)
    assert not [a for a in fig.layout.annotations if "%" in (a.text or "")]
    assert {t.meta for t in fig.data if str(t.meta).startswith("target:")} == {"target:10", "target:25"}


def title_lines(fig) -> list[str]:
    return [line for a in fig.layout.annotations for line in re.split("<br>", a.text or "")]


def test_subplot_titles_fit_side_by_side_at_800_px():
    frame = data.compare_frame(state.parse_query("?devices=a6000,h100-sxm"))
    fig = figures.compare_figure(frame)
    plot_px = PAGE_PX - fig.layout.margin.l - fig.layout.margin.r
    width = min(fig.layout[f"xaxis{i or ''}"].domain[1] - fig.layout[f"xaxis{i or ''}"].domain[0] for i in range(4))
    size = figures.SUBPLOT_TITLE_PX
    longest = max(len(line) for line in title_lines(fig)[:4])
    assert longest * 0.6 * size <= width * plot_px  # a line of 12 px text: about 0.6 em a character


@pytest.mark.parametrize("seconds", [5.02e7, 1234.5, 0.000123])
def test_no_exponent_in_times_and_numbers(seconds):
    assert "e+" not in figures.time_text(seconds) and "e-" not in figures.time_text(seconds)
    assert figures.number(5.02e7) == "50,200,000" and figures.number(0.000123) == "0.000123"


def test_no_exponent_on_the_cards_of_a_very_long_run():
    a = rl.analyze("llama-2-7b", "a6000", batch=1, seq_len=4_000_000, generate=1_000_000)
    assert not [v for v in figures.format_cards(a).values() if re.search(r"\de[+-]\d", v)]


def test_a_path_that_is_no_page_says_so_and_lists_the_pages():
    box = callbacks.show_page("/nonexistent", "")
    assert box.id == ids.NOT_FOUND
    assert callbacks.show_page("/", "").id == ids.page("analyze")
    text = str(box)
    assert "No such page" in text and all(state.PAGE_TITLES[p] in text for p in state.PAGES)
    with pytest.raises(PreventUpdate):
        callbacks.update_analyze("/nonexistent", "", None)


def test_the_page_shows_no_server_paths():
    root = str(data.REPORTS_DIR.parent)
    assert root not in data.shown_folders() and data.shown_folders().startswith("reports/validation")
    message = callbacks.update_validation("/validation", "")[0]
    assert root not in message
    assert data.hide_paths(f"cannot read {root}/reports/x.json") == "cannot read reports/x.json"


def test_serving_latency_axes_label_several_values_each():
    from viewer import serving

    runs = serving.serving_runs(state.parse_query("?model=llama-3.2-1b&seq_len=256&generate=16&serving_rates=1,50"))
    fig = serving.latency_figure(runs)
    for col, axis in enumerate((fig.layout.yaxis, fig.layout.yaxis2, fig.layout.yaxis3), start=1):
        name = "y" if col == 1 else f"y{col}"
        ys = np.array([y for t in fig.data if t.yaxis == name for y in t.y if y and y > 0])
        ticks = list(axis.tickvals)
        assert ticks == figures.log_ticks(ys.min(), ys.max())
        assert len(ticks) >= 2 and all(ys.min() <= t <= ys.max() for t in ticks)
        assert list(axis.ticktext) == [figures.number(t, 3) for t in ticks]


# --- issue 59 item 12: what the 1400 and 1024 px screenshots showed ------------------------


@pytest.mark.parametrize(
    ("lo", "hi", "ticks"),
    [
        (0.0046, 0.078, [0.005, 0.01, 0.02, 0.05]),  # the TPOT axis that showed one label, '0.1'
        (0.6, 10.06, [1, 2, 5, 10]),
        (1e-3, 20.0, [1e-3, 1e-2, 1e-1, 1, 10]),
        (0.0051, 0.0062, [0.006]),  # narrower than 1-2-5 and digits: what falls in it
    ],
)
def test_log_ticks_label_several_values_in_the_range(lo, hi, ticks):
    assert figures.log_ticks(lo, hi) == pytest.approx(ticks)


def serving_runs_with_bands():
    from viewer import serving

    runs = serving.serving_runs(state.parse_query(state.to_query({**state.defaults(), "serving_rates": "5,10,20"})))
    assert all("none" not in b for *_, b in runs), "the default view's deployment has residuals"
    return runs


def test_serving_bands_are_drawn_at_their_own_line_s_points():
    """Each percentile's band spans that percentile's interval at the line's own rates, in
    the line's own subplot: never another percentile's or another metric's values."""
    from viewer import serving

    runs = serving_runs_with_bands()
    fig = serving.latency_figure(runs)
    for key, axis in (("ttft_s", "y"), ("tpot_s", "y2"), ("latency_s", "y3")):
        for q in ("p50", "p90", "p99"):
            line = next(t for t in fig.data if t.name == q and t.yaxis == axis and not t.meta)
            band = next(t for t in fig.data if t.meta == f"band:{key}:{q}")
            lo, hi = figures.band_ends(band)
            assert band.yaxis == axis and band.fill == "toself" and list(band.x) == [*line.x, *line.x[::-1]]
            assert list(line.y) == [r.summary[key][q] for _, r, _ in runs]
            assert list(lo) == [b[key][q][figures.BAND][0] for *_, b in runs]
            assert list(hi) == [b[key][q][figures.BAND][1] for *_, b in runs]
            # around its point: within the step-time factors' spread of it (the runs scale every step)
            factors = [
                f for *_, b in runs for f in (b["step_factors"]["10"]["decode"], b["step_factors"]["90"]["prefill"])
            ]
            assert all(lo_y <= hi_y for lo_y, hi_y in zip(lo, hi))
            assert all(lo_y >= y * min(factors) / 2 for lo_y, y in zip(lo, line.y))


def test_captions_wrap_within_the_figure_and_sit_below_the_axis_title(analysis):
    from viewer import serving

    wide = [figures.roofline_figure(analysis), serving.latency_figure(serving_runs_with_bands())]
    for fig, most in [
        *((f, figures.CAPTION_CHARS) for f in wide),
        (figures.time_breakdown_figure(analysis), figures.HALF_CAPTION_CHARS),
    ]:
        (note,) = [a for a in fig.layout.annotations if a.name == "interval-caption"]
        lines = note.text.split("<br>")
        assert len(lines) >= 2 and all(len(line) <= most for line in lines)
        assert note.yshift == -figures.CAPTION_TOP_PX  # below the x axis' tick labels and title
        assert fig.layout.margin.b >= figures.CAPTION_TOP_PX + figures.CAPTION_LINE_PX * len(lines)
    # a half-page chart's line fits the half of a 1024 px window's page: ~6 px a character at 11 px
    assert figures.HALF_CAPTION_CHARS * 6 <= (1024 - 278 - 36) / 2 - 60


def test_the_plan_chart_spans_its_points_not_zero_to_them():
    from viewer import plan

    result = plan.run_plan(state.parse_query(PLAN_QUERY))
    fig = plan.plan_figure(result)
    done = result.frame[result.frame["reason"] == ""]
    for axis, col in ((fig.layout.xaxis, "usd_per_million_tokens"), (fig.layout.yaxis, "goodput_rps")):
        lo, hi = axis.range
        values = done[col].to_numpy(float)
        assert lo <= values.min() and values.max() <= hi
        if values.max() > values.min():  # the points fill most of the axis
            assert (values.max() - values.min()) / (hi - lo) > 0.75
    assert plan.padded_range(done["goodput_rps"].iloc[:1])[0] < done["goodput_rps"].iloc[0]


PLAN_QUERY = "?model=llama-3-8b&device=h100-sxm&plan_devices=a100-80gb,h100-sxm,h200"


def test_sweep_log_axes_label_whole_values_not_bare_digits():
    frame = data.sweep_frame(state.parse_query("?model=llama-2-13b&seq_len=2048&generate=256"))
    fig = figures.sweep_figure(frame)
    for row in range(1, len(figures.SWEEP_ROWS) + 1):
        axis = fig.layout["yaxis" if row == 1 else f"yaxis{row}"]
        name = "y" if row == 1 else f"y{row}"
        ys = np.array([y for t in fig.data if t.yaxis == name and t.y is not None for y in t.y], dtype=float)
        ys = ys[np.isfinite(ys) & (ys > 0)]
        assert list(axis.tickvals) == figures.log_ticks(ys.min(), ys.max()) and len(axis.tickvals) >= 3
        assert list(axis.ticktext) == [figures.number(t, 3) for t in axis.tickvals]


def test_measured_roofline_labels_peta_as_the_analyze_roofline_does():
    fig = callbacks.profile_figure("cuda-nvidia-h100-80gb-hbm3")
    labels = list(fig.layout.yaxis.ticktext)
    assert "1P" in labels and not [t for t in labels if "^" in t or "e" in t]
    powers = np.log10(list(fig.layout.yaxis.tickvals))
    assert np.array_equal(np.diff(powers), np.ones(len(powers) - 1))  # every decade, once
    assert labels == [figures.si_decade(int(round(k))) for k in powers]
