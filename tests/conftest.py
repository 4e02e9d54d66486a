"""Shared fixtures: catalog objects loaded once."""
from __future__ import annotations

import pytest

import ridgeline as rl


@pytest.fixture(scope="session")
def a6000():
    return rl.load_device("a6000")


@pytest.fixture(scope="session")
def llama2():
    return rl.load_model("llama-2-7b")
