"""``ridgeline plan``: the cheapest deployments that serve a workload within its SLO.

Every deployment of the space (:mod:`ridgeline.serving.bounds`) first meets the analytical
bounds; the survivors are simulated (:func:`ridgeline.serving.simulator.simulate_deployment`,
vLLM V1's scheduler, the same Poisson arrivals for all: common random numbers), cheapest
price per hour first, one price level at a time. A level is skipped where it cannot pay:
its cost per million tokens is at least its price x the arrivals' span (a run lasts longer
than its arrivals), and a cheaper deployment already served every request within the SLO,
which is the most goodput any deployment can have. The levels run in the same order whatever
executes them: the answer is the same, seed for seed.

The Pareto set is that of the deployments the bounds keep, not of every deployment: the
steady-state bounds (``throughput``, ``tpot``) discard deployments that still serve some
requests within the SLO (the first ones, on an empty server), and one of those may cost less
than the set's cheapest. Each such deployment whose cost floor is below the cost of the
cheapest that served every request is marked ``may_be_on_front``; every other pruned one is
provably off the front (no plan, no room, no request within the TTFT target, or dominated).
The front holds deployments with goodput: one that serves no request within the SLO is on none.

- cost per million tokens: devices x price per GPU-hour x the run's duration, over its
  output tokens;
- goodput: requests per second meeting every SLO at the offered rate (offered rate x the
  fraction that met them): every deployment serves the same arrivals.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from ridgeline.engine.analyze import plain
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import Ceilings, spec_ceilings
from ridgeline.engine.workload import Settings
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving import fanout
from ridgeline.serving.arrivals import Arrivals, poisson
from ridgeline.serving.bounds import REASONS, Draft, Load, Slo, Space, activation_type, analytic_pass
from ridgeline.serving.disagg import KvLink, Pool, simulate_disaggregated
from ridgeline.serving.fanout import RunMany
from ridgeline.serving.router import simulate_replicas
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import SimResult, deployment_runs, goodput, max_rate
from ridgeline.serving.speculative import Speculation, simulate_speculative

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MOST_REQUEST_RUNS = 50_000_000  # simulated requests a search may cost at most (survivors x n)
KEY = ["device", "gpus", "tp", "pp", "w_dtype", "kv_dtype", "max_batch", "token_budget"]
STEADY = ("throughput", "tpot")  # the steady-state bounds: what they discard may still serve some requests in time
ROUTE = "least-outstanding"  # replicas' and pools' router: it sends work where the queue is shortest


def portable(device: DeviceSpec) -> dict[str, Any]:
    """A device as plain fields (its peak tables as dicts): what a task sends to a worker."""
    return {f.name: dict(v) if isinstance(v, Mapping) else v for f in fields(device) for v in [getattr(device, f.name)]}


def restored(device: dict[str, Any]) -> DeviceSpec:
    return DeviceSpec(**{k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in device.items()})


def read_only(mapping: dict) -> MappingProxyType:
    return MappingProxyType(mapping)


def packed(roofs: Ceilings) -> bytes:
    """Ceilings pickled with their read-only mappings as plain ones (unpickled as read-only)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out)
    pickler.dispatch_table = {**copyreg.dispatch_table, MappingProxyType: lambda m: (read_only, (dict(m),))}
    pickler.dump(roofs)
    return out.getvalue()


@dataclass(frozen=True)
class Server:
    """Where a pool's servers run: a device (portable) and its roofs (packed; None: datasheet)."""

    device: dict[str, Any]
    roofs: bytes | None = None

    def deployment(self, model: ModelConfig, s: Settings) -> Deployment:
        device = restored(self.device)
        roofs = pickle.loads(self.roofs) if self.roofs is not None else spec_ceilings(device)
        return Deployment.of(model, device, s, roofs)


@dataclass(frozen=True)
class Task:
    """One simulation: everything a worker needs, nothing it must load. Fleet fields:
    ``replicas`` behind the router, or ``pools`` (prefill, decode servers) with the decode
    pool on ``decode``; a ``draft`` to speculate with; ``percentile``: search the highest
    rate whose TTFT and TPOT at it meet the SLO (None: no search)."""

    model: ModelConfig
    device: dict[str, Any]  # portable(DeviceSpec)
    settings: Settings
    scheduler: Scheduler
    load: Load
    slo: Slo
    roofs: bytes | None = None  # packed(Ceilings); None: the datasheet's
    replicas: int = 1
    pools: tuple[int, int] | None = None
    decode: Server | None = None
    draft: Draft | None = None
    percentile: float | None = None


