"""Subplot titles at an 800 px wide window, as Chromium draws them (issue 30 item 11): no two
titles of a figure overlap and none is cut by the figure's edge, read from the rendered SVG
text's bounding boxes rather than estimated from character counts.

Needs Debian's ``chromium`` + ``chromium-driver`` and ``selenium``; skipped without them.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore::DeprecationWarning:dash")]

pytest.importorskip("selenium")
pytest.importorskip("dash")

from viewer import ids  # noqa: E402
from viewer.screenshots import PAGES, chrome, chromium_paths, serve_in_thread, wait_for, wait_idle  # noqa: E402

if chromium_paths() is None:
    pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)

WIDTH = 800  # px: the window the issue saw the titles overlap in
# page, its query, the graph whose subplots carry titles
FIGURES = (
    ("analyze", PAGES["analyze"][0], ids.TIME_BREAKDOWN),
    ("compare", PAGES["compare"][0], ids.COMPARE_GRAPH),
    ("serving", "?model=llama-3.2-1b&seq_len=256&generate=16&serving_rates=1,5", ids.SERVING_LATENCY),
)
# the figure's box and each subplot title's box (make_subplots' titles are its first
# annotations, one per subplot), as the page lays them out
BOXES = """
const graph = document.getElementById(arguments[0]);
const plot = graph.querySelector('.js-plotly-plot');
const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
const count = plot._fullLayout._subplots.cartesian.length;
const titles = [];
for (let i = 0; i < count; i++) {
  const text = plot.querySelector(`g.annotation[data-index="${i}"] text.annotation-text`);
  titles.push({text: text.textContent, ...box(text.getBoundingClientRect())});
}
return {figure: box(plot.querySelector('.main-svg').getBoundingClientRect()), titles: titles};
"""
SLACK = 0.5  # px: sub-pixel rounding


def overlap(a: dict, b: dict) -> bool:
    return min(a["right"], b["right"]) - max(a["left"], b["left"]) > SLACK and (
        min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > SLACK
    )


def inside(title: dict, figure: dict) -> bool:
    return all(
        (
            title["left"] >= figure["left"] - SLACK,
            title["right"] <= figure["right"] + SLACK,
            title["top"] >= figure["top"] - SLACK,
            title["bottom"] <= figure["bottom"] + SLACK,
        )
    )


@pytest.fixture(scope="module")
def narrow():
    with serve_in_thread() as base, chrome(WIDTH, 1000) as driver:
        driver.base = base
        yield driver


@pytest.mark.parametrize(("page", "query", "graph"), FIGURES, ids=[f[0] for f in FIGURES])
def test_subplot_titles_neither_overlap_nor_leave_the_figure_at_800_px(narrow, page, query, graph):
    narrow.get(f"{narrow.base}/{page}{query}")
    wait_for(narrow, f"#{graph} .main-svg")
    wait_idle(narrow)
    boxes = narrow.execute_script(BOXES, graph)
    figure, titles = boxes["figure"], boxes["titles"]
    assert figure["right"] - figure["left"] < WIDTH  # the figure really is drawn this narrow
    assert len(titles) >= 2 and all(t["right"] > t["left"] for t in titles)
    for i, a in enumerate(titles):
        assert inside(a, figure), f"{a['text']!r} is cut by the figure's edge: {a} outside {figure}"
        for b in titles[i + 1 :]:
            assert not overlap(a, b), f"{a['text']!r} overlaps {b['text']!r}: {a} and {b}"


# --- issue 59 item 12: the bands' captions at a 1024 px window ------------------------------

CAPTIONED = (
    ("analyze", PAGES["analyze"][0], ids.ROOFLINE),
    ("analyze", PAGES["analyze"][0], ids.TIME_BREAKDOWN),
    ("sweep", PAGES["sweep"][0], ids.SWEEP_GRAPH),
    ("serving", PAGES["serving"][0], ids.SERVING_LATENCY),
)
# the figure's box, the caption's box (the annotation that says what the bands rest on) and
# the x axis titles' boxes
CAPTION_BOXES = """
const plot = document.getElementById(arguments[0]).querySelector('.js-plotly-plot');
const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
const notes = [...plot.querySelectorAll('g.annotation text.annotation-text')]
  .filter(t => /^(bands:|no measured interval)/.test(t.textContent));
const titles = [...plot.querySelectorAll('g.infolayer [class^="g-x"][class$="title"] text')];
return {figure: box(plot.querySelector('.main-svg')), captions: notes.map(box), xtitles: titles.map(box)};
"""


@pytest.fixture(scope="module")
def window_1024():
    with serve_in_thread() as base, chrome(1024, 768) as driver:
        driver.base = base
        yield driver


@pytest.mark.parametrize(("page", "query", "graph"), CAPTIONED, ids=[f"{f[0]}-{f[2]}" for f in CAPTIONED])
def test_band_captions_stay_in_their_figure_clear_of_the_axis_titles(window_1024, page, query, graph):
    window_1024.get(f"{window_1024.base}/{page}{query}")
    wait_for(window_1024, f"#{graph} .main-svg", 60)
    wait_idle(window_1024, 60)
    boxes = window_1024.execute_script(CAPTION_BOXES, graph)
    (caption,) = boxes["captions"]
    assert caption["right"] > caption["left"]
    assert boxes["xtitles"] or graph == ids.TIME_BREAKDOWN  # the titles it must clear are drawn (bars: none)
    assert inside(caption, boxes["figure"]), f"the caption leaves its figure: {caption} outside {boxes['figure']}"
    for title in boxes["xtitles"]:
        assert not overlap(caption, title), f"the caption overlaps an x axis title: {caption} and {title}"
