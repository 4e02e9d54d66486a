"""The measuring commands' runs: calibrate, validate, predictions register|compare and
simulate-check. Each checks its options (a bad one is one line, exit 2, as the command line's
usage errors read), then runs its subsystem; what needs torch is imported when it runs.
``echo`` prints a result line, ``log`` a progress line (stderr); each returns the exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ridgeline.errors import InvalidOptionError, MissingDependencyError, require_torch
from ridgeline.io.files import write_atomic
from ridgeline.report import console, overhead_line, registered_line

Log = Callable[[str], None]


def check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise InvalidOptionError(f"--device must be cpu or cuda, got '{device}'")


def check_profile(profile: Path | None) -> None:
    if profile is not None and not profile.is_file():
        raise InvalidOptionError(f"--profile {profile}: no such file")


def calibrate(*, device, quick, threads, output, refit, extend, check, profile, quiet_wait, log: Log) -> int:
    """calibrate: measure this machine into a profile, fit one again (``refit``), add the cases
    it lacks (``extend``) or ``check`` one."""
    check_device(device)
    if profile is not None and not check:
        raise InvalidOptionError("--profile goes with --check (calibrate measures this machine into --output)")
    if extend is not None and (check or refit is not None or quick):
        raise InvalidOptionError("--extend measures a profile's missing cases: drop --check, --refit and --quick")
    if check:
        return check_state(device, threads, profile, refit is not None or output is not None, log)
    from kernels.calibrate import calibrate as measure

    if refit is not None:
        measure.refit(refit, output, log=log)
        return 0
    require_torch("'ridgeline calibrate'")
    if extend is not None:
        from kernels.validate.state import check

        held = lambda path: not check(device, threads, path, log=log)["drifted"]  # noqa: E731
        measure.extend(extend, device, threads, in_state=held, output=output, quiet_wait_s=quiet_wait, log=log)
        return 0
    measure.calibrate(device, quick=quick, threads=threads, output=output, quiet_wait_s=quiet_wait, log=log)
    return 0


def check_state(device: str, threads: int | None, profile: Path | None, writes: bool, log: Log) -> int:
    """calibrate --check, which writes nothing: the exit code (1: a roof moved more than 10 %)."""
    if writes:
        raise InvalidOptionError("--check writes nothing: drop --refit and --output")
    require_torch("'ridgeline calibrate --check'")
    from kernels.validate.state import check

    return 1 if check(device, threads, profile, log=log)["drifted"] else 0


def validate(
    *,
    device,
    profile,
    repredict,
    recorded_ceilings,
    quiet_wait,
    draw,
    fit_intervals,
    coverage,
    output,
    echo,
    log,
    **how,
) -> int:
    """validate: held-out shapes measured (or a snapshot predicted again) against the predictions;
    or ``fit_intervals`` / ``coverage`` (interval_run)."""
    if fit_intervals or coverage:
        return interval_run(fit_intervals, coverage, profile, output, echo, log)
    check_device(device)
    from kernels.validate import validate as validation

    if draw is not None and (draw < 0 or repredict is not None):
        raise InvalidOptionError("--draw takes a seed >= 0 and measures: it does not go with --repredict")
    if how["through"] not in ("kernels", "transformers") or (
        how["through"] != "kernels" and (draw, repredict) != (None, None)
    ):
        raise InvalidOptionError(
            f"--through takes kernels or transformers (got {how['through']!r}), without --draw or --repredict"
        )
    if recorded_ceilings and (repredict is None or profile is not None):
        raise InvalidOptionError("--recorded-ceilings goes with --repredict SNAPSHOT and without --profile")
    if repredict is not None:
        result, paths = validation.repredict(repredict, profile, how["output_dir"], log=log, recorded=recorded_ceilings)
    else:
        require_torch("'ridgeline validate'")
        result, paths = validation.validate(device, **how, profile=profile, draw=draw, quiet_wait_s=quiet_wait, log=log)
    return validation.report(result, paths, console(), log)


def interval_run(fit: bool, coverage: bool, profile: Path | None, output: Path | None, echo, log: Log) -> int:
    """--fit-intervals (a profile's table, or without --profile the spec pools) or --coverage."""
    from kernels.validate import intervals

    if fit and coverage:
        raise InvalidOptionError("--fit-intervals and --coverage are separate runs: give one")
    check_profile(profile)
    if coverage:
        if profile is None:
            raise InvalidOptionError("--coverage checks one profile: give --profile PATH")
        for line in intervals.coverage_lines(intervals.write_coverage(profile, output, log)):
            echo(line)
    elif profile is not None:
        intervals.write_profile_intervals(profile, output, log)
    else:
        intervals.write_spec_pools(output, log)
    return 0


def register_predictions(*, hardware, profile, sizes, transfer, output, echo, log: Log) -> int:
    """predictions register: what a GPU run will be held against, written once (never over a file)."""
    from kernels.bench.provenance import git_commit
    from kernels.gpu.register import predictions_path, register

    commit = git_commit()
    check_profile(profile)
    target = output or predictions_path(hardware, commit)
    if target.exists():
        raise InvalidOptionError(f"{target} exists: registered predictions are never written over; pass -o NEW.json")
    data = register(hardware, profile, sizes, commit, transfer)
    write_atomic(target, json.dumps(data, indent=1, allow_nan=False) + "\n")
    echo(registered_line(data, target))
    return 0


def compare_predictions(*, results, predictions, output, echo, log: Log) -> int:
    """predictions compare: the run's measurements beside the predictions (Markdown; JSON beside -o)."""
    from kernels.gpu.register import compare, markdown

    table = compare(results, predictions)
    text = markdown(table)
    if output is None:
        echo(text, nl=False)
        return 0
    write_atomic(output, text)
    write_atomic(output.with_suffix(".json"), json.dumps(table, indent=1, default=float) + "\n")
    echo(f"wrote {output} and {output.with_suffix('.json')}")
    return 0


def simulate_check(*, overhead_from, fit_overhead, resimulate, profile, output, echo, log: Log, **run) -> int:
    """simulate-check: transformers' server measured (``replay``), a recorded run's host terms
    fitted (``fit_overhead``) or its trace simulated again (``resimulate``)."""
    from kernels.servecheck import cb_server

    overhead = cb_server.overhead_from(overhead_from) if overhead_from is not None else None
    if fit_overhead is not None:
        echo(overhead_line(cb_server.overhead_from(fit_overhead), fit_overhead))
    elif resimulate is not None:
        result = cb_server.resimulate(resimulate, overhead, profile=profile)
        for line in cb_server.report_lines(result):
            echo(line)
        if output is not None:  # the comparison and the waterfall as JSON; never over a committed file
            log(f"wrote {cb_server.write_resimulated(result, resimulate, output)}")
    else:
        result, path = replay(run, overhead, profile, output, log)
        for line in cb_server.report_lines(result):
            echo(line)
        log(f"wrote {path}")
    return 0


def replay(p: dict, overhead: dict | None, profile: Path | None, out: Path | None, log: Log):
    """simulate-check's measurement: its options checked, then transformers' server run."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise MissingDependencyError("transformers", "hf") from None
    from kernels.e2e.e2e import resolve_device
    from kernels.servecheck.cb_server import run_check

    gpu = p["device"].startswith("cuda")
    clock = p["clock"] or ("device" if gpu else "cpu")
    if p["requests"] < 2 or p["rate"] <= 0 or p["repeats"] < 1 or clock not in ("cpu", "wall", "device"):
        raise InvalidOptionError("--requests must be >= 2, --rate > 0, --repeats >= 1 and --clock cpu, device or wall")
    if (clock == "device") != gpu and clock != "wall":
        raise InvalidOptionError(f"--clock {clock} goes with --device {'cpu' if clock == 'cpu' else 'cuda'}")
    device = resolve_device(p["device"])
    if p["dtype"] not in ("bf16", "fp32"):
        raise InvalidOptionError(f"--dtype {p['dtype']!r}: transformers' check runs bf16 or fp32")
    prompt, output = p["prompt_range"], p["output_range"]
    if not 1 <= prompt[0] <= prompt[1] or not 1 <= output[0] <= output[1]:
        raise InvalidOptionError("--prompt-range and --output-range take MIN MAX with 1 <= MIN <= MAX")
    same = {name: p[name] for name in ("layers", "requests", "rate", "repeats", "seed", "dtype")}
    keys = {"prompt": prompt, "output": output, "clock": clock, "out": out, "device": device}
    return run_check(p["model"], **same, profile=profile, **keys, overhead=overhead, log=log)
