"""Published anchors: decode speeds others published, predicted as spec, calibrated and
transferred (issue 25).

``reports/anchors.yaml`` holds each figure, its source and the workload it states;
:func:`predict_anchors` prices each with the engine in graph execution (serving stacks
and gpt-fast run CUDA graphs): ``spec`` on the datasheet roofs, ``calibrated`` with the
device's own committed profile, ``transferred`` with another GPU's profile moved to it.
Where the engine refuses a basis (an eager-timed profile cannot price graph execution; a
profile does not transfer across architectures) the refusal's message is recorded in
place of a number, never worked around.

The compared quantity is wall time over generated tokens, total / generate, as the
figures are (their prefill share included); error = predicted / published - 1.

    python -m kernels.validate.anchors     # rewrite reports/validation/anchors.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernels.bench.provenance import git_commit
from ridgeline.api import analyze
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import ROOT
from ridgeline.io.files import read_yaml, write_atomic
from ridgeline.io.profile import load_profile

ANCHORS = ROOT / "reports" / "anchors.yaml"
OUTPUT = ROOT / "reports" / "validation" / "anchors.json"
BASES = ("spec", "calibrated", "transferred")
WORKLOAD_KEYS = ("model", "device", "batch", "prompt", "generate", "tp", "dtype", "attention")


def load_anchors(path: Path = ANCHORS) -> dict[str, Any]:
    return read_yaml(path)


def basis_how(anchor: Mapping[str, Any], basis: str) -> dict[str, Any] | str:
    """resolve's keywords for one basis, or why there is nothing to price it with."""
    if basis == "spec":
        return {}
    if basis == "calibrated":
        path = anchor.get("calibrate_with")
        if not path:
            return f"no committed profile of {anchor['device']} (none under reports/profiles)"
        return {"profile": load_profile(ROOT / path)}
    path = anchor.get("transfer_from")
    if not path:
        return f"no other GPU's profile named to transfer to {anchor['device']}"
    return {"profile": load_profile(ROOT / path), "transfer": True}


def refusal(anchor: Mapping[str, Any], basis: str, err: RidgelineError) -> str:
    """The engine's message (across architectures it names them), with the profile's path."""
    path = anchor["calibrate_with" if basis == "calibrated" else "transfer_from"]
    return str(err).replace("given profile", path)  # it was passed read, not by path


def predict(anchor: Mapping[str, Any], basis: str) -> dict[str, Any]:
    """One basis of one anchor: the prediction and its error, or the reason there is none."""
    how = basis_how(anchor, basis)
    out: dict[str, Any] = {
        "profile": None
        if basis == "spec"
        else anchor.get("calibrate_with" if basis == "calibrated" else "transfer_from")
    }
    if isinstance(how, str):
        return {**out, "refused": how}
    try:
        a = analyze(
            anchor["model"],
            anchor["device"],
            batch=anchor["batch"],
            seq_len=anchor["prompt"],
            generate=anchor["generate"],
            dtype=anchor["dtype"],
            tp=anchor["tp"],
            execution="graph",
            attention=anchor["attention"],
            **how,
        )
    except RidgelineError as err:
        return {**out, "refused": refusal(anchor, basis, err)}
    gen = a.generation or {}
    per_token = gen["total_s"] / anchor["generate"]
    return {
        **out,
        "mode": a.mode,
        "ttft_s": gen["ttft_s"],
        "tpot_s": gen["tpot_s"],
        "total_s": gen["total_s"],
        "predicted_s": per_token,
        "error": per_token / anchor["published"]["value_s"] - 1,
    }


def predict_anchors(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every anchor of ``reports/anchors.yaml`` (as read) with its three predictions."""
    tolerance = spec["tolerance"]
    rows = []
    for anchor in spec["anchors"]:
        bases = {b: predict(anchor, b) for b in BASES}
        for b in bases.values():
            if "error" in b:
                b["within_tolerance"] = abs(b["error"]) <= tolerance
        rows.append(
            {
                "id": anchor["id"],
                "title": anchor["title"],
                "published": dict(anchor["published"]),
                "source": anchor.get("source"),
                "note": anchor.get("note"),
                "engine": anchor.get("engine"),
                "gpu": anchor.get("gpu"),
                "assumed": list(anchor.get("assumed") or []),
                "workload": {k: anchor[k] for k in WORKLOAD_KEYS},
                "execution": "graph",
                "attention": anchor["attention"],
                "predictions": bases,
            }
        )
    return rows


def header_prose(path: Path = ANCHORS) -> str:
    """The YAML's header comment (the explanation of each anchor), as one text."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(lines).strip()


def result(spec: Mapping[str, Sequence[Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "meta": dict(meta),
        "tolerance": spec["tolerance"],
        "compared": "total_s / generate",
        "explanation": header_prose(),
        "anchors": predict_anchors(spec),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUTPUT, help="where to write the JSON")
    args = parser.parse_args(argv)
    spec = load_anchors()
    meta = {
        "commit": git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "anchors": str(ANCHORS.relative_to(ROOT)),
        "sources": {a["id"]: a.get("source") for a in spec["anchors"]},
    }
    write_atomic(args.out, json.dumps(result(spec, meta), indent=1, allow_nan=False) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