def server_of(task: Task) -> Callable[[Arrivals], SimResult]:
    """What serves arrivals on the task's deployment: one server (its runs sharing one table
    of step costs), replicas, or two pools."""
    d = Server(task.device, task.roofs).deployment(task.model, task.settings)
    spec = None
    if task.draft is not None:
        draft = task.draft
        spec = Speculation(d.with_model(draft.model), draft.tokens, draft.acceptance, task.load.seed)
    s, how = task.scheduler, {"route": ROUTE, "seed": task.load.seed, "speculation": spec}
    if task.pools is not None and task.decode is not None:
        pools = Pool(d, task.pools[0], s), Pool(task.decode.deployment(task.model, task.settings), task.pools[1], s)
        return lambda arrivals: simulate_disaggregated(*pools, arrivals, link=KvLink(), **how)
    if task.replicas > 1:
        return lambda arrivals: simulate_replicas(d, arrivals, s, replicas=task.replicas, **how)
    if spec is not None:
        return lambda arrivals: simulate_speculative(d, arrivals, spec, s)
    return deployment_runs(d, s)


def run_task(task: Task) -> dict[str, Any]:
    """Simulate one deployment (on its roofs); the figures the search ranks by."""
    load, serve = task.load, server_of(task)

    def at(rate: float) -> SimResult:
        return serve(poisson(rate, load.requests, load.prompt, load.output, load.seed))

    result = at(load.rate)
    good = goodput(result, task.slo.ttft_s, task.slo.tpot_s)
    summary = result.summary
    found = {}
    if task.percentile is not None:  # the simulator's rate search (as simulate --search)
        searched = max_rate(at, task.slo.ttft_s, task.slo.tpot_s, task.percentile, start=load.rate)
        found = {"max_rate_rps": searched["max_rate"], "rate_runs": len(searched["tried"])}
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
        **found,
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
        maybe = int(self.frame["may_be_on_front"].sum())
        return {
            "enumerated": len(self.frame),
            "pruned": pruned,
            "simulated": int((reasons == "").sum()),
            "may_be_on_front": maybe,
        }

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
                "pruned": pruned[
                    [*KEY, "reason", "why", "ttft_bound_s", "decode_tokens_per_s_bound", "may_be_on_front"]
                ].to_dict("records"),
            }
        )


def _record(row: pd.Series) -> dict[str, Any]:
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in row.drop("why").items()}


def pareto_set(cost: np.ndarray, good: np.ndarray) -> list[int]:
    """Positions with goodput not dominated: no other costs as little or less and serves as
    much or more (one of the two strictly). Cheapest first; no goodput, on no front."""
    order = np.lexsort((-good, cost))
    keep, best = [], 0.0
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
    percentile: float | None = None,
) -> PlanResult:
    """Enumerate, bound, simulate the survivors a price level at a time, and rank. With
    ``percentile``, each simulated deployment also gets the highest rate whose TTFT and TPOT
    at that percentile meet the SLO (``max_rate_rps``); the ranking stays at the offered rate."""
    missing = [d.name for d in space.devices if d.name not in prices]
    if missing:
        raise InvalidWorkloadError(f"no price for {', '.join(missing)}")
    frame = analytic_pass(model, space, load, slo)
    frame["usd_per_hour"] = frame["device"].map(prices) * frame["gpus"]
    if space.fleet:  # pools: each pool's servers at its own device's price
        each = frame["tp"] * frame["pp"]
        pooled = frame["decode_servers"] > 0
        split = (
            frame["device"].map(prices) * frame["prefill_servers"] * each
            + frame["decode_device"].map(lambda name: prices.get(name, np.nan)) * frame["decode_servers"] * each
        )
        frame["usd_per_hour"] = frame["usd_per_hour"].where(~pooled, split)
    if space.fleet:
        frame["fleet"] = [fleet_of(row) for _, row in frame.iterrows()]
    if space.roofs:
        frame["basis"] = basis(frame, {d.name: space.roofs_of(d).mode for d in space.devices})
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
    devices = {d.name: Server(portable(d), packed(space.roofs_of(d)) if space.roofs else None) for d in space.devices}
    results: dict[int, dict] = {}
    moved: dict[str, int] = {}  # bytes one task and one result take over the wire (pickled)
    best = np.inf  # cheapest cost per million tokens that met the SLO for every request
    levels = sorted(frame.loc[survivors, "usd_per_hour"].unique())
    for done, level in enumerate(levels, 1):
        rows = [i for i in survivors if frame.at[i, "usd_per_hour"] == level]
        frame.loc[[i for i in rows if floor[i] >= best], "reason"] = "dominated"
        rows = [i for i in rows if floor[i] < best]
        tasks = [make_task(frame.loc[i], model, devices, space, load, slo, percentile) for i in rows]
        for i, task, out in zip(rows, tasks, run_many(run_task, tasks)):
            results[i] = out
            moved = moved or {"task_bytes": len(pickle.dumps(task)), "result_bytes": len(pickle.dumps(out))}
            cost = level * out["duration_s"] / 3600 / per_million
            if out["slo_attainment"] >= 1.0:
                best = min(best, cost)
        if progress is not None:
            progress(done, len(levels))
    frame["may_be_on_front"] = frame["reason"].isin(STEADY) & (floor < best)
    return _ranked(frame, results, per_million, (len(arrivals) - 1) / span, moved)


