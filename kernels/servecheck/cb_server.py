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
requests per batch, the FIFO scheduler's 15 % admission margin, no prefix sharing) and its
sdpa path's attention (``batch_attention`` "gather": ``simulate.gather_ops``), with
step costs from the device's calibrated profile when one was measured on this CPU model and
thread count, else the datasheet (``spec``) roofline; both are written, nothing is fitted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kernels.e2e.waterfall import serving_waterfall, waterfall_lines, without_launch
from ridgeline.api import simulate
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import spec_ceilings
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import MODELS_DIR, REPORTS_DIR
from ridgeline.io.files import write_atomic
from ridgeline.io.resolve import calibrated_for, load_model, recorded_profile, recorded_spec
from ridgeline.io.traces import CHECK_OUTPUT_RANGE, CHECK_PROMPT_RANGE
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.simulator import Scheduler, percentiles

SERVING_DIR = REPORTS_DIR / "validation" / "serving"  # beside, not among, the kernel snapshots
HF_FIFO_MARGIN = 0.15
# how the step breakdown prices recorded steps' attention: simulate's batch-attention
# policies, and none (the forward without its attention)
ATTENTION_TAGS = ("varlen", "masked", "gather", "none")
CLOCKS = {
    "cpu": "virtual: each step advances the clock by its CPU seconds (time.thread_time) "
    "in the stepping thread; transformers' scheduler and model runner, stepped here",
    "wall": "wall: transformers' background generation thread, requests submitted at "
    "their arrival times, tokens stamped with time.perf_counter",
    "device": "virtual: each step advances the clock by its wall seconds with the GPU "
    "synchronised at the step's phase boundaries (time.perf_counter; a GPU "
    "machine to itself), transformers' scheduler and model runner stepped here; "
    "attention_s is the host's seconds in the attention function, unsynchronised",
}  # transformers' FIFOScheduler: no new prefill below 15 % free blocks


@dataclass(frozen=True)
class ServerSettings:
    """transformers' ContinuousBatchingConfig fields the comparison fixes (and the simulator
    mirrors): a large cache, so neither side preempts, and no prefix sharing."""

    max_batch_tokens: int = 256  # token budget per step
    max_requests_per_batch: int = 16
    page_size: int = 32  # tokens per KV page
    num_blocks: int = 512  # KV blocks (ample for the trace)


def make_trace(n: int, rate: float, prompt: tuple[int, int], output: tuple[int, int], seed: int = 0) -> Arrivals:
    """Poisson arrivals; prompt and output lengths uniform on the closed ranges."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / rate, n))
    return Arrivals(
        times - times[0],
        rng.integers(prompt[0], prompt[1] + 1, n),
        rng.integers(output[0], output[1] + 1, n),
        f"poisson {rate:g}/s seed {seed}",
    )


def build_model(name: str, layers: int | None, seed: int = 0, dtype: str = "bf16", device: str = "cpu"):
    """A transformers causal LM from the catalog's config.json, random weights, in ``dtype``
    (bf16; fp32 on a CPU without bf16 kernels), on ``device``."""
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
    from kernels.bench.bench import TORCH_DTYPES

    return AutoModelForCausalLM.from_config(config, dtype=TORCH_DTYPES[dtype], attn_implementation="sdpa").to(device)


def replay(
    model, arrivals: Arrivals, server: ServerSettings, seed: int = 0, log: Callable[[str], None] = lambda _m: None
) -> dict[str, np.ndarray]:
    """Submit each request at its arrival time (from the main thread, while transformers'
    generation thread serves); return per-request seconds from submission."""
    from transformers import GenerationConfig

    rng = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    prompts = [rng.integers(0, vocab, int(p)).tolist() for p in arrivals.prompt]
    gen = GenerationConfig(max_new_tokens=int(arrivals.output.max()), do_sample=False, eos_token_id=-1)
    cb = _cb_config(server)
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    manager.start()
    try:
        _collect(manager, [prompts[0][:16]], [2], [0.0])  # warm-up: first-call costs
        return _collect(manager, prompts, [int(n) for n in arrivals.output], arrivals.time_s.tolist(), log)
    finally:
        manager.stop(block=True)


class _Clock:
    """transformers stamps tokens with ``time.perf_counter()`` (looked up at call time in
    its requests module); during a virtual-time replay that module sees this clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def replay_virtual(
    model,
    arrivals: Arrivals,
    server: ServerSettings,
    seed: int = 0,
    log: Callable[[str], None] = lambda _m: None,
    clock: str = "cpu",
) -> dict[str, Any]:
    """transformers' own scheduler and model runner, stepped in this thread on a virtual
    clock that advances by each step's CPU seconds (``time.thread_time``: scheduling,
    forward pass, sampling and the update), so other processes sharing the core do not
    stretch it. Requests join when the clock passes their arrival (at a step boundary, as
    in the background-thread server); an idle server jumps to the next arrival. ``clock``
    "device" (a GPU): each step's wall seconds, the GPU synchronised. Besides the
    per-request arrays, ``steps`` holds every step's CPU seconds split by phase and its mix
    (:class:`StepTimer`)."""
    from transformers.generation.continuous_batching import requests as hf_requests

    rng = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    prompts = [rng.integers(0, vocab, int(p)).tolist() for p in arrivals.prompt]
    manager = model.init_continuous_batching(
        generation_config=_generation_config(arrivals), continuous_batching_config=_cb_config(server)
    )
    processor = manager._create_batch_processor()
    manager.batch_processor = processor
    manager.background_thread_status.clear()
    clock, real_time = _Clock(), hf_requests.time
    hf_requests.time = clock
    try:
        with StepTimer(model, clock) as timer:
            _step_all(manager, processor, [prompts[0][:16]], [2], np.zeros(1), clock, timer)  # warm-up
            clock.now = 0.0
            timer.reset()
            out = _step_all(
                manager, processor, prompts, [int(n) for n in arrivals.output], arrivals.time_s, clock, timer, log
            )
        return {**out, "steps": timer.steps}
    finally:
        hf_requests.time = real_time
        manager.batch_processor = None


