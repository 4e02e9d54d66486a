"""``ridgeline validate``: held-out shapes, measured, predicted in both modes, compared.

Writes ``<device_key>-<date>.{json,csv,html}`` (into the user's data folder unless told;
reports/validation holds the committed ones): one row per case (case,
op class, dims, flops, bytes, measured median/p20/p80, noisy flag, spec and calibrated
predictions, signed errors = predicted / measured - 1), the ceilings each mode used (so CI
can replay the snapshot without the device), and a summary per op class: count, median and
p90 of |error|, and the signed bias (median error).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernels.bench.cases import case_from_dict, check_disjoint, is_reference
from kernels.bench.suite import CaseSet
from kernels.validate.replay import MODES, percent, predict, relative_error
from ridgeline.engine.roofline import Ceilings, spec_ceilings
from ridgeline.errors import InvalidSpecError
from ridgeline.io.catalog import REPORTS_DIR, user_data_dir
from ridgeline.io.files import write_atomic
from ridgeline.io.profile import calibrated_ceilings, load_profile, profile_ceilings, recorded_device
from ridgeline.io.resolve import measured_profile

CSV_COLUMNS = (
    "name",
    "op_class",
    "kernel",
    "backend",
    "dtype",
    "stage",
    "op_name",
    "op_kind",
    "dims",
    "flops",
    "bytes",
    "weight_bytes",
    "act_read_bytes",
    "act_write_bytes",
    "kv_read_bytes",
    "kv_write_bytes",
    "intensity",
    "measured_s",
    "p20_s",
    "p80_s",
    "spread",
    "noisy",
    "predicted_spec_s",
    "predicted_calibrated_s",
    "error_spec",
    "error_calibrated",
    "bound_spec",
    "bound_calibrated",
    "rel_error",
    "status",
    "reason",
)


def add_predictions(rows: list[dict[str, Any]], ceilings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Spec and calibrated predictions and errors on every ok row (in place, and returned)."""
    for mode in MODES:
        good = [r for r in rows if r["status"] == "ok"]
        ops = [case_from_dict(r).op for r in good]
        priced = [unpriced_reason(op, ceilings[mode]) for op in ops]
        for r, why in zip(good, priced):
            if why:  # a type the profile measured no class of: named, not guessed
                r.update({f"predicted_{mode}_s": None, f"error_{mode}": None, f"unpriced_{mode}": why})
        good, ops = [r for r, w in zip(good, priced) if not w], [o for o, w in zip(ops, priced) if not w]
        if not good:
            continue
        pred = predict(ops, ceilings[mode])
        err = relative_error(pred["time_s"], np.array([r["measured_s"] for r in good]))
        for r, t, e, b, i in zip(good, pred["time_s"], err, pred["bound"], pred["intensity"]):
            r.update(
                {
                    f"predicted_{mode}_s": float(t),
                    f"error_{mode}": float(e),
                    f"bound_{mode}": str(b),
                    "intensity": float(i),
                }
            )
    return rows


def unpriced_reason(op, ceilings: Ceilings) -> str:
    """Why ``ceilings`` cannot price ``op`` (its type has no measured class and no
    measured type of the same rate stands in), or "" when they can."""
    from ridgeline.errors import UnmeasuredDtypeError

    try:
        ceilings.class_dtype(op.dtype)
    except UnmeasuredDtypeError as err:
        return str(err)
    return ""


def summarize(
    rows: Sequence[Mapping[str, Any]], cross_validated: Sequence[Mapping[str, Any]] = (), device: str = "cpu"
):
    """Per op class and overall: count, median / p90 |error| and bias, for both modes; beside
    them the leave-one-model-out figures (``cv_*``) of the calibration rows of that class
    (``cross_validate``), where given. Reference kernels (``cases.is_reference`` on
    ``device``) are left out of the classes and get their own row, ``reference``, beside
    ``headline`` (every other case); ``all`` counts both."""
    import pandas as pd

    frame = pd.DataFrame([r for r in rows if r["status"] == "ok"])
    cv = pd.DataFrame(list(cross_validated), columns=["op_class", "error_cv", "kernel", "backend"])
    out = []
    if frame.empty:
        return pd.DataFrame(out)
    ref = np.array([is_reference(r, device) for r in frame.to_dict("records")], dtype=bool)
    ref_cv = np.array([is_reference(r, device) for r in cv.to_dict("records")], dtype=bool)
    head, head_cv = frame[~ref], cv[~ref_cv]  # the classes: headline kernels only
    groups = [(c, head[head.op_class == c], head_cv[head_cv.op_class == c]) for c in sorted(head.op_class.unique())]
    groups.append(("all", frame, cv))
    if ref.any():
        groups += [("headline", head, head_cv), ("reference", frame[ref], cv[ref_cv])]
    for name, part, cv_part in groups:
        if part.empty:
            continue
        entry = {"op_class": name, "count": int(len(part)), "noisy": int(part.noisy.sum())}
        for mode in MODES:  # over the rows the mode priced (``unpriced_<mode>``: why not)
            err = part[f"error_{mode}"].to_numpy(dtype=float)
            err = err[np.isfinite(err)]
            if err.size < len(part):
                entry[f"{mode}_unpriced"] = int(len(part) - err.size)
            entry[f"{mode}_median_abs"] = float(np.median(np.abs(err))) if err.size else None
            entry[f"{mode}_p90_abs"] = float(np.quantile(np.abs(err), 0.9)) if err.size else None
            entry[f"{mode}_bias"] = float(np.median(err)) if err.size else None
        err = np.abs(cv_part["error_cv"].to_numpy(dtype=float))
        entry.update(
            cv_count=int(err.size),
            cv_median_abs=float(np.median(err)) if err.size else None,
            cv_p90_abs=float(np.quantile(err, 0.9)) if err.size else None,
        )
        out.append(entry)
    return pd.DataFrame(out)


