"""Shared fixtures: catalog objects loaded once; a user folder of the test session's own."""

from __future__ import annotations

import os

import numpy as np
import pytest

import ridgeline as rl
from ridgeline.serving.arrivals import poisson

# pytest-xdist's workers are started with COLUMNS=80 set, which tells the CLI it prints to an
# 80-column terminal; the tests see what a file would get, as under plain pytest (the tests of
# narrow terminals set COLUMNS themselves)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


@pytest.fixture(scope="session", autouse=True)
def user_folders(tmp_path_factory):
    """Results and the host cache go to temporary folders, never the tester's home: a
    test's run must not become the next run's input. (Set for subprocesses too.)"""
    home = tmp_path_factory.mktemp("ridgeline-home")
    saved = {k: os.environ.get(k) for k in ("RIDGELINE_HOME", "RIDGELINE_CACHE")}
    os.environ["RIDGELINE_HOME"] = str(home / "data")
    os.environ["RIDGELINE_CACHE"] = str(home / "cache")
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def a6000():
    return rl.load_device("a6000")


@pytest.fixture(scope="session")
def llama_1b():
    """Llama 3.2 1B on an A6000 with flash attention (the simulator's default policy's)."""
    return rl.resolve("llama-3.2-1b", "a6000", attention="flash")


@pytest.fixture(scope="session")
def mixed_trace():
    """Poisson arrivals of mixed lengths: (n, rate, seed) -> Arrivals, prompts 16-699 and
    outputs 1-199 tokens drawn with the seed."""

    def make(n: int, rate: float, seed: int):
        rng = np.random.default_rng(seed)
        return poisson(rate, n, rng.integers(16, 700, n), rng.integers(1, 200, n), seed=seed)

    return make


@pytest.fixture(autouse=True)
def elsewhere(tmp_path_factory, monkeypatch):
    """Every test runs from an empty folder, not the repository: nothing may depend on the
    working directory (paths come from the package's own location)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
