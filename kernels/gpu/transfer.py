"""Predict one GPU from another's profile, transferred, against what was measured there.

    python -m kernels.gpu.transfer reports/validation/cuda-nvidia-h200-<date>.json \
        reports/profiles/cuda-nvidia-h100-80gb-hbm3.yaml \
        --e2e reports/validation/e2e-cuda-nvidia-h200-llama-3-8b-<date>.json

The measured rows of a validation snapshot (and of e2e result files) taken on device B are
predicted again with the profile of device A applied to B (its measured fractions on B's
datasheet roofs: ``ridgeline.io.profile.profile_ceilings(..., transfer=True)``, labelled
``transferred``), and the errors are summarised per op class, headline kernels and reference
kernels apart, and end to end. Measures nothing: a pure function of its input files; it
writes ``reports/validation/transfer-<profile>-to-<snapshot>.json`` and never its inputs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.roofline import Ceilings, spec_ceilings
from ridgeline.errors import RidgelineError
from ridgeline.io.profile import load_profile
from ridgeline.io.resolve import load_device

CeilingsFor = Callable[[dict[str, Any], DeviceSpec], Ceilings]


def transferred(profile: dict[str, Any], device: DeviceSpec) -> Ceilings:
    """The profile's fractions on ``device``'s datasheet roofs (the resolver's transfer)."""
    try:
        from ridgeline.io.profile import profile_ceilings
    except ImportError:
        raise RidgelineError(
            "this engine has no profile transfer (ridgeline.io.profile.profile_ceilings with transfer=True)"
        ) from None
    ceilings, _notes = profile_ceilings(profile, device, transfer=True)
    return ceilings


def kernel_errors(snapshot: dict[str, Any], ceilings: Ceilings, device: DeviceSpec) -> dict[str, Any]:
    """Per class and overall |error| of the snapshot's rows predicted with ``ceilings``."""
    from kernels.bench.cases_gpu import split_summary
    from kernels.validate.validate import add_predictions, summarize

    rows = add_predictions(copy.deepcopy(snapshot["rows"]), {"spec": spec_ceilings(device), "calibrated": ceilings})
    return {
        "by_class": summarize(rows).to_dict("records"),
        "split": split_summary(rows),
        "rows": [
            {
                k: r.get(k)
                for k in (
                    "name",
                    "op_class",
                    "kernel",
                    "backend",
                    "measured_s",
                    "predicted_calibrated_s",
                    "error_calibrated",
                )
            }
            for r in rows
            if r.get("status") == "ok"
        ],
    }


def e2e_errors(path: Path, ceilings: Ceilings, device: DeviceSpec) -> list[dict[str, Any]]:
    """TTFT/TPOT of an e2e result file predicted with ``ceilings`` (its execution modes)."""
    return e2e_row_errors(json.loads(path.read_text())["rows"], ceilings, device)


def e2e_row_errors(rows: Sequence[dict[str, Any]], ceilings: Ceilings, device: DeviceSpec) -> list[dict[str, Any]]:
    from kernels.e2e.e2e import Case, predicted_columns, row_execution, truncate
    from ridgeline.io.resolve import load_model

    out = []
    for row in rows:
        config = truncate(load_model(row["model"]), row["layers"])
        case = Case(row["batch"], row["prompt"], row["generate"])
        cols = predicted_columns(config, device, case, row["dtype"], ceilings, row, row_execution(row))
        out.append(
            {
                **{k: row[k] for k in ("model", "layers", "batch", "prompt", "generate")},
                "execution": row_execution(row),
                "measured_tpot_s": row["measured_tpot_s"],
                "measured_ttft_s": row["measured_ttft_s"],
                **{k: v for k, v in cols.items() if "calibrated" in k},
            }
        )
    return out


def transfer_report(
    snapshot_path: Path, profile_path: Path, e2e: Sequence[Path] = (), ceilings_for: CeilingsFor = transferred
) -> dict[str, Any]:
    if not snapshot_path.is_file():
        raise RidgelineError(f"no validation snapshot at {snapshot_path}")
    snapshot = json.loads(snapshot_path.read_text())
    profile = load_profile(profile_path)
    device = load_device(snapshot["meta"]["spec_device"])
    ceilings = ceilings_for(profile, device)
    source = (profile.get("meta") or {}).get("spec_device", profile_path.stem)
    return {
        "meta": {
            "kind": "transfer",
            "profile": str(profile_path),
            "profile_device": source,
            "snapshot": str(snapshot_path),
            "device": device.name,
            "mode": ceilings.mode,
            "e2e": [str(p) for p in e2e],
        },
        "kernels": kernel_errors(snapshot, ceilings, device),
        "e2e": [r for p in e2e for r in e2e_errors(p, ceilings, device)],
    }


def run_transfer(parts: Sequence[Path], profile_path: Path) -> dict[str, Any]:
    """A committed GPU run (its parts' ``results.tar.gz``) predicted from another GPU's
    profile, transferred: its last draw's kernels and its graph-mode e2e rows."""
    from kernels.bench.provenance import read_results

    found = {m: d for p in parts for m, d in read_results(p).items()}  # a later part's draw wins
    draws = [d for m, d in found.items() if m.startswith("draw/") and d.get("rows")]
    e2e = [r for m, d in found.items() if m.startswith("e2e-graph/") for r in d.get("rows", [])]
    if not draws:
        raise RidgelineError(f"no draw in {', '.join(map(str, parts))}")
    device = load_device(draws[-1]["meta"]["spec_device"])
    ceilings = transferred(load_profile(profile_path), device)
    return {"kernels": kernel_errors(draws[-1], ceilings, device), "e2e": e2e_row_errors(e2e, ceilings, device)}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from ridgeline.io.files import write_atomic

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", type=Path)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--e2e", type=Path, action="append", default=[])
    parser.add_argument("--output", "-o", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        report = transfer_report(args.snapshot, args.profile, args.e2e)
    except RidgelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = args.output or args.snapshot.parent / (f"transfer-{args.profile.stem}-to-{args.snapshot.stem}.json")
    if out.resolve() in {args.snapshot.resolve(), args.profile.resolve(), *(p.resolve() for p in args.e2e)}:
        print("error: --output would write over an input", file=sys.stderr)
        return 2
    write_atomic(out, json.dumps(report, indent=2, default=float) + "\n")
    for label, stats in report["kernels"]["split"].items():
        print(f"{label:10s} n={stats['n']:4d}  median {stats['median']:.1%}  p90 {stats['p90']:.1%}")
    for r in report["e2e"]:
        if r.get("calibrated_unpriced"):
            print(
                f"{r['model']} b{r['batch']} p{r['prompt']} {r['execution']}: not priced ({r['calibrated_unpriced']})"
            )
            continue
        print(
            f"{r['model']} b{r['batch']} p{r['prompt']} {r['execution']}: TPOT error "
            f"{r['error_calibrated_tpot']:+.1%}, TTFT {r['error_calibrated_ttft']:+.1%}"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
