"""Fit the interval tables (:mod:`ridgeline.engine.intervals`) from held-out residuals, and
check on data left out of each fit how often the intervals hold (coverage).

- A profile's table: the leave-one-model-out residuals of its calibration rows
  (``cross_validate``: each model's rows predicted by a fit without that model).
- The spec pools: every held-out row of the committed validation snapshots, predicted by
  the datasheet ceilings the snapshot recorded, pooled per kind (cpu, gpu) over devices.
- Coverage: nested leave-one-model-out (the fold's model is left out of the interval fit
  too), the committed validation snapshots of the profile's device (rows never fitted) and
  its committed end-to-end runs (TTFT and TPOT). Pure functions of committed files.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kernels.bench.cases import case_from_dict
from kernels.validate.misses import by_model, level_misses
from kernels.validate.replay import predict
from kernels.validate.serving_coverage import serving_checks
from ridgeline.engine.intervals import COVERAGES, IntervalTable, band, fit_table, grid_distance, residual_interval
from ridgeline.engine.roofline import Ceilings
from ridgeline.io.catalog import REPORTS_DIR, VALIDATION_DIR
from ridgeline.io.profile import calibrated_ceilings, load_profile, recorded_device

ROOT = REPORTS_DIR.parent


def residual_frame(ops: Sequence, measured, predicted, ceilings: Ceilings, models: Sequence[str]) -> pd.DataFrame:
    """One row per op: its residual log(measured / predicted), key chain, band, distance past
    the grid, and the model it belongs to."""
    return pd.DataFrame(
        {
            "model": list(models),
            "r": np.log(np.asarray(measured, dtype=float) / np.asarray(predicted, dtype=float)),
            "chain": [own_chain(op, ceilings.keys(op)) for op in ops],
            "band": [band(op) for op in ops],
            "distance": [grid_distance(op, ceilings) for op in ops],
        }
    )


# benchmark kernels of their own (torchao's weight-only products, int8/fp8 GEMMs): no op an
# analysis builds is named so, and their residuals would stand for a plain product's
OWN_KERNELS = ("int8_weight_only", "int4_weight_only", "int8_matmul", "fp8_matmul")


def own_chain(op, chain: Sequence[str]) -> tuple[str, ...]:
    """The groups a residual counts toward: its key chain, or for a kernel of its own
    (``OWN_KERNELS``) only the keys that name it."""
    if op.name in OWN_KERNELS:
        return tuple(k for k in chain if f":{op.name}" in k)
    return tuple(chain)


def profile_ceilings_of(path: Path) -> tuple[dict[str, Any], Ceilings]:
    prof = load_profile(path)
    return prof, calibrated_ceilings(prof, recorded_device(prof, str(path)))


def cv_frame(path: Path, log: Callable[[str], None] = print) -> pd.DataFrame:
    """The leave-one-model-out residuals of a profile's calibration rows."""
    from kernels.calibrate.calibrate import calibration_rows
    from kernels.validate.validate import profile_cross_validation
    from ridgeline.errors import RidgelineError

    rows_path = Path(path).with_suffix(".calibration.csv")
    if not rows_path.is_file():
        raise RidgelineError(
            f"no calibration rows at {rows_path}: intervals and their coverage are fitted from the "
            "CSV that 'ridgeline calibrate' writes beside the profile"
        )
    prof, ceilings = profile_ceilings_of(path)
    cv = profile_cross_validation(path, prof, recorded_device(prof, str(path)), log)
    rows = {r["name"]: r for r in calibration_rows(path)}
    picked = [(c, rows[c["name"]]) for c in cv if c["name"] in rows]
    ops = [case_from_dict(r).op for _, r in picked]
    # error = predicted / measured - 1, so measured / predicted = 1 / (1 + error)
    return residual_frame(
        ops, [1.0] * len(ops), [1.0 + c["error_cv"] for c, _ in picked], ceilings, [c["model"] for c, _ in picked]
    )


def table_from(frame: pd.DataFrame, basis: str, **extra: Any) -> IntervalTable:
    return fit_table(frame["r"].to_numpy(), list(frame["chain"]), list(frame["band"]), basis, **extra)