def cross_validate(profile: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], spec_device) -> list[dict[str, Any]]:
    """Leave one model out: for each calibration model, fit the profile's classes on every
    other calibration row (the row-count grid, which belongs to no model, always stays in)
    and predict that model's rows with the profile's measured roofs. Pure: the profile and
    its stored calibration rows in, one signed error per predicted row out."""
    from kernels.calibrate.calibrate import base_ceilings, tail_ns
    from kernels.calibrate.fit import fit_profile_terms, recorded_rules

    ops = [case_from_dict(r).op for r in rows]
    models = [r["recipe"].get("model") for r in rows]
    base = base_ceilings(dict(profile), spec_device)
    default = profile["overhead_us"]["default"]
    out = []
    for model in sorted({m for m in models if m}):
        train = [i for i, m in enumerate(models) if m != model]
        test = [i for i, m in enumerate(models) if m == model]
        fit = fit_profile_terms(
            [rows[i] for i in train],
            [ops[i] for i in train],
            base,
            pooled=False,
            cpu=spec_device.kind == "cpu",
            **recorded_rules(profile),
        )
        fold = calibrated_ceilings(
            {
                **profile,
                "efficiency": fit.efficiency,
                "row_curves": fit.row_curves,
                "size_curves": fit.size_curves,
                "attention_tables": fit.attention_tables,
                "row_tail_ns": tail_ns(fit.row_tails),
                "overhead_us": {"default": default, **{k: v * 1e6 for k, v in fit.overhead_s.items()}},
            },
            spec_device,
        )
        predicted = predict([ops[i] for i in test], fold)["time_s"]
        measured = np.array([rows[i]["measured_s"] for i in test], dtype=float)
        out += [
            {
                "name": rows[i]["name"],
                "model": model,
                "op_class": rows[i]["op_class"],
                "kernel": rows[i]["kernel"],
                "backend": rows[i].get("backend"),
                "error_cv": float(e),
            }
            for i, e in zip(test, relative_error(predicted, measured))
        ]
    return out


def rich_summary(summary, title: str):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    cv = "cv_median_abs" in summary
    for col in (
        "op class",
        "cases",
        "noisy",
        "spec median |err|",
        "spec p90",
        "spec bias",
        "calibrated median |err|",
        "calibrated p90",
        "calibrated bias",
        *(("leave-one-model-out median / p90 (cases)",) if cv else ()),
    ):
        table.add_column(col, justify="left" if col == "op class" else "right")
    for r in summary.to_dict("records"):
        extra = (
            (f"{r['cv_median_abs']:.1%} / {r['cv_p90_abs']:.1%} ({r['cv_count']})" if r.get("cv_count") else "-",)
            if cv
            else ()
        )
        table.add_row(
            r["op_class"],
            str(r["count"]),
            str(r["noisy"]),
            *(percent(r[f"{m}_{s}"], s == "bias") for m in MODES for s in ("median_abs", "p90_abs", "bias")),
            *extra,
            style="bold" if r["op_class"] == "all" else None,
        )
    return table


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    import pandas as pd

    frame = pd.DataFrame([{c: (json.dumps(r[c]) if c == "dims" else r.get(c)) for c in CSV_COLUMNS} for r in rows])
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return buffer.getvalue()


def _json_default(value: Any):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def snapshot_stem(key: str, date: str | None = None) -> str:
    return f"{key}-{date or _dt.date.today().isoformat()}"


