"""plan: the cheapest deployments that serve a workload within its SLO (docs/plan.md). Its
options are declared here: they belong to this command alone."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from ridgeline import api
from ridgeline.cli import options as opt
from ridgeline.cli.app import app, echo_err, write_text
from ridgeline.errors import InvalidWorkloadError
from ridgeline.io.files import check_writable
from ridgeline.report import console, plan_view
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
Replicas = Annotated[
    str, typer.Option(help="Replica counts R: each count as R replicas of count/R devices, least-outstanding routed.")
]
Pools = Annotated[
    str | None,
    typer.Option(help="Disaggregated P:D splits, comma-separated: P prefill + D decode servers of count/(P+D) each."),
]
Drafts = Annotated[
    str | None, typer.Option(help="Draft models to speculate with, NAME:K:ACCEPTANCE comma-separated (and none).")
]
RateSearch = Annotated[
    bool,
    typer.Option("--rate-search", help="Also find each simulated deployment's highest rate meeting the SLO at p99."),
]
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


def parse_drafts(text: str) -> list[tuple[str, int, float]]:
    out = []
    for item in names(text, "--drafts"):
        name, k, a = (item.split(":") + [None, None])[:3]
        if k is None or a is None or item.count(":") != 2:
            raise InvalidWorkloadError(f"--drafts takes NAME:K:ACCEPTANCE items, e.g. llama-3.2-1b:4:0.7; got {item!r}")
        try:
            acceptance = float(a)
        except ValueError:
            raise InvalidWorkloadError(f"the draft {name}'s acceptance must be a number, got {a!r}") from None
        out.append((name, int(number(k, f"the draft {name}'s k", whole=True)), acceptance))
    return out


def parse_pools(text: str) -> tuple[tuple[int, int], ...]:
    def split(item: str) -> tuple[int, int]:
        pre, sep, dec = item.partition(":")
        if not sep:
            raise InvalidWorkloadError(f"--pools takes P:D items (prefill:decode servers), got {item!r}")
        return int(number(pre, "each pool's servers", whole=True)), int(number(dec, "each pool's servers", whole=True))

    return tuple(split(item) for item in names(text, "--pools"))


def names(text: str, option: str) -> list[str]:
    out = [n.strip() for n in text.split(",")]
    if not all(out):
        raise InvalidWorkloadError(f"{option} takes names separated by commas, got {text!r}")
    return out


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
    replicas: Replicas = "1",
    pools: Pools = None,
    drafts: Drafts = None,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    rate_search: RateSearch = False,
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
    fleet = {"replicas": tuple(int(number(r, "each of --replicas", whole=True)) for r in names(replicas, "--replicas"))}
    fleet.update({"pools": parse_pools(pools)} if pools else {})
    fleet.update({"drafts": parse_drafts(drafts)} if drafts else {})
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
        profile=profile,
        transfer=transfer,
        rate_search=99.0 if rate_search else None,
        **fleet,
        progress=lambda done, total: echo_err(f"price level {done} of {total} done"),
    )
    if output is not None:
        write_text(output, json.dumps(result.to_dict(), indent=1) + "\n")
    out = console()
    for item in plan_view(result, top):  # a line of text is never wrapped
        out.print(item, soft_wrap=isinstance(item, str))
