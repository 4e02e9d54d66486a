"""What the CLI, the viewer and the measuring commands call: the name-taking entry points
(``analyze``, ``sweep``, ``simulate``, ``plan``: names resolved once by :mod:`ridgeline.io.resolve`),
speculative decoding, the largest batch that fits, the latency/throughput frontier and
side-by-side comparisons. The engine computes them (``speculative``, ``sweeps``), and
``serving/`` serves (``runs``, ``scenarios``, ``plan``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from typing_extensions import Doc

from ridgeline.engine.analyze import Analysis, analyze_deployment, largest_batch, sweep_deployment, sweep_each
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.speculative import speculative_figures
from ridgeline.engine.sweeps import batch_frontier, compare_deployments, setting_combinations, with_bands
from ridgeline.engine.sweeps import sweep_bands as sweep_bands  # the viewer's bands
from ridgeline.engine.workload import SETTING_NAMES, check_slos
from ridgeline.errors import (
    InvalidOptionError,
    InvalidSettingError,
    InvalidWorkloadError,
    RidgelineError,
    in_percent,
    keyword_names,
    takes_keywords,
    yes_or_no,
)
from ridgeline.io.engines import load_engine
from ridgeline.io.files import check_writable
from ridgeline.io.prices import prices_for
from ridgeline.io.resolve import (
    Deployment,
    as_deployment,
    ceilings_where_measured,
    load_device,
    load_model,
    read_profile,
    resolve,
    resolve_each,
)
from ridgeline.io.traces import mlperf_lengths, parse_prefix, trace_arrivals
from ridgeline.serving import scenarios, simulator
from ridgeline.serving.arrivals import Arrivals, shared_prefix
from ridgeline.serving.bounds import Draft, Load, Slo, Space
from ridgeline.serving.engines import engine_scheduler
from ridgeline.serving.engines import options_scheduler as options_scheduler  # the CLI's simulate
from ridgeline.serving.plan import PlanResult, plan_search
from ridgeline.serving.policy import default_attention
from ridgeline.serving.runs import fleet_pools, fleet_server, serve_arrivals
from ridgeline.serving.simulator import deployment_runs as deployment_runs  # simulate_serving's runs=
from ridgeline.serving.workload_text import (
    names,
    number,
    pairs,
    parse_drafts,
    parse_pools,
    parse_slo,
    parse_workload,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# the workload's options, each declared once with the command line's help (each function that
# takes one gives its own default; ridgeline/cli/options.py builds the flags from these)
Batch = Annotated[int, Doc("Sequences per batch.")]
SeqLen = Annotated[int, Doc("Prompt length in tokens.")]
Generate = Annotated[int, Doc("Output tokens per sequence (0: no generation totals).")]
DraftModel = Annotated[str | None, Doc("Draft model for speculative decoding.")]
DraftTokens = Annotated[int, Doc("Tokens the draft proposes per step (k).")]
Acceptance = Annotated[float, Doc("Probability each draft token is accepted (a).")]

# What ``**how`` passes on to ``resolve``: its keywords and the Settings fields. A keyword
# that is none of them, nor the function's own, is refused naming the closest.
HOW = (*(n for n in keyword_names(resolve) if n not in ("model", "hardware")), *SETTING_NAMES)
SPACE = tuple(f.name for f in fields(Space) if f.name not in ("devices", "roofs"))  # plan's **dimensions


@takes_keywords(*HOW)
def analyze(
    model: Deployment | str | ModelConfig,
    hardware=None,
    batch: int = 1,
    seq_len: int = 512,
    generate: int = 0,
    **how: Any,
) -> Analysis:
    """Analyse one workload point: per-op tables for prefill and decode, totals, memory.

    ``model`` is a :class:`~ridgeline.io.resolve.Deployment` (``resolve(...)``), or a model
    name / config with ``hardware`` and ``how`` = resolve's keywords: ``dtype``,
    ``settings``, ``profile``, ``transfer``, ``ceilings`` and Settings fields
    (``w_dtype="int4"``, ``attention="flash"``, ``tp=2`` ...). The ceilings default to the
    device's datasheet roofline (``spec``)."""
    return analyze_deployment(as_deployment(model, hardware, **how), batch, seq_len, generate)


