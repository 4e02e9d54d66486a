"""The measuring commands' runs: calibrate, validate, predictions register|compare,
simulate-check, e2e and decode-profile. Each declares its options once, as its keyword
parameters: one annotated ``Annotated[type, Doc(help)]`` is that command's own (the command
line's flag is its name), any other is one the command line shares (ridgeline/cli/options.py).
Each checks its options (a bad one is one line, exit 2, as the command line's usage errors
read), then runs its subsystem; what needs torch is imported when it runs. ``echo`` prints a
result line, ``log`` a progress line (stderr); each returns the exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from typing_extensions import Doc

from ridgeline.api import Batch
from ridgeline.errors import InvalidOptionError, MissingDependencyError, require_torch
from ridgeline.io.files import write_atomic
from ridgeline.io.resolve import load_model
from ridgeline.io.settings import model_name
from ridgeline.io.traces import CHECK_OUTPUT_RANGE, CHECK_PROMPT_RANGE
from ridgeline.report import console, overhead_line, registered_line

Log = Callable[[str], None]
# the options calibrate and validate share
Device = Annotated[str, Doc("cpu or cuda.")]
Quick = Annotated[
    bool,
    Doc(
        "Fewer shapes and repetitions: calibrate --quick took 660 s on one core of a shared Intel Xeon; more on a busier one."
    ),
]
Threads = Annotated[int | None, Doc("torch CPU threads, fixed for the run (default: all cores this process may use).")]
QuietWait = Annotated[float, Doc("CPU: before each case, wait up to this many seconds for other processes to go idle.")]
# the options e2e, decode-profile and simulate-check share
Layers = Annotated[int | None, Doc("Keep only the first L decoder layers.")]
Decoder = Annotated[str | None, Doc("cpu or cuda (default: cuda when torch sees one).")]


def check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise InvalidOptionError(f"--device must be cpu or cuda, got '{device}'")


def check_profile(profile: Path | None) -> None:
    if profile is not None and not profile.is_file():
        raise InvalidOptionError(f"--profile {profile}: no such file")


# fmt: off
def calibrate(
    *,
    device: Device = "cpu",
    quick: Quick = False,
    threads: Threads = None,
    output: Annotated[Path | None, Doc("Profile path (default: <user data folder>/profiles/<device>.yaml; with --refit: ./<stem>.refit.yaml); its calibration rows go beside it, .calibration.csv for .yaml.")] = None,
    refit: Annotated[Path | None, Doc("Measure nothing: fit this profile again from its stored calibration rows into a new file.")] = None,
    extend: Annotated[Path | None, Doc("Measure only the calibration cases this version has that this profile's rows lack, on the machine and in the state it was measured in (--check's test first), and fit it again from all its rows into -o NEW (default: ./<stem>.extended.yaml).")] = None,
    check: Annotated[bool, Doc("Write nothing: measure the profile's own roofs again (about 20 s) and say whether this machine is still in the state they were measured in; exit 1 if one moved more than 10%.")] = False,
    profile: Path | None = None,
    quiet_wait: QuietWait = 0.0,
    log: Log,
) -> int:
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
        from kernels.calibrate.state import check

        held = lambda path: not check(device, threads, path, log=log)["drifted"]  # noqa: E731
        measure.extend(extend, device, threads, in_state=held, output=output, quiet_wait_s=quiet_wait, log=log)
        return 0
    measure.calibrate(device, quick=quick, threads=threads, output=output, quiet_wait_s=quiet_wait, log=log)
    return 0
# fmt: on


def check_state(device: str, threads: int | None, profile: Path | None, writes: bool, log: Log) -> int:
    """calibrate --check, which writes nothing: the exit code (1: a roof moved more than 10 %)."""
    if writes:
        raise InvalidOptionError("--check writes nothing: drop --refit and --output")
    require_torch("'ridgeline calibrate --check'")
    from kernels.calibrate.state import check

    return 1 if check(device, threads, profile, log=log)["drifted"] else 0


# fmt: off
def validate(
    *,
    device: Device = "cpu",
    quick: Quick = False,
    threads: Threads = None,
    profile: Path | None = None,
    output_dir: Annotated[Path | None, Doc("Folder for the JSON/CSV/HTML (default: <user data folder>/validation; with --repredict: the current folder).")] = None,
    repredict: Annotated[Path | None, Doc("Measure nothing: predict this snapshot JSON again (with --profile or the profile it used) into <stem>-repredicted.*.")] = None,
    recorded_ceilings: Annotated[bool, Doc("With --repredict: predict again on the ceilings the snapshot recorded (what an engine change alone moves), not on a profile.")] = False,
    quiet_wait: QuietWait = 0.0,
    draw: Annotated[int | None, Doc("Measure a fresh held-out set drawn with this seed instead of the committed one: two catalog models, batch sizes and context lengths that calibration never uses (written as <stem>-draw<SEED>.*).")] = None,
    through: Annotated[str, Doc("kernels (default: the kernels called directly) or transformers: one decoder layer's attention and MLP modules as transformers builds them (random weights, its default attention), measured and predicted (written as <stem>-through-transformers.*).")] = "kernels",
    fit_intervals: Annotated[bool, Doc("Fit interval tables instead of measuring: with --profile, the profile's from its leave-one-model-out residuals; without, the spec pools of the committed snapshots. Writes -o NEW.")] = False,
    coverage: Annotated[bool, Doc("Check instead of measuring how often --profile's intervals hold on data left out of their fit (-o NEW.json to keep it).")] = False,
    output: Path | None = None,
    echo,
    log: Log,
) -> int:
    """validate: held-out shapes measured (or a snapshot predicted again) against the predictions;
    or ``fit_intervals`` / ``coverage`` (interval_run)."""
    if fit_intervals or coverage:
        return interval_run(fit_intervals, coverage, profile, output, echo, log)
    check_device(device)
    from kernels.validate import validate as validation

    if draw is not None and (draw < 0 or repredict is not None):
        raise InvalidOptionError("--draw takes a seed >= 0 and measures: it does not go with --repredict")
    if through not in ("kernels", "transformers") or (through != "kernels" and (draw, repredict) != (None, None)):
        raise InvalidOptionError(
            f"--through takes kernels or transformers (got {through!r}), without --draw or --repredict"
        )
    if recorded_ceilings and (repredict is None or profile is not None):
        raise InvalidOptionError("--recorded-ceilings goes with --repredict SNAPSHOT and without --profile")
    if repredict is not None:
        result, paths = validation.repredict(repredict, profile, output_dir, log=log, recorded=recorded_ceilings)
    else:
        require_torch("'ridgeline validate'")
        how = {"quick": quick, "threads": threads, "output_dir": output_dir, "through": through}
        result, paths = validation.validate(device, **how, profile=profile, draw=draw, quiet_wait_s=quiet_wait, log=log)
    return validation.report(result, paths, console(), log)
# fmt: on


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


# fmt: off
def register_predictions(
    *,
    hardware: Annotated[str, Doc("Catalog device, 'host', or a device YAML file.")] = "h200",
    profile: Path | None = None,
    sizes: Annotated[str, Doc("The run's sizes preset (kernels/gpu/plan.py): gpu, gpu-heldout, gpu-families, gpu-heldout2, gpu-heldout3, or cpu-test.")] = "gpu",
    transfer: Annotated[bool, Doc("The profile is another GPU's of the same architecture: its fractions on this GPU's datasheet roofs (for a GPU with no device-time profile of its own).")] = False,
    output: Path | None = None,
    echo,
    log: Log,
) -> int:
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
# fmt: on


def compare_predictions(
    *,
    results: list[Path],
    predictions: Annotated[Path, Doc("The registered predictions (reports/predictions/*.json).")],
    output: Path | None = None,
    echo,
    log: Log,
) -> int:
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


# fmt: off
def simulate_check(
    *,
    model: str = "qwen2-0.5b",
    layers: Layers = None,
    requests: Annotated[int, Doc("Requests in the Poisson trace.")] = 48,
    rate: Annotated[float, Doc("Requests per second.")] = 2.0,
    prompt_range: Annotated[tuple[int, int], Doc("Prompt tokens, uniform on MIN MAX.")] = CHECK_PROMPT_RANGE,
    output_range: Annotated[tuple[int, int], Doc("Output tokens, uniform on MIN MAX.")] = CHECK_OUTPUT_RANGE,
    repeats: Annotated[int, Doc("Replays of the trace (per-request medians).")] = 3,
    seed: Annotated[int, Doc("Seed of the trace and the prompts.")] = 0,
    dtype: Annotated[str, Doc("Model data type: bf16, or fp32 on a CPU without bf16 kernels (see 'calibrate').")] = "bf16",
    clock: Annotated[str | None, Doc("cpu: step transformers' server here on a clock of CPU seconds (immune to other processes); device (a GPU): the same, each step's wall seconds with the GPU synchronised; wall: its background thread in real time. Default: cpu, or device with --device cuda.")] = None,
    device: Annotated[str, Doc("cpu, or cuda: transformers on the GPU, eager (no CUDA graphs), simulated in eager execution with the GPU's profile.")] = "cpu",
    overhead_from: Annotated[Path | None, Doc("Also simulate with the host terms fitted to this recorded run (another trace).")] = None,
    fit_overhead: Annotated[Path | None, Doc("Measure nothing: fit the host terms (seconds per step, per request) to this recorded run's steps and print them.")] = None,
    resimulate: Annotated[Path | None, Doc("Measure nothing: simulate this recorded run's trace again with today's engine and print the comparison.")] = None,
    profile: Path | None = None,
    output: Path | None = None,
    echo,
    log: Log,
) -> int:
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
        run = {"model": model, "layers": layers, "requests": requests, "rate": rate, "repeats": repeats, "seed": seed}
        run |= {"prompt_range": prompt_range, "output_range": output_range, "dtype": dtype, "clock": clock, "device": device}
        result, path = replay(run, overhead, profile, output, log)
        for line in cb_server.report_lines(result):
            echo(line)
        log(f"wrote {path}")
    return 0
# fmt: on


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


# fmt: off
def e2e(
    *,
    model: str | None = None,
    config: Path | None = None,
    device: Decoder = None,
    batch: Annotated[list[int], Doc("Sequences per batch; repeat the option for several.")] = (1,),
    prompt: Annotated[list[int], Doc("Prompt tokens; repeat the option for several.")] = (128,),
    generate: Annotated[int, Doc("Output tokens: the prefill's token + N-1 decode steps.")] = 16,
    layers: Annotated[int | None, Doc("Keep only the first L decoder layers (prediction too).")] = None,
    dtype: Annotated[str, Doc("fp32, bf16 or fp16 for weights, activations and KV cache.")] = "bf16",
    compile: Annotated[bool, Doc("Also measure under torch.compile (eager is always measured).")] = False,
    execution: Annotated[list[str] | None, Doc("eager, compiled or graph (CUDA graphs of the decode step); repeat for several (default: eager, and compiled with --compile).")] = None,
    repeats: Annotated[int, Doc("Timed generations per configuration (median kept).")] = 5,
    threads: Annotated[int | None, Doc("torch CPU threads (default: torch's).")] = None,
    hardware: Annotated[str, Doc("Device for the spec prediction: 'host' or a catalog name.")] = "host",
    profile: Path | None = None,
    output: Annotated[Path | None, Doc("Result JSON (default: <user data folder>/validation/e2e-<device>-<model>-<date>.json, rows of a configuration measured again replaced; with --repredict: ./<stem>-repredicted.json).")] = None,
    repredict: Annotated[Path | None, Doc("Measure nothing: recompute the predictions of this e2e result file into a new file.")] = None,
    quiet_wait: Annotated[float, Doc("CPU: before each timed run, wait up to this many seconds for other processes to go idle.")] = 0.0,
    echo,
    log: Log,
) -> int:
    """e2e: a real decoder (random weights) measured against the predictions, or a result file
    predicted again (``repredict``, which needs no torch: the file names its models)."""
    if repredict is None:
        require_torch("'ridgeline e2e'")
    from kernels.e2e.e2e import run_command

    name = model_name(model, config) if repredict is None else None
    shape = {"batch": batch, "prompt": prompt, "generate": generate, "layers": layers, "dtype": dtype}
    how = {"compile": compile, "repeats": repeats, "threads": threads, "executions": tuple(execution or ())}
    files = {"hardware": hardware, "profile": profile, "output": output, "repredict_path": repredict}
    for line in run_command(name, device=device, **shape, **how, **files, quiet_wait_s=quiet_wait, log=log):
        echo(line)
    return 0


def decode_profile(
    *,
    model: str | None = None,
    config: Path | None = None,
    device: Decoder = None,
    batch: Batch = 1,
    prompt: Annotated[int, Doc("Cached tokens before the first decode step.")] = 512,
    steps: Annotated[int, Doc("Decode steps per pass.")] = 16,
    layers: Layers = None,
    dtype: Annotated[str, Doc("fp32, bf16 or fp16.")] = "bf16",
    ops: Annotated[bool, Doc("Also time each engine op (profiler ranges) beside its prediction.")] = False,
    threads: Annotated[int | None, Doc("torch CPU threads (default: torch's); the calibrated profile is the one of this count.")] = None,
    echo,
    log: Log,
) -> int:
    """decode-profile: an eager decode step split into host dispatch and device work."""
    require_torch("'ridgeline decode-profile'")
    from kernels.e2e.decode_profile import run

    options = {"batch": batch, "prompt": prompt, "steps": steps, "layers": layers, "dtype": dtype}
    for line in run(load_model(model_name(model, config)), **options, device=device, ops=ops, threads=threads):
        echo(line)
    return 0
# fmt: on