class StepTimer:
    """CPU seconds (``time.thread_time``) of each transformers step, split by phase:
    ``prepare_s`` (scheduling and batch tensors: ``prepare_next_batch``), ``forward_s`` (the
    model's forward, timed by hooks on the model: the torch work the engine predicts, with
    the paged cache's reads and writes inside attention), ``attention_s`` (the part of the
    forward inside the attention function: cache update, GQA repeat, SDPA), ``sample_s``
    (the rest of the generation step: logits to fp32, argmax, output copy) and ``update_s``
    (``update_batch`` and delivering results). ``step_s`` is the whole step on the same
    clock. The step's mix: ``query`` and ``past`` (tokens computed and tokens already
    cached, one entry per request in the batch, in batch order)."""

    PHASES = ("prepare_s", "forward_s", "attention_s", "sample_s", "update_s", "step_s")

    def __init__(self, model, clock: str = "cpu") -> None:
        self.model = model
        self.now = self.host = time.thread_time
        if clock == "device":  # a GPU's work ends when it is synchronised
            import torch

            self.host = time.perf_counter

            def now() -> float:
                torch.cuda.synchronize()
                return time.perf_counter()

            self.now = now
        self.reset()

    def reset(self) -> None:
        self.steps: dict[str, list] = {k: [] for k in (*self.PHASES, "query", "past")}
        self._forward = self._attention = 0.0

    def __enter__(self) -> StepTimer:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        impl = self.model.config._attn_implementation
        inner = ALL_ATTENTION_FUNCTIONS[impl]

        def timed_attention(*args, **kwargs):
            start = self.host()
            try:
                return inner(*args, **kwargs)
            finally:
                self._attention += self.host() - start

        def before(_module, _args, _kwargs):
            self._forward_start = self.now()

        def after(_module, _args, _output):
            self._forward += self.now() - self._forward_start

        self._restore = (
            ALL_ATTENTION_FUNCTIONS,
            impl,
            impl in ALL_ATTENTION_FUNCTIONS._local_mapping,
            ALL_ATTENTION_FUNCTIONS._local_mapping.get(impl),
        )
        ALL_ATTENTION_FUNCTIONS[impl] = timed_attention
        self._hooks = [
            self.model.register_forward_pre_hook(before, with_kwargs=True),
            self.model.register_forward_hook(after),
        ]
        return self

    def __exit__(self, *_exc) -> None:
        table, impl, had, previous = self._restore
        if had:
            table._local_mapping[impl] = previous
        else:
            table._local_mapping.pop(impl, None)
        for hook in self._hooks:
            hook.remove()

    def step(self, manager, processor, clock: _Clock) -> float:
        """Run one step if a batch is ready, record it, and advance ``clock`` by its CPU
        seconds: past the generation before ``update_batch`` stamps the tokens (a token
        is out at the end of its forward), then past the update. Returns the seconds."""
        t0 = self.now()
        if not processor.prepare_next_batch():
            busy = self.now() - t0
            clock.now += busy
            return busy
        t1 = self.now()
        batch = processor.inputs_and_outputs.requests_in_batch
        query = [int(f.query_length) for f in batch]
        past = [int(f.state.position_offset) - q for f, q in zip(batch, query)]
        self._forward = self._attention = 0.0
        manager._generation_step()
        t2 = self.now()
        clock.now += t2 - t0
        processor.update_batch()
        t3 = self.now()
        clock.now += t3 - t2
        for key, value in (
            ("prepare_s", t1 - t0),
            ("forward_s", self._forward),
            ("attention_s", self._attention),
            ("sample_s", t2 - t1 - self._forward),
            ("update_s", t3 - t2),
            ("step_s", t3 - t0),
            ("query", query),
            ("past", past),
        ):
            self.steps[key].append(value)
        return t3 - t0


