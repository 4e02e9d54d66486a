"""Golden analytic values: flops and bytes (by destination) of every op for a set of configs.

``reports/golden/analytic.json`` pins what the engine's formulas give today; a test compares
the current engine with it exactly, so any formula change shows up in the diff and has to be
made deliberately:

    python -m kernels.validate.golden            # compare; exit 1 listing what changed
    python -m kernels.validate.golden --write    # regenerate after a deliberate formula change
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from ridgeline.engine.layers import Plan, stage_ops
from ridgeline.engine.ops import BYTE_FIELDS
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.resolve import load_model

GOLDEN_PATH = REPORTS_DIR / "golden" / "analytic.json"
MODELS = ("llama-2-7b", "llama-3-8b", "falcon-7b")
WORKLOADS = (("prefill", 1, 512), ("prefill", 4, 2048), ("decode", 1, 512), ("decode", 8, 4096))
ATTENTION = ("eager", "flash")
FIELDS = ("count", "flops", "vector_flops", *BYTE_FIELDS)


def _number(value: Any) -> int | float:
    value = float(value)
    return int(value) if value.is_integer() else value


def config_ops(model: str, stage: str, batch: int, length: int, attention: str) -> list[dict[str, Any]]:
    """fp16 weights, activations and KV cache; one device."""
    p = Plan(2.0, 2.0, 2.0, "fp16", "fp16", attention=attention)
    return [
        {"name": op.name, "kind": op.kind, **{f: _number(getattr(op, f)) for f in FIELDS}}
        for op in stage_ops(load_model(model), stage, batch, length, p)
    ]


def compute() -> dict[str, Any]:
    configs = [
        {"model": m, "stage": s, "batch": b, "length": n, "attention": a, "ops": config_ops(m, s, b, n, a)}
        for m in MODELS
        for s, b, n in WORKLOADS
        for a in ATTENTION
    ]
    return {
        "about": "flops/bytes per op instance from ridgeline.engine.layers.stage_ops, fp16 "
        "everywhere; regenerate deliberately with 'python -m kernels.validate.golden --write'",
        "configs": configs,
    }


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Human-readable list of what changed, op by op."""
    out = []
    exp = {(c["model"], c["stage"], c["batch"], c["length"], c["attention"]): c for c in expected["configs"]}
    act = {(c["model"], c["stage"], c["batch"], c["length"], c["attention"]): c for c in actual["configs"]}
    for key in sorted(set(exp) | set(act), key=str):
        if key not in act or key not in exp:
            out.append(f"{key}: config {'removed' if key not in act else 'added'}")
            continue
        e_ops = {o["name"]: o for o in exp[key]["ops"]}
        a_ops = {o["name"]: o for o in act[key]["ops"]}
        for name in sorted(set(e_ops) | set(a_ops)):
            if name not in a_ops or name not in e_ops:
                out.append(f"{key} {name}: op {'removed' if name not in a_ops else 'added'}")
                continue
            for f in ("kind", *FIELDS):
                if e_ops[name].get(f) != a_ops[name].get(f):
                    out.append(f"{key} {name}.{f}: {e_ops[name].get(f)} -> {a_ops[name].get(f)}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    current = compute()
    if "--write" in args:
        GOLDEN_PATH.parent.mkdir(parents=True, exist_ok=True)
        from ridgeline.io.files import write_atomic

        write_atomic(GOLDEN_PATH, json.dumps(current, indent=1) + "\n")
        print(f"wrote {GOLDEN_PATH}")
        return 0
    diff = differences(json.loads(GOLDEN_PATH.read_text()), current)
    for line in diff:
        print(line)
    print(f"{len(diff)} differences from {GOLDEN_PATH}")
    return 1 if diff else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
