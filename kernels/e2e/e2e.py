"""End-to-end check: time a real decoder's prefill and decode steps and put the engine's
``spec`` and ``calibrated`` predictions for the same configuration beside them.

Convention (the engine's): ``generate = N`` output tokens per sequence = the token the
prefill yields plus N - 1 decode steps. TTFT = prefill time (greedy sampling included);
TPOT = time per decode step. Each configuration runs once to warm up (and to compile, with
``compile``), then ``repeats`` times; rows keep medians and 20th/80th percentiles
(``measure_case`` says over what). GPU steps are timed with CUDA events (one pair per
step, one synchronisation per run: the steps queue back to back as in a real server);
CPU steps with ``perf_counter`` (a CPU step returns when its work is done).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kernels.bench.provenance import collect, datasheet_device, measured_key, read_result, read_results
from kernels.bench.timing import NOISE_CPU, NOISE_CUDA, summarize, wait_for_quiet
from kernels.e2e.waterfall import e2e_waterfalls, waterfall_lines, without_launch
from ridgeline.api import analyze
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import Ceilings, spec_ceilings
from ridgeline.engine.workload import EXECUTIONS, Settings
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import VALIDATION_DIR, user_data_dir
from ridgeline.io.files import write_atomic
from ridgeline.io.resolve import calibrated_for, device_to_dict, recorded_spec

ENGINE_DTYPES = ("fp32", "bf16", "fp16")
KEY_FIELDS = ("model", "layers", "batch", "prompt", "generate", "dtype", "compile", "execution")


@dataclass(frozen=True)
class Case:
    """One measured configuration."""

    batch: int
    prompt: int
    generate: int  # output tokens: 1 from the prefill + (generate - 1) decode steps


def truncate(config: ModelConfig, layers: int | None) -> ModelConfig:
    """The same model with only its first ``layers`` decoder layers (None: all)."""
    if layers is None or layers == config.num_layers:
        return config
    if layers <= 0 or layers > config.num_layers:
        raise RidgelineError(f"--layers must be between 1 and {config.num_layers} for {config.name}, got {layers}")
    return replace(config, num_layers=layers)


# --- timing ----------------------------------------------------------------------------


def time_generation(
    prefill: Callable, decode: Callable, tokens, generate: int, device: str
) -> tuple[float, list[float]]:
    """One generation: (prefill seconds, [seconds of each decode step])."""
    import torch

    prompt = tokens.shape[1]
    if device.startswith("cuda"):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * generate)]
        torch.cuda.synchronize()
        events[0].record()
        token = prefill(tokens)
        events[1].record()
        for j in range(generate - 1):
            events[2 * j + 2].record()
            token = decode(token, prompt + j)
            events[2 * j + 3].record()
        torch.cuda.synchronize()
        times = [events[2 * i].elapsed_time(events[2 * i + 1]) / 1e3 for i in range(generate)]
        return times[0], times[1:]
    start = time.perf_counter()
    token = prefill(tokens)
    times = [time.perf_counter() - start]
    for j in range(generate - 1):
        start = time.perf_counter()
        token = decode(token, prompt + j)
        times.append(time.perf_counter() - start)
    return times[0], times[1:]


def reset_peak(device: str) -> None:
    """Start a new memory high-water mark: the CUDA allocator's, or the process's peak RSS
    (Linux: writing 5 to /proc/self/clear_refs resets VmHWM)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def read_peak(device: str) -> dict[str, Any]:
    """The high-water mark since :func:`reset_peak` and how it was read: on a GPU
    ``torch.cuda.max_memory_allocated`` (tensors only, not the allocator's cached slack or
    the CUDA context); on a CPU the process's peak RSS (interpreter and libraries included)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        return {
            "measured_peak_bytes": float(torch.cuda.max_memory_allocated()),
            "peak_method": "torch.cuda.max_memory_allocated",
        }
    try:
        status = Path("/proc/self/status").read_text().split("\n")
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        return {"measured_peak_bytes": kib * 1024.0, "peak_method": "VmHWM (peak RSS)"}
    except (OSError, StopIteration, ValueError):
        import resource

        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {"measured_peak_bytes": kib * 1024.0, "peak_method": "ru_maxrss (process life)"}


def measure_case(
    model,
    case: Case,
    device: str,
    repeats: int,
    compiled: bool,
    seed: int = 0,
    quiet_wait_s: float = 0.0,
    graph: bool = False,
) -> dict[str, Any]:
    """Warm-up run, then ``repeats`` timed generations of one configuration.

    TTFT: quantiles over the repeats' prefills. TPOT: quantiles over every decode step of
    every repeat (steps differ only by one cached token each, so on a quiet machine the
    median step is the mean step; on a shared one it ignores the steps another process
    stalled); ``measured_tpot_mean_s`` keeps the median over repeats of each run's mean.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (case.batch, case.prompt), generator=generator).to(device)
    prefill, decode = model.prefill, model.decode
    if compiled:
        prefill, decode = torch.compile(prefill), torch.compile(decode)
    ttfts, steps, run_means, waited = [], [], [], 0.0
    reset_peak(device)
    with torch.inference_mode():
        if graph:  # decode steps replayed from CUDA graphs; the prefill stays eager
            decode = graph_decode(model, case)
        time_generation(prefill, decode, tokens, case.generate, device)  # warm-up / compile
        for _ in range(repeats):
            if quiet_wait_s and not device.startswith("cuda"):
                waited += wait_for_quiet(quiet_wait_s)
            ttft, run = time_generation(prefill, decode, tokens, case.generate, device)
            ttfts.append(ttft)
            steps += run
            run_means.append(float(np.mean(run)))
    method = "cuda_events" if device.startswith("cuda") else "perf_counter"
    noise = NOISE_CUDA if device.startswith("cuda") else NOISE_CPU
    ttft, tpot = (summarize(v, inner=1, sets=1, method=method, noise_threshold=noise) for v in (ttfts, steps))
    return {
        **read_peak(device),
        "measured_ttft_s": ttft.median_s,
        "measured_ttft_p20_s": ttft.p20_s,
        "measured_ttft_p80_s": ttft.p80_s,
        "measured_tpot_s": tpot.median_s,
        "measured_tpot_p20_s": tpot.p20_s,
        "measured_tpot_p80_s": tpot.p80_s,
        "measured_tpot_mean_s": float(np.median(run_means)),
        "noisy": ttft.noisy or tpot.noisy,  # p80/p20 - 1 over the harness's threshold
        "quiet_waited_s": waited,
        "measured_tokens_per_s": case.batch * case.generate / (ttft.median_s + (case.generate - 1) * tpot.median_s),
    }


