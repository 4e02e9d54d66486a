"""Issue 56: each command-line option changes meaning in at most 2 places on its way to the
engine, as tests/benchmarks/option_meaning.py measures it (its docstring says how): every
option of analyze (the deployment options take one path there, resolve_options, in every
command that resolves one) and of sweep's lists here; every option of every command is slow."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

import option_meaning  # noqa: E402


def over_the_limit(rows) -> list[str]:
    return [f"{c} --{o}: {len(f)} places {f}" for c, o, f, why in rows if len(f) > option_meaning.LIMIT]


def test_the_width_of_w_bits_is_read_into_its_type_where_its_text_is():
    """--w-bits 4 was text, then 4, then 'int4', then w_dtype, then the Plan: 4 places
    (parse_values, dtype_for_bits, setting_lists, Deployment.of); now the word is read once
    into w_dtype, and the Plan is made of it."""
    rows = option_meaning.table(["analyze"], only=("w_bits", "link_bw", "batch"))
    found = {option: places for _, option, places, _ in rows}
    assert found["w_bits"] == ["ridgeline/io/settings.py:setting_lists", "ridgeline/engine/deployment.py:Deployment.of"]
    assert found["link_bw"] == found["w_bits"]  # text -> link_bw_gb_s -> the ceilings' link
    assert found["batch"] == ["click"]  # the int typer reads is what the engine takes


def test_every_option_of_analyze_changes_meaning_in_two_places_at_most():
    rows = option_meaning.table(["analyze"]) + option_meaning.table(["sweep"], only=("batch", "w_bits", "tp"))
    assert [why for *_, why in rows if why] == []
    assert over_the_limit(rows) == []


@pytest.mark.slow
def test_every_option_of_every_command_changes_meaning_in_two_places_at_most():
    rows = option_meaning.table()
    untraced = {(c, o): why for c, o, _, why in rows if why}
    assert set(untraced) <= {("plan", "executor"), ("plan", "address"), ("hardware show", "refresh")}, untraced
    assert over_the_limit(rows) == []
