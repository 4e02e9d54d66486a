"""``ridgeline plan``'s simulations fanned out: simulations per second on 1 and on N local
workers (and on a local Ray cluster when ray is installed), the speed-up, and the bytes one
task and one result take pickled. The tasks are the issue example's first survivors, in the
order the search runs them.

Run: python tests/benchmarks/plan_fanout.py [TASKS] [WORKERS]   (medians of 3 repeats; a shared
machine is noisy: say what else ran)
"""

from __future__ import annotations

import importlib.util
import pickle
import statistics
import sys
import time

import ridgeline as rl
from ridgeline.serving.bounds import Load, Slo, Space, analytic_pass
from ridgeline.serving.fanout import local, ray_cluster
from ridgeline.serving.plan import make_task, portable, run_task

PRICES = {"h100-sxm": 3.90, "h200": 4.29, "a100-80gb": 2.30, "mi300x": 3.45}


def example_tasks(count: int) -> list:
    model = rl.load_model("llama-3-8b")
    space = Space(tuple(rl.load_device(n) for n in PRICES))
    load, slo = Load(20, 512, 256, 10_000), Slo(0.5, 0.05)
    frame = analytic_pass(model, space, load, slo)
    frame["usd_per_hour"] = frame["device"].map(PRICES) * frame["gpus"]
    kept = frame[frame["reason"] == ""].sort_values("usd_per_hour", kind="stable").head(count)
    devices = {d.name: portable(d) for d in space.devices}
    return [make_task(row, model, devices, space, load, slo) for _, row in kept.iterrows()]


def timed(executor, tasks) -> tuple[float, list]:
    """Median seconds of three runs of ``tasks``, each on a fresh ``executor()``."""
    runs, out = [], None
    for _ in range(3):
        with executor() as run_many:
            start = time.perf_counter()
            out = run_many(run_task, tasks)
            runs.append(time.perf_counter() - start)
    return statistics.median(runs), out


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    tasks = example_tasks(count)
    one, base = timed(lambda: local(1), tasks)
    print(f"1 worker: {count} simulations in {one:.1f} s -> {count / one:.2f} simulations/s")
    many, out = timed(lambda: local(workers), tasks)
    print(f"{workers} local workers: {many:.1f} s -> {count / many:.2f} simulations/s, {one / many:.2f}x faster")
    assert out == base, "local workers changed a result"
    if importlib.util.find_spec("ray") is not None:
        on_ray, out = timed(lambda: ray_cluster(workers, None), tasks)
        print(f"local Ray, {workers} CPUs: {on_ray:.1f} s (pool start excluded) -> {one / on_ray:.2f}x faster")
        assert out == base, "ray changed a result"
    sizes = [len(pickle.dumps(t)) for t in tasks], [len(pickle.dumps(r)) for r in base]
    print(f"pickled bytes per task: {max(sizes[0])} (task), {max(sizes[1])} (result)")


if __name__ == "__main__":
    main()