def _step_all(
    manager,
    processor,
    prompts: list,
    outputs: list[int],
    arrival: np.ndarray,
    clock: _Clock,
    timer: StepTimer,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, np.ndarray]:
    n, nxt, results, ids, total = len(prompts), 0, {}, [], 0.0
    while len(results) < n:
        if not processor.has_pending_requests() and manager.input_queue.empty():
            clock.now = max(clock.now, float(arrival[nxt]))
        while nxt < n and arrival[nxt] <= clock.now:
            ids.append(
                manager.add_request(
                    prompts[nxt],
                    request_id=f"v{nxt}",
                    max_new_tokens=outputs[nxt],
                    record_timestamps=True,
                    eos_token_id=-1,
                )
            )
            nxt += 1
        total += timer.step(manager, processor, clock)
        while True:
            out = manager.get_result(timeout=0) if not manager.output_router.output_queue.empty() else None
            if out is None:
                break
            results[out.request_id] = out
            log(f"  {len(results)}/{n} requests done")
    rows = [results[i] for i in ids]
    return {
        "queue_s": np.array([r.lifespan[0] for r in rows]) - arrival,
        "ttft_s": np.array([r.timestamps[0] for r in rows]) - arrival,
        "latency_s": np.array([r.timestamps[-1] for r in rows]) - arrival,
        "tokens": np.array([len(r.generated_tokens) for r in rows]),
        "cpu_s": np.array(total),
    }


def _generation_config(arrivals: Arrivals):
    from transformers import GenerationConfig

    return GenerationConfig(max_new_tokens=int(arrivals.output.max()), do_sample=False, eos_token_id=-1)


def _cb_config(server: ServerSettings):
    """transformers' server settings: the ones this transformers knows (5.17, on the GPU
    machine, has no ``page_size`` or ``use_async_batching``; its defaults stand there)."""
    import inspect

    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    wanted = dict(
        max_batch_tokens=server.max_batch_tokens,
        max_requests_per_batch=server.max_requests_per_batch,
        page_size=server.page_size,
        num_blocks=server.num_blocks,
        use_cuda_graph=False,
        allow_block_sharing=False,
        use_async_batching=False,
        scheduler_type="fifo",
    )
    known = inspect.signature(ContinuousBatchingConfig).parameters
    return ContinuousBatchingConfig(**{k: v for k, v in wanted.items() if k in known})


def _collect(
    manager, prompts: list, outputs: list[int], times: list[float], log: Callable[[str], None] = lambda _m: None
) -> dict[str, np.ndarray]:
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
        ids.append(
            manager.add_request(
                prompt, request_id=f"r{i}_{start}", max_new_tokens=n, record_timestamps=True, eos_token_id=-1
            )
        )
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
    return {
        "cpu_s": np.array(usage.ru_utime + usage.ru_stime - cpu0),
        "wall_s": np.array(time.perf_counter() - start),
        "submitted_s": created - start,
        "queue_s": np.array([r.lifespan[0] for r in rows]) - created,
        "ttft_s": np.array([r.timestamps[0] for r in rows]) - created,
        "latency_s": np.array([r.timestamps[-1] for r in rows]) - created,
        "tokens": np.array([len(r.generated_tokens) for r in rows]),
    }


def matching_scheduler(server: ServerSettings) -> Scheduler:
    """transformers' policy: its budget and batch, the FIFO margin, no prefix sharing, and
    its sdpa path's attention as it runs it (``simulate.gather_ops``): the cache written and
    read back by index, K/V repeated for GQA, one masked SDPA over the whole step."""
    return Scheduler(
        max_batch=server.max_requests_per_batch,
        token_budget=server.max_batch_tokens,
        chunked_prefill=True,
        prefix_hit=0.0,
        kv_blocks=server.num_blocks,
        admit_margin=HF_FIFO_MARGIN,
        batch_attention="gather",
        policy="transformers",
    )


def recorded_scheduler(data: dict[str, Any]) -> Scheduler:
    """The scheduler a recorded run was simulated with (runs from before a field existed
    get its default, as they were simulated; before the policy was recorded, the loop the
    ``transformers`` policy runs), else today's match of its server."""
    if "scheduler" not in data:
        return matching_scheduler(ServerSettings(**data["server"]))
    known = Scheduler.__dataclass_fields__
    return Scheduler(**{"policy": "transformers"} | {k: v for k, v in data["scheduler"].items() if k in known})


def compare(measured: dict[str, np.ndarray], simulated) -> dict[str, Any]:
    """p50/p90 of TTFT and latency, measured and simulated, and simulated / measured - 1."""
    out = {}
    for key in ("ttft_s", "latency_s", "queue_s"):
        m, s = percentiles(measured[key]), percentiles(simulated.requests[key])
        out[key] = {
            "measured": m,
            "simulated": s,
            "error": {q: s[q] / m[q] - 1 if m[q] else None for q in ("p50", "p90", "mean")},
        }
    return out


def mode_roofs(spec, calibrated) -> dict[str, Any]:
    """The ceilings per roofline mode: the datasheet's, and the profile's when there is one."""
    return {"spec": spec_ceilings(spec), **({"calibrated": calibrated} if calibrated else {})}


def mode_deployments(config: ModelConfig, spec, calibrated, dtype: str, execution: str) -> dict[str, Any]:
    """The resolved deployment per roofline mode (the step breakdown prices recorded steps with it)."""
    from kernels.e2e.e2e import engine_settings
    from ridgeline.io.resolve import resolve

    return {
        m: resolve(config, spec, settings=engine_settings(dtype, execution), ceilings=r)
        for m, r in mode_roofs(spec, calibrated).items()
    }


