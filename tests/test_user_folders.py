"""User results live outside the source tree; reports/ holds the committed baselines, and
the dashboard and the CI gate say which folders they read (issue 12.4)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from ridgeline.io.catalog import ROOT, VALIDATION_DIR, user_cache_dir, user_data_dir
from ridgeline.io.profile import list_profiles, profile_path


def test_user_folders_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RIDGELINE_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("RIDGELINE_CACHE", str(tmp_path / "c"))
    assert user_data_dir() == tmp_path / "h" and user_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("RIDGELINE_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert user_data_dir() == tmp_path / "xdg" / "ridgeline"
    assert not user_data_dir().is_relative_to(ROOT)


def test_e2e_writes_into_the_user_folder_by_default():
    from kernels.e2e.e2e import default_path
    from ridgeline.io.resolve import load_model

    path = default_path("cpu-x-1t", load_model("qwen2-0.5b"), "2026-01-01")
    assert path == user_data_dir() / "validation" / "e2e-cpu-x-1t-qwen2-0.5b-2026-01-01.json"


def test_a_users_profile_comes_before_the_committed_one(tmp_path, monkeypatch):
    monkeypatch.setenv("RIDGELINE_HOME", str(tmp_path))
    key = "cuda-nvidia-h100-80gb-hbm3"
    assert profile_path(key) == ROOT / "reports" / "profiles" / f"{key}.yaml"
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / f"{key}.yaml").write_text("bandwidth_gb_s: 1\n")
    (tmp_path / "profiles" / "mine.yaml").write_text("bandwidth_gb_s: 1\n")
    assert profile_path(key) == tmp_path / "profiles" / f"{key}.yaml"
    assert "mine" in list_profiles() and "cpu-amd-epyc-1t" in list_profiles()
    assert profile_path("unknown") == tmp_path / "profiles" / "unknown.yaml"


@pytest.mark.slow
def test_the_dashboard_reads_both_folders_and_says_so(tmp_path, monkeypatch):
    pytest.importorskip("dash")
    from viewer import callbacks, data

    monkeypatch.setenv("RIDGELINE_HOME", str(tmp_path))
    mine = tmp_path / "validation"
    mine.mkdir()
    (mine / "run.json").write_text(
        json.dumps(
            {
                "meta": {"device_key": "cpu-mine-1t"},
                "rows": [
                    {
                        "name": "a",
                        "op_class": "gemm",
                        "measured_s": 1e-3,
                        "predicted_spec_s": 9e-4,
                        "predicted_calibrated_s": 1.1e-3,
                        "status": "ok",
                    }
                ],
            }
        )
    )
    assert data.validation_folders() == (VALIDATION_DIR, mine)
    assert "cpu-mine-1t" in data.validation_devices()
    message = callbacks.update_validation("/validation", "?runs=cpu-mine-1t")[0]
    assert message.startswith("1 measured cases from 1 file(s) measured on cpu-mine-1t")
    # named as the repository and the user's folder name it, never the server's absolute paths
    assert f"read from reports/validation, {mine.name}" in message and str(VALIDATION_DIR) not in message


def test_the_gate_replays_only_tracked_snapshots(tmp_path):
    from kernels.validate.replay import tracked_snapshots

    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    (tmp_path / "committed.json").write_text("{}")
    (tmp_path / "e2e-run.json").write_text("{}")
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=tmp_path, check=True, env=env)
    (tmp_path / "left-by-a-user.json").write_text("{}")
    assert tracked_snapshots(tmp_path) == [tmp_path / "committed.json"]


def test_host_is_detected_once_and_kept_with_its_provenance(monkeypatch, tmp_path):
    """The copy bandwidth is measured once: a new process (the in-memory table cleared)
    reads the same figure back from disk; --refresh measures again."""
    from typer.testing import CliRunner

    import ridgeline.io.host as hw
    from ridgeline.cli import app

    monkeypatch.setenv("RIDGELINE_CACHE", str(tmp_path))
    copies = iter([12e9, 34e9])
    monkeypatch.setattr(hw, "measure_copy_bandwidth", lambda: next(copies))
    monkeypatch.setattr(hw, "_HOSTS", {})
    first = hw.detect_host(gpu=False)
    assert first.memory_bandwidth == 12e9 and hw.host_cache_path().is_file()
    assert any("kept in" in s and "--refresh" in s for s in first.sources)
    monkeypatch.setattr(hw, "_HOSTS", {})
    again = hw.detect_host(gpu=False)
    assert again == first
    record = json.loads(hw.host_cache_path().read_text())
    assert record["device"]["memory_bandwidth_gb_s"] == 12 and record["detected"]
    monkeypatch.setattr(hw, "_nvidia_host", lambda: None)
    result = CliRunner().invoke(app, ["hardware", "show", "host", "--refresh"])
    assert result.exit_code == 0 and "bandwidth              34 GB/s" in result.output
    assert hw.detect_host(gpu=False).memory_bandwidth == 34e9


def test_the_suite_writes_nothing_under_the_testers_home():
    """Issue 30 item 3: the run once wrote ``~/.cache/ridgeline/host-*.json``; conftest points
    both user folders at a temporary one for the whole session."""
    home = Path.home()
    for folder in (user_data_dir(), user_cache_dir()):
        assert not folder.is_relative_to(home) or folder.is_relative_to(Path(tempfile.gettempdir())), folder
