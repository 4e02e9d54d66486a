"""The published set: throughput and latency figures that engine makers and MLCommons
published (reports/published/*.yaml, one file per source family), and the held-out third
drawn from it before any prediction (reports/published/heldout.yaml).

    python -m kernels.results.published --draw SEED   # draw the held-out third (once; never over a draw)
    python -m kernels.results.published --predict     # every priced figure -> reports/results/published.json

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

from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.files import read_json, read_yaml, write_atomic, yaml_text

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


def draw_heldout(candidates: Mapping[str, Sequence[str]], seed: int) -> dict[str, list[str]]:
    """A third of each family's eligible ids (``eligible``), drawn with ``seed`` (one
    generator, the families in ``FAMILIES`` order)."""
    rng = np.random.default_rng(seed)
    out = {}
    for family, ids in candidates.items():
        k = round(len(ids) / 3)
        out[family] = sorted(ids[i] for i in rng.choice(len(ids), size=k, replace=False)) if k else []
    return out


def draws(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The first draw and each supplement (a draw over figures priced after the ones before)."""
    return [raw, *(raw.get("supplements") or [])]


def heldout_ids(path: Path = HELDOUT) -> set[str]:
    """The committed held-out ids, every draw's."""
    return {i for d in draws(read_yaml(path)) for ids in d["heldout"].values() for i in ids}


def supplement(seed: int, why: str, path: Path = HELDOUT) -> dict[str, Any]:
    """A draw over the figures eligible now that no earlier draw chose from (a figure found
    priceable after them), made before any of them is predicted, with its reason."""
    raw = dict(read_yaml(path))
    before = {i for d in draws(raw) for ids in d["eligible"].values() for i in ids}
    candidates = {f: [i for i in ids if i not in before] for f, ids in eligible(load_published()).items()}
    if not any(candidates.values()):
        raise SystemExit("no figure is eligible that an earlier draw did not choose from")
    new = {"seed": seed, "date": dt.date.today().isoformat(), "why": why, "heldout": draw_heldout(candidates, seed)}
    raw["supplements"] = [*(raw.get("supplements") or []), {**new, "eligible": candidates}]
    return raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--draw", type=int, metavar="SEED", help="draw the held-out third with this seed")
    what.add_argument("--predict", action="store_true", help="predict every priced figure (a few minutes)")
    what.add_argument("--summary", action="store_true", help="print the committed predictions' summary")
    what.add_argument("--supplement", type=int, metavar="SEED", help="draw a third of the newly priced figures")
    parser.add_argument("--why", default="", help="with --supplement: why these figures became priceable")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.predict:
        return predict_main(args.out or OUTPUT)
    if args.summary:
        print("\n".join(summary_lines(read_json(OUTPUT))))
        return 0
    if args.supplement is not None:
        if not args.why:
            parser.error("--supplement needs --why: what made these figures priceable")
        text = HELDOUT.read_text().split("\nseed:")[0]  # the header comment, kept
        body = {k: v for k, v in supplement(args.supplement, args.why).items()}
        write_atomic(HELDOUT, text + "\n" + yaml_text(body, width=110))
        print(f"wrote {HELDOUT}: supplement seed {args.supplement}")
        return 0
    args.out = args.out or HELDOUT
    if args.out.exists():
        parser.error(f"{args.out} exists: a held-out draw is made once, before any prediction")
    candidates = eligible(load_published())
    drawn = draw_heldout(candidates, args.draw)
    body = {
        "seed": args.draw,
        "date": dt.date.today().isoformat(),
        "method": (
            "per family (in the order trtllm, mlperf, vllm, sglang, gpt-fast), the sorted ids of the figures that are "
            "priced and not seen; numpy.random.default_rng(seed).choice of round(n / 3) of them, without replacement "
            "(kernels/results/published.py, draw_heldout)"
        ),
        "seen": sorted(f["id"] for f in load_published() if f["seen"]),
        "heldout": drawn,
        # what the draw chose from: a figure found unpriceable later leaves this list as it was
        "eligible": candidates,
    }
    head = (
        "# The held-out third of the published set, drawn before any prediction of it (issue 54). Never tune on\n"
        "# these figures; RESULTS.md reports them apart. Written by python -m kernels.results.published --draw SEED.\n"
    )
    write_atomic(args.out, head + yaml_text(body, width=110))
    print(f"wrote {args.out}: {sum(map(len, drawn.values()))} held out of {sum(map(len, candidates.values()))}")
    return 0


# --- predictions ---------------------------------------------------------------------------