@takes_keywords(*HOW)
def sweep(
    model: Deployment | str | ModelConfig, hardware=None, batch=1, seq_len=512, generate=0, bands=True, **how
) -> pd.DataFrame:
    """Every (batch, seq_len) point of a grid in one array evaluation; a row per point.
    ``model``, ``hardware`` and ``how`` as for :func:`analyze`. With ``bands`` (the
    default), each point's 80 % interval as ``<figure>_lo80`` / ``<figure>_hi80`` columns where
    residuals support one (the CLI's ``sweep`` prints the same), and what they rest on, or why
    there are none, in ``frame.attrs["intervals"]``."""
    d = as_deployment(model, hardware, **how)
    frame = sweep_deployment(d, batch, seq_len, generate)
    return with_bands(d, frame, generate) if yes_or_no("bands", bands) else frame


@takes_keywords(*HOW)
def simulate(
    model: Deployment | str | ModelConfig,
    hardware,
    arrivals: Arrivals,
    scheduler: simulator.Scheduler | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    **how: Any,
) -> simulator.SimResult:
    """Serve ``arrivals`` with continuous batching (:mod:`ridgeline.serving.simulator`).
    ``model`` is a resolved :class:`Deployment` (``hardware`` None), or a model and a
    device with ``ridgeline.resolve``'s keywords: Settings fields (``tp=2``,
    ``w_dtype="int4"``, ...), ``dtype``, ``settings``, ``profile``, ``ceilings``.
    ``progress(finished, total)`` is called every few thousand steps. Without an
    ``attention`` keyword (or ``settings``), the attention is the policy's
    (:func:`default_attention`: vLLM V1 runs flash). Without a ``scheduler``, the one the
    deployment's engine runs on its device (:func:`serving_scheduler`: the default engine
    runs vLLM V1's, with vLLM V1's limits for the device and prefix caching on)."""
    if not isinstance(model, Deployment) and not {"attention", "settings"} & set(how):
        how["attention"] = default_attention((scheduler or simulator.Scheduler()).policy)
    d = as_deployment(model, hardware, **how)
    return simulator.simulate_deployment(d, arrivals, scheduler or serving_scheduler(d), progress=progress)


def _draft(d: Deployment, draft: Deployment | ModelConfig | str) -> Deployment:
    """The draft model on the target's device, settings and ceilings."""
    if isinstance(draft, Deployment):
        return draft
    return d.with_model(draft if isinstance(draft, ModelConfig) else load_model(str(draft)))


@takes_keywords(*HOW)
def speculative(
    model,
    hardware=None,
    draft=None,
    *,
    batch: int = 1,
    seq_len: int = 512,
    generate: int = 0,
    draft_tokens: int = 4,
    acceptance: float = 0.7,
    max_k: int = 8,
    **how: Any,
) -> dict:
    """Predicted speed-up of speculative decoding over plain decoding, and the draft beside
    the target in memory (:func:`ridgeline.engine.speculative.speculative_figures`).
    ``model`` is a Deployment or a name with ``hardware`` and ``how`` (see ``analyze``); the
    draft runs on the same device, settings and ceilings (the result's ``mode``)."""
    if draft is None:
        raise InvalidWorkloadError("name a draft model")
    if not 0.0 <= acceptance <= 1.0:
        raise InvalidWorkloadError(f"acceptance must be between 0 and 1, got {acceptance}")
    if draft_tokens < 0:
        raise InvalidWorkloadError(f"draft tokens must be >= 0, got {draft_tokens}")
    d = as_deployment(model, hardware, **how)
    return speculative_figures(d, _draft(d, draft), batch, seq_len, generate, draft_tokens, acceptance, max_k)


