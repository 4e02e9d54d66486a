"""e2e and decode-profile: a real decoder (random weights) measured against the predictions.
Each calls into kernels/e2e, imported when the command runs (it needs torch)."""

from __future__ import annotations

import typer

from ridgeline.cli.app import app, command, echo_err, pick, values
from ridgeline.errors import require_torch
from ridgeline.io.resolve import load_model
from ridgeline.io.settings import model_name
from ridgeline.report import print_lines

E2E_OPTIONS = "device batch prompt generate layers dtype compile repeats threads hardware profile output"


E2E = "model config device batch__e2e prompt generate__e2e layers dtype__e2e compile execution__e2e repeats threads hardware__e2e profile output__e2e repredict quiet_wait"


@command(app, E2E)
def e2e(ctx: typer.Context) -> None:
    """Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions."""
    v = values(ctx)
    repredict = v["repredict"]
    if repredict is None:  # measuring needs torch; predicting a file again does not
        require_torch("'ridgeline e2e'")
    from kernels.e2e.e2e import run_command

    name = model_name(v["model"], v["config"]) if repredict is None else None  # a file names its models
    options = pick(v, E2E_OPTIONS)
    files = {"repredict_path": repredict, "quiet_wait_s": v["quiet_wait"], "executions": tuple(v["execution"] or ())}
    print_lines(run_command(name, **options, **files, log=echo_err))


@command(
    app,
    "model config device batch prompt__decode steps layers__decode dtype__decode ops threads__decode",
    "decode-profile",
)
def decode_profile(ctx: typer.Context) -> None:
    """Split an eager decode step into host dispatch and device work (is it host-bound?)."""
    v = values(ctx)
    require_torch("'ridgeline decode-profile'")
    from kernels.e2e.decode_profile import run

    options = pick(v, "batch prompt steps layers dtype device ops threads")
    print_lines(run(load_model(model_name(v["model"], v["config"])), **options))
