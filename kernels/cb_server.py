"""Check the serving simulator against a continuous-batching server nobody here wrote:
Hugging Face transformers' ``ContinuousBatchingManager`` (``init_continuous_batching``).

A small decoder is built from a catalog config with random weights (no hub), requests
arrive as a Poisson trace, and every generated token is stamped by transformers itself
(``record_timestamps``). TTFT = first token stamp - arrival, latency = last token stamp -
arrival, queueing = admission (``lifespan[0]``) - arrival. Two clocks: ``wall`` runs
transformers' background thread in real time, requests submitted at their arrival times;
``cpu`` steps the same scheduler and model runner in this thread on a virtual clock that
advances by each step's CPU seconds, so a machine shared with other jobs does not stretch
the measured times (it only slows the run down). The trace is replayed ``repeats`` times; each request keeps its median. The
simulator then serves the same trace with transformers' scheduler settings (token budget,
requests per batch, the FIFO scheduler's 15 % admission margin, no prefix sharing), with
step costs from the device's calibrated profile when one was measured on this CPU model and
thread count, else the datasheet (``spec``) roofline; both are written, nothing is fitted.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ridgeline.catalog import MODELS_DIR, REPORTS_DIR
from ridgeline.errors import RidgelineError
from ridgeline.model import ModelConfig, load_model
from ridgeline.report import write_atomic
from ridgeline.roofline import spec_ceilings
from ridgeline.simulate import Scheduler, percentiles, simulate
from ridgeline.traces import Arrivals

SERVING_DIR = REPORTS_DIR / "validation" / "serving"  # beside, not among, the kernel snapshots
HF_FIFO_MARGIN = 0.15
CLOCKS = {"cpu": "virtual: each step advances the clock by its CPU seconds (time.thread_time) "
                 "in the stepping thread; transformers' scheduler and model runner, stepped here",
          "wall": "wall: transformers' background generation thread, requests submitted at "
                  "their arrival times, tokens stamped with time.perf_counter"}  # transformers' FIFOScheduler: no new prefill below 15 % free blocks


@dataclass(frozen=True)
class ServerSettings:
    """transformers' ContinuousBatchingConfig fields the comparison fixes (and the simulator
    mirrors): a large cache, so neither side preempts, and no prefix sharing."""

    max_batch_tokens: int = 256     # token budget per step
    max_requests_per_batch: int = 16
    page_size: int = 32             # tokens per KV page
    num_blocks: int = 512           # KV blocks (ample for the trace)


def make_trace(n: int, rate: float, prompt: tuple[int, int], output: tuple[int, int],
               seed: int = 0) -> Arrivals:
    """Poisson arrivals; prompt and output lengths uniform on the closed ranges."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / rate, n))
    return Arrivals(times - times[0], rng.integers(prompt[0], prompt[1] + 1, n),
                    rng.integers(output[0], output[1] + 1, n), f"poisson {rate:g}/s seed {seed}")


