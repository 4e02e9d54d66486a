"""Predict the published MLPerf Inference Llama 2 70B results (reports/mlperf/llama2-70b.yaml)
with ``simulate --scenario``, write reports/results/mlperf-predictions.json and regenerate
reports/RESULTS.md, whose MLPerf section divides each prediction by its published figure.

Each system is simulated as submitted: its GPU's datasheet roofline (``spec``), fp8 weights,
activations and KV cache, its tensor and pipeline parallelism per copy, its batch and tokens
a step, its number of copies, and the scenario's LoadGen rules (:mod:`ridgeline.serving.scenarios`).

    python -m kernels.results.mlperf             # all systems and scenarios (about a minute)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernels.results import generate
from ridgeline.api import default_attention, simulate_scenario
from ridgeline.io.files import read_yaml, write_atomic
from ridgeline.io.resolve import resolve
from ridgeline.serving.scenarios import SCENARIOS
from ridgeline.serving.simulator import Scheduler
from ridgeline.version import __version__

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "reports" / "mlperf" / "llama2-70b.yaml"
PREDICTIONS = ROOT / "reports" / "results" / "mlperf-predictions.json"
FP8 = {"w_dtype": "fp8", "a_dtype": "fp8", "kv_dtype": "fp8"}


def predict(system: dict[str, Any], scenario: str, seed: int = 0) -> dict[str, Any]:
    """One system's scenario, simulated as submitted; the run's figures."""
    shape = {**system, **system.get(scenario, {})}
    sched = Scheduler(max_batch=shape["max_batch"], token_budget=shape["token_budget"])
    # the attention kernel the scheduler policy's server runs (vLLM V1: flash), as simulate's
    attention = default_attention(sched.policy)
    d = resolve("llama-2-70b", system["hardware"], **FP8, tp=shape["tp"], pp=shape["pp"], attention=attention)
    instances = shape["instances"]
    requests = math.ceil(SCENARIOS["offline"].min_queries / instances) if scenario == "offline" else 100
    run = simulate_scenario(d, sched, scenario, requests=requests, seed=seed, instances=instances, rate=instances)
    m, s = run["mlperf"], run["result"].summary
    return {
        "tokens_per_s": m["tokens_per_s"],
        "rate_per_instance": m["rate_per_instance"],
        "ttft_p99_s": m["latency"]["ttft_s"],
        "tpot_p99_s": m["latency"]["tpot_s"],
        "requests_per_instance": s["requests"],
        "duration_s": s["duration_s"],
        "mode": run["result"].meta["mode"],
        "settings": {**FP8, "tp": shape["tp"], "pp": shape["pp"], "instances": instances, "attention": attention},
        "scheduler": {"max_batch": shape["max_batch"], "token_budget": shape["token_budget"]},
    }


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    published = read_yaml(PUBLISHED)
    rows = []
    for key, system in published["systems"].items():
        for scenario in system["tokens_per_s"]:
            print(f"{key} {scenario} ...", file=sys.stderr)
            rows.append({"system": key, "scenario": scenario, **predict(system, scenario)})
    meta = {
        "ridgeline": __version__,
        "commit": commit(),
        "date": datetime.date.today().isoformat(),
        "command": "python -m kernels.results.mlperf",
        "model": "llama-2-70b",
        "seed": 0,
    }

    write_atomic(PREDICTIONS, json.dumps({"meta": meta, "predictions": rows}, indent=1) + "\n")
    print(f"wrote {PREDICTIONS.relative_to(ROOT)}", file=sys.stderr)
    return generate.main([])


if __name__ == "__main__":
    raise SystemExit(main())
