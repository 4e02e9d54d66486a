"""``ridgeline plan``: the cheapest deployments that serve a workload within its SLO.

Every deployment of the space (:mod:`ridgeline.serving.bounds`) first meets the analytical
bounds; the survivors are simulated (:func:`ridgeline.serving.simulator.simulate_deployment`,
vLLM V1's scheduler, the same Poisson arrivals for all: common random numbers), cheapest
price per hour first, one price level at a time. A level is skipped where it cannot pay:
its cost per million tokens is at least its price x the arrivals' span (a run lasts longer
than its arrivals), and a cheaper deployment already served every request within the SLO,
which is the most goodput any deployment can have. So the Pareto set is exact, and the
levels run in the same order whatever executes them: the answer is the same, seed for seed.

- cost per million tokens: devices x price per GPU-hour x the run's duration, over its
  output tokens;
- goodput: requests per second meeting every SLO at the offered rate (offered rate x the
  fraction that met them): every deployment serves the same arrivals.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.analyze import plain
from ridgeline.engine.deployment import Deployment, with_links
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.precision import make_plan
from ridgeline.engine.roofline import spec_ceilings
from ridgeline.engine.workload import Settings
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.arrivals import poisson
from ridgeline.serving.bounds import REASONS, Load, Slo, Space, analytic_pass
from ridgeline.serving.fanout import RunMany
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import goodput, simulate_deployment

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MOST_REQUEST_RUNS = 50_000_000  # simulated requests a search may cost at most (survivors x n)
KEY = ["device", "gpus", "tp", "pp", "w_dtype", "kv_dtype", "max_batch", "token_budget"]


def portable(device: DeviceSpec) -> dict[str, Any]:
    """A device as plain fields (its peak tables as dicts): what a task sends to a worker."""
    return {f.name: dict(v) if isinstance(v, Mapping) else v for f in fields(device) for v in [getattr(device, f.name)]}


def restored(device: dict[str, Any]) -> DeviceSpec:
    return DeviceSpec(**{k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in device.items()})


@dataclass(frozen=True)
class Task:
    """One simulation: everything a worker needs, nothing it must load."""

    model: ModelConfig
    device: dict[str, Any]  # portable(DeviceSpec)
    settings: Settings
    scheduler: Scheduler
    load: Load
    slo: Slo


def run_task(task: Task) -> dict[str, Any]:
    """Simulate one deployment on its datasheet roofline; the figures the search ranks by."""
    device = restored(task.device)
    s = task.settings
    d = Deployment(
        task.model, device, s, make_plan(s, device, task.model.head_dim), with_links(spec_ceilings(device), device, s)
    )
    load = task.load
    result = simulate_deployment(
        d, poisson(load.rate, load.requests, load.prompt, load.output, load.seed), task.scheduler
    )
    good = goodput(result, task.slo.ttft_s, task.slo.tpot_s)
    summary = result.summary
    return {
        "duration_s": summary["duration_s"],
        "steps": summary["steps"],
        "output_tokens": summary["output_tokens"],
        "preemptions": summary["preemptions"],
        "ttft_p50_s": summary["ttft_s"]["p50"],
        "ttft_p99_s": summary["ttft_s"]["p99"],
        "tpot_p50_s": summary["tpot_s"]["p50"],
        "tpot_p99_s": summary["tpot_s"]["p99"],
        "slo_attainment": good["slo_attainment"],
    }


@dataclass(frozen=True)
class PlanResult:
    """Every deployment enumerated (``frame``: a row each, its bounds, why it was pruned or
    what the simulation found), the Pareto set and the chosen deployment (row indices)."""

    frame: pd.DataFrame
    pareto: list[int]
    chosen: int | None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, Any]:
        reasons = self.frame["reason"]
        pruned = {r: int((reasons == r).sum()) for r in (*REASONS, "dominated") if (reasons == r).any()}
        return {"enumerated": len(self.frame), "pruned": pruned, "simulated": int((reasons == "").sum())}

    def to_dict(self) -> dict[str, Any]:
        simulated = self.frame[self.frame["reason"] == ""]
        pruned = self.frame[self.frame["reason"] != ""]
        return plain(
            {
                "meta": self.meta,
                "counts": self.counts,
                "chosen": None if self.chosen is None else _record(self.frame.loc[self.chosen]),
                "pareto": [_record(self.frame.loc[i]) for i in self.pareto],
                "deployments": [_record(row) for _, row in simulated.sort_values("rank_cost").iterrows()],
                "pruned": pruned[[*KEY, "reason", "why", "ttft_bound_s", "decode_tokens_per_s_bound"]].to_dict(
                    "records"
                ),
            }
        )


def _record(row: pd.Series) -> dict[str, Any]:
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in row.drop("why").items()}


def pareto_set(cost: np.ndarray, good: np.ndarray) -> list[int]:
    """Positions not dominated: no other costs as little or less and serves as much or more
    (one of the two strictly). Cheapest first."""
    order = np.lexsort((-good, cost))
    keep, best = [], -np.inf
    for i in order:
        if good[i] > best:
            keep.append(int(i))
            best = good[i]
    return keep


def search(
    model: ModelConfig,
    space: Space,
    load: Load,
    slo: Slo,
    prices: dict[str, float],
    run_many: RunMany,
    progress: Callable[[int, int], None] | None = None,
) -> PlanResult:
    """Enumerate, bound, simulate the survivors a price level at a time, and rank."""
    missing = [d.name for d in space.devices if d.name not in prices]
    if missing:
        raise InvalidWorkloadError(f"no price for {', '.join(missing)}")
    frame = analytic_pass(model, space, load, slo)
    frame["usd_per_hour"] = frame["device"].map(prices) * frame["gpus"]
    survivors = frame.index[frame["reason"] == ""]
    if len(survivors) * load.requests > MOST_REQUEST_RUNS:
        raise InvalidWorkloadError(
            f"the search would simulate up to {len(survivors):,} deployments x {load.requests:,} requests, over "
            f"{MOST_REQUEST_RUNS:,}; name fewer devices or counts, or fewer requests (n=)"
        )
    arrivals = poisson(load.rate, load.requests, load.prompt, load.output, load.seed)
    span = float(arrivals.time_s[-1] - arrivals.time_s[0])
    per_million = load.requests * load.output / 1e6
    floor = frame["usd_per_hour"] * span / 3600 / per_million  # no run is shorter than its arrivals
    devices = {d.name: portable(d) for d in space.devices}
    results: dict[int, dict] = {}
    moved: dict[str, int] = {}  # bytes one task and one result take over the wire (pickled)
    best = np.inf  # cheapest cost per million tokens that met the SLO for every request
    levels = sorted(frame.loc[survivors, "usd_per_hour"].unique())
    for done, level in enumerate(levels, 1):
        rows = [i for i in survivors if frame.at[i, "usd_per_hour"] == level]
        frame.loc[[i for i in rows if floor[i] >= best], "reason"] = "dominated"
        rows = [i for i in rows if floor[i] < best]
        tasks = [make_task(frame.loc[i], model, devices, space, load, slo) for i in rows]
        for i, task, out in zip(rows, tasks, run_many(run_task, tasks)):
            results[i] = out
            moved = moved or {"task_bytes": len(pickle.dumps(task)), "result_bytes": len(pickle.dumps(out))}
            cost = level * out["duration_s"] / 3600 / per_million
            if out["slo_attainment"] >= 1.0:
                best = min(best, cost)
        if progress is not None:
            progress(done, len(levels))
    return _ranked(frame, results, per_million, (len(arrivals) - 1) / span, moved)


def make_task(row, model, devices, space: Space, load, slo) -> Task:
    settings = Settings(
        w_dtype=row["w_dtype"],
        kv_dtype=row["kv_dtype"],
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        attention=space.attention,
    )
    scheduler = Scheduler(max_batch=int(row["max_batch"]), token_budget=int(row["token_budget"]))
    return Task(model, devices[row["device"]], settings, scheduler, load, slo)


def _ranked(frame: pd.DataFrame, results: dict[int, dict], per_million: float, offered: float, meta) -> PlanResult:
    import pandas as pd  # only when a search runs: the CLI's import stays light

    sim = pd.DataFrame.from_dict(results, orient="index")
    frame = frame.join(sim)
    if results:
        frame["usd_per_million_tokens"] = frame["usd_per_hour"] * frame["duration_s"] / 3600 / per_million
        frame["goodput_rps"] = offered * frame["slo_attainment"]
    else:
        frame["usd_per_million_tokens"] = frame["goodput_rps"] = np.nan
    done = frame.index[frame["reason"] == ""]
    cost, good = frame.loc[done, "usd_per_million_tokens"].to_numpy(), frame.loc[done, "goodput_rps"].to_numpy()
    frame["rank_cost"] = frame.loc[done, "usd_per_million_tokens"].rank(method="first")
    frame["rank_goodput"] = frame.loc[done, "goodput_rps"].rank(method="first", ascending=False)
    front = [int(done[i]) for i in pareto_set(cost, good)]
    return PlanResult(frame, front, front[-1] if front else None, {**meta, "offered_rate": offered})
