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

import datetime as dt
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ridgeline.analyze import analyze
from ridgeline.catalog import REPORTS_DIR
from ridgeline.errors import RidgelineError
from ridgeline.hardware import DeviceSpec, detect_host, load_device
from ridgeline.model import ModelConfig
from ridgeline.profile import calibrated_ceilings, device_key, load_profile, profile_path
from ridgeline.report import write_atomic
from ridgeline.roofline import Ceilings, spec_ceilings
from ridgeline.workload import Settings

from .provenance import collect, cpu_model
from .timing import NOISE_CPU, NOISE_CUDA, summarize

VALIDATION_DIR = REPORTS_DIR / "validation"
ENGINE_DTYPES = ("fp32", "bf16", "fp16")
KEY_FIELDS = ("model", "layers", "batch", "prompt", "generate", "dtype", "compile")


@dataclass(frozen=True)
class Case:
    """One measured configuration."""

    batch: int
    prompt: int
    generate: int   # output tokens: 1 from the prefill + (generate - 1) decode steps


# --- timing ----------------------------------------------------------------------------

def time_generation(prefill: Callable, decode: Callable, tokens, generate: int,
                    device: str) -> tuple[float, list[float]]:
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


def busy_cores(interval_s: float = 0.25) -> float:
    """Cores kept busy by anything on the machine over ``interval_s`` (/proc/stat), ~0
    when it is quiet; called between runs, so this process itself adds almost nothing."""
    def jiffies() -> tuple[int, int]:
        with open("/proc/stat") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # total, idle + iowait

    try:
        total0, idle0 = jiffies()
        time.sleep(interval_s)
        total1, idle1 = jiffies()
    except (OSError, ValueError, IndexError):
        return 0.0
    cores = os.cpu_count() or 1
    return cores * (1 - (idle1 - idle0) / max(total1 - total0, 1))


def wait_for_quiet(max_wait_s: float, threshold: float | None = None) -> float:
    """Sleep (up to ``max_wait_s``) until other processes leave our threads free cores
    (they use at most ``threshold`` cores: by default the cores beyond torch's threads,
    at least 0.3): on a small shared CPU a thread that shares its core stalls the whole
    step. Returns the seconds waited."""
    if threshold is None:
        import torch

        threshold = max(0.3, (os.cpu_count() or 1) - torch.get_num_threads())
    start = time.perf_counter()
    while time.perf_counter() - start < max_wait_s and busy_cores() > threshold:
        time.sleep(0.5)
    return time.perf_counter() - start


