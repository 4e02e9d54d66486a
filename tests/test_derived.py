"""The CSV and HTML beside a kernel snapshot are derived from its JSON (issue 56): not
tracked, and one command writes them again."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kernels.validate.derived import committed_snapshots, main
from ridgeline.io.catalog import ROOT, VALIDATION_DIR


def test_the_derived_files_come_back_from_the_json(tmp_path):
    pytest.importorskip("plotly")
    source = VALIDATION_DIR / "cpu-amd-epyc-f25m1-1t-2026-11-24.json"
    snap = shutil.copy(source, tmp_path / source.name)
    assert main([str(snap)]) == 0
    csv = (tmp_path / source.name).with_suffix(".csv").read_text()
    rows = json.loads(source.read_text())["rows"]
    assert csv.splitlines()[0].startswith("name,") and len(csv.splitlines()) == len(rows) + 1
    assert (tmp_path / source.name).with_suffix(".html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_no_derived_file_is_tracked():
    tracked = subprocess.run(
        ["git", "ls-files", "reports/validation"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    stems = {p.relative_to(ROOT).with_suffix("").as_posix() for p in committed_snapshots()}
    derived = [t for t in tracked if t.endswith((".csv", ".html")) and t.rsplit(".", 1)[0] in stems]
    assert derived == []
    assert len(stems) >= 30  # every committed kernel snapshot still is