OUTPUT = REPORTS_DIR / "results" / "published.json"
MLPERF_LONGEST = 1024  # llama2-70b's prompts and outputs are capped at 1,024 tokens (reports/mlperf)
BASES = ("spec", "engine")  # the datasheet roofline; the engine priced on the best measured roofs there are
# the committed device-time profiles, and the GPUs of their architecture they transfer to
PROFILES = {"h200": "cuda-nvidia-h200"}
TRANSFERS = {"h100-sxm": "cuda-nvidia-h200", "gh200": "cuda-nvidia-h200"}
# LoadGen's figures count the whole system; the rest one deployment (a tensor-parallel group)
THROUGHPUT = ("output_tokens_per_s", "mlperf_tokens_per_s", "tokens_per_s_per_user", "output_tokens_per_s_per_gpu")


def roofs_of(f: Mapping[str, Any], basis: str) -> dict[str, Any]:
    """resolve's keywords for a basis: the datasheet; or the device's own committed
    device-time profile (calibrated), else one of its architecture's (transferred), else
    the datasheet again (said in the row's ``mode``)."""
    from ridgeline.io.catalog import PROFILES_DIR

    if basis == "spec":
        return {}
    if f["device"] in PROFILES:
        return {"profile": PROFILES_DIR / f"{PROFILES[f['device']]}.yaml"}
    if f["device"] in TRANSFERS:
        return {"profile": PROFILES_DIR / f"{TRANSFERS[f['device']]}.yaml", "transfer": True}
    return {}


def deployment_of(f: Mapping[str, Any], basis: str):
    from ridgeline.io.resolve import resolve

    engine = "pytorch" if f["engine"] == "pytorch" else f["engine"]
    return resolve(f["model"], f["device"], engine=engine, **f["settings"], **roofs_of(f, basis))


def predict_figure(f: Mapping[str, Any], basis: str) -> dict[str, Any]:
    """One figure's prediction on one basis: the published quantity, and how it was run."""
    from ridgeline import api
    from ridgeline.serving import scenarios

    d = deployment_of(f, basis)
    h, quantity = f["harness"], f["published"]["quantity"]
    out: dict[str, Any] = {"mode": d.mode, "engine": d.settings.engine}
    if h["kind"] == "analyze":
        gen = api.analyze(d, batch=h["batch"], seq_len=h["prompt"], generate=h["output"]).generation
        per_token = gen["total_s"] / h["output"]
        value = 1 / per_token if quantity == "tokens_per_s_per_user" else per_token
        return {**out, "value": value, "ttft_s": gen["ttft_s"], "tpot_s": gen["tpot_s"]}
    # MLPerf's prompts run to 1,024 tokens: a step budget below that needs the prompt chunked
    lengths = (h["prompt"], h["output"]) if "prompt" in h else (MLPERF_LONGEST, MLPERF_LONGEST)
    given = {"max_batch": h.get("max_batch") or h.get("concurrency"), "token_budget": h.get("token_budget")}
    given |= {k: h.get(k) for k in ("policy", "chunked_prefill")}  # a submission's own scheduler
    sched = api.serving_scheduler(d, given, h.get("context", "server"), lengths)
    out["scheduler"] = {"policy": sched.policy, "max_batch": sched.max_batch, "token_budget": sched.token_budget}
    if h["kind"] == "mlperf":
        run = api.simulate_scenario(d, sched, h["scenario"], instances=h["instances"], rate=h["instances"])
        out["scheduler"]["chunked_prefill"] = sched.chunked_prefill
        return {**out, "value": run["mlperf"]["tokens_per_s"], "latency_p99": run["mlperf"]["latency"]}
    n = h["requests"]
    arrivals = scenarios.offline_arrivals(np.full(n, h["prompt"]), np.full(n, h["output"]))
    s = api.simulate(d, None, arrivals, sched).summary
    value = s["tpot_s"]["mean"] if quantity == "tpot_s" else s["output_tokens_per_s"]
    return {**out, "value": value, "mean_running": s["mean_running"], "duration_s": s["duration_s"]}


def error_of(f: Mapping[str, Any], predicted: float) -> float:
    """predicted / published - 1, on the figure's own quantity (a rate or a time)."""
    return predicted / f["published"]["value"] - 1


def predict_all(figures: Sequence[Mapping[str, Any]], only: set[str] | None = None, log=print) -> list[dict[str, Any]]:
    """Every priced figure (or those in ``only``) on every basis; a refusal is recorded as
    its one-line message, never worked around."""
    from ridgeline.errors import RidgelineError

    rows = []
    for f in figures:
        if f["priced"] is not True or (only is not None and f["id"] not in only):
            continue
        log(f["id"])
        row = {
            "id": f["id"],
            "family": f["family"],
            "quantity": f["published"]["quantity"],
            "published": f["published"]["value"],
        }
        for basis in BASES:
            try:
                p = predict_figure(f, basis)
                row[basis] = {**p, "error": error_of(f, p["value"])}
            except RidgelineError as err:
                row[basis] = {"refused": str(err)}
        rows.append(row)
    return rows


# --- summaries -----------------------------------------------------------------------------


