"""Replicas behind a router: N copies of one server, each request sent to one of them.

Routes (``ROUTES``):

- ``round-robin``: request i goes to replica i mod N;
- ``least-outstanding``: to the replica with the fewest requests routed to it and not yet
  finished when the request arrives (ties: the lowest index);
- ``prefix-affinity``: a seeded hash of a key, mod N, so requests with the same key share a
  replica (and its prefix cache). The key is the request's first prefix block id when the
  arrivals carry ``hash_ids`` (Mooncake traces: one id per 512-token block); otherwise
  the request's index, which makes the route a seeded uniform random one.

The replicas run in lockstep: before a request is routed, every replica runs the steps that
start before its arrival, so a router that reads their state sees it as it is at that
moment. Each replica is the single-server simulation (:mod:`ridgeline.serving.simulator`)
unchanged: a route that ignores the state (round-robin, prefix affinity) gives each request
exactly the times the replica's share of the trace gets when run alone.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from ridgeline.engine.deployment import Deployment
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import SimResult, _Server, new_line, result_of, run_decodes, run_step
from ridgeline.serving.speculative import Speculation, maker, with_spec_summary

ROUTES = ("round-robin", "least-outstanding", "prefix-affinity")
MAX_REPLICAS = 1024
REQUEST_COLUMNS = ("admitted", "first", "finish", "preempted", "hit_tokens")


def check_fleet(replicas: int, route: str) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, (int, np.integer)) or not 1 <= replicas <= MAX_REPLICAS:
        raise InvalidWorkloadError(f"replicas must be a whole number from 1 to {MAX_REPLICAS}, got {replicas!r}")
    if route not in ROUTES:
        raise InvalidWorkloadError(f"unknown route {route!r}; known: {', '.join(ROUTES)}")


def mix(keys: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64's finaliser of ``keys`` + seed (Steele et al., 2014): a seeded hash the
    same on every platform (Python's ``hash`` is salted per process)."""
    with np.errstate(over="ignore"):
        x = keys.astype(np.uint64) + np.uint64(seed & (2**64 - 1)) * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def affinity_keys(arrivals: Arrivals) -> np.ndarray:
    """Each request's affinity key: its first prefix block id, or its index without ``hash_ids``."""
    hashes = getattr(arrivals, "hash_ids", None)
    index = np.arange(len(arrivals), dtype=np.int64)
    if hashes is None:
        return index
    first = [int(h[0]) if len(h) else -1 - i for i, h in enumerate(hashes)]  # no blocks: its own key
    return np.asarray(first, dtype=np.int64)


def affinity_route(arrivals: Arrivals, replicas: int, seed: int = 0) -> np.ndarray:
    """The replica of every request under ``prefix-affinity``."""
    return (mix(affinity_keys(arrivals), seed) % np.uint64(replicas)).astype(np.int64)


class Replica:
    """One server of a fleet, its clock and the requests routed to it."""

    def __init__(self, server: _Server):
        self.server, self.now, self.line, self.ids = server, 0.0, new_line(), []
        self.finished, self.last_end, self.last_done = 0, 0.0, 0

    def busy(self) -> bool:
        return len(self.server.run[0]) > 0 or bool(self.server.waiting)

    def advance(self, t: float) -> None:
        """Run every step that starts before ``t``."""
        while self.now < t and self.busy():
            self.now, ran, done = run_decodes(self.server, self.now, t, self.line)
            if not ran:
                self.now, done = run_step(self.server, self.now, self.line)
            self.finished += done
            self.last_end, self.last_done = self.now, done

    def outstanding(self, t: float) -> int:
        """Requests routed here and not finished at ``t`` (the last step may end after it)."""
        late = self.last_done if self.last_end > t else 0
        return len(self.ids) - self.finished + late

    def take(self, r: int, t: float) -> None:
        if not self.busy():
            self.now = max(self.now, t)
        self.server.waiting.append(r)
        self.ids.append(r)


