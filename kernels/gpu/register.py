"""Predictions registered before a GPU run, and the run's results held against them.

``ridgeline predictions register`` writes, before the run, everything the run will be
checked against: per model x batch x execution the end-to-end TTFT, TPOT and peak memory
(spec and calibrated) and the largest batch that fits; transformers' ``generate`` rows; the
serving percentiles of the trace the serving stage replays; and the draw's kernels, case by
case. It reads only the catalogs and the profile: a pure function of them, written into
``reports/predictions/<device key>-<commit>.json`` and never over an existing file.

``ridgeline predictions compare RESULTS --predictions FILE`` reads a run's
``results.tar.gz`` (or its unpacked folder) and writes the table RESULTS.md quotes: measured,
the registered prediction, and the current code's prediction side by side. Nothing in it is
fitted to the measurement.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernels.bench.provenance import read_results
from kernels.gpu.plan import sizes
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.roofline import TIMINGS, Ceilings, spec_ceilings
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.profile import load_profile, profile_ceilings, timing_of
from ridgeline.io.resolve import load_device, load_model

PREDICTIONS_DIR = REPORTS_DIR / "predictions"
HF_EXECUTION = {"eager": "eager", "compiled": "graph"}


def ceilings_for(
    device: DeviceSpec, profile: Path | None, transfer: bool = False, loaded: Mapping[str, Any] | None = None
) -> dict[str, Ceilings]:
    """The datasheet's ceilings, and the profile's (``transfer``: another GPU's, its
    fractions on this device's datasheet roofs) under the name ``calibrated``; ``loaded``:
    the profile's contents when the caller has read them already."""
    out = {"spec": spec_ceilings(device)}
    if profile is not None:
        out["calibrated"], _ = profile_ceilings(
            loaded or load_profile(profile), device, transfer=transfer, where=str(profile)
        )
    return out


def e2e_prediction(
    model: str,
    layers: int | None,
    batch: int,
    prompt: int,
    generate: int,
    dtype: str,
    execution: str,
    device: DeviceSpec,
    roofs: Mapping[str, Ceilings],
) -> dict[str, Any]:
    from kernels.e2e.e2e import Case, predict, truncate

    config = truncate(load_model(model), layers)
    row: dict[str, Any] = {
        "model": model,
        "layers": config.num_layers,
        "batch": batch,
        "prompt": prompt,
        "generate": generate,
        "dtype": dtype,
        "execution": execution,
    }
    for mode, ceilings in roofs.items():
        pred = predict(config, device, Case(batch, prompt, generate), dtype, ceilings, execution)
        row.update({f"{mode}_ttft_s": pred["ttft_s"], f"{mode}_tpot_s": pred["tpot_s"]})
        row["peak_bytes"] = pred["peak_bytes"]
    return row


def largest_batch(model: str, prompt: int, generate: int, dtype: str, device: DeviceSpec) -> int:
    """The largest batch whose weights + KV cache + activations fit the device
    (``ridgeline.max_batch``, the engine's ``fits``): 0 when not even one sequence fits."""
    from kernels.e2e.e2e import engine_settings
    from ridgeline.api import max_batch

    return max_batch(model, device, seq_len=prompt, generate=generate, settings=engine_settings(dtype))


def _layers(flags: Sequence[str]) -> int | None:
    """A preset's ``["--layers", "N"]`` (or nothing: every layer)."""
    return int(flags[1]) if flags else None


def serving_prediction(
    s: Mapping[str, Any], rate: float, device: DeviceSpec, roofs: Mapping[str, Ceilings]
) -> dict[str, Any]:
    """The simulator's percentiles for the trace the serving stage replays (the same
    trace, scheduler and execution as ``simulate-check``; its default ranges and seed)."""
    from kernels.e2e.e2e import truncate
    from kernels.servecheck.cb_server import ServerSettings, make_trace, matching_scheduler, simulations
    from ridgeline.io.traces import CHECK_OUTPUT_RANGE, CHECK_PROMPT_RANGE
    from ridgeline.serving.simulator import percentiles

    v = s["serving"]
    output = tuple(int(x) for x in v["output_range"]) if v["output_range"] else CHECK_OUTPUT_RANGE
    arrivals = make_trace(v["requests"], rate, CHECK_PROMPT_RANGE, output, 0)
    config = truncate(load_model(v["model"]), _layers(v["layers"]))
    execution = "eager" if s["device"] == "cuda" else "auto"
    sims = simulations(
        config,
        device,
        roofs.get("calibrated"),
        arrivals,
        matching_scheduler(ServerSettings()),
        None,
        v["dtype"],
        execution,
    )
    return {
        "model": v["model"],
        "rate": rate,
        "requests": v["requests"],
        **{mode: {k: percentiles(sim.requests[k]) for k in ("ttft_s", "latency_s")} for mode, sim in sims.items()},
    }


def draw_prediction(seed: int, roofs: Mapping[str, Ceilings]) -> dict[str, Any]:
    """The draw's cases, each with its predicted seconds (``kernels.validate.replay.predict``)."""
    from kernels.bench.cases import Options
    from kernels.bench.cases_gpu import CUDA_BACKENDS, DTYPES, gpu_drawn_cases
    from kernels.validate.replay import predict

    cases, what = gpu_drawn_cases(seed, Options(DTYPES, CUDA_BACKENDS, "cuda"))
    ops = [c.op for c in cases]
    preds = {mode: predict(ops, ceilings)["time_s"] for mode, ceilings in roofs.items()}
    return {
        "seed": seed,
        "drawn": what,
        "cases": [
            {
                "name": c.name,
                "op_class": c.op_class,
                "kernel": c.kernel,
                "backend": c.backend,
                **{f"{m}_s": float(p[i]) for m, p in preds.items()},
            }
            for i, c in enumerate(cases)
        ],
    }


def register(
    hardware: str, profile: Path | None, preset: str = "gpu", commit: str = "none", transfer: bool = False
) -> dict[str, Any]:
    s = sizes(preset)
    device = load_device(hardware)
    loaded = load_profile(profile) if profile else {}
    roofs = ceilings_for(device, profile, transfer, loaded)
    e, h = s["e2e"], s["hf"]
    layers = _layers(e["layers"])
    executions = sorted(set(s["executions"].values()))
    e2e = [
        e2e_prediction(m, layers, b, e["prompt"], e["generate"], e["dtype"], x, device, roofs)
        for m in e["models"]
        for x in executions
        for b in e["batches"]
    ]
    hf_layers = _layers(h["layers"])
    hf = [
        {
            **e2e_prediction(
                h["model"], hf_layers, b, h["prompt"], h["generate"], h["dtype"], HF_EXECUTION[mode], device, roofs
            ),
            "mode": mode,
        }
        for mode, batches in (("eager", h["batches"]), ("compiled", h["compiled_batches"]))
        for b in batches
    ]
    prof_meta = loaded.get("meta") or {}
    return {
        "meta": {
            "kind": "registered predictions",
            "commit": commit,
            "sizes": preset,
            "registered_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "hardware": device.name,
            "profile": str(profile) if profile else None,
            "profile_date": prof_meta.get("date"),
            "profile_commit": prof_meta.get("commit"),
            "transfer": transfer,
            "basis": "spec (datasheet) and "
            + (
                "transferred (the other GPU's profile named here, its fractions on "
                "this GPU's datasheet roofs; listed as calibrated)"
                if transfer
                else "calibrated (the profile named here)"
            ),
        },
        "e2e": e2e,
        "largest_batch": [
            {
                "model": m,
                "prompt": e["prompt"],
                "generate": e["generate"],
                "dtype": e["dtype"],
                "batch": largest_batch(m, e["prompt"], e["generate"], e["dtype"], device),
            }
            for m in e["models"]
        ],
        "hf": hf,
        "serving": [serving_prediction(s, r, device, roofs) for r in s["serving"]["rates"]],
        "draw": draw_prediction(s["draw_seed"], roofs),
    }


# --- after the run ---------------------------------------------------------------------


def read_predictions(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RidgelineError(f"--predictions {path}: cannot read registered predictions ({err})") from None
    if not isinstance(data, dict) or data.get("meta", {}).get("kind") != "registered predictions":
        raise RidgelineError(
            f"--predictions {path}: not a registered-predictions file ('ridgeline predictions register' writes one)"
        )
    return data


def _err(pred: float | None, measured: float | None) -> float | None:
    if pred is None or not measured:
        return None
    return pred / measured - 1


def _key(row: Mapping[str, Any]) -> tuple:
    return (
        row["model"],
        row["batch"],
        row["prompt"],
        row["generate"],
        row["execution"],
        row.get("client", "ridgeline") if "mode" not in row else "transformers",
    )


def e2e_table(
    files: Mapping[str, Any], registered: Mapping[str, Any], hardware: str, profile: Path | None, transfer: bool = False
) -> list[dict[str, Any]]:
    """Measured e2e and transformers rows beside the registered and the current code's
    predictions (calibrated), with their signed errors."""
    device = load_device(hardware)
    roofs = ceilings_for(device, profile, transfer)
    reg = {_key(r): r for r in registered["e2e"] + registered["hf"]}
    out = []
    for name, data in sorted(files.items()):
        if not isinstance(data, dict) or "rows" not in data or data.get("meta", {}).get("kind") not in ("e2e", None):
            continue
        for row in data["rows"]:
            if "measured_tpot_s" not in row:
                continue
            key = (
                row["model"],
                row["batch"],
                row["prompt"],
                row["generate"],
                row.get("execution", "eager"),
                row.get("client", "ridgeline"),
            )
            r = reg.get(key, {})
            now = e2e_prediction(
                row["model"],
                row["layers"],
                row["batch"],
                row["prompt"],
                row["generate"],
                row["dtype"],
                key[4],
                device,
                roofs,
            )
            line = {
                "file": name,
                "client": key[5],
                "model": row["model"],
                "batch": row["batch"],
                "execution": key[4],
                "measured_peak_bytes": row.get("measured_peak_bytes"),
                "registered_peak_bytes": r.get("peak_bytes"),
                "error_peak": _err(r.get("peak_bytes"), row.get("measured_peak_bytes")),
            }
            for what in ("tpot", "ttft"):
                m = row[f"measured_{what}_s"]
                line[f"measured_{what}_s"] = m
                for label, src in (("registered", r), ("current", now)):
                    p = src.get(f"calibrated_{what}_s")
                    line[f"{label}_{what}_s"] = p
                    line[f"error_{label}_{what}"] = _err(p, m)
            out.append(line)
    order = {"graph": 0, "compiled": 1, "eager": 2}
    return sorted(out, key=lambda r: (r["client"] != "ridgeline", order.get(r["execution"], 3), r["model"], r["batch"]))


def serving_table(files: Mapping[str, Any], registered: Mapping[str, Any]) -> list[dict[str, Any]]:
    from ridgeline.serving.simulator import percentiles

    reg = {float(r["rate"]): r for r in registered.get("serving", [])}
    out = []
    for name, data in sorted(files.items()):
        if not isinstance(data, dict) or data.get("meta", {}).get("kind") != "serving":
            continue
        r = reg.get(float(data["trace"]["rate"]))
        for what in ("ttft_s", "latency_s"):
            measured = percentiles(np.asarray(data["measured"][what], dtype=float))
            for q in ("p50", "p90"):
                line = {"file": name, "rate": data["trace"]["rate"], "what": what, "q": q, "measured_s": measured[q]}
                for mode in ("spec", "calibrated"):
                    p = r[mode][what][q] if r and mode in r else None
                    line[f"registered_{mode}_s"] = p
                    line[f"error_{mode}"] = _err(p, measured[q])
                out.append(line)
    return out


def draw_table(files: Mapping[str, Any], registered: Mapping[str, Any]) -> dict[str, Any]:
    """Per op class: |error| median and p90 of the registered (committed profile) and of
    this run's own profile (the snapshot's calibrated column), headline kernels only."""
    from kernels.bench.cases import is_reference

    reg = {c["name"]: c for c in registered.get("draw", {}).get("cases", [])}
    snaps = [
        d for n, d in files.items() if n.startswith("draw/") and isinstance(d, dict) and "rows" in d and "ceilings" in d
    ]
    if not snaps:
        return {}
    rows = [r for r in snaps[0]["rows"] if r.get("status") == "ok" and not is_reference(r)]
    out: dict[str, Any] = {}
    for cls in sorted({r["op_class"] for r in rows}) + ["all"]:
        chosen = [r for r in rows if cls in ("all", r["op_class"])]
        reg_err = [abs(_err(reg[r["name"]].get("calibrated_s"), r["measured_s"])) for r in chosen if r["name"] in reg]
        run_err = [abs(r["error_calibrated"]) for r in chosen if r.get("error_calibrated") is not None]
        out[cls] = {"n": len(chosen), "registered": _stats(reg_err), "this_run_profile": _stats(run_err)}
    return out


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p90": None}
    return {"median": float(np.median(values)), "p90": float(np.percentile(values, 90))}


def compare(results: Path | Sequence[Path], predictions: Path) -> dict[str, Any]:
    """``results``: one run's archive or folder, or several (a stage run again in a later
    call: a file of the same name in a later one replaces the earlier)."""
    registered = read_predictions(predictions)
    paths = [results] if isinstance(results, (str, Path)) else list(results)
    files: dict[str, Any] = {}
    for path in paths:
        files.update(read_results(path))
    results = ", ".join(str(p) for p in paths)
    meta = registered["meta"]
    measured_on = {
        d["meta"].get("spec_hardware")
        for d in files.values()
        if isinstance(d, dict) and isinstance(d.get("meta"), dict) and d["meta"].get("spec_hardware")
    }
    if measured_on - {meta["hardware"]}:
        raise RidgelineError(
            f"{results} was measured on {', '.join(sorted(measured_on))}, but "
            f"{predictions} was registered for {meta['hardware']}: compare a "
            "run with the predictions registered for its device"
        )
    transfer = bool(meta.get("transfer"))
    profile = Path(meta["profile"]) if meta.get("profile") else None
    if profile is not None and not profile.is_absolute():
        profile = REPORTS_DIR.parent / profile
    timing = timing_of(load_profile(profile), str(profile)) if profile else None
    return {
        "meta": {
            "results": str(results),
            "predictions": str(predictions),
            "hardware": meta["hardware"],
            "profile": meta.get("profile"),
            "transfer": transfer,
            "timing": TIMINGS.get(timing, timing),
        },
        "e2e": e2e_table(files, registered, meta["hardware"], profile, transfer),
        "largest_batch": registered.get("largest_batch", []),
        "serving": serving_table(files, registered),
        "draw": draw_table(files, registered),
        "agreement": agreement_table(files),
    }


def agreement_table(files: Mapping[str, Any], within: float = 0.05) -> dict[str, Any]:
    """Graph replay against profiler kernel durations: how many kernels agree within
    ``within``, the worst, and the attention backends the sample covered."""
    found = [d for n, d in files.items() if n.startswith("agree/") and isinstance(d, dict) and "rows" in d]
    if not found:
        return {}
    rows = [r for r in found[0]["rows"] if r.get("status") == "ok" and r.get("agreement") is not None]
    worst = max(rows, key=lambda r: r["agreement"]) if rows else None
    return {
        "n": len(rows),
        "within": within,
        "agree": sum(r["agreement"] <= within for r in rows),
        "median": _stats([r["agreement"] for r in rows])["median"],
        "worst": {
            "name": worst["name"],
            "agreement": worst["agreement"],
            "graph_s": worst["graph_s"],
            "profiler_s": worst["profiler_s"],
        }
        if worst
        else None,
        "backends": sorted({r["name"].rsplit("/", 1)[-1] for r in rows if "/sdpa/" in r["name"]}),
        "outside": [{"name": r["name"], "agreement": r["agreement"]} for r in rows if r["agreement"] > within],
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1%}"


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x * 1e3:.2f}"


def markdown(table: Mapping[str, Any]) -> str:
    """The comparison as the Markdown RESULTS.md quotes."""
    head = (
        "| client | model | batch | execution | TPOT ms | registered | current | "
        "TTFT ms | registered | current | peak GiB | predicted |"
    )
    meta = table["meta"]
    rests = (
        f"the profile {meta['profile']}"
        + (", transferred" if meta.get("transfer") else "")
        + f" (timed by {meta['timing']})"
        if meta.get("profile")
        else "the datasheet alone"
    )
    lines = [
        (
            f"Predictions registered before the run ({meta['predictions']}) against "
            f"its measurements ({meta['results']}); error = predicted / measured - 1. "
            f"The e2e and transformers predictions rest on {rests}."
        ),
        "",
        head,
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table["e2e"]:
        peak = r["measured_peak_bytes"]
        lines.append(
            f"| {r['client']} | {r['model']} | {r['batch']} | {r['execution']} | "
            f"{_ms(r['measured_tpot_s'])} | {_pct(r['error_registered_tpot'])} | "
            f"{_pct(r['error_current_tpot'])} | {_ms(r['measured_ttft_s'])} | "
            f"{_pct(r['error_registered_ttft'])} | {_pct(r['error_current_ttft'])} | "
            f"{'–' if not peak else f'{peak / 2**30:.2f}'} | {_pct(r['error_peak'])} |"
        )
    if table["serving"]:
        lines += ["", "| serving rate | metric | measured ms | spec | calibrated |", "|---|---|---|---|---|"]
        for r in table["serving"]:
            lines.append(
                f"| {r['rate']}/s | {r['what'][:-2]} {r['q']} | {_ms(r['measured_s'])} | "
                f"{_pct(r['error_spec'])} | {_pct(r['error_calibrated'])} |"
            )
    if table["draw"]:
        lines += ["", "| draw class | n | registered median / p90 | this run's profile |", "|---|---|---|---|"]
        for cls, r in table["draw"].items():

            def fmt(st):
                return "–" if st["median"] is None else f"{st['median']:.1%} / {st['p90']:.1%}"

            lines.append(f"| {cls} | {r['n']} | {fmt(r['registered'])} | {fmt(r['this_run_profile'])} |")
    if table.get("largest_batch"):
        lines += [
            "",
            "Largest batch that fits (registered; not measured by this run): "
            + ", ".join(
                f"{r['model']} {r['batch']} at {r['prompt']} + {r['generate']} tokens" for r in table["largest_batch"]
            )
            + ".",
        ]
    a = table.get("agreement") or {}
    if a:
        lines += [
            "",
            f"Graph replay against profiler kernel durations: {a['agree']} of {a['n']} "
            f"kernels within {a['within']:.0%} (median {a['median']:.1%}); attention "
            f"backends sampled: {', '.join(a['backends']) or 'none'}; outside: "
            + ", ".join(f"{r['name']} {r['agreement']:.1%}" for r in a["outside"])
            + ".",
        ]
    return "\n".join(lines) + "\n"


def predictions_path(hardware: str, commit: str) -> Path:
    """Where ``ridgeline predictions register`` writes by default: the device and the commit
    (``-dirty`` when the tree had changes)."""
    dirty = "-dirty" if commit.endswith("+dirty") else ""
    return PREDICTIONS_DIR / f"{hardware}-{commit[:12]}{dirty}.json"