def fit_profile(path: Path, log: Callable[[str], None] = print, frame: pd.DataFrame | None = None) -> IntervalTable:
    """A profile's table from its leave-one-model-out residuals (``frame``, else computed)."""
    frame = cv_frame(path, log) if frame is None else frame
    models = sorted(set(frame["model"]))
    basis = (
        f"held-out residuals of {Path(path).stem}: {len(frame)} calibration rows, each predicted by "
        f"a fit without its model (leave-one-model-out over {len(models)} models)"
    )
    return table_from(frame, basis, models=models, residuals=len(frame))


def snapshots_of(device_key: str) -> list[Path]:
    """The committed validation snapshots measured on ``device_key``."""
    out = []
    for name in sorted(glob.glob(str(VALIDATION_DIR / f"{device_key}-*.json"))):
        meta = json.loads(Path(name).read_text())["meta"]
        if meta.get("device_key") == device_key:
            out.append(Path(name))
    return out


def snapshot_frame(path: Path, ceilings: Ceilings, timing: str | None = None) -> pd.DataFrame:
    """A snapshot's held-out rows (split 'validation', ok), predicted by ``ceilings``;
    with ``timing``, only the rows timed that way (an eager-timed snapshot's host-inclusive
    times say nothing of a device-time profile's intervals)."""
    from ridgeline.io.profile import METHOD_TIMING

    rows = [r for r in json.loads(Path(path).read_text())["rows"] if r["status"] == "ok" and r["split"] == "validation"]
    if timing is not None:
        rows = [r for r in rows if METHOD_TIMING.get(str(r.get("method", "")).split("/")[0], timing) == timing]
    ops = [case_from_dict(r).op for r in rows]
    keep = [i for i, op in enumerate(ops) if priced(op, ceilings)]
    ops, rows = [ops[i] for i in keep], [rows[i] for i in keep]
    predicted = predict(ops, ceilings)["time_s"]
    return residual_frame(
        ops, [r["measured_s"] for r in rows], predicted, ceilings, [r["recipe"].get("model", "") for r in rows]
    )


def priced(op, ceilings: Ceilings) -> bool:
    from kernels.validate.validate import unpriced_reason

    return not unpriced_reason(op, ceilings)


def spec_pools(paths: Sequence[Path]) -> dict[str, IntervalTable]:
    """Per kind (cpu, gpu), the spec residuals of every snapshot's held-out rows, pooled over
    the devices measured (a device's repeated snapshots all count)."""
    frames: dict[str, list[pd.DataFrame]] = {}
    devices: dict[str, set[str]] = {}
    catalog: dict[str, set[str]] = {}  # the catalog devices the snapshots were priced as (spec_device)
    for path in paths:
        data = json.loads(Path(path).read_text())
        kind = "cpu" if data["meta"].get("device_kind") == "cpu" else "gpu"
        frames.setdefault(kind, []).append(snapshot_frame(path, Ceilings.from_dict(data["ceilings"]["spec"])))
        devices.setdefault(kind, set()).add(data["meta"]["device_key"])
        catalog.setdefault(kind, set()).update({data["meta"].get("spec_device")} - {None, "host"})
    out = {}
    for kind, parts in sorted(frames.items()):
        frame = pd.concat(parts, ignore_index=True)
        names = sorted(devices[kind])
        basis = (
            f"spec residuals from {len(names)} {kind} devices ({', '.join(names)}): {len(frame)} held-out kernel rows"
        )
        out[kind] = table_from(frame, basis, devices=names, spec_devices=sorted(catalog[kind]), residuals=len(frame))
    return out


def committed_snapshots() -> list[Path]:
    """Every committed validation snapshot (not the drift or repeat folders)."""
    return [Path(p) for p in sorted(glob.glob(str(VALIDATION_DIR / "c*-20*.json")))]


# --- coverage ------------------------------------------------------------------------


def check_residuals(frame: pd.DataFrame, table: IntervalTable) -> pd.DataFrame:
    """Per residual: inside each central interval, and that interval's half-width (a
    fraction of the prediction)."""
    ratio = np.exp(frame["r"].to_numpy(dtype=float))
    out: dict[str, Any] = {
        "ratio": ratio,
        "where": [f"{chain[-1]} {b}" for chain, b in zip(frame["chain"], frame["band"])],
    }
    for c in COVERAGES:
        bounds = np.array(
            [
                residual_interval(table, table.group_of(chain, size_band), distance)[str(c)]
                for chain, size_band, distance in zip(frame["chain"], frame["band"], frame["distance"])
            ]
        ).reshape(-1, 2)
        out[f"in{c}"] = (bounds[:, 0] <= ratio) & (ratio <= bounds[:, 1])
        out[f"half{c}"] = (bounds[:, 1] - bounds[:, 0]) / 2
        out[f"side{c}"] = np.where(ratio > bounds[:, 1], 1, np.where(ratio < bounds[:, 0], -1, 0))
    return pd.DataFrame(out, index=frame.index)