def build_model(name: str, layers: int | None, seed: int = 0):
    """A transformers causal LM from the catalog's config.json, random weights, bf16."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = MODELS_DIR / f"{name}.json"
    if not path.is_file():
        raise RidgelineError(f"no catalog config at {path}")
    raw = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}
    if layers:
        raw["num_hidden_layers"] = layers
    torch.manual_seed(seed)
    config = AutoConfig.for_model(**raw)
    return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")


def replay(model, arrivals: Arrivals, server: ServerSettings, seed: int = 0,
           log: Callable[[str], None] = lambda _m: None) -> dict[str, np.ndarray]:
    """Submit each request at its arrival time (from the main thread, while transformers'
    generation thread serves); return per-request seconds from submission."""
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    rng = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    prompts = [rng.integers(0, vocab, int(p)).tolist() for p in arrivals.prompt]
    gen = GenerationConfig(max_new_tokens=int(arrivals.output.max()), do_sample=False,
                           eos_token_id=-1)
    cb = ContinuousBatchingConfig(max_batch_tokens=server.max_batch_tokens,
                                  max_requests_per_batch=server.max_requests_per_batch,
                                  page_size=server.page_size, num_blocks=server.num_blocks,
                                  use_cuda_graph=False, allow_block_sharing=False,
                                  scheduler_type="fifo")
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    manager.start()
    try:
        _collect(manager, [prompts[0][:16]], [2], [0.0])  # warm-up: first-call costs
        return _collect(manager, prompts, [int(n) for n in arrivals.output],
                        arrivals.time_s.tolist(), log)
    finally:
        manager.stop(block=True)


class _Clock:
    """transformers stamps tokens with ``time.perf_counter()`` (looked up at call time in
    its requests module); during a virtual-time replay that module sees this clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def replay_virtual(model, arrivals: Arrivals, server: ServerSettings, seed: int = 0,
                   log: Callable[[str], None] = lambda _m: None) -> dict[str, np.ndarray]:
    """transformers' own scheduler and model runner, stepped in this thread on a virtual
    clock that advances by each step's CPU seconds (``time.thread_time``: scheduling,
    forward pass, sampling and the update), so other processes sharing the core do not
    stretch it. Requests join when the clock passes their arrival (at a step boundary, as
    in the background-thread server); an idle server jumps to the next arrival."""
    from transformers.generation.continuous_batching import requests as hf_requests

    rng = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    prompts = [rng.integers(0, vocab, int(p)).tolist() for p in arrivals.prompt]
    manager = model.init_continuous_batching(generation_config=_generation_config(arrivals),
                                             continuous_batching_config=_cb_config(server))
    processor = manager._create_batch_processor()
    manager.batch_processor = processor
    manager.background_thread_status.clear()
    clock, real_time = _Clock(), hf_requests.time
    hf_requests.time = clock
    try:
        _step_all(manager, processor, [prompts[0][:16]], [2], np.zeros(1), clock)  # warm-up
        clock.now = 0.0
        return _step_all(manager, processor, prompts, [int(n) for n in arrivals.output],
                         arrivals.time_s, clock, log)
    finally:
        hf_requests.time = real_time
        manager.batch_processor = None


def _step_all(manager, processor, prompts: list, outputs: list[int], arrival: np.ndarray,
              clock: _Clock, log: Callable[[str], None] = lambda _m: None) -> dict[str, np.ndarray]:
    n, nxt, results, ids, total = len(prompts), 0, {}, [], 0.0
    while len(results) < n:
        if not processor.has_pending_requests() and manager.input_queue.empty():
            clock.now = max(clock.now, float(arrival[nxt]))
        while nxt < n and arrival[nxt] <= clock.now:
            ids.append(manager.add_request(prompts[nxt], request_id=f"v{nxt}", max_new_tokens=outputs[nxt],
                                           record_timestamps=True, eos_token_id=-1))
            nxt += 1
        start = time.thread_time()
        if processor.prepare_next_batch():
            manager._generation_step()
            busy = time.thread_time() - start
            clock.now += busy  # tokens are stamped at the end of their step
            total += busy
            start = time.thread_time()
            processor.update_batch()
        busy = time.thread_time() - start
        clock.now += busy
        total += busy
        while True:
            out = manager.get_result(timeout=0) if not manager.output_router.output_queue.empty() else None
            if out is None:
                break
            results[out.request_id] = out
            log(f"  {len(results)}/{n} requests done")
    rows = [results[i] for i in ids]
    return {"queue_s": np.array([r.lifespan[0] for r in rows]) - arrival,
            "ttft_s": np.array([r.timestamps[0] for r in rows]) - arrival,
            "latency_s": np.array([r.timestamps[-1] for r in rows]) - arrival,
            "tokens": np.array([len(r.generated_tokens) for r in rows]),
            "cpu_s": np.array(total)}


def _generation_config(arrivals: Arrivals):
    from transformers import GenerationConfig

    return GenerationConfig(max_new_tokens=int(arrivals.output.max()), do_sample=False,
                            eos_token_id=-1)


def _cb_config(server: ServerSettings):
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    return ContinuousBatchingConfig(max_batch_tokens=server.max_batch_tokens,
                                    max_requests_per_batch=server.max_requests_per_batch,
                                    page_size=server.page_size, num_blocks=server.num_blocks,
                                    use_cuda_graph=False, allow_block_sharing=False,
                                    use_async_batching=False, scheduler_type="fifo")