def regime(f: Mapping[str, Any]) -> str:
    """batch 1 (one sequence at a time), latency-bound (MLPerf Server and Interactive, a
    fixed batch's latency), or throughput (every request at once, or many concurrent)."""
    h = f["harness"]
    if h.get("batch") == 1 or h.get("concurrency") == 1:
        return "batch 1"
    if (h["kind"] == "mlperf" and h["scenario"] != "offline") or h["kind"] == "analyze":
        return "latency-bound"
    return "throughput"


def stats(errors: Sequence[float]) -> dict[str, Any]:
    """n, the median and 90th percentile of |error|, the median signed error, how many
    within 10 % and 20 %."""
    e = np.abs(np.asarray(errors, dtype=float))
    if not len(e):
        return {"n": 0}
    return {
        "n": int(len(e)),
        "median": float(np.median(e)),
        "p90": float(np.percentile(e, 90)),
        "bias": float(np.median(errors)),
        "within_10": int(np.sum(e <= 0.10)),
        "within_20": int(np.sum(e <= 0.20)),
    }


GROUPS = {  # how the summary breaks a basis's rows down
    "engine": lambda f, p: f["engine"],
    "gpu": lambda f, p: f["device"],
    "dtype": lambda f, p: str(f["settings"].get("w_dtype", "?")),
    "regime": lambda f, p: regime(f),
    "roofs": lambda f, p: p["mode"],
}


def summarize(rows: Sequence[Mapping[str, Any]], figures: Sequence[Mapping[str, Any]], held: set[str]):
    """Per basis: in-sample and held-out stats, and each breakdown of ``GROUPS``, the
    held-out figures apart in every one."""
    by_id = {f["id"]: f for f in figures}
    out: dict[str, Any] = {}
    for basis in BASES:
        priced = [r for r in rows if "error" in r[basis]]
        part = {k: [r[basis]["error"] for r in priced if (r["id"] in held) == (k == "held")] for k in ("in", "held")}
        out[basis] = {k: stats(v) for k, v in part.items()}
        for name, key in GROUPS.items():
            groups: dict[str, dict[str, list[float]]] = {}
            for r in priced:
                g = groups.setdefault(str(key(by_id[r["id"]], r[basis])), {"in": [], "held": []})
                g["held" if r["id"] in held else "in"].append(r[basis]["error"])
            out[basis][name] = {g: {k: stats(v) for k, v in parts.items()} for g, parts in sorted(groups.items())}
    return out


def spec_is_slower(row: Mapping[str, Any]) -> bool:
    """Whether the spec prediction is slower than the published figure (a bound must not be):
    a rate predicted below it, or a time above it."""
    if "error" not in row["spec"]:
        return False
    return row["spec"]["error"] < 0 if row["quantity"] in THROUGHPUT else row["spec"]["error"] > 0


def result(figures: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """published.json: how it was made, the summary, every row (held out or not), and why
    each unpriced figure is."""
    from kernels.bench.provenance import git_commit

    held = heldout_ids()
    by_id = {f["id"]: f for f in figures}
    return {
        "meta": {
            "commit": git_commit(),
            "date": dt.date.today().isoformat(),
            "command": "python -m kernels.results.published --predict",
            "heldout_seed": read_yaml(HELDOUT)["seed"],
        },
        "summary": summarize(rows, figures, held),
        "spec_slower": [r["id"] for r in rows if spec_is_slower(r)],
        "rows": [{**r, "heldout": r["id"] in held, "regime": regime(by_id[r["id"]])} for r in rows],
        "unpriced": {f["id"]: f["priced"] for f in figures if f["priced"] is not True},
    }


def stats_text(s: Mapping[str, Any]) -> str:
    if not s.get("n"):
        return "none"
    return (
        f"n {s['n']}, median {s['median']:.1%}, p90 {s['p90']:.1%}, bias {s['bias']:+.1%}, {s['within_20']} within 20 %"
    )


def summary_lines(snap: Mapping[str, Any]) -> list[str]:
    """The committed predictions in a few lines: each basis in-sample and held out."""
    rows = snap["rows"]
    held = sum(1 for r in rows if r["heldout"])
    lines = [f"published figures: {len(rows)} priced ({held} held out), {len(snap['unpriced'])} recorded, not priced"]
    for basis in BASES:
        s = snap["summary"][basis]
        lines.append(f"{basis}: in-sample {stats_text(s['in'])}; held out {stats_text(s['held'])}")
    slower = snap["spec_slower"]
    lines.append(f"spec slower than the published figure: {', '.join(slower) if slower else 'none'}")
    return lines


def predict_main(out: Path) -> int:
    import json
    import sys

    figures = load_published()
    rows = predict_all(figures, log=lambda m: print(m, file=sys.stderr))
    write_atomic(out, json.dumps(result(figures, rows), indent=1, allow_nan=False) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
