"""Published anchors (issue 25): the committed reports/validation/anchors.json is what
kernels.validate.anchors computes today, each figure names its source (or says none was found),
and every basis the engine refuses records why."""

from __future__ import annotations

import json

import pytest
import yaml

from kernels.validate.anchors import ANCHORS, OUTPUT, load_anchors, predict_anchors
from ridgeline.io.catalog import ROOT


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(OUTPUT.read_text())


@pytest.fixture(scope="module")
def computed() -> list[dict]:
    return predict_anchors(load_anchors())


def by_id(rows: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in rows}


def test_committed_json_is_what_the_code_computes_now(committed, computed):
    """Numbers cannot drift silently: rerun python -m kernels.validate.anchors after an engine change."""
    assert json.loads(json.dumps(computed)) == committed["anchors"], (
        "reports/validation/anchors.json is stale: python -m kernels.validate.anchors"
    )
    assert set(committed["meta"]) >= {"commit", "date", "sources"}
    assert committed["meta"]["sources"] == {a["id"]: a["source"] for a in committed["anchors"]}


def test_every_anchor_names_its_source_or_says_none_was_found():
    spec = yaml.safe_load(ANCHORS.read_text())
    assert len(spec["anchors"]) == 3
    for a in spec["anchors"]:
        assert "source" in a and a["published"]["quoted"] and a["published"]["value_s"] > 0
        if a["source"] is None:
            assert "no public source" in a["note"] and "issue 25" in a["note"]
        else:
            assert a["source"].startswith("https://")
    sources = {a["id"]: a["source"] for a in spec["anchors"]}
    assert sources["gpt-fast-a100-llama-2-7b"] == "https://github.com/pytorch-labs/gpt-fast"
    assert "buildkite.com/vllm" in sources["vllm-h200-llama-3.1-8b"]


def test_published_figures_are_the_quoted_ones():
    """gpt-fast: 104.9 tok/s is 9.53 ms a token; vLLM: 833.421 ms over 128 steps is 6.51 ms."""
    spec = by_id(load_anchors()["anchors"])
    assert spec["gpt-fast-a100-llama-2-7b"]["published"]["value_s"] == pytest.approx(1 / 104.9, rel=1e-3)
    assert spec["vllm-h200-llama-3.1-8b"]["published"]["value_s"] == pytest.approx(0.833421 / 128, rel=1e-3)
    assert spec["nemo-h100-llama-2-7b"]["published"]["value_s"] == pytest.approx(7.7e-3)


def test_spec_is_at_least_the_weight_read_floor(computed):
    """Hand-worked: Llama-2-7B has 6,738,415,616 parameters, 2 bytes each in bf16. A decode
    step reads every weight once except the input embedding table, of which it gathers one
    row per token (the untied lm_head is read whole): (6,738,415,616 - 32,000 x 4096) x 2 B
    = 13.2147 GB. Over the A100-80GB's datasheet 2039 GB/s (hardware/a100-80gb.yaml) that
    is 6.481 ms, the floor of a spec decode step. (All 13.4768 GB would be 6.610 ms, above
    the spec TPOT of 6.514 ms: the embedding is not read, so it is not a floor.)"""
    device = yaml.safe_load((ROOT / "hardware" / "a100-80gb.yaml").read_text())
    bandwidth = device["memory_bandwidth_gb_s"] * 1e9
    floor = (6_738_415_616 - 32_000 * 4096) * 2 / bandwidth
    assert floor == pytest.approx(6.481e-3, rel=1e-3)
    spec = by_id(computed)["gpt-fast-a100-llama-2-7b"]["predictions"]["spec"]
    assert spec["tpot_s"] >= floor
    assert spec["tpot_s"] == pytest.approx(floor, rel=0.02)  # memory-bound: weights dominate


def test_refusals_are_recorded_not_worked_around(computed):
    rows = by_id(computed)
    # the H100's profile is device time since its run of 2026-11-26: both its bases are priced
    h100 = rows["nemo-h100-llama-2-7b"]["predictions"]["calibrated"]
    assert "refused" not in h100 and h100["mode"] == "calibrated"
    h200_transfer = rows["vllm-h200-llama-3.1-8b"]["predictions"]["transferred"]
    assert "refused" not in h200_transfer and h200_transfer["mode"] == "transferred"
    a100 = rows["gpt-fast-a100-llama-2-7b"]["predictions"]
    assert "no committed profile of a100-80gb" in a100["calibrated"]["refused"]
    assert "hopper" in a100["transferred"]["refused"] and "ampere" in a100["transferred"]["refused"]


def test_the_predictions_that_exist_are_labelled_and_compared(computed):
    rows = by_id(computed)
    transferred = rows["nemo-h100-llama-2-7b"]["predictions"]["transferred"]
    assert transferred["mode"] == "transferred"
    calibrated = rows["vllm-h200-llama-3.1-8b"]["predictions"]["calibrated"]
    assert calibrated["mode"] == "calibrated"
    for row in computed:
        published = row["published"]["value_s"]
        for p in row["predictions"].values():
            if "predicted_s" in p:
                assert p["error"] == pytest.approx(p["predicted_s"] / published - 1)
                assert p["within_tolerance"] == (abs(p["error"]) <= 0.15)
        assert row["predictions"]["spec"]["predicted_s"] < published  # a datasheet bound


def test_results_md_renders_the_section(committed):
    from kernels.validate.results import anchors_section

    text = "\n".join(anchors_section())
    assert text.startswith("## Published anchors")
    for row in committed["anchors"]:
        assert row["title"] in text
    assert text.count("refused [") == sum(
        "refused" in p for r in committed["anchors"] for p in r["predictions"].values()
    )