def plan_search(
    model: ModelConfig,
    space: Space,
    load: Load,
    slo: Slo,
    cited: Mapping[str, Any],
    *,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    rate_search: float | None = None,
    about: Mapping[str, Any] | None = None,
) -> PlanResult:
    """:func:`search` simulating on ``executor`` (:mod:`ridgeline.serving.fanout`), priced at
    the ``cited`` prices (by device: ``usd_per_gpu_hour`` and where it comes from), with its
    meta block: the model, what the roofs rest on (``about`` over the datasheet's), the load,
    the SLO, the prices and where the simulations ran."""
    count = fanout.check_executor(executor, workers, address)
    usd = {k: p.usd_per_gpu_hour for k, p in cited.items()}
    with fanout.executor(executor, workers, address) as run_many:
        result = search(model, space, load, slo, usd, run_many, progress, rate_search)
    meta = {
        "model": model.name,
        "basis": "spec: every device's datasheet roofline",
        **(about or {}),
        "load": asdict(load),
        "slo": asdict(slo),
        "prices": {k: asdict(p) for k, p in cited.items()},
        "executor": executor,
        "workers": None if address else count,
    }
    if space.fleet:
        meta["fleet"] = {"route": "least-outstanding", "kv_link": asdict(KvLink())}
    if rate_search is not None:
        meta["rate_search_percentile"] = rate_search
    return replace(result, meta={**meta, **result.meta})


def fleet_of(row) -> str:
    """A deployment's fleet in words: one server, R replicas, or P prefill + D decode servers."""
    each = row["tp"] * row["pp"]
    if row["decode_servers"]:
        text = (
            f"{row['prefill_servers']}x{each} prefill + {row['decode_servers']}x{each} decode on {row['decode_device']}"
        )
    else:
        text = f"{row['replicas']} replicas of {each}" if row["replicas"] > 1 else "one server"
    return text + (f", draft {row['draft']}" if row["draft"] else "")


def basis(frame: pd.DataFrame, modes: dict[str, str]) -> pd.Series:
    """What each deployment's prices rest on: its device's roofs (``spec``, ``calibrated``,
    ``transferred``), a pool's each."""
    own = frame["device"].map(modes)
    if "decode_device" not in frame:
        return own
    pooled = frame["decode_servers"] > 0
    return own.where(~pooled, "prefill " + own + ", decode " + frame["decode_device"].map(modes).fillna(""))


def make_task(row, model, devices: dict[str, Server], space: Space, load, slo, percentile=None) -> Task:
    settings = Settings(
        w_dtype=row["w_dtype"],
        a_dtype=activation_type(row["w_dtype"]),
        kv_dtype=row["kv_dtype"],
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        attention=space.attention,
    )
    scheduler = Scheduler(max_batch=int(row["max_batch"]), token_budget=int(row["token_budget"]))
    own = devices[row["device"]]
    fleet: dict[str, Any] = {"roofs": own.roofs, "percentile": percentile}
    if space.fleet:
        drafts = {d.label: d for d in space.drafts}
        fleet.update(replicas=int(row["replicas"]), draft=drafts.get(row["draft"]))
        if row["decode_servers"]:
            fleet.update(pools=(int(row["prefill_servers"]), int(row["decode_servers"])))
            fleet.update(decode=devices[row["decode_device"]])
    return Task(model, own.device, settings, scheduler, load, slo, **fleet)


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