def _collect(manager, prompts: list, outputs: list[int], times: list[float],
             log: Callable[[str], None] = lambda _m: None) -> dict[str, np.ndarray]:
    """Submit, wait for every result, and note the CPU seconds the process got meanwhile
    (on a shared machine, fewer than the wall seconds it was busy)."""
    import resource

    ids = []
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    for i, (prompt, n, at) in enumerate(zip(prompts, outputs, times)):
        wait = start + at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        ids.append(manager.add_request(prompt, request_id=f"r{i}_{start}", max_new_tokens=n,
                                       record_timestamps=True, eos_token_id=-1))
    results = {}
    while len(results) < len(ids):
        out = manager.get_result(timeout=600)
        if out is None:
            raise RidgelineError("transformers' generation thread stopped before every request finished")
        results[out.request_id] = out
        log(f"  {len(results)}/{len(ids)} requests done")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rows = [results[i] for i in ids]
    created = np.array([r.created_time for r in rows])
    return {"cpu_s": np.array(usage.ru_utime + usage.ru_stime - cpu0),
            "wall_s": np.array(time.perf_counter() - start),
            "submitted_s": created - start,
            "queue_s": np.array([r.lifespan[0] for r in rows]) - created,
            "ttft_s": np.array([r.timestamps[0] for r in rows]) - created,
            "latency_s": np.array([r.timestamps[-1] for r in rows]) - created,
            "tokens": np.array([len(r.generated_tokens) for r in rows])}


def matching_scheduler(server: ServerSettings) -> Scheduler:
    return Scheduler(max_batch=server.max_requests_per_batch, token_budget=server.max_batch_tokens,
                     chunked_prefill=True, prefix_hit=0.0, kv_blocks=server.num_blocks,
                     admit_margin=HF_FIFO_MARGIN)


def compare(measured: dict[str, np.ndarray], simulated) -> dict[str, Any]:
    """p50/p90 of TTFT and latency, measured and simulated, and simulated / measured - 1."""
    out = {}
    for key in ("ttft_s", "latency_s", "queue_s"):
        m, s = percentiles(measured[key]), percentiles(simulated.requests[key])
        out[key] = {"measured": m, "simulated": s,
                    "error": {q: s[q] / m[q] - 1 if m[q] else None for q in ("p50", "p90", "mean")}}
    return out


def run_check(model: str = "qwen2-0.5b", *, layers: int | None = None, requests: int = 32,
              rate: float = 1.0, prompt: tuple[int, int] = (32, 192),
              output: tuple[int, int] = (16, 48), repeats: int = 3, seed: int = 0,
              server: ServerSettings = ServerSettings(), clock: str = "cpu", out: Path | None = None,
              log: Callable[[str], None] = lambda _m: None) -> tuple[dict[str, Any], Path]:
    """Replay the trace on transformers ``repeats`` times, simulate it, write the JSON."""
    import torch
    import transformers

    from kernels.e2e import truncate
    from kernels.e2e import calibrated_for, engine_settings, measured_key, provenance, spec_device

    torch.set_num_threads(1)
    arrivals = make_trace(requests, rate, prompt, output, seed)
    config: ModelConfig = truncate(load_model(model), layers)
    hf = build_model(model, layers, seed)
    runs = []
    replay_with = replay if clock == "wall" else replay_virtual
    for i in range(repeats):
        log(f"replay {i + 1}/{repeats} ({clock} clock): {requests} requests at {rate:g}/s on "
            f"transformers {transformers.__version__}")
        runs.append(replay_with(hf, arrivals, server, seed, log))
    measured = {k: np.median([r[k] for r in runs], axis=0) for k in runs[0]}
    spec = spec_device("cpu", None)
    key = measured_key("cpu")
    calibrated, profile, note = calibrated_for(key, spec, None)
    sched = matching_scheduler(server)
    settings = engine_settings("bf16")
    sims = {"spec": simulate(config, spec, arrivals, sched, settings=settings,
                             ceilings=spec_ceilings(spec))}
    if calibrated is not None:
        sims["calibrated"] = simulate(config, spec, arrivals, sched, settings=settings,
                                      ceilings=calibrated)
    meta = provenance("cpu", spec, profile if calibrated is not None else None)
    meta.update(kind="serving", server=f"transformers {transformers.__version__} "
                "ContinuousBatchingManager (fifo scheduler, sdpa attention, bf16)",
                clock=CLOCKS[clock], profile_note=note,
                load_note="measured on a 2-core machine shared with other developers' jobs "
                f"(load average {meta.get('loadavg')}): per-request medians over the repeats")
    result = {
        "meta": meta,
        "model": config.name, "layers": config.num_layers,
        "trace": {"requests": requests, "rate": rate, "prompt": list(prompt),
                  "output": list(output), "seed": seed, "arrival_s": arrivals.time_s.tolist(),
                  "prompt_tokens": arrivals.prompt.tolist(), "output_tokens": arrivals.output.tolist()},
        "server": asdict(server), "scheduler": asdict(sched), "repeats": repeats,
        "measured": {k: v.tolist() for k, v in measured.items()},
        "measured_runs": [{k: v.tolist() for k, v in r.items()} for r in runs],
        "simulated": {mode: {k: sim.requests[k].tolist() for k in ("queue_s", "ttft_s", "latency_s")}
                      for mode, sim in sims.items()},
        "comparison": {mode: compare(measured, sim) for mode, sim in sims.items()},
        # the work on one side and the other, whatever the load: CPU seconds transformers'
        # process used over a replay (median), and the simulated steps' seconds summed
        "busy": {"measured_cpu_s": float(measured["cpu_s"]),
                 **{f"simulated_{mode}_s": float(np.sum(sim.timeline["step_s"]))
                    for mode, sim in sims.items()}},
    }
    stem = f"serving-{key}-{config.name}-{rate:g}rps" + ("-wall" if clock == "wall" else "")
    path = out or SERVING_DIR / f"{stem}-{meta['date'][:10]}.json"
    write_atomic(path, json.dumps(result, indent=1, allow_nan=False, default=float) + "\n")
    return result, path