def nested_lomo(frame: pd.DataFrame, basis: str) -> pd.DataFrame:
    """Each model's residuals checked against a table fitted without that model."""
    parts = []
    for model in sorted(set(frame["model"])):
        held = frame["model"] == model
        parts.append(check_residuals(frame[held], table_from(frame[~held], basis)))
    return pd.concat(parts)


def level_summary(checks: pd.DataFrame, what: str, files: Sequence[str]) -> dict[str, Any]:
    """Coverage and median half-width per level, with the files checked."""
    out: dict[str, Any] = {"what": what, "n": len(checks), "checked": list(files)}
    for c in COVERAGES:
        col = checks[f"in{c}"]
        out[f"coverage_{c}"] = float(col.mean()) if len(col) else None
        out[f"median_half_width_{c}"] = float(checks[f"half{c}"].median()) if len(col) else None
        out[f"holds_{c}"] = bool(len(col)) and abs(float(col.mean()) - c / 100) <= 0.10
    return out


def e2e_checks(
    device_key: str, table: IntervalTable, ceilings: Ceilings, log: Callable[[str], None]
) -> tuple[pd.DataFrame, list[str]]:
    """The committed end-to-end runs of ``device_key``: each row's measured TTFT and TPOT
    against the intervals of its calibrated prediction."""
    from kernels.e2e.e2e import e2e_files
    from ridgeline.errors import InvalidSettingError

    rows, files, unpriced = [], [], 0
    for name, data in e2e_files(VALIDATION_DIR):  # the top folder's, then the GPU runs' archives
        if data["meta"].get("device_key") != device_key:
            continue
        files.append(f"reports/validation/{name}")
        for row in data["rows"]:
            try:
                rows += e2e_row_checks(row, ceilings, table, data["meta"])
            except InvalidSettingError as err:  # an execution the profile measured no terms for
                unpriced += 1
                log(f"e2e: {name} {row['model']} batch {row['batch']} not checked: {err}")
    log(f"e2e: {len(rows)} checks in {len(files)} files ({unpriced} rows the profile cannot price)")
    return pd.DataFrame(rows, columns=CHECK_COLUMNS), files


CHECK_COLUMNS = ["figure", "where", "ratio", *[f"{p}{c}" for c in COVERAGES for p in ("in", "half", "side")]]


def row_analysis(row: dict, meta: dict, ceilings: Ceilings | None, table: IntervalTable | None = None):
    """``analyze`` for exactly an e2e row's run (its truncated model, batch, lengths, types,
    execution and attention), with ``ceilings`` (None: the recorded datasheet's)."""
    from kernels.e2e.e2e import engine_settings, row_execution, truncate
    from ridgeline.api import analyze
    from ridgeline.io.resolve import load_model, recorded_spec

    spec = recorded_spec(meta, None)
    execution = row_execution(row)
    if spec.kind == "cpu" and execution == "graph":
        execution = "eager"
    how = {"ceilings": ceilings} if ceilings is not None else {}
    return analyze(
        truncate(load_model(row["model"]), row["layers"]),
        spec,
        batch=row["batch"],
        seq_len=row["prompt"],
        generate=row["generate"],
        settings=engine_settings(row["dtype"], execution, row.get("attention_priced", "flash")),
        intervals=(table, ""),
        **how,
    )


def peak_rows(folder: Path = VALIDATION_DIR) -> list[dict[str, Any]]:
    """Every committed e2e row that measured its peak memory, beside the peak today's engine
    predicts for its run (``row_analysis``): kind (cpu, gpu), file, client, case,
    measured and predicted bytes, and the signed error predicted / measured - 1."""
    from kernels.e2e.e2e import e2e_files, row_execution

    out = []
    for name, data in e2e_files(folder):
        for row in data["rows"]:
            if row.get("measured_peak_bytes"):
                predicted = float(row_analysis(row, data["meta"], None).memory["peak_bytes"])
                out.append(
                    {
                        "kind": "cpu" if data["meta"].get("device_kind") == "cpu" else "gpu",
                        "file": f"reports/validation/{name}",
                        "client": row.get("client") or "ridgeline",
                        "model": row["model"],
                        "batch": row["batch"],
                        "prompt": row["prompt"],
                        "execution": row_execution(row),
                        "measured_bytes": row["measured_peak_bytes"],
                        "predicted_bytes": predicted,
                        "error": predicted / row["measured_peak_bytes"] - 1.0,
                    }
                )
    return out


