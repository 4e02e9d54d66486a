"""e2e and decode-profile: a real decoder (random weights) measured against the predictions.
Each calls into kernels/e2e, imported when the command runs (it needs torch)."""

from __future__ import annotations

import typer

from ridgeline.cli import options as opt
from ridgeline.cli.app import app, echo_err, echo_lines, model_name
from ridgeline.errors import require_torch
from ridgeline.io.resolve import load_model

E2E_OPTIONS = ("device", "batch", "prompt", "generate", "layers", "dtype", "compile", "repeats", "threads", "hardware")


@app.command()
def e2e(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    device: opt.TorchDevice = None,
    batch: opt.E2eBatches = [1],  # noqa: B006
    prompt: opt.E2ePrompts = [128],  # noqa: B006
    generate: opt.E2eGenerate = 16,
    layers: opt.E2eLayers = None,
    dtype: opt.E2eDtype = "bf16",
    compile: opt.Compile = False,
    execution: opt.Executions = None,
    repeats: opt.E2eRepeats = 5,
    threads: opt.E2eThreads = None,
    hardware: opt.E2eHardware = "host",
    profile: opt.Profile = None,
    output: opt.E2eOutput = None,
    repredict: opt.E2eRepredict = None,
    quiet_wait: opt.E2eQuietWait = 0.0,
) -> None:
    """Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions."""
    if repredict is None:  # measuring needs torch; predicting a file again does not
        require_torch("'ridgeline e2e'")
    from kernels.e2e.e2e import run_command

    name = model_name(model, config) if repredict is None else None  # a file names its models
    options = {key: ctx.params[key] for key in E2E_OPTIONS}
    files = {"profile": profile, "output": output, "repredict_path": repredict, "quiet_wait_s": quiet_wait}
    echo_lines(run_command(name, **options, **files, executions=tuple(execution or ()), log=echo_err))


@app.command("decode-profile")
def decode_profile(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    device: opt.TorchDevice = None,
    batch: opt.Batch = 1,
    prompt: opt.CachedPrompt = 512,
    steps: opt.Steps = 16,
    layers: opt.Layers = None,
    dtype: opt.ProfileDtype = "bf16",
    ops: opt.Ops = False,
    threads: opt.ProfileThreads = None,
) -> None:
    """Split an eager decode step into host dispatch and device work (is it host-bound?)."""
    require_torch("'ridgeline decode-profile'")
    from kernels.e2e.decode_profile import run

    options = {key: ctx.params[key] for key in ("batch", "prompt", "steps", "layers", "dtype", "device", "ops")}
    echo_lines(run(load_model(model_name(model, config)), **options, threads=threads))
