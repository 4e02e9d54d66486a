"""CLI speed: ``ridgeline analyze llama-2-7b`` (the shipped default) as a whole process, and
where its time goes: the imports, reading the spec intervals (JSON, and the same data as
YAML with libyaml's loader, the format it had until issue 56), and the analysis itself.

Run: python tests/benchmarks/cli_speed.py [repeats]   (medians; the machine is noisy, so compare
ratios within one run). Python compiles the package's sources on every start when it may not
write bytecode (PYTHONDONTWRITEBYTECODE, a read-only checkout): the whole-process time then
includes that compile, which an installed package does once.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "ridgeline", "analyze", "llama-2-7b"]
IMPORTS = "import time; t = time.perf_counter(); import ridgeline.cli; print(time.perf_counter() - t)"


def median_run(argv: list[str], repeats: int) -> float:
    """Median wall seconds of ``argv`` run as a process from the repository root (one warm-up)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_import(repeats: int) -> float:
    """Median seconds to import the CLI in a fresh process (measured inside it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = [
        float(
            subprocess.run([sys.executable, "-c", IMPORTS], env=env, check=True, capture_output=True, text=True).stdout
        )
        for _ in range(repeats)
    ]
    return statistics.median(out)


def median_call(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sys.path.insert(0, str(ROOT))
    import ridgeline as rl
    from ridgeline.io.files import FAST_LOADER
    from ridgeline.io.profile import SPEC_INTERVALS

    cached = any((ROOT / "ridgeline" / "__pycache__").glob("*.pyc"))
    writes = "no" if sys.dont_write_bytecode else "yes"
    print(
        f"package bytecode cached: {'yes' if cached else 'no'} (Python may write it: {writes}); {repeats} repeats, medians"
    )
    print(f"ridgeline analyze llama-2-7b: {median_run(COMMAND, repeats):.3f} s wall (issue 56's goal: 0.3 s)")
    print(f"import ridgeline.cli: {median_import(repeats):.3f} s")
    text = SPEC_INTERVALS.read_text()
    t = median_call(lambda: json.loads(text), repeats)
    print(f"{SPEC_INTERVALS.name} ({len(text) / 1e3:.0f} KB) with json: {t * 1e3:.1f} ms")
    as_yaml = yaml.safe_dump(json.loads(text), width=200, default_flow_style=None)
    t = median_call(lambda: yaml.load(as_yaml, Loader=FAST_LOADER), repeats)
    print(f"the same as YAML ({len(as_yaml) / 1e3:.0f} KB) with {FAST_LOADER.__name__}: {t * 1e3:.1f} ms")
    d = rl.resolve("llama-2-7b", "a6000")
    t = median_call(lambda: rl.analyze(d, batch=1, seq_len=512), repeats * 20)
    print(f"the analysis itself (batch 1, prompt 512): {t * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