def measured_peaks() -> dict[str, dict[str, Any]]:
    """Per kind, the range of measured / predicted peak memory over the committed e2e rows
    that measured their peak (predicted again with today's engine)."""
    ratios: dict[str, list[float]] = {}
    runs: dict[str, list[str]] = {}
    for row in peak_rows():
        ratios.setdefault(row["kind"], []).append(row["measured_bytes"] / row["predicted_bytes"])
        runs.setdefault(row["kind"], []).append(row["file"])
    return {
        kind: {
            "low": round(min(r), 6),
            "high": round(max(r), 6),
            "n": len(r),
            "basis": f"{len(r)} measured peaks of {len(set(runs[kind]))} committed {kind} e2e runs, "
            f"{min(r) - 1:+.1%} to {max(r) - 1:+.1%} of the prediction ({runs_method(kind)})",
            "runs": sorted(set(runs[kind])),
        }
        for kind, r in sorted(ratios.items())
    }


def runs_method(kind: str) -> str:
    return "torch.cuda.max_memory_allocated" if kind == "gpu" else "peak resident memory"


def e2e_row_checks(row: dict, ceilings: Ceilings, table: IntervalTable, meta: dict) -> list[dict]:
    """A row's measured TTFT and TPOT against the intervals of its calibrated prediction."""
    result = row_analysis(row, meta, ceilings, table)
    out = []
    for figure in ("ttft_s", "tpot_s"):
        measured, point = row.get(f"measured_{figure}"), result.generation[figure]
        if measured is None or point is None:
            continue
        where = f"{figure[:-2].upper()} ({result.settings.execution})"
        check = {"figure": figure, "where": where, "ratio": measured / point}
        for c in COVERAGES:
            lo, hi = result.extra["intervals"][figure][str(c)]
            check[f"in{c}"], check[f"half{c}"] = lo <= measured <= hi, (hi - lo) / (2 * point)
            check[f"side{c}"] = 1 if measured > hi else -1 if measured < lo else 0
        out.append(check)
    return out