def measure_case(model, case: Case, device: str, repeats: int, compiled: bool,
                 seed: int = 0, quiet_wait_s: float = 0.0) -> dict[str, Any]:
    """Warm-up run, then ``repeats`` timed generations of one configuration.

    TTFT: quantiles over the repeats' prefills. TPOT: quantiles over every decode step of
    every repeat (steps differ only by one cached token each, so on a quiet machine the
    median step is the mean step; on a shared one it ignores the steps another process
    stalled); ``measured_tpot_mean_s`` keeps the median over repeats of each run's mean.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (case.batch, case.prompt),
                           generator=generator).to(device)
    prefill, decode = model.prefill, model.decode
    if compiled:
        prefill, decode = torch.compile(prefill), torch.compile(decode)
    ttfts, steps, run_means, waited = [], [], [], 0.0
    with torch.inference_mode():
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
    ttft, tpot = (summarize(v, inner=1, sets=1, method=method, noise_threshold=noise)
                  for v in (ttfts, steps))
    return {"measured_ttft_s": ttft.median_s, "measured_ttft_p20_s": ttft.p20_s,
            "measured_ttft_p80_s": ttft.p80_s, "measured_tpot_s": tpot.median_s,
            "measured_tpot_p20_s": tpot.p20_s, "measured_tpot_p80_s": tpot.p80_s,
            "measured_tpot_mean_s": float(np.median(run_means)),
            "noisy": ttft.noisy or tpot.noisy,  # p80/p20 - 1 over the harness's threshold
            "quiet_waited_s": waited,
            "measured_tokens_per_s": case.batch * case.generate
            / (ttft.median_s + (case.generate - 1) * tpot.median_s)}


# --- predictions -----------------------------------------------------------------------

def engine_settings(dtype: str) -> Settings:
    """Weights, activations and KV cache in ``dtype``; SDPA is a fused (flash-style)
    kernel, so the engine models flash attention when it knows the setting."""
    names = {f.name for f in fields(Settings)}
    extra = {"attention": "flash"} if "attention" in names else {}
    return Settings(dtype, dtype, dtype, **extra)


def predict(config: ModelConfig, device: DeviceSpec, case: Case, dtype: str,
            ceilings: Ceilings) -> dict[str, float]:
    """TTFT, TPOT and tokens/s from ``ridgeline.analyze`` for exactly this run."""
    result = analyze(config, device, batch=case.batch, seq_len=case.prompt,
                     generate=case.generate, settings=engine_settings(dtype), ceilings=ceilings)
    gen = result.generation
    return {"ttft_s": gen["ttft_s"], "tpot_s": gen["tpot_s"], "tokens_per_s": gen["tokens_per_s"],
            "decode_ops": sum(r["count"] for r in result.decode.records())}


def signed_error(predicted: float | None, measured: float) -> float | None:
    """(predicted - measured) / measured: negative when the prediction is too fast."""
    if predicted is None or not measured or np.isnan(measured):
        return None
    return predicted / measured - 1.0


def prediction_columns(mode: str, pred: dict[str, float] | None,
                       measured: dict[str, Any]) -> dict[str, Any]:
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
        raise RidgelineError("--device cuda: torch sees no CUDA device (CPU build of torch, "
                             "or no driver); use --device cpu")
    return device


def measured_key(device: str) -> str:
    """File stem of the measured device, as ``ridgeline calibrate`` names its profile."""
    import torch

    if device.startswith("cuda"):
        return device_key("cuda", torch.cuda.get_device_name(device))
    return device_key("cpu", cpu_model(), torch.get_num_threads())


def spec_device(device: str, hardware: str | None) -> DeviceSpec:
    """The datasheet device to predict with: ``--hardware``, else the detected host
    (on CUDA: the catalog entry of the GPU's name)."""
    if hardware not in (None, "host"):
        return load_device(hardware)
    if device.startswith("cuda"):
        import torch

        from ridgeline.names import catalog_name_for_gpu

        name = torch.cuda.get_device_name(device)
        match = catalog_name_for_gpu(name)
        if match is None:
            raise RidgelineError(f"GPU '{name}' is not in the hardware catalog; pass "
                                 "--hardware NAME or a device YAML")
        return load_device(match)
    import torch

    # the host's bandwidth is a copy measured now: the best of three, as another process
    # on a shared machine only ever lowers it
    host = max((detect_host() for _ in range(3)), key=lambda d: d.memory_bandwidth)
    return on_threads(host, torch.get_num_threads())


def on_threads(host: DeviceSpec, threads: int) -> DeviceSpec:
    """The detected CPU as seen by ``threads`` torch threads: compute peaks scale with
    the cores used (the detected bandwidth is a one-thread copy already)."""
    from dataclasses import replace
    from types import MappingProxyType

    if host.kind != "cpu" or not host.compute_units or threads >= host.compute_units:
        return host
    scale = threads / host.compute_units

    def scaled(peaks):
        return MappingProxyType({k: v * scale for k, v in peaks.items()})

    return replace(host, full_name=f"{host.full_name}, {threads} of {host.compute_units} used",
                   matrix_peak=scaled(host.matrix_peak), vector_peak=scaled(host.vector_peak),
                   compute_units=threads)


def provenance(device: str, spec: DeviceSpec, profile: Path | None) -> dict[str, Any]:
    """The harness's ``meta`` block plus what this comparison predicted with."""
    import torch

    meta = collect("cuda" if device.startswith("cuda") else "cpu", torch.get_num_threads())
    meta.update({
        "kind": "e2e", "device_key": measured_key(device), "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "spec_hardware": spec.name, "spec_full_name": spec.full_name,
        "spec_bandwidth_gb_s": spec.memory_bandwidth / 1e9,
        "spec_matrix_peak_tops": {k: v / 1e12 for k, v in spec.matrix_peak.items()},
        "profile": str(profile) if profile else None,
        "timer": "cuda events" if device.startswith("cuda") else "time.perf_counter",
    })
    return meta


# --- the run ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    profile_note: str
    path: Path | None


def run_e2e(config: ModelConfig, cases: Sequence[Case], *, dtype: str = "bf16",
            device: str | None = None, layers: int | None = None, compile_modes=(False,),
            repeats: int = 5, hardware: str | None = None, profile: Path | None = None,
            threads: int | None = None, seed: int = 0, output: Path | None = None,
            quiet_wait_s: float = 0.0,
            write: bool = True, log: Callable[[str], None] = lambda _m: None) -> Result:
    """Measure every case in every compile mode, predict each, write the JSON, return rows."""
    import torch

    from .decoder import Decoder, check_fits, truncate

    if dtype not in ENGINE_DTYPES:
        raise RidgelineError(f"--dtype must be one of {', '.join(ENGINE_DTYPES)}, got '{dtype}'")
    if repeats < 1:
        raise RidgelineError(f"--repeats must be at least 1, got {repeats}")
    if any(c.generate < 2 for c in cases):
        raise RidgelineError("--generate must be at least 2 (the prefill's token + one timed "
                             "decode step)")
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(device)
    config = truncate(config, layers)
    max_batch = max(c.batch for c in cases)
    max_len = max(c.prompt + c.generate for c in cases)
    check_fits(config, max_batch, max_len, dtype, device)

    spec = spec_device(device, hardware)
    key = measured_key(device)
    calibrated, profile, note = calibrated_for(key, spec, profile)
    meta = provenance(device, spec, profile if calibrated else None)

    if device == "cpu":
        torch.set_flush_denormal(True)
    log(f"building {config.name} ({config.num_layers} layers, {dtype}) on {device}")
    model = Decoder(config, dtype, device, max_batch=max_batch, max_len=max_len, seed=seed)
    rows = []
    for compiled in compile_modes:
        for case in cases:
            log(f"measuring batch {case.batch}, prompt {case.prompt}, generate {case.generate}"
                f"{', compiled' if compiled else ''}")
            measured = measure_case(model, case, device, repeats, compiled, seed, quiet_wait_s)
            row = {"model": config.name, "layers": config.num_layers, **asdict(case),
                   "dtype": dtype, "compile": compiled, "repeats": repeats, **measured}
            row.update(predicted_columns(config, spec, case, dtype, calibrated, measured))
            row["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            row["load_avg_1m"] = os.getloadavg()[0]  # other processes on the machine
            row["spec_bandwidth_gb_s"] = spec.memory_bandwidth / 1e9
            rows.append(row)
    path = None
    if write:
        path = output or default_path(key, config, meta["date"][:10])
        write_rows(path, meta, rows)
    return Result(meta, rows, note, path)


def calibrated_for(key: str, spec: DeviceSpec, profile: Path | None
                   ) -> tuple[Ceilings | None, Path, str]:
    """The calibrated ceilings of the measured device, or None and a note saying why."""
    profile = profile or profile_path(key)
    if profile.is_file():
        return calibrated_ceilings(load_profile(profile), spec), profile, f"calibrated: {profile}"
    return None, profile, (f"calibrated: no measured profile at {profile} (run 'ridgeline "
                           "calibrate' on this device); calibrated predictions are empty")


def predicted_columns(config: ModelConfig, spec: DeviceSpec, case: Case, dtype: str,
                      calibrated: Ceilings | None, measured: dict[str, Any]) -> dict[str, Any]:
    spec_pred = predict(config, spec, case, dtype, spec_ceilings(spec))
    out = {"engine_ops_per_decode_step": spec_pred["decode_ops"]}
    out.update(prediction_columns("spec", spec_pred, measured))
    cal = predict(config, spec, case, dtype, calibrated) if calibrated else None
    out.update(prediction_columns("calibrated", cal, measured))
    return out


def recorded_spec(meta: dict[str, Any], hardware: str | None) -> DeviceSpec:
    """The spec device a result file was predicted with: ``hardware`` when given, the
    catalog entry it names, or the detected host with the bandwidth measured back then."""
    from dataclasses import replace

    name = hardware or meta.get("spec_hardware", "host")
    if name != "host":
        return load_device(name)
    host = detect_host(measure=False)
    host = replace(host, memory_bandwidth=float(meta["spec_bandwidth_gb_s"]) * 1e9)
    return on_threads(host, int(meta.get("threads") or host.compute_units))


def repredict(path: Path, hardware: str | None = None, profile: Path | None = None) -> Result:
    """Recompute the predictions of a result file with today's engine and profile; the
    measurements and their provenance stay as they were."""
    from dataclasses import replace

    from ridgeline.model import load_model

    from .decoder import truncate

    if not path.is_file():
        raise RidgelineError(f"no e2e result at {path}")
    data = json.loads(path.read_text())
    meta = dict(data["meta"])
    spec = recorded_spec(meta, hardware)
    calibrated, used, note = calibrated_for(meta["device_key"], spec, profile)
    rows = []
    for row in data["rows"]:
        row_spec = spec
        if spec.name == "host" and row.get("spec_bandwidth_gb_s"):  # as measured with the row
            row_spec = replace(spec, memory_bandwidth=row["spec_bandwidth_gb_s"] * 1e9)
        config = truncate(load_model(row["model"]), row["layers"])
        case = Case(row["batch"], row["prompt"], row["generate"])
        rows.append({**row, **predicted_columns(config, row_spec, case, row["dtype"], calibrated,
                                                row)})
    meta.update(profile=str(used) if calibrated else None, spec_hardware=spec.name,
                predicted_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    write_atomic(path, json.dumps({"meta": meta, "rows": rows}, indent=2, allow_nan=False) + "\n")
    return Result(meta, rows, note, path)


def default_path(key: str, config: ModelConfig, date: str) -> Path:
    return VALIDATION_DIR / f"e2e-{key}-{config.name}-{date}.json"


def write_rows(path: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Merge into the file of the same day: a configuration measured again replaces its row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = []
    if path.is_file():
        try:
            old = json.loads(path.read_text()).get("rows", [])
        except (json.JSONDecodeError, AttributeError):
            old = []
    fresh = {tuple(r[k] for k in KEY_FIELDS) for r in rows}
    kept = [r for r in old if tuple(r.get(k) for k in KEY_FIELDS) not in fresh]
    merged = sorted(kept + rows, key=lambda r: tuple(str(r.get(k)) for k in KEY_FIELDS))
    write_atomic(path, json.dumps({"meta": meta, "rows": merged}, indent=2, allow_nan=False,
                                  default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {value!r}")


def compile_overhead(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Eager minus compiled, per configuration: the per-op launch and dispatch cost that a
    roofline (bytes and operations only) does not see."""
    out = []
    eager = {tuple(r[k] for k in KEY_FIELDS[:-1]): r for r in rows if not r["compile"]}
    for r in rows:
        base = eager.get(tuple(r[k] for k in KEY_FIELDS[:-1]))
        if not r["compile"] or base is None:
            continue
        out.append({**{k: r[k] for k in KEY_FIELDS[:-1]},
                    "ttft_saved_s": base["measured_ttft_s"] - r["measured_ttft_s"],
                    "tpot_saved_s": base["measured_tpot_s"] - r["measured_tpot_s"],
                    "tpot_saved_fraction": 1 - r["measured_tpot_s"] / base["measured_tpot_s"],
                    "tpot_saved_per_op_s": (base["measured_tpot_s"] - r["measured_tpot_s"])
                    / r["engine_ops_per_decode_step"]})
    return out



# --- display ---------------------------------------------------------------------------

def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({value:+.0%})"


def report_lines(result: Result) -> list[str]:
    """Measured beside predicted, one line per configuration, then the compile gap."""
    meta = result.meta
    lines = [f"device {meta['device_key']} (torch {meta['torch']}, {meta['threads']} threads); "
             f"spec: {meta['spec_hardware']} at {meta['spec_bandwidth_gb_s']:.1f} GB/s",
             result.profile_note,
             f"{'model':14s} {'L':>3s} {'B':>3s} {'P':>5s} {'N':>4s} {'mode':8s} "
             f"{'TTFT ms':>9s} {'spec':>15s} {'calibrated':>15s} "
             f"{'TPOT ms':>9s} {'spec':>15s} {'calibrated':>15s}"]
    for r in result.rows:
        cells = []
        for what in ("ttft", "tpot"):
            cells.append(f"{_ms(r[f'measured_{what}_s']):>9s} " + " ".join(
                f"{_ms(r[f'predicted_{m}_{what}_s']) + _pct(r[f'error_{m}_{what}']):>15s}"
                for m in ("spec", "calibrated")))
        mode = "compiled" if r["compile"] else "eager"
        lines.append(f"{r['model'][:14]:14s} {r['layers']:3d} {r['batch']:3d} {r['prompt']:5d} "
                     f"{r['generate']:4d} {mode:8s} {cells[0]} {cells[1]}")
    for gap in compile_overhead(result.rows):
        lines.append(f"compile gap (batch {gap['batch']}, prompt {gap['prompt']}): eager - "
                     f"compiled = {gap['tpot_saved_s'] * 1e3:.2f} ms per decode step "
                     f"({gap['tpot_saved_fraction']:.0%} of eager, "
                     f"{gap['tpot_saved_per_op_s'] * 1e6:.1f} us per op), "
                     f"{gap['ttft_saved_s'] * 1e3:.2f} ms of TTFT: per-op overhead the "
                     "roofline ignores")
    lines.append("error = predicted / measured - 1 (negative: the prediction is faster)")
    if result.path is not None:
        lines.append(f"wrote {result.path}")
    return lines
