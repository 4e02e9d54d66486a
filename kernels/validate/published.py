"""The published set: throughput and latency figures that engine makers and MLCommons
published (reports/published/*.yaml, one file per source family), and the held-out third
drawn from it before any prediction (reports/published/heldout.yaml).

    python -m kernels.validate.published --draw SEED   # draw the held-out third (once; never over a draw)

The draw is a seeded, per-family choice of a third of the figures that can be priced and
were never predicted before (``seen``): each family's ids sorted, ``numpy.random.
default_rng(SEED).choice`` of round(n / 3) of them. Commit it before predicting anything;
never tune on those figures, and report them apart.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.files import read_yaml, write_atomic

PUBLISHED_DIR = REPORTS_DIR / "published"
HELDOUT = PUBLISHED_DIR / "heldout.yaml"
FAMILIES = ("trtllm", "mlperf", "vllm", "sglang", "gpt-fast")
REQUIRED = (
    "id",
    "family",
    "priced",
    "seen",
    "published",
    "source",
    "quoted",
    "engine",
    "settings",
    "harness",
    "assumed",
)


def load_published(folder: Path = PUBLISHED_DIR) -> list[dict[str, Any]]:
    """Every figure of every family file, its shared method text filled in; each checked for
    the fields a figure needs and a unique id."""
    figures, seen = [], set()
    for family in FAMILIES:
        raw = read_yaml(folder / f"{family}.yaml")
        methods = raw.get("methods") or {}
        for f in raw["figures"]:
            missing = [k for k in REQUIRED if k not in f]
            if missing:
                raise ValueError(f"{family}.yaml: {f.get('id')}: missing {', '.join(missing)}")
            if f["id"] in seen:
                raise ValueError(f"{family}.yaml: id {f['id']} appears twice")
            seen.add(f["id"])
            figures.append({**f, "method": methods.get(f.get("method"), f.get("method"))})
    return figures


def eligible(figures: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per family, the sorted ids the draw may hold out: priced, and never predicted before."""
    out: dict[str, list[str]] = {family: [] for family in FAMILIES}
    for f in figures:
        if f["priced"] is True and not f["seen"]:
            out[f["family"]].append(f["id"])
    return {family: sorted(ids) for family, ids in out.items()}


def draw_heldout(figures: Sequence[Mapping[str, Any]], seed: int) -> dict[str, list[str]]:
    """A third of each family's eligible figures, drawn with ``seed`` (one generator, the
    families in ``FAMILIES`` order)."""
    rng = np.random.default_rng(seed)
    out = {}
    for family, ids in eligible(figures).items():
        k = round(len(ids) / 3)
        out[family] = sorted(ids[i] for i in rng.choice(len(ids), size=k, replace=False)) if k else []
    return out


def heldout_ids(path: Path = HELDOUT) -> set[str]:
    """The committed held-out ids."""
    raw = read_yaml(path)
    return {i for ids in raw["heldout"].values() for i in ids}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--draw", type=int, required=True, metavar="SEED", help="draw the held-out third with this seed"
    )
    parser.add_argument("--out", type=Path, default=HELDOUT)
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"{args.out} exists: a held-out draw is made once, before any prediction")
    figures = load_published()
    drawn = draw_heldout(figures, args.draw)
    body = {
        "seed": args.draw,
        "date": dt.date.today().isoformat(),
        "method": (
            "per family (in the order trtllm, mlperf, vllm, sglang, gpt-fast), the sorted ids of the figures that are "
            "priced and not seen; numpy.random.default_rng(seed).choice of round(n / 3) of them, without replacement "
            "(kernels/validate/published.py, draw_heldout)"
        ),
        "eligible": {family: len(ids) for family, ids in eligible(figures).items()},
        "seen": sorted(f["id"] for f in figures if f["seen"]),
        "heldout": drawn,
    }
    head = (
        "# The held-out third of the published set, drawn before any prediction of it (issue 54). Never tune on\n"
        "# these figures; RESULTS.md reports them apart. Written by python -m kernels.validate.published --draw SEED.\n"
    )
    write_atomic(args.out, head + yaml.safe_dump(body, sort_keys=False, width=110))
    print(f"wrote {args.out}: {sum(len(v) for v in drawn.values())} held out of {sum(body['eligible'].values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