def write_snapshot(result: dict[str, Any], folder: Path, stem: str) -> dict[str, Path]:
    """JSON, CSV and the self-contained HTML report; atomic writes. Without plotly (a bare
    GPU machine) the HTML is left out: ``python -m kernels.validate.html SNAPSHOT.json`` renders it."""
    from kernels.validate.html import have_plotly, report_html

    folder.mkdir(parents=True, exist_ok=True)
    paths = {ext: folder / f"{stem}.{ext}" for ext in ("json", "csv", "html")}
    text = json.dumps(result, indent=1, default=_json_default) + "\n"
    write_atomic(paths["json"], text)
    write_atomic(paths["csv"], to_csv(result["rows"]))
    if have_plotly():
        write_atomic(paths["html"], report_html(json.loads(text)))
    else:
        del paths["html"]
    return paths


def shown_path(path: Path) -> str:
    """A path inside the checkout relative to it (as committed files name each other)."""
    root, full = REPORTS_DIR.parent.resolve(), Path(path).resolve()
    return str(full.relative_to(root)) if full.is_relative_to(root) else str(path)


def validate(
    device: str = "cpu",
    *,
    quick: bool = False,
    threads: int | None = None,
    profile: Path | None = None,
    output_dir: Path | None = None,
    progress: bool = True,
    quiet_wait_s: float = 0.0,
    draw: int | None = None,
    through: str = "kernels",
    case_set: CaseSet = CaseSet(),
    log: Callable[[str], None] = print,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Run ``case_set``'s validation cases (with ``draw``, a fresh held-out set drawn with that
    seed: ``case_set.draw``; ``through="transformers"``, transformers' own modules instead of
    the kernels: ``through.measure_modules``); returns the result and the files written."""
    from kernels.bench.provenance import collect, datasheet_device, device_name, measured_key
    from kernels.bench.suite import device_options, setup
    from kernels.calibrate.state import describe, measure_state, state_record

    cfg = setup(device, threads, quick, quiet_wait_s)
    key = measured_key(device, cfg.threads)
    prof_path, prof = measured_profile(device, key, profile)
    spec_device = datasheet_device(device, cfg.threads)
    calibrated, notes = profile_ceilings(prof, spec_device, where=str(prof_path))
    for note in notes:
        log(f"warning: {note}")
    ceilings = {"spec": spec_ceilings(spec_device), "calibrated": calibrated}
    opts, skipped = device_options(device)
    before = measure_state(cfg, prof, device)
    if through == "transformers":
        rows, cv, drawn = through_rows(cfg, opts, ceilings, spec_device, quick, log), [], None
    else:
        cases, drawn = (case_set.cases("validation", opts, quick), None) if draw is None else case_set.draw(draw, opts)
        check_disjoint(
            case_set.cases("calibration", opts, False) + case_set.cases("calibration", opts, True), cases
        )  # held out in shape, model, batch, length and width
        log(f"validating {len(cases)} held-out cases on {device_name(device)} with {prof_path.name}")
        cv = profile_cross_validation(prof_path, prof, spec_device, log)
        rows = add_predictions(case_set.run(cases, cfg, label="validation", progress=progress), ceilings)
    state = state_record(prof, [before, measure_state(cfg, prof, device)])
    log(("warning: " if state["drifted"] else "") + describe(state["ratios"], prof_path.name))
    summary = summarize(rows, cv, device)
    result = {
        "meta": {
            **collect(device, cfg.threads),
            "device_key": key,
            "mode": "quick" if quick else "full",
            "run": cfg.to_dict(),
            "profile": shown_path(prof_path),
            "profile_meta": prof.get("meta", {}),
            "spec_device": spec_device.name,
            "spec_device_full_name": spec_device.full_name,
            "skipped": skipped,
            "machine_state": state,
            **({"draw": drawn} if drawn else {}),
            **({"through": through} if through != "kernels" else {}),
        },
        "ceilings": {m: c.to_dict() for m, c in ceilings.items()},
        "summary": summary.to_dict("records"),
        "rows": rows,
        "cross_validation": cv,
    }
    stem = snapshot_stem(key) + ("-quick" if quick else "") + ("" if draw is None else f"-draw{draw}")
    stem += "" if through == "kernels" else f"-through-{through}"
    folder = Path(output_dir) if output_dir else user_data_dir() / "validation"
    return result, write_snapshot(result, folder, stem)


def through_rows(cfg, opts, ceilings: Mapping[str, Ceilings], spec_device, quick: bool, log) -> list[dict[str, Any]]:
    """``--through transformers``: the module cases of ``through.MODELS`` (quick: the first)
    in the float types this device runs natively, measured and predicted."""
    from kernels.validate.through import MODELS, QUICK_MODELS, measure_modules

    dtypes = [d for d in opts.dtypes if d in ("fp32", "bf16", "fp16")]
    models = QUICK_MODELS if quick else MODELS
    return measure_modules(cfg, dtypes, ceilings, spec_device, models=models, quick=quick, log=log)


def repredict(
    snapshot: Path,
    profile: Path | None = None,
    output_dir: Path | None = None,
    log: Callable[[str], None] = print,
    recorded: bool = False,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Predict a recorded snapshot again (after a refit or a model change): measurements and
    spec ceilings as recorded, calibrated ceilings from ``profile`` (default: the one it
    used) on the datasheet that profile records, or with ``recorded`` the calibrated
    ceilings it recorded too (an engine change alone). A pure function of its files: writes
    ``<stem>-repredicted.*`` into ``output_dir`` (default: the current folder)."""
    from kernels.bench.provenance import git_commit, read_result

    snapshot = Path(snapshot)
    result = read_result(snapshot, "validation snapshot", ("meta", "ceilings", "rows"))
    meta = result["meta"]
    if meta.get("through", "kernels") != "kernels":
        raise InvalidSpecError(
            snapshot.name,
            f"measured with --through {meta['through']}: --repredict cannot rebuild module rows yet; measure again",
        )
    ceilings = {m: Ceilings.from_dict(result["ceilings"][m]) for m in MODES}
    cv, basis = result.get("cross_validation") or [], "the ceilings the snapshot recorded"
    if not recorded:
        prof_path = Path(profile) if profile else REPORTS_DIR.parent / meta["profile"]
        prof = load_profile(prof_path)
        check_same_device(prof, prof_path, meta, snapshot)
        ceilings["calibrated"], _ = profile_ceilings(prof, recorded_device(prof, str(prof_path)), where=str(prof_path))
        cv, basis = (
            profile_cross_validation(prof_path, prof, recorded_device(prof, str(prof_path)), log),
            shown_path(prof_path),
        )
        meta["profile_meta"] = prof.get("meta", {})
    rows = add_predictions(result["rows"], ceilings)
    result.update(
        cross_validation=cv,
        ceilings={m: c.to_dict() for m, c in ceilings.items()},
        summary=summarize(rows, cv, meta.get("device_kind", "cpu")).to_dict("records"),
        rows=rows,
    )
    meta["repredicted"] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "profile": basis,
        "from": shown_path(snapshot),
        **({"before": meta["repredicted"]} if "repredicted" in meta else {}),
    }
    folder = Path(output_dir) if output_dir else Path.cwd()
    stem = snapshot.stem.removesuffix("-repredicted") + "-repredicted"
    paths = write_snapshot(result, folder, stem)
    log(f"re-predicted {len(rows)} rows of {snapshot.name} on {basis}")
    return result, paths