# --- predictions -----------------------------------------------------------------------


def engine_settings(dtype: str, execution: str = "auto", attention: str = "flash") -> Settings:
    """Weights, activations and KV cache in ``dtype``; ridgeline's decoder calls SDPA as a
    fused kernel (the group folded at decode), so ``flash`` unless a client says otherwise."""
    return Settings(dtype, dtype, dtype, attention=attention, execution=execution)


def graph_decode(model, case: Case):
    """The decoder's decode steps of one case captured in CUDA graphs (kernels.e2e.decoder)."""
    from kernels.e2e.decoder import DecodeGraphs

    return DecodeGraphs(model, case.batch, case.prompt, case.generate - 1)


def row_execution(row: dict[str, Any]) -> str:
    """How a result row ran (rows from before execution modes: eager or compiled)."""
    return row.get("execution") or ("compiled" if row.get("compile") else "eager")


def predict(
    config: ModelConfig,
    device: DeviceSpec,
    case: Case,
    dtype: str,
    ceilings: Ceilings,
    execution: str = "auto",
    attention: str = "flash",
) -> dict[str, float]:
    """TTFT, TPOT and tokens/s from ``ridgeline.analyze`` for exactly this run, its attention
    priced as ``attention`` (ridgeline's decoder: ``flash``)."""
    if device.kind == "cpu" and execution == "graph":
        execution = "eager"
    result = analyze(
        config,
        device,
        batch=case.batch,
        seq_len=case.prompt,
        generate=case.generate,
        settings=engine_settings(dtype, execution, attention),
        ceilings=ceilings,
    )
    gen = result.generation
    return {
        "ttft_s": gen["ttft_s"],
        "tpot_s": gen["tpot_s"],
        "tokens_per_s": gen["tokens_per_s"],
        "decode_ops": sum(r["count"] for r in result.decode.records()),
        "peak_bytes": float(result.memory["peak_bytes"]),
    }


