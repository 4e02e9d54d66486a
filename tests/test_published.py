"""The published set (issue 54, goals 1-2): at least 40 figures from four source families,
each quoting its source, and a held-out third drawn by a committed seed before any
prediction."""

from __future__ import annotations

from collections import Counter

from kernels.validate.published import HELDOUT, draw_heldout, eligible, heldout_ids, load_published
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
    committed = read_yaml(HELDOUT)
    figures = load_published()
    assert draw_heldout(figures, committed["seed"]) == committed["heldout"]
    assert committed["eligible"] == {family: len(ids) for family, ids in eligible(figures).items()}
    by_id = {f["id"]: f for f in figures}
    for i in heldout_ids():
        assert by_id[i]["priced"] is True and not by_id[i]["seen"]
    for family, ids in eligible(figures).items():
        assert len(committed["heldout"][family]) == round(len(ids) / 3)
