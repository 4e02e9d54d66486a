"""The CI gate's verdict (pure): bounds on calibrated error, errored cases named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernels.validate.gate import MAX_MEDIAN_ABS_ERROR, MAX_P90_ABS_ERROR, headline, verdict

ROOT = Path(__file__).resolve().parent.parent


def rows(errors, status="ok"):
    return [
        {"name": f"case{i}", "status": status, "reason": "", "error_calibrated": e, "error_spec": -0.5}
        for i, e in enumerate(errors)
    ]


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
    text = (ROOT / "docs" / "bounds.md").read_text()
    assert f"{MAX_MEDIAN_ABS_ERROR:.0%}" in text and f"{MAX_P90_ABS_ERROR:.0%}" in text


@pytest.mark.slow
def test_gate_replay_only_passes_without_torch():
    out = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "validate_gate.py"), "--replay-only"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validate gate: passed" in out.stdout


def _gate_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("validate_gate", ROOT / ".ci" / "validate_gate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_gate(monkeypatch, results):
    gate, calls = _gate_module(), []

    def once(threads, keep):
        calls.append(threads)
        return results[len(calls) - 1]

    monkeypatch.setattr(gate, "measure_once", once)
    return gate.measure(1, None), len(calls)


def result(errors, drifted=()):
    return {"rows": rows(errors), "meta": {"machine_state": {"drifted": list(drifted)}}}


def test_a_failure_while_the_machine_drifted_is_measured_again_once(monkeypatch):
    bad, good = [0.5, -0.6, 0.4, 0.3, 0.45], [0.05, -0.08, 0.1]
    assert run_gate(monkeypatch, [result(bad, ["stream"]), result(good)]) == ([], 2)
    problems, calls = run_gate(monkeypatch, [result(bad, ["stream"]), result(bad, ["copy"])])
    assert calls == 2 and "median 45.0%" in problems[0]
    assert problems[1] == "the machine drifted during the run too (copy)"


def test_a_failure_in_a_steady_state_stands_and_a_pass_is_not_repeated(monkeypatch):
    problems, calls = run_gate(monkeypatch, [result([0.5, -0.6, 0.4, 0.3, 0.45])])
    assert calls == 1 and len(problems) == 1
    assert run_gate(monkeypatch, [result([0.05, 0.02], ["stream"])]) == ([], 1)
