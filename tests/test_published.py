"""The published set (issue 54, goals 1-2): at least 40 figures from four source families,
each quoting its source, and a held-out third drawn by a committed seed before any
prediction."""

from __future__ import annotations

from collections import Counter

from kernels.results.published import HELDOUT, draw_heldout, draws, eligible, heldout_ids, load_published
from ridgeline.io.files import read_yaml


def test_the_set_has_forty_priced_figures_from_four_families():
    figures = load_published()
    priced = [f for f in figures if f["priced"] is True]
    assert len(priced) >= 40
    families = Counter(f["family"] for f in priced)
    assert {"trtllm", "mlperf", "gpt-fast"} <= set(families) and families.keys() & {"vllm", "sglang"}
    devices = {f["device"] for f in priced}
    assert {"h100-sxm", "h200", "a100-80gb"} <= devices
    assert {f["settings"].get("w_dtype") for f in priced} >= {"fp8", "bf16"}
    assert {f["settings"]["tp"] for f in priced} >= {1, 2, 4, 8}


def test_every_figure_quotes_its_source_and_says_what_it_assumes():
    for f in load_published():
        assert f["source"].startswith("https://") and f["quoted"], f["id"]
        assert isinstance(f["assumed"], list), f["id"]
        assert f["priced"] is True or (isinstance(f["priced"], str) and f["priced"]), f["id"]
        value = f["published"]["value"]
        assert isinstance(value, (int, float)) and value > 0, f["id"]


def test_the_held_out_third_is_the_committed_seeds_draw():
    """The draw is the seed's over what was eligible when it was made; every held-out figure
    is still priced and was never predicted before it. A figure found unpriceable since (gpt-
    fast's speculative row) leaves the draw as it was."""
    committed = read_yaml(HELDOUT)
    figures = load_published()
    by_id = {f["id"]: f for f in figures}
    now = eligible(figures)
    chosen_from: dict[str, set] = {family: set() for family in now}
    for d in draws(committed):  # the first draw, then each supplement (with its reason)
        assert draw_heldout(d["eligible"], d["seed"]) == d["heldout"]
        for family, ids in d["eligible"].items():
            assert not chosen_from[family] & set(ids)  # a supplement draws only from new figures
            chosen_from[family] |= set(ids)
            assert len(d["heldout"][family]) == round(len(ids) / 3)
    for family, ids in now.items():
        assert set(ids) <= chosen_from[family], family  # nothing priced escaped a draw
    for i in heldout_ids():
        assert by_id[i]["priced"] is True and not by_id[i]["seen"]


# --- the predictions (reports/results/published.json, python -m kernels.results.published --predict)

import json  # noqa: E402

import pytest  # noqa: E402

from kernels.results.published import (  # noqa: E402
    OUTPUT,
    THROUGHPUT,
    predict_figure,
    spec_is_slower,
    stats,
    summary_lines,
)


@pytest.fixture(scope="module")
def committed():
    return json.loads(OUTPUT.read_text())


def test_summary_statistics_by_hand():
    """|errors| 0.05, 0.1, 0.3, 0.2 (signed -0.05, 0.1, -0.3, 0.2): median 0.15, p90 by
    linear interpolation 0.2 + 0.7 x 0.1 = 0.27, signed median 0.025, 2 within 10 %, 3 within 20 %."""
    s = stats([-0.05, 0.1, -0.3, 0.2])
    assert s == pytest.approx({"n": 4, "median": 0.15, "p90": 0.27, "bias": 0.025, "within_10": 2, "within_20": 3})


def test_the_spec_is_a_bound_on_every_published_figure(committed):
    """The datasheet roofline is never slower than a real system: every published rate at
    most its spec prediction, every published time at least it (issue 54, goal 5)."""
    assert committed["spec_slower"] == []
    for row in committed["rows"]:
        assert not spec_is_slower(row), row["id"]
        spec = row["spec"]["value"]
        assert spec >= row["published"] if row["quantity"] in THROUGHPUT else spec <= row["published"], row["id"]


def test_every_priced_figure_is_predicted_on_both_bases(committed):
    priced = {f["id"] for f in load_published() if f["priced"] is True}
    assert {r["id"] for r in committed["rows"]} == priced
    for row in committed["rows"]:
        assert "error" in row["spec"] and "error" in row["engine"], row["id"]
        assert row["heldout"] == (row["id"] in heldout_ids())


FAST = [  # one of each harness whose prediction takes under a second
    "gptfast-a100-llama-2-7b-bf16-tp1",
    "vllm-nightly-h200-llama-3.1-8b-bs8-32-128",
    "trtllm-0.17-h100-llama-3.1-8b-fp8-tp1-128-128",
    "sglang-0.5.6-a100-llama-3.1-70b-bf16-tp8-1000-1000-conc16-output-tok-s",
]


@pytest.mark.parametrize("figure", FAST)
def test_committed_predictions_are_what_the_code_computes_now(committed, figure):
    """Pure: the same inputs give the committed numbers (the rest: ``--predict`` again)."""
    f = next(x for x in load_published() if x["id"] == figure)
    row = next(r for r in committed["rows"] if r["id"] == figure)
    for basis in ("spec", "engine"):
        assert predict_figure(f, basis)["value"] == pytest.approx(row[basis]["value"], rel=1e-9), basis


def test_the_summary_command_prints_the_committed_figures(committed):
    lines = summary_lines(committed)
    assert lines[0].startswith(f"published figures: {len(committed['rows'])} priced")
    assert lines[-1] == "spec slower than the published figure: none"