def serve_fleet(
    make: Callable[[int], _Server],
    arrivals: Arrivals,
    replicas: int,
    route: str,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Replica]:
    """Route ``arrivals`` over ``replicas`` servers made by ``make(index)`` and run them to the end."""
    check_fleet(replicas, route)
    fleet = [Replica(make(i)) for i in range(replicas)]
    fixed = affinity_route(arrivals, replicas, seed) if route == "prefix-affinity" else None
    n = len(arrivals)
    for r, t in enumerate(arrivals.time_s.tolist()):
        for rep in fleet:
            rep.advance(t)
        if route == "round-robin":
            k = r % replicas
        elif fixed is not None:
            k = int(fixed[r])
        else:
            k = int(np.argmin([rep.outstanding(t) for rep in fleet]))
        fleet[k].take(r, t)
        if progress is not None and r % 2000 == 1999:
            progress(sum(rep.finished for rep in fleet), n)
    for rep in fleet:
        rep.advance(np.inf)
    if progress is not None:
        progress(n, n)
    return fleet


def _view(fleet: list[Replica], arrivals: Arrivals, ids: np.ndarray | None = None) -> SimpleNamespace:
    """The per-request arrays of the whole fleet (or of requests ``ids``), as a server holds them."""
    first = fleet[0].server
    out = {name: getattr(first, name).copy() for name in REQUEST_COLUMNS}
    for rep in fleet[1:]:
        mine = np.asarray(rep.ids, dtype=np.int64)
        for name in REQUEST_COLUMNS:
            out[name][mine] = getattr(rep.server, name)[mine]
    pick = slice(None) if ids is None else ids
    servers = [rep.server for rep in fleet]
    return SimpleNamespace(
        arrival=arrivals.time_s[pick],
        prompt=arrivals.prompt[pick],
        output=arrivals.output[pick],
        **{name: values[pick] for name, values in out.items()},
        computed=sum(x.computed for x in servers),
        recomputed=sum(x.recomputed for x in servers),
        blocks=first.blocks,
        block=first.block,
    )


def fleet_result(fleet: list[Replica], arrivals: Arrivals, d: Deployment, s: Scheduler, route: str) -> SimResult:
    """Per request (with its ``replica``), every replica's steps (with ``replica``), the
    summary over all requests pooled and ``summary["replicas"]``: each replica's own."""
    line = {k: sum((rep.line[k] for rep in fleet), []) for k in fleet[0].line}
    line["replica"] = sum(([i] * len(rep.line["start_s"]) for i, rep in enumerate(fleet)), [])
    pooled = result_of(_view(fleet, arrivals), line, d, s)
    where = np.zeros(len(arrivals), dtype=np.int64)
    each = []
    for i, rep in enumerate(fleet):
        ids = np.asarray(rep.ids, dtype=np.int64)
        where[ids] = i
        if ids.size:
            mine = result_of(_view([rep], arrivals, ids), rep.line, d, s).summary
            each.append({"replica": i, **mine})
        else:
            each.append({"replica": i, "requests": 0})
    summary = {**pooled.summary, "route": route, "replicas": each}
    meta = {**pooled.meta, "replicas": len(fleet), "route": route}
    result = SimResult({**pooled.requests, "replica": where}, pooled.timeline, summary, meta)
    return with_spec_summary(result, [rep.server for rep in fleet])


def simulate_replicas(
    d: Deployment,
    arrivals: Arrivals,
    scheduler: Scheduler | None = None,
    *,
    replicas: int = 2,
    route: str = "round-robin",
    seed: int = 0,
    speculation: Speculation | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Serve ``arrivals`` on ``replicas`` copies of ``d`` behind a router (``ROUTES``);
    ``seed`` seeds the prefix-affinity hash. Each replica may speculate (``speculation``)."""
    check_fleet(replicas, route)
    s = scheduler or Scheduler()
    fleet = serve_fleet(maker(d, arrivals, s, speculation), arrivals, replicas, route, seed, progress)
    return fleet_result(fleet, arrivals, d, s, route)
