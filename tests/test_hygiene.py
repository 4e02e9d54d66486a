"""The habits of the code base, checked on every run: ruff (lint and format), no dead code
(vulture, with each exception listed in tests/vulture_whitelist.py and why), and no block of
six lines or more repeated across files (pylint's duplicate-code check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ["ridgeline", "kernels", "viewer"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    result = run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_code_is_ruff_formatted():
    result = run("ruff", "format", "--check", ".")
    assert result.returncode == 0, "run 'ruff format .':\n" + result.stdout + result.stderr


@pytest.mark.slow
def test_no_dead_code():
    result = run("vulture", *CODE, "tests", ".ci", "tests/vulture_whitelist.py")
    assert result.returncode == 0, result.stdout + result.stderr


def whitelisted() -> set[str]:
    """The names tests/vulture_whitelist.py lists (``_.name`` as ``name``), comments and docstring aside."""
    lines = (ROOT / "tests" / "vulture_whitelist.py").read_text().split('"""')[-1].splitlines()
    items = (item.strip() for line in lines for item in line.split("#")[0].split(","))
    return {item.removeprefix("_.") for item in items if item}


@pytest.mark.slow
def test_every_whitelisted_name_is_one_vulture_reports():
    # a name vulture no longer reports without the whitelist is stale: it hides nothing, or nothing has it
    report = run("vulture", *CODE, "tests", ".ci", "--exclude", "*vulture_whitelist.py").stdout
    assert {name for name in whitelisted() if f"'{name}'" not in report} == set()


@pytest.mark.slow
def test_no_repeated_blocks_of_six_lines():
    result = run("pylint", "--disable=all", "--enable=duplicate-code", "--min-similarity-lines=6", *CODE)
    assert result.returncode == 0, result.stdout + result.stderr