@takes_keywords(*HOW)
def max_batch(model, hardware=None, seq_len: int = 512, generate: int = 0, **how: Any) -> int:
    """Largest batch whose peak memory fits what the runtime may use on one device
    (:func:`ridgeline.engine.analyze.largest_batch`); 0 when nothing fits."""
    d = as_deployment(model, hardware, **how)
    return largest_batch(d.model, d.device, d.plan, seq_len, generate)


@takes_keywords(*HOW)
def frontier(
    model,
    hardware=None,
    seq_len: SeqLen = 1024,
    generate: Generate = 256,
    *,
    batches=None,
    tpot_slo: Annotated[float | None, Doc("Largest acceptable TPOT, seconds.")] = None,
    ttft_slo: Annotated[float | None, Doc("Largest acceptable TTFT, seconds.")] = None,
    **how: Any,
):
    """TPOT against throughput across batch sizes up to the largest that fits (powers of
    two and the maximum itself), and the best throughput meeting the latency targets."""
    check_slos(tpot_slo=tpot_slo, ttft_slo=ttft_slo)
    if generate < 2:
        raise InvalidSettingError("generate", "the frontier needs generate >= 2 (TPOT needs decode steps)")
    d = as_deployment(model, hardware, **how)
    return batch_frontier(d, seq_len, generate, batches, tpot_slo, ttft_slo)


@takes_keywords("profile", "transfer")
def compare(
    model, devices=None, variants=None, *, batch: Batch = 1, seq_len: SeqLen = 512, generate: Generate = 128, **how: Any
):
    """One row per deployment (device and settings variant): the key totals side by side,
    with the ceilings' mode of each row. ``model`` is a list of Deployments, or a model
    name with ``devices`` x ``variants`` (Settings keywords) resolved by ``resolve_each``
    (``how``: ``profile``, ``transfer``)."""
    if devices is None and (how or variants):
        raise RidgelineError("Deployments already hold their devices, settings and ceilings; pass only the workload")
    deployments = (
        [as_deployment(d) for d in model] if devices is None else resolve_each(model, devices, variants or [{}], **how)
    )
    return compare_deployments(deployments, batch, seq_len, generate)


# --- used by the CLI ---


def analyze_with_draft(
    d: Deployment,
    *,
    batch: Batch = 1,
    seq_len: SeqLen = 512,
    generate: Generate = 0,
    draft: DraftModel = None,
    draft_tokens: DraftTokens = 4,
    acceptance: Acceptance = 0.7,
):
    """``analyze``; with a draft model (a name on the target's device and settings), speculative
    decoding's figures in ``extra["speculative"]``."""
    shape = {"batch": batch, "seq_len": seq_len, "generate": generate}
    result = analyze_deployment(d, **shape)
    if draft is None:
        return result
    drafted = d.with_model(load_model(draft))
    spec = speculative(d, draft=drafted, **shape, draft_tokens=draft_tokens, acceptance=acceptance)
    return replace(result, extra={**result.extra, "speculative": spec})


def sweep_settings(d: Deployment, lists: dict[str, list], batches, seq_lens, generate: Generate = 0, on_step=None):
    """Every combination of the listed settings on ``d``, batch x length in one vectorised pass
    each, with each point's 80 % intervals where residuals support them (``with_bands``)."""
    bands = lambda each, frame: with_bands(each, frame, generate)  # noqa: E731
    return sweep_each(d, setting_combinations(lists), batches, seq_lens, generate, on_step=on_step, finish=bands)


def compare_settings(name: str, devices: list[str], lists: dict[str, list], dtype: str | None, **how: Any):
    """``compare`` of ``name`` on each device x every combination of the listed settings, the
    three types ``dtype`` where not listed (without it, each device's default)."""
    variants = setting_combinations(lists, dict.fromkeys(("w_dtype", "a_dtype", "kv_dtype"), dtype) if dtype else {})
    return compare(name, devices, variants, **how)