def simulations(
    config: ModelConfig,
    spec,
    calibrated,
    arrivals: Arrivals,
    sched: Scheduler,
    overhead: dict[str, float] | None,
    dtype: str = "bf16",
    execution: str = "auto",
) -> dict[str, Any]:
    """The trace simulated per roofline mode, and again with the measured host terms."""
    from kernels.e2e.e2e import engine_settings

    roofs = mode_roofs(spec, calibrated)
    scheds = {"": sched}
    if overhead:
        scheds["+overhead"] = with_host(sched, overhead)
    return {
        mode + tag: simulate(config, spec, arrivals, s, settings=engine_settings(dtype, execution), ceilings=r)
        for mode, r in roofs.items()
        for tag, s in scheds.items()
    }


def with_host(sched: Scheduler, host: dict[str, float] | None) -> Scheduler:
    """``sched`` with the host seconds per step and per request of ``host`` (None: as it is)."""
    if not host:
        return sched
    return replace(
        sched,
        step_overhead_s=host["step_overhead_s"],
        request_overhead_s=host["request_overhead_s"],
        host_overlap=bool(host.get("host_overlap", False)),
    )


def step_breakdown(runs: list[dict[str, list]], deployments: dict[str, Any], server: ServerSettings) -> dict[str, Any]:
    """Recorded steps, summed per replay (median over replays): the whole step, the forward
    (and the attention inside it), the rest; and each roofline mode's engine seconds for
    the same steps' mixes, for steps that only decode and steps with a prompt chunk."""
    rows = []
    for steps in runs:
        b = breakdown(steps)
        row = {"steps": float(len(b["step_s"]))}
        predicted = {
            (mode, tag): predicted_steps(d, steps, server, tag)
            for mode, d in deployments.items()
            for tag in ATTENTION_TAGS
        }
        for part, mask in (
            ("all", np.ones_like(b["decode_only"])),
            ("decode", b["decode_only"]),
            ("prefill", ~b["decode_only"]),
        ):
            row[f"{part}_steps"] = float(mask.sum())
            for key in ("step_s", "forward_s", "attention_s", "other_s", "tokens", "requests"):
                row[f"{part}_{key}"] = float(b[key][mask].sum())
            for (mode, tag), seconds in predicted.items():
                row[f"{part}_predicted_{mode}_{tag}_s"] = float(seconds[mask].sum())
        for key in ("prepare_s", "sample_s", "update_s"):
            row[key] = float(np.sum(steps[key]))
        rows.append(row)
    return {k: float(np.median([r[k] for r in rows])) for k in rows[0]}


