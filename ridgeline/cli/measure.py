"""The kernel measurements and the GPU run's predictions: calibrate, validate, predictions
register|compare. Each calls into kernels/, imported when the command runs (most of it needs torch)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ridgeline.cli.app import app, command, echo_err, predictions_app, values
from ridgeline.errors import require_torch
from ridgeline.io.files import write_atomic
from ridgeline.report import console, registered_line


def check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"--device must be cpu or cuda, got '{device}'")


@command(app, "device__calibrate quick threads__calibrate output__calibrate refit check profile quiet_wait__calibrate")
def calibrate(ctx: typer.Context) -> None:
    """Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile."""
    device, threads, output, refit, check, profile = (
        values(ctx)[k] for k in ("device", "threads", "output", "refit", "check", "profile")
    )
    check_device(device)
    if profile is not None and not check:
        raise typer.BadParameter("--profile goes with --check (calibrate measures this machine into --output)")
    if check:
        raise typer.Exit(check_state(device, threads, profile, refit is not None or output is not None))
    from kernels.calibrate import calibrate as measure

    if refit is not None:
        return measure.refit(refit, output, log=echo_err)
    require_torch("'ridgeline calibrate'")
    measure.calibrate(
        device,
        quick=values(ctx)["quick"],
        threads=threads,
        output=output,
        quiet_wait_s=values(ctx)["quiet_wait"],
        log=echo_err,
    )


def check_state(device: str, threads: int | None, profile: Path | None, writes: bool) -> int:
    """calibrate --check, which writes nothing: the exit code (1: a roof moved more than 10 %)."""
    if writes:
        raise typer.BadParameter("--check writes nothing: drop --refit and --output")
    require_torch("'ridgeline calibrate --check'")
    from kernels.validate.state import check

    return 1 if check(device, threads, profile, log=echo_err)["drifted"] else 0


VALIDATE = "device__calibrate quick threads__calibrate profile output_dir repredict__validate quiet_wait__calibrate draw fit_intervals coverage output"


@command(app, VALIDATE)
def validate(ctx: typer.Context) -> None:
    """Measure held-out kernel shapes and compare them with the spec and calibrated predictions."""
    v = values(ctx)
    fit_intervals, coverage, profile, output, draw, repredict = (
        v[k] for k in ("fit_intervals", "coverage", "profile", "output", "draw", "repredict")
    )
    if fit_intervals or coverage:
        raise typer.Exit(interval_command(fit_intervals, coverage, profile, output))
    check_device(v["device"])
    from kernels.validate import validate as validation

    if draw is not None and (draw < 0 or repredict is not None):
        raise typer.BadParameter("--draw takes a seed >= 0 and measures: it does not go with --repredict")
    if repredict is not None:
        result, paths = validation.repredict(repredict, profile, v["output_dir"], log=echo_err)
    else:
        require_torch("'ridgeline validate'")
        how = {k: v[k] for k in ("quick", "threads", "profile", "output_dir", "draw")}
        result, paths = validation.validate(v["device"], **how, quiet_wait_s=v["quiet_wait"], log=echo_err)
    raise typer.Exit(validation.report(result, paths, console(), echo_err))


@command(predictions_app, "hardware__register profile sizes transfer__register output", "register")
def predictions_register(ctx: typer.Context) -> None:
    """Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels)."""
    hardware, profile, sizes, transfer, output = values(ctx).values()
    from kernels.bench.provenance import git_commit
    from kernels.gpu.register import predictions_path, register

    commit = git_commit()
    if profile is not None and not profile.is_file():
        raise typer.BadParameter(f"--profile {profile}: no such file")
    target = output or predictions_path(hardware, commit)
    if target.exists():
        raise typer.BadParameter(f"{target} exists: registered predictions are never written over; pass -o NEW.json")
    data = register(hardware, profile, sizes, commit, transfer)
    write_atomic(target, json.dumps(data, indent=1, allow_nan=False) + "\n")
    typer.echo(registered_line(data, target))


@command(predictions_app, "results predictions output", "compare")
def predictions_compare(ctx: typer.Context) -> None:
    """After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o)."""
    results, predictions, output = values(ctx).values()
    from kernels.gpu.register import compare, markdown

    table = compare(results, predictions)
    text = markdown(table)
    if output is None:
        return typer.echo(text, nl=False)
    write_atomic(output, text)
    write_atomic(output.with_suffix(".json"), json.dumps(table, indent=1, default=float) + "\n")
    typer.echo(f"wrote {output} and {output.with_suffix('.json')}")


def interval_command(fit: bool, coverage: bool, profile: Path | None, output: Path | None) -> int:
    """--fit-intervals (a profile's table, or without --profile the spec pools) or --coverage."""
    from kernels.validate import intervals

    if fit and coverage:
        raise typer.BadParameter("--fit-intervals and --coverage are separate runs: give one")
    if profile is not None and not profile.is_file():
        raise typer.BadParameter(f"--profile {profile}: no such file")
    if coverage:
        if profile is None:
            raise typer.BadParameter("--coverage checks one profile: give --profile PATH")
        for line in intervals.coverage_lines(intervals.write_coverage(profile, output, echo_err)):
            typer.echo(line)
    elif profile is not None:
        intervals.write_profile_intervals(profile, output, echo_err)
    else:
        intervals.write_spec_pools(output, echo_err)
    return 0