def check_same_device(prof: Mapping[str, Any], prof_path: Path, meta: Mapping[str, Any], snapshot: Path) -> None:
    """A snapshot is re-predicted only with a profile of the device that measured it (its
    ``device_key``: a GPU's name, a CPU's signature and threads)."""
    theirs, ours = (prof.get("meta") or {}).get("device_key"), meta.get("device_key")
    if theirs and ours and theirs != ours:
        raise InvalidSpecError(
            prof_path.name,
            f"measured on {theirs}, but {snapshot.name} was measured on {ours}: re-predict it with a "
            f"profile of {ours} (without --profile: the one it used)",
        )


def profile_cross_validation(
    path: Path, profile: Mapping[str, Any], spec_device, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """``cross_validate`` on the calibration rows stored beside a profile (none stored: no
    cross-validation, said once)."""
    from kernels.calibrate.calibrate import calibration_rows

    if not Path(path).with_suffix(".calibration.csv").is_file():
        log(f"no calibration rows beside {Path(path).name}: no leave-one-model-out figure")
        return []
    return cross_validate(profile, calibration_rows(path), spec_device)


def failures(result: Mapping[str, Any]) -> list[str]:
    """Cases that errored (wrong result or exception)."""
    return [f"{r['name']}: {r['reason']}" for r in result["rows"] if r["status"] == "error"]


def report(result: Mapping[str, Any], paths: Mapping[str, Path], console, log: Callable[[str], None] = print) -> int:
    """Print a validation's summary table on ``console``, the files written and the cases that
    errored (``log``); the exit code: 1 when one errored."""
    import pandas as pd

    title = f"{result['meta']['device_key']}: |predicted / measured - 1|"
    console.print(rich_summary(pd.DataFrame(result["summary"]), title))
    for path in paths.values():
        log(f"wrote {path}")
    problems = failures(result)
    for line in problems:
        log(f"error: {line}")
    return 1 if problems else 0
