"""e2e and decode-profile: a real decoder (random weights) measured against the predictions.
Each calls into kernels/e2e, imported when the command runs (it needs torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ridgeline.cli import options as opt
from ridgeline.cli.app import app, echo_err, echo_lines, model_name
from ridgeline.errors import require_torch
from ridgeline.io.resolve import load_model

# help texts too long to sit in their option's line
HELP = {
    "batch": "Sequences per batch; repeat the option for several.",
    "prompt": "Prompt tokens; repeat the option for several.",
    "compile": "Also measure under torch.compile (eager is always measured).",
    "execution": "eager, compiled or graph (CUDA graphs of the decode step); repeat for several (default: eager, and compiled with --compile).",
    "hardware": "Device for the spec prediction: 'host' or a catalog name.",
    "output": "Result JSON (default: <user data folder>/validation/e2e-<device>-<model>-<date>.json, rows of a configuration measured again replaced; with --repredict: ./<stem>-repredicted.json).",
    "repredict": "Measure nothing: recompute the predictions of this e2e result file into a new file.",
    "quiet_wait": "CPU: before each timed run, wait up to this many seconds for other processes to go idle.",
    "ops": "Also time each engine op (profiler ranges) beside its prediction.",
    "threads": "torch CPU threads (default: torch's); the calibrated profile is the one of this count.",
}


E2E_OPTIONS = ("device", "batch", "prompt", "generate", "layers", "dtype", "compile", "repeats", "threads", "hardware")


@app.command()
def e2e(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    device: opt.TorchDevice = None,
    batch: Annotated[list[int], typer.Option(help=HELP["batch"])] = [1],  # noqa: B006,
    prompt: Annotated[list[int], typer.Option(help=HELP["prompt"])] = [128],  # noqa: B006,
    generate: Annotated[int, typer.Option(help="Output tokens: the prefill's token + N-1 decode steps.")] = 16,
    layers: Annotated[int | None, typer.Option(help="Keep only the first L decoder layers (prediction too).")] = None,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16 for weights, activations and KV cache.")] = "bf16",
    compile: Annotated[bool, typer.Option("--compile", help=HELP["compile"])] = False,
    execution: Annotated[list[str] | None, typer.Option(help=HELP["execution"])] = None,
    repeats: Annotated[int, typer.Option(help="Timed generations per configuration (median kept).")] = 5,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads (default: torch's).")] = None,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help=HELP["hardware"])] = "host",
    profile: opt.Profile = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help=HELP["output"])] = None,
    repredict: Annotated[Path | None, typer.Option(help=HELP["repredict"])] = None,
    quiet_wait: Annotated[float, typer.Option(help=HELP["quiet_wait"])] = 0.0,
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
    prompt: Annotated[int, typer.Option(help="Cached tokens before the first decode step.")] = 512,
    steps: Annotated[int, typer.Option(help="Decode steps per pass.")] = 16,
    layers: opt.Layers = None,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "bf16",
    ops: Annotated[bool, typer.Option("--ops", help=HELP["ops"])] = False,
    threads: Annotated[int | None, typer.Option(help=HELP["threads"])] = None,
) -> None:
    """Split an eager decode step into host dispatch and device work (is it host-bound?)."""
    require_torch("'ridgeline decode-profile'")
    from kernels.e2e.decode_profile import run

    options = {key: ctx.params[key] for key in ("batch", "prompt", "steps", "layers", "dtype", "device", "ops")}
    echo_lines(run(load_model(model_name(model, config)), **options, threads=threads))