def signed_error(predicted: float | None, measured: float) -> float | None:
    """(predicted - measured) / measured: negative when the prediction is too fast."""
    if predicted is None or not measured or np.isnan(measured):
        return None
    return predicted / measured - 1.0


def prediction_columns(mode: str, pred: dict[str, float] | None, measured: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for what in ("ttft", "tpot"):
        value = None if pred is None else pred[f"{what}_s"]
        out[f"predicted_{mode}_{what}_s"] = value
        out[f"error_{mode}_{what}"] = signed_error(value, measured[f"measured_{what}_s"])
    return out


# --- the device and its provenance ---------------------------------------------------


def resolve_device(device: str | None) -> str:
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise RidgelineError(f"--device must be cpu or cuda, got '{device}'")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RidgelineError(
            "--device cuda: torch sees no CUDA device (CPU build of torch, or no driver); use --device cpu"
        )
    return device


def provenance(device: str, spec: DeviceSpec, profile: Path | None) -> dict[str, Any]:
    """The harness's ``meta`` block plus what this comparison predicted with."""
    import torch

    meta = collect("cuda" if device.startswith("cuda") else "cpu", torch.get_num_threads())
    meta.update(
        {
            "kind": "e2e",
            "device_key": measured_key(device),
            "hostname": platform.node(),
            "cpu_count": os.cpu_count(),
            "spec_hardware": spec.name,
            "spec_full_name": spec.full_name,
            "spec_bandwidth_gb_s": spec.memory_bandwidth / 1e9,
            "spec_matrix_peak_tops": {k: v / 1e12 for k, v in spec.matrix_peak.items()},
            "spec_device": device_to_dict(spec),  # what --repredict predicts with again
            "profile": str(profile) if profile else None,
            "timer": "cuda events" if device.startswith("cuda") else "time.perf_counter",
        }
    )
    return meta


# --- the run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    profile_note: str
    path: Path | None


def run_e2e(
    config: ModelConfig,
    cases: Sequence[Case],
    *,
    dtype: str = "bf16",
    device: str | None = None,
    layers: int | None = None,
    compile_modes=(False,),
    repeats: int = 5,
    executions: Sequence[str] | None = None,
    hardware: str | None = None,
    profile: Path | None = None,
    threads: int | None = None,
    seed: int = 0,
    output: Path | None = None,
    quiet_wait_s: float = 0.0,
    write: bool = True,
    log: Callable[[str], None] = lambda _m: None,
) -> Result:
    """Measure every case in every compile mode, predict each, write the JSON, return rows."""
    import torch

    from kernels.e2e.decoder import Decoder, check_fits

    if dtype not in ENGINE_DTYPES:
        raise RidgelineError(f"--dtype must be one of {', '.join(ENGINE_DTYPES)}, got '{dtype}'")
    if repeats < 1:
        raise RidgelineError(f"--repeats must be at least 1, got {repeats}")
    executions = tuple(executions or ("compiled" if c else "eager" for c in compile_modes))
    unknown = [e for e in executions if e not in EXECUTIONS]
    if unknown:
        raise RidgelineError(f"unknown --execution {unknown[0]!r}; use one of: {', '.join(EXECUTIONS)}")
    if any(c.generate < 2 for c in cases):
        raise RidgelineError("--generate must be at least 2 (the prefill's token + one timed decode step)")
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(device)
    if "graph" in executions and not device.startswith("cuda"):
        raise RidgelineError("--execution graph needs a CUDA device (a CPU runs no CUDA graphs); use eager or compiled")
    config = truncate(config, layers)
    max_batch = max(c.batch for c in cases)
    max_len = max(c.prompt + c.generate for c in cases)
    check_fits(config, max_batch, max_len, dtype, device)

    spec = datasheet_device(device, hardware=hardware)
    key = measured_key(device)
    calibrated, profile, note = calibrated_for(key, spec, profile, log)
    meta = provenance(device, spec, profile if calibrated else None)

    if device == "cpu":
        torch.set_flush_denormal(True)
    path = Path(output) if output else default_path(key, config, meta["date"][:10])  # the API may pass a str
    path.parent.mkdir(parents=True, exist_ok=True)  # an unwritable path refuses before any timing
    log(f"building {config.name} ({config.num_layers} layers, {dtype}) on {device}")
    model = Decoder(config, dtype, device, max_batch=max_batch, max_len=max_len, seed=seed)
    rows = []
    for execution in executions:
        compiled = execution == "compiled"
        for case in cases:
            log(f"measuring batch {case.batch}, prompt {case.prompt}, generate {case.generate}, {execution}")
            model.reserve(case.batch, case.prompt + case.generate - 1)  # its own cache only
            measured = measure_case(
                model, case, device, repeats, compiled, seed, quiet_wait_s, graph=execution == "graph"
            )
            row = {
                "model": config.name,
                "layers": config.num_layers,
                **asdict(case),
                "dtype": dtype,
                "compile": compiled,
                "execution": execution,
                "repeats": repeats,
                **measured,
            }
            row.update(predicted_columns(config, spec, case, dtype, calibrated, measured, execution))
            row["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            row["load_avg_1m"] = os.getloadavg()[0]  # other processes on the machine
            row["spec_bandwidth_gb_s"] = spec.memory_bandwidth / 1e9
            rows.append(row)
            if write:  # row by row: a run stopped at a time limit keeps what it measured
                write_rows(path, meta, [row])
    return Result(meta, rows, note, path if write else None)


def run_command(
    model: str | None,
    *,
    device: str | None,
    batch: Sequence[int],
    prompt: Sequence[int],
    generate: int,
    layers: int | None,
    dtype: str,
    compile: bool,
    repeats: int,
    threads: int | None,
    hardware: str,
    profile: Path | None,
    output: Path | None,
    repredict_path: Path | None,
    quiet_wait_s: float,
    log: Callable[[str], None],
    executions: Sequence[str] = (),
) -> list[str]:
    """``ridgeline e2e``: measure every batch x prompt (or, with ``repredict``, predict a
    result file again) and return the report's lines."""
    from ridgeline.io.resolve import load_model

    if repredict_path is not None:
        spec = None if hardware == "host" else hardware
        return report_lines(repredict(repredict_path, hardware=spec, profile=profile, output=output))
    if any(b < 1 for b in batch) or any(p < 1 for p in prompt):
        raise RidgelineError("--batch and --prompt must be positive")
    cases = [Case(b, p, generate) for b in batch for p in prompt]
    result = run_e2e(
        load_model(model),
        cases,
        dtype=dtype,
        device=device,
        layers=layers,
        compile_modes=(False, True) if compile else (False,),
        executions=executions,
        repeats=repeats,
        hardware=hardware,
        profile=profile,
        threads=threads,
        output=output,
        quiet_wait_s=quiet_wait_s,
        log=log,
    )
    return report_lines(result)


def predicted_columns(
    config: ModelConfig,
    spec: DeviceSpec,
    case: Case,
    dtype: str,
    calibrated: Ceilings | None,
    measured: dict[str, Any],
    execution: str = "auto",
    attention: str = "flash",
) -> dict[str, Any]:
    spec_pred = predict(config, spec, case, dtype, spec_ceilings(spec), execution, attention)
    out = {
        "engine_ops_per_decode_step": spec_pred["decode_ops"],
        "predicted_peak_bytes": spec_pred["peak_bytes"],
    }  # the same in every roofline mode
    if measured.get("measured_peak_bytes"):
        out["error_peak"] = signed_error(spec_pred["peak_bytes"], measured["measured_peak_bytes"])
    out.update(prediction_columns("spec", spec_pred, measured))
    cal = None
    if calibrated is not None:
        try:
            cal = predict(config, spec, case, dtype, calibrated, execution, attention)
            kernels = predict(config, spec, case, dtype, without_launch(calibrated), execution, attention)
            out.update({f"predicted_kernels_{what}_s": kernels[f"{what}_s"] for what in ("ttft", "tpot")})
        except RidgelineError as err:  # the profile cannot price this mode or type: say so
            out["calibrated_unpriced"] = str(err)
    out.update(prediction_columns("calibrated", cal, measured))
    out["waterfall"] = e2e_waterfalls({**measured, **out})  # measured - spec, attributed
    return out


def repredict(
    path: Path, hardware: str | None = None, profile: Path | None = None, output: Path | None = None
) -> Result:
    """Recompute the predictions of a result file with today's engine and profile; the
    measurements and their provenance stay as they were. A pure function of its files:
    writes ``output`` (default: ``<stem>-repredicted.json`` in the current folder)."""
    data = read_result(path, "ridgeline e2e result", ("meta", "rows"))
    stem = path.stem.removesuffix("-repredicted")
    target = Path(output) if output else Path.cwd() / f"{stem}-repredicted.json"
    if target.resolve() == path.resolve():
        raise RidgelineError(f"--repredict writes a new file, not over its input {path}; pass -o NEW.json")
    meta, rows, note = repredicted(data, str(path), hardware, profile)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, json.dumps({"meta": meta, "rows": rows}, indent=2, allow_nan=False) + "\n")
    return Result(meta, rows, note, target)


def repredicted(
    data: dict[str, Any], source: str, hardware: str | None = None, profile: Path | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """A result's (meta, rows, profile note) predicted again in memory: its recorded spec
    device (or ``hardware``), ``profile``, else the committed profile it names, else its
    device key's; writes nothing."""
    from ridgeline.io.resolve import load_model, recorded_profile

    meta = dict(data["meta"])
    spec = recorded_spec(meta, hardware)
    calibrated, used, note = calibrated_for(meta["device_key"], spec, profile or recorded_profile(meta))
    rows = []
    for row in data["rows"]:
        row_spec = spec
        if spec.name == "host" and row.get("spec_bandwidth_gb_s"):  # as measured with the row
            row_spec = replace(spec, memory_bandwidth=row["spec_bandwidth_gb_s"] * 1e9)
        config = truncate(load_model(row["model"]), row["layers"])
        case = Case(row["batch"], row["prompt"], row["generate"])
        rows.append(
            {
                **row,
                **predicted_columns(
                    config,
                    row_spec,
                    case,
                    row["dtype"],
                    calibrated,
                    row,
                    row_execution(row),
                    row.get("attention_priced", "flash"),
                ),
            }
        )
    meta.update(
        profile=str(used) if calibrated else None,
        spec_hardware=spec.name,
        predicted_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        repredicted_from=source,
    )
    return meta, rows, note


def e2e_files(folder: Path = VALIDATION_DIR) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, data) of every committed e2e result, top folder first, then the GPU runs'."""
    for path in sorted(folder.glob("e2e-*.json")):
        yield path.name, json.loads(path.read_text())
    for archive in sorted(folder.glob("gpu-runs/*/*/results.tar.gz")):
        for member, data in read_results(archive).items():
            if (data.get("meta") or {}).get("kind") == "e2e" and data.get("rows"):
                yield f"{archive.parent.relative_to(folder)}/{member}", data


def default_path(key: str, config: ModelConfig, date: str) -> Path:
    """In the user's data folder: reports/validation holds the committed runs only."""
    return user_data_dir() / "validation" / f"e2e-{key}-{config.name}-{date}.json"


def write_rows(path: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Merge into the file of the same day: a configuration measured again replaces its row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = []
    if path.is_file():
        try:
            old = json.loads(path.read_text()).get("rows", [])
        except (json.JSONDecodeError, AttributeError):
            old = []
    fresh = {row_key(r) for r in rows}
    kept = [r for r in old if row_key(r) not in fresh]
    merged = sorted(kept + rows, key=lambda r: tuple(str(v) for v in row_key(r)))
    write_atomic(
        path, json.dumps({"meta": meta, "rows": merged}, indent=2, allow_nan=False, default=_json_default) + "\n"
    )


def row_key(row: dict[str, Any]) -> tuple:
    """What identifies a configuration in a result file (its execution mode included)."""
    return (*(row.get(k) for k in KEY_FIELDS[:-1]), row_execution(row))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {value!r}")


def compile_overhead(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Eager minus compiled, per configuration: the per-op launch and dispatch cost that a
    roofline (bytes and operations only) does not see."""
    out = []
    eager = {tuple(r[k] for k in KEY_FIELDS[:-2]): r for r in rows if row_execution(r) == "eager"}
    for r in rows:
        base = eager.get(tuple(r[k] for k in KEY_FIELDS[:-2]))
        if row_execution(r) != "compiled" or base is None:
            continue
        out.append(
            {
                **{k: r[k] for k in KEY_FIELDS[:-1]},
                "ttft_saved_s": base["measured_ttft_s"] - r["measured_ttft_s"],
                "tpot_saved_s": base["measured_tpot_s"] - r["measured_tpot_s"],
                "tpot_saved_fraction": 1 - r["measured_tpot_s"] / base["measured_tpot_s"],
                "tpot_saved_per_op_s": (base["measured_tpot_s"] - r["measured_tpot_s"])
                / r["engine_ops_per_decode_step"],
            }
        )
    return out


# --- display ---------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({value:+.0%})"


def waterfall_report(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Where the time between the spec prediction and the measurement goes, per row and
    metric (ms; kernels.e2e.waterfall), each note once."""
    lines, notes = ["where the time goes, measured - spec (ms; docs/measurement.md):"], {}
    for r in rows:
        for metric, fall in (r.get("waterfall") or {}).items():
            name = f"{r['model']} B{r['batch']} P{r['prompt']} {row_execution(r)} {metric.upper()}"
            first, *rest = waterfall_lines(name, fall)
            lines.append(first)
            notes.update(dict.fromkeys(rest))
    return lines + list(notes) if len(lines) > 1 else []


def report_lines(result: Result) -> list[str]:
    """Measured beside predicted, one line per configuration, then the compile gap."""
    meta = result.meta
    lines = [
        f"device {meta['device_key']} (torch {meta['torch']}, {meta['threads']} threads); "
        f"spec: {meta['spec_hardware']} at {meta['spec_bandwidth_gb_s']:.1f} GB/s",
        result.profile_note,
        f"{'model':14s} {'L':>3s} {'B':>3s} {'P':>5s} {'N':>4s} {'mode':8s} "
        f"{'TTFT ms':>9s} {'spec':>15s} {'calibrated':>15s} "
        f"{'TPOT ms':>9s} {'spec':>15s} {'calibrated':>15s}",
    ]
    for r in result.rows:
        cells = []
        for what in ("ttft", "tpot"):
            cells.append(
                f"{_ms(r[f'measured_{what}_s']):>9s} "
                + " ".join(
                    f"{_ms(r[f'predicted_{m}_{what}_s']) + _pct(r[f'error_{m}_{what}']):>15s}"
                    for m in ("spec", "calibrated")
                )
            )
        mode = row_execution(r)
        lines.append(
            f"{r['model'][:14]:14s} {r['layers']:3d} {r['batch']:3d} {r['prompt']:5d} "
            f"{r['generate']:4d} {mode:8s} {cells[0]} {cells[1]}"
        )
    for gap in compile_overhead(result.rows):
        lines.append(
            f"compile gap (batch {gap['batch']}, prompt {gap['prompt']}): eager - "
            f"compiled = {gap['tpot_saved_s'] * 1e3:.2f} ms per decode step "
            f"({gap['tpot_saved_fraction']:.0%} of eager, "
            f"{gap['tpot_saved_per_op_s'] * 1e6:.1f} us per op), "
            f"{gap['ttft_saved_s'] * 1e3:.2f} ms of TTFT: per-op overhead the "
            "roofline ignores"
        )
    lines.append("error = predicted / measured - 1 (negative: the prediction is faster)")
    lines += waterfall_report(result.rows)
    if result.path is not None:
        lines.append(f"wrote {result.path}")
    return lines
