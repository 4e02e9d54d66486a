"""The dashboard's polish (issue 30 item 11), asserted on the figure objects: what each
screenshot showed wrong, fixed where the figure is built."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("dash")

from dash.exceptions import PreventUpdate

import ridgeline as rl
from viewer import callbacks, data, figures, layout, state

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
    styles = callbacks.page_styles("/nonexistent")
    assert styles[-1] == {"display": "block"} and all(s == {"display": "none"} for s in styles[:-1])
    assert callbacks.page_styles("/")[0] == {"display": "block"}
    box = layout.not_found()
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


def test_serving_latency_axes_label_decades_only_when_they_span_one():
    from viewer import serving

    runs = serving.serving_runs(state.parse_query("?model=llama-3.2-1b&seq_len=256&generate=16&serving_rates=1,50"))
    fig = serving.latency_figure(runs)
    ys = [y for t in fig.data for y in t.y if y and y > 0]
    wide = max(ys) >= 10 * min(ys)
    assert (fig.layout.yaxis.dtick == 1) == wide
