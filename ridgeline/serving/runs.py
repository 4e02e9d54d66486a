"""One ``ridgeline simulate`` run: what serves the arrivals (one server, replicas behind a
router, disaggregated pools, decodes speculating with a draft model), and the run itself:
the arrivals at a rate, the highest rate meeting the SLOs, goodput and intervals."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ridgeline.engine.deployment import Deployment
from ridgeline.engine.model import ModelConfig
from ridgeline.errors import InvalidOptionError, InvalidSettingError
from ridgeline.serving import simulator
from ridgeline.serving.arrivals import Arrivals, check_requests, poisson, shared_prefix
from ridgeline.serving.disagg import KvLink, Pool, parse_link, simulate_disaggregated
from ridgeline.serving.intervals import SURE, serving_intervals, step_factors
from ridgeline.serving.router import simulate_replicas
from ridgeline.serving.speculative import Speculation, simulate_speculative


def fleet_pools(pools: dict[str, tuple], kv_link: str | None, d: Deployment, pool) -> dict[str, Any]:
    """``simulate``'s disaggregation options (``pools``: prefill and decode, each its count and
    device) as :func:`fleet_server`'s keywords; each pool's device resolved by ``pool``."""
    counts = tuple(n for n, _ in pools.values())
    if counts == (None, None):
        if any(device is not None for _, device in pools.values()) or kv_link is not None:
            raise InvalidOptionError(
                "--prefill-hardware, --decode-hardware and --kv-link need --prefill-replicas and --decode-replicas"
            )
        return {}
    if None in counts:
        raise InvalidOptionError("disaggregation needs both --prefill-replicas and --decode-replicas")
    keys: dict[str, Any] = {name: (n, d if device is None else pool(device)) for name, (n, device) in pools.items()}
    keys["kv_link"] = parse_link(kv_link) if kv_link is not None else None
    return keys


def fleet_server(
    d: Deployment,
    scheduler: simulator.Scheduler,
    *,
    replicas: int = 1,
    route: str = "round-robin",
    seed: int = 0,
    draft: ModelConfig | None = None,
    draft_tokens: int = 4,
    acceptance: float = 0.7,
    prefill: tuple[int, Deployment] | None = None,
    decode: tuple[int, Deployment] | None = None,
    kv_link: KvLink | None = None,
) -> Callable[..., simulator.SimResult] | None:
    """What serves the arrivals (``fn(arrivals, progress=None)``) when ``simulate`` is given
    fleet options: ``replicas`` of ``d`` behind a ``route`` router; decodes speculating with
    a ``draft`` model (on each pool's device); or ``prefill`` and ``decode`` pools (count,
    deployment) joined by ``kv_link``. None for one plain server."""
    spec = Speculation(d.with_model(draft), draft_tokens, acceptance, seed) if draft is not None else None
    if prefill is None and decode is None:
        if replicas == 1 and spec is None:
            return None
        if replicas == 1:
            return lambda arrivals, progress=None: simulate_speculative(d, arrivals, spec, scheduler, progress=progress)
        keys = {"replicas": replicas, "route": route, "seed": seed, "speculation": spec}
        return lambda arrivals, progress=None: simulate_replicas(d, arrivals, scheduler, **keys, progress=progress)
    if replicas != 1:
        raise InvalidSettingError(
            "replicas", "with disaggregation each pool has its own count: --prefill-replicas and --decode-replicas"
        )
    pools = [Pool(dep, n, scheduler) for n, dep in (prefill or (1, d), decode or (1, d))]
    keys = {"link": kv_link, "route": route, "seed": seed, "speculation": spec}
    return lambda arrivals, progress=None: simulate_disaggregated(*pools, arrivals, **keys, progress=progress)


@contextlib.contextmanager
def no_progress(_total: int):
    yield None


def serve_arrivals(
    d: Deployment,
    scheduler: simulator.Scheduler,
    base: Arrivals | None,
    shared: tuple[int, int] | None,
    /,
    *,
    rate: float = 1.0,
    requests: int = 1000,
    prompt: int = 512,
    output_tokens: int = 128,
    seed: int = 0,
    search: bool = False,
    ttft_slo: float | None = None,
    tpot_slo: float | None = None,
    percentile: float = 99.0,
    progress=no_progress,
    fleet: Callable[..., simulator.SimResult] | None = None,
    intervals: bool = True,
    runs: Callable[..., simulator.SimResult] | None = None,
) -> dict[str, Any]:
    """Serve ``base`` (a trace's requests, at their own rate) or Poisson arrivals (``rate``,
    ``requests``, ``prompt``, ``output_tokens``, ``seed``), their prompts sharing system
    prompts where ``shared`` (tokens, fanout) says; with ``search``, first find the highest
    rate meeting the SLOs (from ``rate``, or the trace's own) and serve at it (the SLOs
    checked by the caller: the search needs one). ``progress(total)`` yields a step
    callback. ``fleet`` (:func:`fleet_server`) serves the arrivals instead of one server of
    ``d``. ``runs`` (:func:`~ridgeline.serving.simulator.deployment_runs` of ``d`` under
    ``scheduler``) serves instead of a runner of this call's own: calls sharing one share its
    table of step costs (a page's rates). Returns the result, its goodput, the search and, with
    ``intervals``, the summary's intervals (:mod:`ridgeline.serving.intervals`; the search
    adds ``max_rate_prob90``; one server only: a fleet's are not computed, and say so)."""
    check_requests(requests if base is None else len(base))  # before the progress bar starts
    slo_given = ttft_slo is not None or tpot_slo is not None

    def arrivals(at: float):
        if base is not None:
            return base.scaled(at / base.rate)
        made = poisson(at, requests, prompt, output_tokens, seed)
        return shared_prefix(made, *shared, d.plan.kv_block) if shared else made

    served = getattr(runs, "serves", (None, None))
    if runs is not None and (served[0] is not d or served[1] is not scheduler):
        raise InvalidSettingError(
            "runs", "runs must be deployment_runs(d, scheduler) of this call's own d and scheduler"
        )
    runs = runs or simulator.deployment_runs(d, scheduler)

    def serve(requests: Arrivals, tick=None):
        if fleet is not None:
            return fleet(requests, progress=tick)
        return runs(requests, progress=tick)

    def run(at: float, scale: tuple[float, float] = (1.0, 1.0)):
        if fleet is not None:
            return serve(arrivals(at))
        return runs(arrivals(at), step_scale=scale)

    found = None
    start = base.rate if base is not None else rate
    with progress(requests if base is None else len(base)) as tick:
        if search:
            found = simulator.max_rate(run, ttft_slo, tpot_slo, percentile, start=start)
        at = found["max_rate"] if found and found["max_rate"] else rate
        first = base if base is not None and not search else arrivals(at)
        result = serve(first, tick)
    if base is not None:
        result = replace(result, meta={**result.meta, "trace": base.about})
    good = simulator.goodput(result, ttft_slo, tpot_slo) if slo_given else None  # no target: no goodput
    out = {"result": result, "goodput": good, "search": found}
    if intervals and fleet is not None:
        out["intervals"] = {"none": "not computed for replicas, pools or speculative steps (one server only)"}
    elif intervals:
        again = lambda scale: runs(first, step_scale=scale)  # noqa: E731
        out["intervals"] = serving_intervals(d, first, scheduler, result, again)
        if found is not None:
            found["max_rate_prob90"] = sure_rate(
                d, scheduler, first, result, run, (ttft_slo, tpot_slo, percentile), start
            )
    return out


def sure_rate(d: Deployment, scheduler, served, result, run, slos: tuple, start: float) -> float | None:
    """The highest rate meeting the SLOs with probability >= 0.9: the search again with every
    step at the 90 % step factor of the served run (meeting them is monotone in the steps'
    costs), from the same ``start`` as the point's search; None without a measured interval."""
    if d.intervals is None:
        return None
    slow = step_factors(d, served, result, scheduler)[SURE]
    return simulator.max_rate(lambda at: run(at, slow), *slos, start=start)["max_rate"]