def coverage(path: Path, log: Callable[[str], None] = print, frame: pd.DataFrame | None = None) -> dict[str, Any]:
    """The coverage of a profile's intervals on data left out of each fit (module docstring);
    ``frame``: its leave-one-model-out residuals when already computed (``cv_frame``)."""
    path = Path(path).resolve()
    prof, ceilings = profile_ceilings_of(path)
    key = prof["meta"]["device_key"]
    frame = cv_frame(path, log) if frame is None else frame
    table = table_from(frame, "coverage")
    kernel_parts = [nested_lomo(frame, "coverage")]
    snaps = snapshots_of(key)
    kernel_parts += [check_residuals(snapshot_frame(s, ceilings, ceilings.timing or None), table) for s in snaps]
    calibration = (
        str(path.with_suffix(".calibration.csv").relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    )
    shown = [str(s.relative_to(ROOT)) for s in snaps]
    e2e, e2e_files = e2e_checks(key, table, ceilings, log)
    serving, serving_files, host_fits = serving_checks(key, path, table, log)
    models = sorted(set(frame["model"]))
    fit = f"a table of {len(frame)} kernel residuals of {len(models)} models ({', '.join(models)})"
    checks = {
        "kernel-lomo": (
            kernel_parts[0],
            f"each fold's table fitted without its model, from {fit} in all; {by_model(frame)}",
        ),
        "kernel-snapshots": (
            pd.concat(kernel_parts[1:]) if snaps else pd.DataFrame(columns=kernel_parts[0].columns),
            f"checked against {fit}",
        ),
        "e2e": (e2e, f"checked against {fit}"),
        "serving": (serving, f"checked against {fit}; the simulated step adds the host terms a run records"),
    }
    levels = {
        "kernel-lomo": level_summary(checks["kernel-lomo"][0], "kernels, nested leave-one-model-out", [calibration]),
        "kernel-snapshots": level_summary(
            checks["kernel-snapshots"][0], "kernels, held-out rows of the validation snapshots", shown
        ),
        "e2e": level_summary(e2e, "end-to-end TTFT and TPOT", e2e_files),
        "serving": level_summary(serving, SERVING_WHAT, serving_files),
    }
    return {
        "device_key": key,
        "profile": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
        "fitted": [calibration, *host_fits],
        "method": (
            "kernel: nested leave-one-model-out over the calibration rows (each model's residuals "
            "against a table fitted without it), then the held-out rows of the validation "
            "snapshots against the table of every model; e2e: measured TTFT and TPOT of the "
            "committed end-to-end runs against the intervals of their calibrated predictions; "
            "serving: measured TTFT and TPOT p50 and p90 of the committed serving runs against the "
            "simulator's intervals, each run simulated again as simulate-check --resimulate does "
            "(fitted: the calibration rows, and the runs the host terms were fitted to)"
        ),
        "levels": levels,
        "misses": [m for name, (c, rests) in checks.items() for m in level_misses(name, c, levels[name], rests)],
    }


SERVING_WHAT = "serving TTFT and TPOT p50 and p90 (kernels.validate.serving_coverage)"


# --- writing -------------------------------------------------------------------------


def new_file(output: Path | None, flag: str) -> Path:
    """``output``, refused when missing or when it exists: these commands never write over
    a file (a committed profile or coverage file is replaced by moving the new one in)."""
    from ridgeline.errors import RidgelineError

    if output is None:
        raise RidgelineError(f"{flag} writes a new file: pass -o NEW (it never writes over one)")
    if Path(output).exists():
        raise RidgelineError(f"{output} exists: {flag} never writes over a file; pass -o NEW")
    return Path(output)


def without_intervals(text: str) -> str:
    """A profile's YAML text less a top-level ``intervals:`` section (the rest byte for byte)."""
    lines, out, skipping = text.splitlines(keepends=True), [], False
    for line in lines:
        if line.startswith("intervals:"):
            skipping = True
            continue
        if skipping and line[:1] not in (" ", "-", "\n", ""):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def write_profile_intervals(profile: Path, output: Path | None, log: Callable[[str], None] = print) -> Path:
    """The profile with an ``intervals`` section fitted from its leave-one-model-out residuals."""
    from ridgeline.io.files import write_atomic, yaml_text

    target = new_file(output, "--fit-intervals")
    table = fit_profile(Path(profile), log)
    text = without_intervals(Path(profile).read_text())
    write_atomic(
        target,
        text + yaml_text({"intervals": table.to_dict()}, width=200, flow=None),
    )
    log(f"wrote {target}: {len(table.groups)} groups from {table.extra['residuals']} residuals")
    return target


def write_spec_pools(output: Path | None, log: Callable[[str], None] = print) -> Path:
    """The spec residual pools of every committed validation snapshot."""
    from ridgeline.io.files import write_atomic

    target = new_file(output, "--fit-intervals")
    pools: dict[str, Any] = {k: t.to_dict() for k, t in spec_pools(committed_snapshots()).items()}
    pools["memory"] = measured_peaks()
    write_atomic(target, json.dumps(pools, indent=1, allow_nan=False) + "\n")
    log(f"wrote {target}: spec pools for {', '.join(pools)}")
    return target


def write_coverage(profile: Path, output: Path | None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """``coverage`` of a profile, printed; written as JSON to ``output`` when given."""
    from ridgeline.io.files import write_atomic

    result = coverage(Path(profile), log)
    if output is not None:
        write_atomic(new_file(output, "--coverage"), json.dumps(result, indent=1, allow_nan=False) + "\n")
        log(f"wrote {output}")
    return result


def coverage_lines(result: dict[str, Any]) -> list[str]:
    """One line per level: its coverage of the 50 % and 80 % intervals and their widths."""
    out = [f"coverage of {result['profile']} ({result['device_key']}):"]
    for name, level in result["levels"].items():
        if not level["n"]:
            out.append(f"  {name}: no checks (no committed files)")
            continue
        parts = [
            f"{c} %: {level[f'coverage_{c}']:.0%} inside (median half-width {level[f'median_half_width_{c}']:.1%})"
            + ("" if level[f"holds_{c}"] else f", outside {c - 10}–{c + 10} %")
            for c in COVERAGES
        ]
        out.append(f"  {name} (n={level['n']}): " + "; ".join(parts))
    for miss in result.get("misses", []):
        out.append(
            f"  miss: {miss['level']} {miss['figure']} {miss['value']:.1%} (band {miss['band']}): {miss['cause']}"
        )
    return out