def run_check(
    model: str = "qwen2-0.5b",
    *,
    layers: int | None = None,
    requests: int = 32,
    rate: float = 1.0,
    prompt: tuple[int, int] = CHECK_PROMPT_RANGE,
    output: tuple[int, int] = CHECK_OUTPUT_RANGE,
    repeats: int = 3,
    seed: int = 0,
    server: ServerSettings = ServerSettings(),
    clock: str = "cpu",
    out: Path | None = None,
    overhead: dict[str, float] | None = None,
    dtype: str = "bf16",
    profile: Path | None = None,
    device: str = "cpu",
    log: Callable[[str], None] = lambda _m: None,
) -> tuple[dict[str, Any], Path]:
    """Replay the trace on transformers ``repeats`` times, simulate it (and with the host
    ``overhead`` terms, when given: ``overhead_from`` a run on another trace), write the JSON.
    Calibrated step costs from ``profile``, else this device's own profile. On a GPU
    (``device`` cuda) transformers runs eager (no CUDA graphs), on the ``device`` clock, and
    is simulated in eager execution."""
    import os

    import torch
    import transformers

    from kernels.bench.provenance import datasheet_device
    from kernels.bench.suite import setup
    from kernels.calibrate.state import measure_state, state_record
    from kernels.e2e.e2e import measured_key, provenance, truncate
    from ridgeline.io.profile import load_profile

    gpu = device.startswith("cuda")
    if not gpu:
        torch.set_num_threads(1)
    spec = datasheet_device(device)
    key = measured_key(device)
    calibrated, profile, note = calibrated_for(key, spec, profile)
    arrivals = make_trace(requests, rate, prompt, output, seed)
    config: ModelConfig = truncate(load_model(model), layers)
    hf = build_model(model, layers, seed, dtype, device)
    runs, steps = [], []
    execution = "eager" if gpu else "auto"
    prof = load_profile(profile) if calibrated is not None and not gpu else None
    cfg = setup("cpu", 1) if prof else None

    def state():  # the profile's roofs again, before and after the replays (kernels.calibrate.state)
        return measure_state(cfg, prof, "cpu") if prof else {}

    load, states = [os.getloadavg()], [state()]
    for i in range(repeats):
        log(
            f"replay {i + 1}/{repeats} ({clock} clock): {requests} requests at {rate:g}/s on "
            f"transformers {transformers.__version__}"
        )
        run = (
            replay(hf, arrivals, server, seed, log)
            if clock == "wall"
            else replay_virtual(hf, arrivals, server, seed, log, clock)
        )
        if "steps" in run:
            steps.append(run.pop("steps"))
        runs.append(run)
        load.append(os.getloadavg())
    states.append(state())
    measured = {k: np.median([r[k] for r in runs], axis=0) for k in runs[0]}
    sched = matching_scheduler(server)
    sims = simulations(config, spec, calibrated, arrivals, sched, overhead, dtype, execution)
    meta = provenance(device, spec, profile if calibrated is not None else None)
    meta.update(
        kind="serving",
        server=f"transformers {transformers.__version__} "
        f"ContinuousBatchingManager (fifo scheduler, sdpa attention, {dtype}"
        + (", eager: no CUDA graphs)" if gpu else ")"),
        clock=CLOCKS[clock],
        profile_note=note,
        loadavg_per_replay=load,
        machine_state=state_record(prof, states) if prof else None,
        load_note=(
            "measured on a GPU machine to itself"
            if gpu
            else "measured on a 2-core machine shared with other developers' jobs"
        )
        + f" (load average {meta.get('loadavg')}): per-request medians over the repeats",
    )
    result = {
        "meta": meta,
        "model": config.name,
        "layers": config.num_layers,
        "dtype": dtype,
        "trace": {
            "requests": requests,
            "rate": rate,
            "prompt": list(prompt),
            "output": list(output),
            "seed": seed,
            "arrival_s": arrivals.time_s.tolist(),
            "prompt_tokens": arrivals.prompt.tolist(),
            "output_tokens": arrivals.output.tolist(),
        },
        "server": asdict(server),
        "scheduler": asdict(sched),
        "repeats": repeats,
        "execution": execution,
        "overhead": overhead,
        "measured": {k: v.tolist() for k, v in measured.items()},
        "measured_runs": [{k: v.tolist() for k, v in r.items()} for r in runs],
        "simulated": {
            mode: {k: sim.requests[k].tolist() for k in ("queue_s", "ttft_s", "latency_s")}
            for mode, sim in sims.items()
        },
        "comparison": {mode: compare(measured, sim) for mode, sim in sims.items()},
        # the work on one side and the other, whatever the load: CPU seconds transformers'
        # process used over a replay (median), and the simulated steps' seconds summed
        "busy": {
            "measured_cpu_s": float(measured["cpu_s"]),
            **{f"simulated_{mode}_s": float(np.sum(sim.timeline["step_s"])) for mode, sim in sims.items()},
        },
    }
    if steps:
        deployments = mode_deployments(config, spec, calibrated, dtype, execution)
        result["step_breakdown"] = step_breakdown(steps, deployments, server)
        result["measured_steps"] = steps
    result["waterfall"] = run_waterfall(result, Served(config, spec, calibrated, arrivals, sched, dtype, execution))
    stem = (
        f"serving-{key}-{config.name}"
        + ("" if dtype == "bf16" else f"-{dtype}")
        + f"-{rate:g}rps"
        + (f"-seed{seed}" if seed else "")
        + ("-wall" if clock == "wall" else "")
    )
    path = out or SERVING_DIR / f"{stem}-{meta['date'][:10]}.json"
    write_atomic(path, json.dumps(result, indent=1, allow_nan=False, default=float) + "\n")
    return result, path


