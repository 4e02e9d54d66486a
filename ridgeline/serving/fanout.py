"""Where the simulations of a search run: this machine's processes, or a Ray cluster.

Simulations are independent: each task carries what it simulates (the model config, the
device's datasheet, the settings, the server's limits and the workload's seed) and returns
a few summary figures, so the same task gives the same answer on any worker. ``run_many``
keeps the order of the tasks, so results never depend on which worker finished first.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ridgeline.errors import InvalidWorkloadError, MissingDependencyError, RidgelineError

EXECUTORS = ("local", "ray")
RunMany = Callable[[Callable[[Any], Any], Sequence[Any]], list]


def _inline(fn, tasks) -> list:
    return [fn(task) for task in tasks]


@contextlib.contextmanager
def local(workers: int) -> Iterator[RunMany]:
    """``workers`` processes of this machine (the standard library's pool); one runs the
    tasks here, in order."""
    if workers == 1:
        yield _inline
        return
    from concurrent.futures import ProcessPoolExecutor  # here: it imports multiprocessing, which `analyze` never needs

    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield lambda fn, tasks: list(pool.map(fn, tasks))


@contextlib.contextmanager
def ray_cluster(workers: int | None, address: str | None) -> Iterator[RunMany]:
    """A Ray cluster: the one at ``address`` (``ray start --head`` prints it; every node
    needs ridgeline installed), or a local one of ``workers`` CPUs started for this search."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "cluster", "--executor ray") from None
    options = {"address": address} if address else {"num_cpus": workers}
    try:
        ray.init(**options, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise RidgelineError(f"cannot reach a Ray cluster at {address or 'this machine'}: {err}") from None
    remote: dict[Any, Any] = {}

    def run_many(fn, tasks) -> list:
        if fn not in remote:
            remote[fn] = ray.remote(num_cpus=1)(fn)
        return ray.get([remote[fn].remote(task) for task in tasks])

    try:
        yield run_many
    finally:
        ray.shutdown()


def check_executor(kind: str, workers: int | None, address: str | None) -> int:
    """The workers a search runs on (``workers``, else this machine's CPUs), after checking
    the options go together."""
    if kind not in EXECUTORS:
        raise InvalidWorkloadError(f"--executor must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if address and kind != "ray":
        raise InvalidWorkloadError("--address names a Ray cluster: add --executor ray")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidWorkloadError(f"--workers must be a whole number >= 1, got {workers!r}")
    return workers or len(os.sched_getaffinity(0))


def executor(kind: str = "local", workers: int | None = None, address: str | None = None):
    """The context that runs a search's simulations (``local`` or ``ray``)."""
    count = check_executor(kind, workers, address)
    return ray_cluster(count, address) if kind == "ray" else local(count)
