"""plan: the cheapest deployments that serve a workload within its SLO (docs/plan.md). Its
options are declared here: they belong to this command alone."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ridgeline import api
from ridgeline.cli import options as opt
from ridgeline.cli.app import app, echo_err, write_text
from ridgeline.errors import InvalidWorkloadError, UnwritableOutputError
from ridgeline.report import console
from ridgeline.serving.bounds import Load, Slo

Workload = Annotated[
    str, typer.Option(help="Poisson arrivals: poisson:rate=REQ_PER_S,prompt=TOKENS,output=TOKENS,n=REQUESTS[,seed=S].")
]
SloOption = Annotated[str, typer.Option("--slo", help="Latency targets, seconds: ttft=0.5,tpot=0.05 (either or both).")]
Devices = Annotated[str, typer.Option(help="Catalog devices to search, comma-separated.")]
Counts = Annotated[str, typer.Option(help="Devices per deployment, comma-separated; every tp x pp split of each.")]
Prices = Annotated[
    str | None,
    typer.Option("--price", help="USD per GPU-hour overrides: h100-sxm=3.5,mi300x=2.9 (default: the shipped list)."),
]
Executor = Annotated[str, typer.Option(help="Where simulations run: local (processes) or ray.")]
Address = Annotated[
    str | None, typer.Option(help="A Ray cluster's address (with --executor ray); default: a local one.")
]
Workers = Annotated[
    int | None, typer.Option(help="Worker processes (local) or CPUs (a local Ray); default: this machine's CPUs.")
]
Top = Annotated[int, typer.Option(help="Rows of the table of the cheapest deployments.")]
PlanOutput = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write every deployment, with the search's counts, as JSON.")
]


def pairs(text: str, option: str) -> dict[str, str]:
    """'a=1,b=2' -> {'a': '1', 'b': '2'}; anything else is one line naming the option."""
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InvalidWorkloadError(f"{option} takes KEY=VALUE pairs separated by commas, got {item!r} in {text!r}")
        if key.strip() in out:
            raise InvalidWorkloadError(f"{option} names {key.strip()} twice")
        out[key.strip()] = value.strip()
    return out


def number(value: str, what: str, whole: bool = False) -> float | int:
    try:
        parsed = int(value) if whole else float(value)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise InvalidWorkloadError(f"{what} must be {kind}, got {value!r}") from None
    if not math.isfinite(parsed) or parsed <= 0 and not (whole and what.endswith("seed")):
        raise InvalidWorkloadError(f"{what} must be positive, got {value!r}")
    return parsed


def parse_workload(text: str) -> Load:
    kind, sep, rest = text.partition(":")
    if kind != "poisson" or not sep:
        raise InvalidWorkloadError(f"--workload must start with 'poisson:', got {text!r}")
    given = pairs(rest, "--workload")
    keys = {"rate": False, "prompt": True, "output": True, "n": True, "seed": True}
    unknown = sorted(set(given) - set(keys))
    missing = [k for k in ("rate", "prompt", "output", "n") if k not in given]
    if unknown or missing:
        raise InvalidWorkloadError(
            f"--workload {'does not take ' + ', '.join(unknown) if unknown else 'needs ' + ', '.join(missing)}; "
            "give poisson:rate=R,prompt=P,output=O,n=N[,seed=S]"
        )
    values = {k: number(v, f"the workload's {k}", keys[k]) for k, v in given.items()}
    return Load(values["rate"], values["prompt"], values["output"], values["n"], values.get("seed", 0))


def parse_slo(text: str) -> Slo:
    given = pairs(text, "--slo")
    unknown = sorted(set(given) - {"ttft", "tpot"})
    if unknown:
        raise InvalidWorkloadError(f"--slo takes ttft and tpot (seconds), not {', '.join(unknown)}")
    return Slo(*(number(given[k], f"the {k} SLO") if k in given else None for k in ("ttft", "tpot")))


def names(text: str, option: str) -> list[str]:
    out = [n.strip() for n in text.split(",")]
    if not all(out):
        raise InvalidWorkloadError(f"{option} takes names separated by commas, got {text!r}")
    return out


def check_writable(path: Path) -> None:
    """Refuse an output path that cannot be written before the search spends its time."""
    if path.is_dir():
        raise UnwritableOutputError(path, "it is a folder")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise UnwritableOutputError(path, f"{folder} is a file, not a folder")
    if not os.access(folder, os.W_OK):
        raise UnwritableOutputError(path, f"no permission to write in {folder}")


@app.command()
def plan(
    model: opt.ModelArg = None,
    workload: Workload = "poisson:rate=20,prompt=512,output=256,n=10000",
    slo: SloOption = "ttft=0.5,tpot=0.05",
    devices: Devices = "h100-sxm,h200,a100-80gb,mi300x",
    counts: Counts = "1,2,4,8",
    price: Prices = None,
    executor: Executor = "local",
    address: Address = None,
    workers: Workers = None,
    top: Top = 10,
    output: PlanOutput = None,
) -> None:
    """Search deployments (devices x count x tp/pp x types x batch x chunk): bounds, then simulation; cost vs goodput."""
    if model is None:
        raise typer.BadParameter("name a model (see 'ridgeline models list')")
    if top < 1:
        raise InvalidWorkloadError(f"--top must be at least 1, got {top}")
    if output is not None:
        check_writable(output)
    overrides = {k: number(v, f"the --price of {k}") for k, v in pairs(price, "--price").items()} if price else None
    sizes = tuple(int(number(c, "each of --counts", whole=True)) for c in names(counts, "--counts"))
    result = api.plan(
        model,
        names(devices, "--devices"),
        parse_workload(workload),
        parse_slo(slo),
        prices=overrides,
        executor=executor,
        workers=workers,
        address=address,
        counts=sizes,
        progress=lambda done, total: echo_err(f"price level {done} of {total} done"),
    )
    if output is not None:
        write_text(output, json.dumps(result.to_dict(), indent=1) + "\n")
    show(result, top)


COLUMNS = {
    "device": ("device", "{}"),
    "gpus": ("gpus", "{}"),
    "tp": ("tp", "{}"),
    "pp": ("pp", "{}"),
    "w_dtype": ("weights", "{}"),
    "kv_dtype": ("kv", "{}"),
    "max_batch": ("max batch", "{}"),
    "token_budget": ("chunk", "{}"),
    "usd_per_hour": ("$/hour", "{:.2f}"),
    "usd_per_million_tokens": ("$/M tokens", "{:.3f}"),
    "goodput_rps": ("goodput req/s", "{:.2f}"),
    "slo_attainment": ("met SLO", "{:.4f}"),
    "ttft_p99_s": ("TTFT p99 s", "{:.3f}"),
    "tpot_p99_s": ("TPOT p99 s", "{:.4f}"),
}


def table(frame, title: str) -> Table:
    out = Table(title=title)
    for header, _ in COLUMNS.values():
        out.add_column(header, justify="right")
    for _, row in frame.iterrows():
        out.add_row(*(fmt.format(row[key]) for key, (_, fmt) in COLUMNS.items()))
    return out


def show(result, top: int) -> None:
    counts, frame, meta = result.counts, result.frame, result.meta
    bounds = {reason: n for reason, n in counts["pruned"].items() if reason != "dominated"}
    pruned = ", ".join(f"{n} {reason}" for reason, n in bounds.items()) or "none"
    out = console()
    out.print(
        f"{meta['model']}: {counts['enumerated']} deployments enumerated; {sum(bounds.values())} pruned by the "
        f"bounds ({pruned}); {counts['pruned'].get('dominated', 0)} dominated (they cost more than a simulated "
        f"one that met the SLO for every request); {counts['simulated']} simulated on datasheet rooflines "
        f"({meta['executor']} executor)",
        soft_wrap=True,
    )
    if result.chosen is None:
        out.print("no deployment survived the bounds: none can meet the SLO at this rate", soft_wrap=True)
        return
    out.print(table(frame.loc[result.pareto], "Pareto set: cost per million output tokens vs goodput"))
    simulated = frame[frame["reason"] == ""].sort_values("rank_cost").head(top)
    out.print(table(simulated, f"The {len(simulated)} cheapest simulated"))
    row = frame.loc[result.chosen]
    out.print(
        f"chosen: {row['gpus']} x {row['device']} (tp {row['tp']}, pp {row['pp']}), weights {row['w_dtype']}, KV "
        f"{row['kv_dtype']}, max batch {row['max_batch']}, chunk {row['token_budget']}: "
        f"${row['usd_per_million_tokens']:.3f} per million output tokens, goodput {row['goodput_rps']:.2f} req/s "
        f"({row['slo_attainment']:.4f} of requests met the SLO)",
        soft_wrap=True,
    )
    for name, p in meta["prices"].items():
        out.print(f"price of {name}: ${p['usd_per_gpu_hour']:.2f}/GPU-hour, {p['source']}", soft_wrap=True)