def resimulate(
    path: Path,
    overhead: dict[str, float] | None = None,
    batch_attention: str | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Measure nothing: simulate a recorded run's trace again with today's engine (the spec
    host as recorded: its bandwidth from the file; ``profile``, else the one the run used) and compare
    with its measurements; with ``overhead`` (or the terms the run recorded), also with the
    host terms; with ``batch_attention``, under that policy instead of the recorded one
    (``scheduler`` in the result says which). Returns the result; never writes."""
    data = _load_run(path)
    served = served_of(data, path, profile, batch_attention)
    config, spec, calibrated, sched = served.config, served.spec, served.calibrated, served.sched
    dtype, execution = served.dtype, served.execution
    server = ServerSettings(**data["server"])
    sims = simulations(
        config, spec, calibrated, served.arrivals, sched, overhead or data.get("overhead"), dtype, execution
    )
    measured = {k: np.asarray(v) for k, v in data["measured"].items()}
    busy = {"measured_cpu_s": float(measured["cpu_s"])} if "cpu_s" in measured else {}
    out = {
        "scheduler": asdict(sched),
        "simulated": {
            mode: {k: sim.requests[k].tolist() for k in ("queue_s", "ttft_s", "latency_s")}
            for mode, sim in sims.items()
        },
        "comparison": {mode: compare(measured, sim) for mode, sim in sims.items()},
        "busy": {**busy, **{f"simulated_{m}_s": float(np.sum(sim.timeline["step_s"])) for m, sim in sims.items()}},
    }
    if data.get("measured_steps"):
        deployments = mode_deployments(config, spec, calibrated, dtype, execution)
        out["step_breakdown"] = step_breakdown(data["measured_steps"], deployments, server)
    out["waterfall"] = run_waterfall(data, served)
    return out


def write_resimulated(result: dict[str, Any], source: Path, output: Path) -> Path:
    """``resimulate``'s result as JSON at ``output``: a new file, never the recorded run
    nor anything under reports/ (committed measurements)."""
    target = Path(output).resolve()
    if target == Path(source).resolve() or REPORTS_DIR.resolve() in target.parents:
        raise RidgelineError(
            f"--output {output}: --resimulate writes a new file, never over a recorded run or under "
            f"{REPORTS_DIR}; pass -o NEW.json elsewhere"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, json.dumps({"resimulated_from": str(source), **result}, indent=1, allow_nan=False) + "\n")
    return target


def served_of(
    data: dict[str, Any], path: Path, profile: Path | None = None, batch_attention: str | None = None
) -> Served:
    """What a recorded run is simulated with again: its trace, the spec host as recorded,
    ``profile`` (else the one the run used), its scheduler (``batch_attention`` instead of
    the recorded policy's, when given), data type and execution mode."""
    from kernels.e2e.e2e import truncate

    meta, trace = data["meta"], data["trace"]
    arrivals = Arrivals(
        np.asarray(trace["arrival_s"]),
        np.asarray(trace["prompt_tokens"]),
        np.asarray(trace["output_tokens"]),
        str(path),
    )
    spec = recorded_spec(meta, None)
    calibrated, _, _ = calibrated_for(meta["device_key"], spec, profile or recorded_profile(meta))
    sched = recorded_scheduler(data)
    if batch_attention is not None:
        sched = replace(sched, batch_attention=batch_attention)
    return Served(
        truncate(load_model(data["model"]), data["layers"]),
        spec,
        calibrated,
        arrivals,
        sched,
        data.get("dtype", "bf16"),  # runs before fp32 was offered were bf16
        data.get("execution", "auto"),  # runs before GPUs were offered ran on a CPU
    )


def recorded_waterfall(path: Path, profile: Path | None = None) -> dict[str, Any]:
    """A recorded run's waterfalls (``run_waterfall``), simulated again; measures nothing."""
    data = _load_run(path)
    return run_waterfall(data, served_of(data, path, profile))


def report_lines(result: dict[str, Any]) -> list[str]:
    busy = result.get("busy", {})
    lines = (
        [
            f"transformers used {busy.get('measured_cpu_s', float('nan')):.1f} CPU s per replay; simulated steps sum to "
            + ", ".join(f"{v:.1f} s ({k[10:-2]})" for k, v in busy.items() if k.startswith("simulated_"))
        ]
        if busy
        else []
    )
    for mode, table in result["comparison"].items():
        for key in ("ttft_s", "latency_s"):
            m, s, e = (table[key][x] for x in ("measured", "simulated", "error"))
            lines.append(
                f"{mode:20s} {key:9s} p50 measured {m['p50']:.3f} s simulated "
                f"{s['p50']:.3f} s ({e['p50']:+.0%}); p90 measured {m['p90']:.3f} s "
                f"simulated {s['p90']:.3f} s ({e['p90']:+.0%})"
            )
    lines += breakdown_lines(result.get("step_breakdown"))
    if result.get("waterfall"):
        lines.append("where the time goes, measured - spec, means over the requests (ms; docs/measurement.md):")
        notes = {}
        for metric, fall in result["waterfall"].items():
            first, *rest = waterfall_lines(metric, fall)
            lines.append(first)
            notes.update(dict.fromkeys(rest))
        lines += list(notes)
    return lines


def breakdown_lines(b: dict[str, float] | None) -> list[str]:
    """The recorded steps' CPU seconds by phase, and the engine's for the same mixes."""
    if not b:
        return []
    lines = [
        f"steps (median replay): {b['steps']:.0f}, {b['all_step_s']:.2f} CPU s: forward "
        f"{b['all_forward_s']:.2f} s (attention {b['all_attention_s']:.2f} s), other "
        f"{b['all_other_s']:.2f} s (prepare {b['prepare_s']:.2f}, sample {b['sample_s']:.2f}, "
        f"update {b['update_s']:.2f})"
    ]
    for part in ("decode", "prefill"):
        forward, attention = b[f"{part}_forward_s"], b[f"{part}_attention_s"]
        lines.append(
            f"  {part}: {b[f'{part}_steps']:.0f} steps, {b[f'{part}_tokens']:.0f} tokens, "
            f"forward {forward:.2f} s (attention {attention:.2f} s, the rest "
            f"{forward - attention:.2f} s), other {b[f'{part}_other_s']:.2f} s"
        )
        for mode in sorted({k.split("_")[2] for k in b if k.startswith(f"{part}_predicted_")}):
            got = {t: b.get(f"{part}_predicted_{mode}_{t}_s") for t in ATTENTION_TAGS}
            if got["none"] is None:
                continue
            rest = got.pop("none")
            tags = [t for t, v in got.items() if v is not None]  # files from before a policy lack it
            lines.append(
                f"    engine ({mode}) for the same mixes: forward "
                + ", ".join(f"{t} {got[t]:.2f} s ({got[t] / forward - 1:+.0%})" for t in tags)
                + f"; the rest {rest:.2f} s ({rest / (forward - attention) - 1:+.0%}); attention "
                + ", ".join(f"{t} {got[t] - rest:.2f} s" for t in tags)
            )
    return lines


# --- the waterfall: measured minus spec, one effect at a time --------------------------


@dataclass(frozen=True)
class Served:
    """What a run was simulated with: the model, the spec device, the calibrated ceilings
    (None: no profile), the trace, the scheduler, the data type and the execution mode."""

    config: ModelConfig
    spec: Any
    calibrated: Any
    arrivals: Arrivals
    sched: Scheduler
    dtype: str
    execution: str


def host_terms(data: dict[str, Any]) -> tuple[dict[str, float] | None, str]:
    """The host seconds per step and per request a run measured: fitted to its own recorded
    steps, else the terms it recorded (fitted to another run), else None; and where from."""
    if data.get("measured_steps"):
        return fit_overhead(data["measured_steps"], gpu_eager(data)), "fitted to this run's recorded steps"
    if data.get("overhead"):
        return data["overhead"], f"fitted to {data['overhead'].get('from', 'another run')}'s steps"
    return None, ""


def alone(arrivals: Arrivals, gap: float) -> Arrivals:
    """The same requests, each arriving ``gap`` seconds after the one before."""
    return replace(arrivals, time_s=gap * np.arange(len(arrivals), dtype=float))


def simulated_means(served: Served, ceilings, sched: Scheduler, arrivals: Arrivals, by_itself: bool = False):
    """Mean TTFT and latency over the requests, and their means less the queueing; with
    ``by_itself``, every request served alone (spaced further apart until none overlaps)."""
    from kernels.e2e.e2e import engine_settings

    settings = engine_settings(served.dtype, served.execution)
    gap = 1.0
    for _ in range(3):
        trace = alone(arrivals, gap) if by_itself else arrivals
        sim = simulate(served.config, served.spec, trace, sched, settings=settings, ceilings=ceilings)
        if not by_itself or int(np.max(sim.timeline["running"])) <= 1:
            break
        gap = 10 * float(np.max(sim.requests["latency_s"]))
    else:
        raise RidgelineError(f"requests spaced {gap:.3g} s apart still overlap in the simulation")
    r = sim.requests
    wait = r["queue_s"]
    return {
        "all": {"ttft": float(np.mean(r["ttft_s"])), "latency": float(np.mean(r["latency_s"]))},
        "service": {"ttft": float(np.mean(r["ttft_s"] - wait)), "latency": float(np.mean(r["latency_s"] - wait))},
        "preemptions": int(np.sum(r["preemptions"])),
    }


def enough_blocks(served: Served) -> int:
    """KV blocks for every request of the trace at once, prompt and output, whatever a
    block holds (at least a token): none waits for blocks, none is preempted."""
    return int(np.sum(served.arrivals.prompt + served.arrivals.output)) + len(served.arrivals)


def waterfall_means(served: Served, host: dict[str, float] | None) -> dict[str, Any]:
    """The simulations a serving waterfall steps through (``kernels.e2e.waterfall``):
    spec, the calibrated kernels alone and with their launch and host terms, each request
    alone; then the trace with enough KV blocks for all and with the run's own."""
    spec_roofs = spec_ceilings(served.spec)
    roofs = served.calibrated or spec_roofs
    hosted = with_host(served.sched, host)
    a = served.arrivals
    unbounded = simulated_means(served, roofs, replace(hosted, kv_blocks=enough_blocks(served)), a)
    recorded = simulated_means(served, roofs, hosted, a)
    kernels = None
    if served.calibrated is not None:
        kernels = simulated_means(served, without_launch(roofs), served.sched, a, True)
    return {
        "spec_alone": simulated_means(served, spec_roofs, served.sched, a, True)["all"],
        "kernels_alone": kernels["all"] if kernels else {"ttft": None, "latency": None},
        "host_alone": simulated_means(served, roofs, hosted, a, True)["all"],
        "service": unbounded["service"],
        "unbounded": unbounded["all"],
        "recorded": recorded["all"],
        "preemptions": recorded["preemptions"],
    }


def run_waterfall(data: dict[str, Any], served: Served) -> dict[str, Any]:
    """A serving run's waterfalls (mean TTFT, mean latency): measured minus spec in parts,
    each part the difference of two simulations that differ by that effect alone."""
    host, source = host_terms(data)
    means = waterfall_means(served, host)
    notes = {
        "scheduler_batching": "service time (latency less queueing) in the trace minus each request alone",
        "queueing": "the simulated wait from arrival to admission, with enough KV blocks for every request",
        "preemption": f"the run's KV cache against one large enough for all ({means['preemptions']} "
        "preemptions simulated; admissions held for blocks count here too)",
    }
    if served.calibrated is None:
        notes["kernel_efficiency"] = "no calibrated profile of this device: left in the remainder"
    notes["launch_host"] = (
        "the profile's per-op fixed costs and execution terms" if served.calibrated is not None else "no profile terms"
    ) + (f"; host seconds per step and per request {source}" if host else "; no host seconds measured")
    measured = {k: float(np.nanmean(np.asarray(data["measured"][f"{k}_s"], float))) for k in ("ttft", "latency")}
    return serving_waterfall(measured, means, notes)


# --- the step breakdown (pure functions of a recorded run) ------------------------------


def step_mix(query: list[int], past: list[int]) -> tuple[list[int], list[tuple[int, int]], int, float]:
    """A recorded step as ``simulate.step_time`` takes it: fresh prompt chunks, chunks
    over a cache (tokens, cached), decodes and the decodes' cached tokens summed."""
    fresh = [q for q, p in zip(query, past) if p == 0]
    chunks = [(q, p) for q, p in zip(query, past) if p > 0 and q > 1]
    decoded = [p for q, p in zip(query, past) if p > 0 and q == 1]
    return fresh, chunks, len(decoded), float(sum(decoded))


def predicted_steps(
    deployment, steps: dict[str, list], server: ServerSettings, attention: str = "varlen"
) -> np.ndarray:
    """The engine's seconds for every recorded step's own mix (transformers' scheduler
    decisions, not the simulator's): ``simulate.step_time`` on the simulator's tables
    (``attention`` varlen), ``simulate.masked_step_time`` (masked: one attention over the
    whole step), ``simulate.gather_step_time`` (gather: that attention as transformers'
    sdpa path runs it) or the step without its attention ops (none)."""
    from ridgeline.serving.step_cost import build_step_cost, gather_step_time, masked_step_time, step_time

    cost = build_step_cost(
        deployment.model,
        deployment.plan,
        deployment.ceilings,
        server.max_batch_tokens,
        server.max_requests_per_batch,
        "gather" if attention == "gather" else "varlen",
    )
    if attention == "none":
        zero = lambda t: tuple(np.zeros_like(a) for a in t)  # noqa: E731
        cost = replace(
            cost,
            fresh=zero(cost.fresh),
            chunk=zero(cost.chunk),
            decode=zero(cost.decode),
            overhead_s=np.zeros_like(cost.overhead_s),
        )
    out = []
    for q, p in zip(steps["query"], steps["past"]):
        fresh = sum(x for x, y in zip(q, p) if y == 0)
        mix = (fresh, sum(q) - fresh, len(q), float(sum(q) + sum(p)))
        if attention == "masked":
            out.append(masked_step_time(cost, *mix))
        elif attention == "gather":
            out.append(gather_step_time(cost, *mix, any(y > 0 for y in p)))
        else:
            out.append(step_time(cost, *step_mix(q, p)))
    return np.array(out)


def breakdown(steps: dict[str, list]) -> dict[str, np.ndarray]:
    """Per step: the forward, everything else (``step_s - forward_s``: scheduling, batch
    tensors, sampling, the update), tokens computed and requests in the batch."""
    step = np.asarray(steps["step_s"], dtype=float)
    forward = np.asarray(steps["forward_s"], dtype=float)
    return {
        "step_s": step,
        "forward_s": forward,
        "other_s": step - forward,
        "attention_s": np.asarray(steps["attention_s"], dtype=float),
        "tokens": np.array([sum(q) for q in steps["query"]]),
        "requests": np.array([len(q) for q in steps["query"]]),
        "decode_only": np.array(
            [all(x == 1 for x in q) and all(p > 0 for p in ps) for q, ps in zip(steps["query"], steps["past"])]
        ),
    }


def fit_overhead(runs: list[dict[str, list]], whole_step: bool = False) -> dict[str, float]:
    """The host terms of the simulator's server model from recorded steps (every replay's):
    least squares of each step's non-forward CPU seconds on [1, requests in the step],
    ``other = step_overhead_s + request_overhead_s * requests``; a negative per-request
    slope is dropped (the fixed term is then the mean). ``whole_step`` (a GPU run eager,
    ``host_overlap``): the whole step's seconds, host-bound steps being the host's work.
    Measures nothing."""
    parts = [breakdown(r) for r in runs]
    other = np.concatenate([b["step_s" if whole_step else "other_s"] for b in parts])
    requests = np.concatenate([b["requests"] for b in parts]).astype(float)
    if other.size < 3:
        raise RidgelineError(f"{other.size} recorded steps are too few to fit the host overhead")
    design = np.column_stack([np.ones_like(requests), requests])
    (fixed, per_request), *_ = np.linalg.lstsq(design, other, rcond=None)
    if per_request < 0:
        fixed, per_request = float(other.mean()), 0.0
    fitted = fixed + per_request * requests
    return {
        "step_overhead_s": float(max(fixed, 0.0)),
        "request_overhead_s": float(per_request),
        **({"host_overlap": True} if whole_step else {}),
        "steps": int(other.size),
        "mean_other_s": float(other.mean()),
        "rms_residual_s": float(np.sqrt(np.mean((other - fitted) ** 2))),
    }


def overhead_from(path: Path) -> dict[str, float]:
    """``fit_overhead`` of a recorded ``simulate-check`` run (its ``measured_steps``),
    with the file it came from."""
    data = _load_run(path, ("measured",))
    if not data.get("measured_steps"):
        raise RidgelineError(
            f"{path} has no recorded steps (it was made before steps were recorded); record one with simulate-check"
        )
    return {**fit_overhead(data["measured_steps"], gpu_eager(data)), "from": str(path)}


def gpu_eager(data: dict[str, Any]) -> bool:
    """Whether a recorded run ran transformers eager on a GPU: its host work overlaps the
    device's, and its steps are host-bound (``fit_overhead(whole_step=True)``)."""
    return data.get("execution") == "eager" and str(data.get("meta", {}).get("device_key", "")).startswith("cuda")


def _load_run(path: Path, keys: tuple[str, ...] = ("meta", "trace", "measured")) -> dict[str, Any]:
    from kernels.bench.provenance import read_result

    return read_result(path, "serving run", keys)
