"""The CI gate's verdict (pure): bounds on calibrated error, errored cases named."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernels.gate import MAX_MEDIAN_ABS_ERROR, MAX_P90_ABS_ERROR, headline, verdict

ROOT = Path(__file__).resolve().parent.parent


def rows(errors, status="ok"):
    return [{"name": f"case{i}", "status": status, "reason": "", "error_calibrated": e,
             "error_spec": -0.5} for i, e in enumerate(errors)]


def test_within_bounds_passes():
    assert verdict({"rows": rows([0.05, -0.08, 0.1, 0.02, -0.12])}) == []
    assert "5 cases ok" in headline({"rows": rows([0.05, -0.08, 0.1, 0.02, -0.12])})


def test_median_over_bound_fails_and_names_the_worst():
    problems = verdict({"rows": rows([0.5, -0.6, 0.4, 0.3, 0.45])}, worst=2)
    assert len(problems) == 1
    assert "median 45.0%" in problems[0] and "case1 (-60%)" in problems[0] and "case0 (+50%)" in problems[0]


def test_p90_over_bound_fails():
    errs = [0.01] * 8 + [2.0, 3.0]
    problems = verdict({"rows": rows(errs)})
    assert problems and "p90" in problems[0]


def test_errored_case_fails_by_name():
    data = rows([0.01, 0.02]) + [{"name": "bad/case", "status": "error", "reason": "wrong result"}]
    assert verdict({"rows": data}) == ["case errored: bad/case: wrong result"]
    assert verdict({"rows": rows([0.1], status="skipped")}) == ["no case was measured"]


def test_bounds_are_the_documented_ones():
    text = (ROOT / "reports" / "validation" / "BOUNDS.md").read_text()
    assert f"{MAX_MEDIAN_ABS_ERROR:.0%}" in text and f"{MAX_P90_ABS_ERROR:.0%}" in text


def test_gate_replay_only_passes_without_torch():
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "validate_gate.py"), "--replay-only"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validate gate: passed" in out.stdout
