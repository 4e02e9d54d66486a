"""Shared fixtures: catalog objects loaded once; a user folder of the test session's own."""

from __future__ import annotations

import os

import pytest

import ridgeline as rl


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


@pytest.fixture(autouse=True)
def elsewhere(tmp_path_factory, monkeypatch):
    """Every test runs from an empty folder, not the repository: nothing may depend on the
    working directory (paths come from the package's own location)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
