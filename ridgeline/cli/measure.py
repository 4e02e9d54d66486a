"""The kernel measurements and the GPU run's predictions: calibrate, validate, predictions
register|compare. Each calls into kernels/, imported when the command runs (most of it needs torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ridgeline.cli import options as opt
from ridgeline.cli.app import app, echo_err, predictions_app
from ridgeline.errors import require_torch
from ridgeline.io.files import write_atomic
from ridgeline.report import console, registered_line

# help texts too long to sit in their option's line
HELP = {
    "results": "A run's OUT/results.tar.gz, or the folder it unpacks to; several for stages run again later (a later file of the same name replaces an earlier).",
    "output": "Profile path (default: <user data folder>/profiles/<device>.yaml; with --refit: ./<stem>.refit.yaml); its calibration rows go beside it, .calibration.csv for .yaml.",
    "refit": "Measure nothing: fit this profile again from its stored calibration rows into a new file.",
    "check": "Write nothing: measure the profile's own roofs again (about 20 s) and say whether this machine is still in the state they were measured in; exit 1 if one moved more than 10%.",
    "output_dir": "Folder for the JSON/CSV/HTML (default: <user data folder>/validation; with --repredict: the current folder).",
    "repredict": "Measure nothing: predict this snapshot JSON again (with --profile or the profile it used) into <stem>-repredicted.*.",
    "through": "kernels (default: the kernels called directly) or transformers: one decoder layer's attention and MLP modules as transformers builds them (random weights, its default attention), measured and predicted (written as <stem>-through-transformers.*).",
    "draw": "Measure a fresh held-out set drawn with this seed instead of the committed one: two catalog models, batch sizes and context lengths that calibration never uses (written as <stem>-draw<SEED>.*).",
    "fit_intervals": "Fit interval tables instead of measuring: with --profile, the profile's from its leave-one-model-out residuals; without, the spec pools of the committed snapshots. Writes -o NEW.",
    "coverage": "Check instead of measuring how often --profile's intervals hold on data left out of their fit (-o NEW.json to keep it).",
    "transfer": "The profile is another GPU's of the same architecture: its fractions on this GPU's datasheet roofs (for a GPU with no device-time profile of its own).",
}


def check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"--device must be cpu or cuda, got '{device}'")


@app.command()
def calibrate(
    device: opt.MeasureDevice = "cpu",
    quick: opt.Quick = False,
    threads: opt.Threads = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help=HELP["output"])] = None,
    refit: Annotated[Path | None, typer.Option(help=HELP["refit"])] = None,
    check: Annotated[bool, typer.Option("--check", help=HELP["check"])] = False,
    profile: opt.Profile = None,
    quiet_wait: opt.QuietWait = 0.0,
) -> None:
    """Measure bandwidth, matrix peaks, overhead and per-class efficiencies; write a device profile."""
    check_device(device)
    if profile is not None and not check:
        raise typer.BadParameter("--profile goes with --check (calibrate measures this machine into --output)")
    if check:
        raise typer.Exit(check_state(device, threads, profile, refit is not None or output is not None))
    from kernels.calibrate import calibrate as measure

    if refit is not None:
        return measure.refit(refit, output, log=echo_err)
    require_torch("'ridgeline calibrate'")
    measure.calibrate(device, quick=quick, threads=threads, output=output, quiet_wait_s=quiet_wait, log=echo_err)


def check_state(device: str, threads: int | None, profile: Path | None, writes: bool) -> int:
    """calibrate --check, which writes nothing: the exit code (1: a roof moved more than 10 %)."""
    if writes:
        raise typer.BadParameter("--check writes nothing: drop --refit and --output")
    require_torch("'ridgeline calibrate --check'")
    from kernels.validate.state import check

    return 1 if check(device, threads, profile, log=echo_err)["drifted"] else 0


@app.command()
def validate(
    device: opt.MeasureDevice = "cpu",
    quick: opt.Quick = False,
    threads: opt.Threads = None,
    profile: opt.Profile = None,
    output_dir: Annotated[Path | None, typer.Option(help=HELP["output_dir"])] = None,
    repredict: Annotated[Path | None, typer.Option(help=HELP["repredict"])] = None,
    quiet_wait: opt.QuietWait = 0.0,
    draw: Annotated[int | None, typer.Option(help=HELP["draw"])] = None,
    through: Annotated[str, typer.Option(help=HELP["through"])] = "kernels",
    fit_intervals: Annotated[bool, typer.Option("--fit-intervals", help=HELP["fit_intervals"])] = False,
    coverage: Annotated[bool, typer.Option("--coverage", help=HELP["coverage"])] = False,
    output: opt.Output = None,
) -> None:
    """Measure held-out kernel shapes and compare them with the spec and calibrated predictions."""
    if fit_intervals or coverage:
        raise typer.Exit(interval_command(fit_intervals, coverage, profile, output))
    check_device(device)
    from kernels.validate import validate as validation

    if draw is not None and (draw < 0 or repredict is not None):
        raise typer.BadParameter("--draw takes a seed >= 0 and measures: it does not go with --repredict")
    if through not in ("kernels", "transformers") or (through != "kernels" and (draw, repredict) != (None, None)):
        raise typer.BadParameter(
            f"--through takes kernels or transformers (got {through!r}), without --draw or --repredict"
        )
    if repredict is not None:
        result, paths = validation.repredict(repredict, profile, output_dir, log=echo_err)
    else:
        require_torch("'ridgeline validate'")
        how = dict(quick=quick, threads=threads, profile=profile, output_dir=output_dir, draw=draw, through=through)
        result, paths = validation.validate(device, **how, quiet_wait_s=quiet_wait, log=echo_err)
    raise typer.Exit(validation.report(result, paths, console(), echo_err))


@predictions_app.command("register")
def predictions_register(
    hardware: opt.Hardware = "h200",
    profile: opt.Profile = None,
    sizes: Annotated[str, typer.Option(help="The run's sizes preset (kernels/gpu/plan.py): gpu, or cpu-test.")] = "gpu",
    transfer: Annotated[bool, typer.Option("--transfer", help=HELP["transfer"])] = False,
    output: opt.Output = None,
) -> None:
    """Before a GPU run: write what it will be checked against (e2e, transformers, serving, the draw's kernels)."""
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


@predictions_app.command("compare")
def predictions_compare(
    results: Annotated[list[Path], typer.Argument(help=HELP["results"])],
    predictions: Annotated[Path, typer.Option(help="The registered predictions (reports/predictions/*.json).")],
    output: opt.Output = None,
) -> None:
    """After a GPU run: measured beside the registered and the current code's predictions (Markdown; JSON beside -o)."""
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
