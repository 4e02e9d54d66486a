"""The GPU case set's command line: ``ridgeline calibrate`` and ``validate`` measuring the GPU
set (``kernels.bench.cases_gpu``), the GPU run's calibrate and draw stages (:mod:`kernels.gpu.plan`).

    python -m kernels.gpu.cases calibrate [--compact] [--budget-s S] [options]
    python -m kernels.gpu.cases validate [--draw SEED] [options]
    python -m kernels.gpu.cases summary SNAPSHOT.json   # headline and reference figures apart
    python -m kernels.gpu.cases list                    # the set's cases by priority
    python -m kernels.gpu.cases agree [--device D] [--every N]   # graph replay against the profiler
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernels.bench.cases import is_reference
from kernels.bench.cases_gpu import (
    PRIORITY,
    gpu_case_set,
    gpu_cases,
    priority,
    split_summary,
    write_agreement,
)
from kernels.bench.suite import CaseSet

COMPACT_BUDGET_S = 150.0  # --compact: seconds of cases at most (roofs and the fit come on top)


def compact_args(args: list[str]) -> tuple[list[str], float | None]:
    """``calibrate --compact [--budget-s S]`` -> the ridgeline arguments (``--quick``: the
    compact grid, quick timing) and the case budget in seconds (``COMPACT_BUDGET_S`` unless
    given; ``--budget-s`` alone caps a full calibration)."""
    args = list(args)
    budget = None
    if "--budget-s" in args:
        i = args.index("--budget-s")
        if i + 1 >= len(args):
            raise SystemExit("--budget-s needs a number of seconds")
        budget = float(args[i + 1])
        del args[i : i + 2]
    if "--compact" in args:
        args.remove("--compact")
        if "--quick" not in args:
            args.append("--quick")
        budget = COMPACT_BUDGET_S if budget is None else budget
    return args, budget


def main(argv: list[str] | None = None) -> int:
    """``calibrate|validate [ridgeline options]``: the ridgeline command on the GPU set;
    ``summary SNAPSHOT.json``: headline and reference figures apart."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("calibrate", "validate", "summary", "list", "agree"):
        print(
            "usage: python -m kernels.gpu.cases calibrate [--compact] [--budget-s S] "
            "[options] | validate [options] | "
            "summary SNAPSHOT.json | list | agree [--device D] [--every N]",
            file=sys.stderr,
        )
        return 2
    if args[0] == "agree":
        device = args[args.index("--device") + 1] if "--device" in args else "cuda"
        every = int(args[args.index("--every") + 1]) if "--every" in args else 20
        folder = args[args.index("--output-dir") + 1] if "--output-dir" in args else None
        print(write_agreement(device, every, folder))
        return 0
    if args[0] == "summary":
        rows = json.loads(open(args[1]).read())["rows"]
        for label, stats in split_summary(rows).items():
            print(f"{label:10s} n={stats['n']:4d}  median {stats['median']:.1%}  p90 {stats['p90']:.1%}")
        return 0
    if args[0] == "list":
        for label, cases in (
            ("calibration", gpu_cases("calibration")),
            ("calibration --compact", gpu_cases("calibration", quick=True)),
            ("validation", gpu_cases("validation")),
        ):
            print(f"{label}: {len(cases)} cases, {sum(is_reference(c) for c in cases)} reference")
            if label.startswith("calibration"):
                for tier, what in enumerate(PRIORITY):
                    print(f"  {tier}. {what}: {sum(priority(c) == tier for c in cases)}")
        return 0
    args, budget = compact_args(args)  # validate: --budget-s alone (a draw in time)
    return measure(args[0], measure_options(args[0]).parse_args(args[1:]), gpu_case_set(budget))


def measure_options(command: str):
    """The options of ``ridgeline calibrate|validate`` that the GPU run passes."""
    parser = argparse.ArgumentParser(prog=f"python -m kernels.gpu.cases {command}")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--quiet-wait", type=float, default=0.0)
    if command == "calibrate":
        parser.add_argument("--output", "-o", type=Path)
    else:
        parser.add_argument("--profile", type=Path)
        parser.add_argument("--output-dir", type=Path)
        parser.add_argument("--draw", type=int)
    return parser


def measure(command: str, options, case_set: CaseSet) -> int:
    """``calibrate`` or ``validate`` as ridgeline runs them, on ``case_set``; the exit code."""
    from kernels.calibrate import calibrate
    from kernels.validate import validate
    from ridgeline.report import console

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    how = {"quick": options.quick, "threads": options.threads, "quiet_wait_s": options.quiet_wait, "log": log}
    if command == "calibrate":
        calibrate.calibrate(options.device, output=options.output, case_set=case_set, **how)
        return 0
    where = {"profile": options.profile, "output_dir": options.output_dir, "draw": options.draw}
    result, paths = validate.validate(options.device, **where, case_set=case_set, **how)
    return validate.report(result, paths, console(), log)


if __name__ == "__main__":
    raise SystemExit(main())