@takes_keywords(*keyword_names(serve_arrivals))
def simulate_serving(
    d: Deployment,
    scheduler: simulator.Scheduler,
    *,
    trace=None,
    trace_window: str | tuple[float, float] | None = None,
    trace_log_type: str | None = None,
    prefix: str | None = None,
    time_scale: float = 1.0,
    **run: Any,
) -> dict[str, Any]:
    """Serve a recorded ``trace`` (replayed ``time_scale`` times faster) or Poisson arrivals
    (``run``: the rate, the requests, the rate search and the other keywords of
    :func:`~ridgeline.serving.runs.serve_arrivals`). ``trace_window`` ("START,END" or a pair,
    seconds from the trace's first request) and ``trace_log_type`` (BurstGPT's Log Type)
    select requests (:func:`~ridgeline.io.traces.load_trace`); ``prefix``
    ("shared:system=S,fanout=F") gives the prompts shared system prompts, in blocks of the
    deployment's KV block, for ``scheduler.prefix_cache``."""
    ttft_slo, tpot_slo = run.get("ttft_slo"), run.get("tpot_slo")
    check_slos(ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    if run.get("search") and ttft_slo is None and tpot_slo is None:
        raise InvalidSettingError("ttft_slo", "the rate search needs a latency target: ttft_slo or tpot_slo, seconds")
    base = trace_arrivals(trace, trace_window, trace_log_type, time_scale)
    shared = parse_prefix(prefix) if prefix is not None else None
    if shared and base is not None and base.hash_ids is not None:
        raise InvalidWorkloadError(f"{trace} carries its prompts' block ids (hash_ids); drop --prefix")
    if shared and base is not None:
        base = shared_prefix(base, *shared, d.plan.kv_block)
    return serve_arrivals(d, scheduler, base, shared, **run)


def simulate_scenario(
    d: Deployment,
    scheduler: simulator.Scheduler,
    name: str,
    *,
    requests: int = 1000,
    seed: int = 0,
    instances: int = 1,
    rate: float = 1.0,
    duration_s: float | None = None,
    progress=None,
) -> dict[str, Any]:
    """An MLPerf Inference scenario on ``instances`` copies of ``d``, its samples drawn like
    MLPerf's data set (:func:`ridgeline.serving.scenarios.simulate_scenario`). ``progress``
    is not used (many short runs)."""
    keys = {"requests": requests, "seed": seed, "instances": instances, "rate": rate, "duration_s": duration_s}
    return scenarios.simulate_scenario(d, scheduler, scenarios.scenario(name), mlperf_lengths(), **keys)


def serving_scheduler(
    d: Deployment,
    given: Mapping[str, Any] | None = None,
    context: str = "server",
    lengths: tuple[int, int] | None = None,
) -> simulator.Scheduler:
    """The scheduler ``d``'s engine runs (``d.settings.engine``: its policy, its limits on
    this GPU in ``context``, its KV memory rule), with the fields ``given`` sets over it."""
    return engine_scheduler(d, load_engine(d.settings.engine), given, context, lengths)


# fmt: off
def simulate_options(
    d: Deployment,
    scheduler: simulator.Scheduler,
    pool: Callable[[str], Deployment],
    progress,
    *,
    rate: Annotated[float, Doc("Poisson arrivals, requests per second (start of --search).")] = 1.0,
    requests: Annotated[int, Doc("Poisson requests to simulate.")] = 1000,
    prompt: Annotated[int, Doc("Prompt tokens per Poisson request.")] = 512,
    output_tokens: Annotated[int, Doc("Output tokens per Poisson request.")] = 128,
    trace: Annotated[Path | None, Doc("CSV/JSONL trace: arrival_s, prompt_tokens, output_tokens; Azure's, BurstGPT's and Mooncake's load as they are (docs/traces.md).")] = None,
    time_scale: Annotated[float, Doc("Replay the trace this many times faster.")] = 1.0,
    trace_window: Annotated[str | None, Doc("START,END: only the trace's requests arriving in [START, END) seconds from its first request.")] = None,
    trace_log_type: Annotated[str | None, Doc("BurstGPT traces: only the rows of this Log Type, e.g. 'Conversation log'.")] = None,
    prefix: Annotated[str | None, Doc("shared:system=TOKENS,fanout=N: each N requests in a row share a system prompt of TOKENS tokens (block ids for --prefix-cache).")] = None,
    seed: Annotated[int, Doc("Seed of the Poisson arrivals.")] = 0,
    ttft_slo: Annotated[float | None, Doc("TTFT target, seconds.")] = None,
    tpot_slo: Annotated[float | None, Doc("TPOT target, seconds.")] = None,
    percentile: Annotated[float, Doc("Percentile the SLOs apply to.")] = 99.0,
    search: Annotated[bool, Doc("Find the highest request rate meeting the SLOs.")] = False,
    scenario: Annotated[str | None, Doc("MLPerf Inference scenario for Llama 2 70B: server, interactive or offline (LoadGen's latency bounds, the data set's lengths; --requests samples).")] = None,
    instances: Annotated[int, Doc("With --scenario: copies of the deployment sharing the load.")] = 1,
    duration: Annotated[float | None, Doc("With --scenario server/interactive: seconds of arrivals per run (LoadGen's minimum, 600, by default).")] = None,
    replicas: Annotated[int, Doc("Copies of the server behind a router.")] = 1,
    route: Annotated[str, Doc("How the router picks a replica: round-robin, least-outstanding or prefix-affinity.")] = "round-robin",
    prefill_replicas: Annotated[int | None, Doc("Disaggregate: servers in the prefill pool (with --decode-replicas).")] = None,
    decode_replicas: Annotated[int | None, Doc("Disaggregate: servers in the decode pool.")] = None,
    prefill_hardware: Annotated[str | None, Doc("Device of the prefill pool (default --hardware).")] = None,
    decode_hardware: Annotated[str | None, Doc("Device of the decode pool (default --hardware).")] = None,
    kv_link: Annotated[str | None, Doc("KV cache link between the pools, GBPS,US (default 400,14: a ConnectX-7 port).")] = None,
    draft: DraftModel = None,
    draft_tokens: DraftTokens = 4,
    acceptance: Acceptance = 0.7,
    **_: Any,
) -> dict[str, Any]:
    """``simulate``'s options run: ``scenario`` (LoadGen's rules set the arrivals, lengths and
    latency bounds: :func:`simulate_scenario`), or the arrivals served by one server of ``d``
    or the fleet they describe (:func:`simulate_serving`, :func:`fleet_server`); ``pool(device)``
    resolves a disaggregated pool's device on ``d``'s settings. The options it does not take
    are ``options_scheduler``'s."""
    in_percent("--percentile", percentile, InvalidOptionError)  # the percentile the SLOs apply to
    slos = {"ttft_slo": ttft_slo, "tpot_slo": tpot_slo}
    if scenario is not None:
        clash = [f"--{k.replace('_', '-')}" for k, v in {"trace": trace, "search": search, **slos}.items() if v]
        if clash:
            raise InvalidOptionError(f"--scenario sets its own arrivals and latency bounds; drop {', '.join(clash)}")
        keep = {"requests": requests, "seed": seed, "instances": instances, "rate": rate}
        return simulate_scenario(d, scheduler, scenario, **keep, duration_s=duration)
    arrivals = {"trace": trace, "trace_window": trace_window, "trace_log_type": trace_log_type, "prefix": prefix}
    arrivals |= {"time_scale": time_scale, "rate": rate, "requests": requests, "prompt": prompt}
    fleet = {"replicas": replicas, "route": route, "seed": seed, "draft_tokens": draft_tokens, "acceptance": acceptance}
    pools = {"prefill": (prefill_replicas, prefill_hardware), "decode": (decode_replicas, decode_hardware)}
    split = fleet_pools(pools, kv_link, d, pool)  # each pool's device resolved before the draft
    fleet = fleet_server(d, scheduler, **fleet, draft=load_model(draft) if draft else None, **split)
    keys = {"output_tokens": output_tokens, "seed": seed, "search": search, **slos, "percentile": percentile}
    return simulate_serving(d, scheduler, **arrivals, **keys, progress=progress, fleet=fleet)
# fmt: on


def _drafts(given) -> tuple[Draft, ...]:
    """Drafts as :class:`Draft` s, or (catalog name, k, acceptance) triples."""
    return tuple(d if isinstance(d, Draft) else Draft(load_model(str(d[0])), *d[1:]) for d in given)


def plan_roofs(devices: list, profile, transfer: bool) -> tuple[tuple, dict[str, Any]]:
    """Each device's roofs: the profile's where it was measured (or transferred, when asked;
    :func:`~ridgeline.io.resolve.ceilings_where_measured`), the datasheet's elsewhere; and
    what they rest on, for the meta block."""
    raw, where = read_profile(profile)
    found = [ceilings_where_measured(d, raw, transfer=transfer) for d in devices]
    modes = {d.name: c.mode for d, (c, _) in zip(devices, found)}
    if set(modes.values()) == {"spec"}:
        hint = "" if transfer else " (or add --transfer for another GPU of its architecture)"
        raise InvalidWorkloadError(
            f"the profile {where} was measured on none of {', '.join(modes)}; add its device to --devices{hint}"
        )
    notes = sorted({n for _, ns in found for n in ns})
    about = {"basis": f"profile {where} where it applies, datasheet elsewhere", "roofs": modes, "notes": notes}
    return tuple(c for c, _ in found), about


@takes_keywords(*SPACE)
def plan(
    model: str | ModelConfig,
    devices: list[str],
    load: Load,
    slo: Slo,
    *,
    prices: dict[str, float] | None = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    profile=None,
    transfer: bool = False,
    rate_search: float | None = None,
    **dimensions: Any,
) -> PlanResult:
    """The deployments of ``model`` on ``devices`` (x count x split x types x server limits,
    and the opt-in fleet dimensions ``replicas``, ``pools`` and ``drafts`` — Draft s or
    (name, k, acceptance): :class:`~ridgeline.serving.bounds.Space`'s ``dimensions``) that
    serve ``load`` within ``slo`` cheapest (:func:`ridgeline.serving.plan.search`), priced
    from the shipped price list or ``prices`` (USD per GPU-hour by device), simulated on
    ``executor``. ``profile`` prices the devices it was measured on (``transfer``: or
    transferred to) with its roofs. ``rate_search`` (a percentile, e.g. 99): each simulated
    deployment's highest rate meeting the SLO at it (the simulator's ``max_rate``)."""
    config = model if isinstance(model, ModelConfig) else load_model(str(model))
    if len(set(devices)) != len(devices):
        raise InvalidWorkloadError(f"a device is named twice in {', '.join(devices)}")
    if rate_search is not None:
        in_percent("the rate search's percentile", rate_search)
    if yes_or_no("transfer", transfer) and profile is None:
        raise InvalidWorkloadError("--transfer applies a --profile to another GPU of its architecture: give --profile")
    if "drafts" in dimensions:
        dimensions["drafts"] = _drafts(dimensions["drafts"])
    specs = tuple(load_device(name) for name in devices)
    roofs, about = plan_roofs(list(specs), profile, transfer) if profile is not None else ((), {})
    space = Space(specs, **dimensions, roofs=roofs)
    cited = prices_for(list(devices), prices)
    where = {"executor": executor, "workers": workers, "address": address}
    return plan_search(
        config, space, load, slo, cited, **where, progress=progress, rate_search=rate_search, about=about
    )


# fmt: off
def plan_from_text(
    model: str | None,
    *,
    workload: Annotated[str, Doc("Poisson arrivals: poisson:rate=REQ_PER_S,prompt=TOKENS,output=TOKENS,n=REQUESTS[,seed=S].")] = "poisson:rate=20,prompt=512,output=256,n=10000",
    slo: Annotated[str, Doc("Latency targets, seconds: ttft=0.5,tpot=0.05 (either or both).")] = "ttft=0.5,tpot=0.05",
    devices: Annotated[str, Doc("Catalog devices to search, comma-separated.")] = "h100-sxm,h200,a100-80gb,mi300x",
    counts: Annotated[str, Doc("Devices per deployment, comma-separated; every tp x pp split of each.")] = "1,2,4,8",
    price: Annotated[str | None, Doc("USD per GPU-hour overrides: h100-sxm=3.5,mi300x=2.9 (default: the shipped list).")] = None,
    executor: Annotated[str, Doc("Where simulations run: local (processes) or ray.")] = "local",
    address: Annotated[str | None, Doc("A Ray cluster's address (with --executor ray); default: a local one.")] = None,
    workers: Annotated[int | None, Doc("Worker processes (local) or CPUs (a local Ray); default: this machine's CPUs.")] = None,
    top: Annotated[int, Doc("Rows of the table of the cheapest deployments.")] = 10,
    output: Annotated[Path | None, Doc("Write every deployment, with the search's counts, as JSON.")] = None,
    replicas: Annotated[str, Doc("Replica counts R: each count also as R replicas of count/R devices, least-outstanding routed.")] = "1",
    pools: Annotated[str | None, Doc("Disaggregated P:D splits, comma-separated: P prefill + D decode servers of count/(P+D) each.")] = None,
    drafts: Annotated[str | None, Doc("Draft models to speculate with, NAME:K:ACCEPTANCE comma-separated (and none).")] = None,
    rate_search: Annotated[bool, Doc("Also find each simulated deployment's highest rate meeting the SLO at p99.")] = False,
    **how: Any,
) -> PlanResult:
    """:func:`plan` of the command line's text: ``workload`` 'poisson:rate=R,prompt=P,output=O,n=N',
    ``slo`` 'ttft=0.5,tpot=0.05', ``price`` 'h100-sxm=3.5', ``devices``, ``counts`` and
    ``replicas`` lists, ``pools`` 'P:D,...', ``drafts`` 'NAME:K:A,...'; each checked (``top``
    rows to show, ``output`` writable) before the search starts. ``rate_search``: at p99."""
    if model is None:
        raise InvalidOptionError("name a model (see 'ridgeline models list')")
    if top < 1:
        raise InvalidWorkloadError(f"--top must be at least 1, got {top}")
    if output is not None:
        check_writable(output)
    overrides = {k: number(v, f"the --price of {k}") for k, v in pairs(price, "--price").items()} if price else None
    sizes = tuple(int(number(c, "each of --counts", whole=True)) for c in names(counts, "--counts"))
    fleet = {"replicas": tuple(int(number(r, "each of --replicas", whole=True)) for r in names(replicas, "--replicas"))}
    fleet.update({"pools": parse_pools(pools)} if pools else {})
    fleet.update({"drafts": parse_drafts(drafts)} if drafts else {})
    return plan(
        model,
        names(devices, "--devices"),
        parse_workload(workload),
        parse_slo(slo),
        prices=overrides,
        counts=sizes,
        rate_search=99.0 if rate_search else None,
        **fleet,
        executor=executor,
        workers=workers,
        address=address,
        **how,
    )
# fmt: on