def resimulate(path: Path) -> dict[str, Any]:
    """Measure nothing: simulate a recorded run's trace again with today's engine (the spec
    host as recorded: its bandwidth from the file; the profile the run used) and compare
    with its measurements. Returns the result; never writes."""
    from kernels.e2e import truncate
    from kernels.e2e import calibrated_for, engine_settings, recorded_spec

    if not Path(path).is_file():
        raise RidgelineError(f"no serving run at {path}")
    data = json.loads(Path(path).read_text())
    meta, trace = data["meta"], data["trace"]
    arrivals = Arrivals(np.asarray(trace["arrival_s"]), np.asarray(trace["prompt_tokens"]),
                        np.asarray(trace["output_tokens"]), str(path))
    spec = recorded_spec(meta, None)
    calibrated, _, _ = calibrated_for(meta["device_key"], spec, None)  # today's committed profile
    config = truncate(load_model(data["model"]), data["layers"])
    sched = matching_scheduler(ServerSettings(**data["server"]))
    roofs = {"spec": spec_ceilings(spec), **({"calibrated": calibrated} if calibrated else {})}
    sims = {mode: simulate(config, spec, arrivals, sched, settings=engine_settings("bf16"),
                           ceilings=r) for mode, r in roofs.items()}
    measured = {k: np.asarray(v) for k, v in data["measured"].items()}
    busy = {"measured_cpu_s": float(measured["cpu_s"])} if "cpu_s" in measured else {}
    return {"comparison": {mode: compare(measured, sim) for mode, sim in sims.items()},
            "busy": {**busy, **{f"simulated_{m}_s": float(np.sum(sim.timeline["step_s"]))
                                for m, sim in sims.items()}}}


def report_lines(result: dict[str, Any]) -> list[str]:
    busy = result.get("busy", {})
    lines = [f"transformers used {busy.get('measured_cpu_s', float('nan')):.1f} CPU s per replay; simulated steps sum to "
             + ", ".join(f"{v:.1f} s ({k[10:-2]})" for k, v in busy.items() if k.startswith("simulated_"))
             ] if busy else []
    for mode, table in result["comparison"].items():
        for key in ("ttft_s", "latency_s"):
            m, s, e = (table[key][x] for x in ("measured", "simulated", "error"))
            lines.append(f"{mode:10s} {key:9s} p50 measured {m['p50']:.3f} s simulated "
                         f"{s['p50']:.3f} s ({e['p50']:+.0%}); p90 measured {m['p90']:.3f} s "
                         f"simulated {s['p90']:.3f} s ({e['p90']:+.0%})")
    return lines
