"""simulate (the serving simulator), simulate-check (transformers' continuous batching against
it) and serve (the dashboard)."""

from __future__ import annotations

from typing import Any

import typer

from ridgeline.api import default_attention, fleet_server, simulate_scenario, simulate_serving
from ridgeline.cli import options as opt
from ridgeline.cli.app import app, check_format, deployment, echo_err, echo_lines, emit, write_text
from ridgeline.errors import MissingDependencyError, RidgelineError
from ridgeline.io.traces import CHECK_OUTPUT_RANGE, CHECK_PROMPT_RANGE
from ridgeline.report import (
    overhead_line,
    scenario_lines,
    simulation_progress,
    simulation_tables,
    simulation_text,
)
from ridgeline.serving.disagg import parse_link
from ridgeline.serving.simulator import Scheduler

SCHEDULER = ("max_batch", "token_budget", "chunked_prefill", "prefix_hit", "prefix_cache", "kv_blocks", "admit_margin")
ARRIVALS = (
    "trace",
    "trace_window",
    "trace_log_type",
    "prefix",
    "time_scale",
    "rate",
    "requests",
    "prompt",
    "output_tokens",
    "seed",
)


@app.command()
def simulate(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    hardware: opt.Hardware = "a6000",
    rate: opt.Rate = 1.0,
    requests: opt.Requests = 1000,
    prompt: opt.Prompt = 512,
    output_tokens: opt.OutputTokens = 128,
    trace: opt.Trace = None,
    time_scale: opt.TimeScale = 1.0,
    trace_window: opt.TraceWindow = None,
    trace_log_type: opt.TraceLogType = None,
    prefix: opt.Prefix = None,
    max_batch: opt.MaxBatch = 256,
    token_budget: opt.TokenBudget = 2048,
    chunked_prefill: opt.ChunkedPrefill = True,
    prefix_hit: opt.PrefixHit = 0.0,
    prefix_cache: opt.PrefixCache = False,
    kv_blocks: opt.KvBlocks = None,
    admit_margin: opt.AdmitMargin = 0.0,
    step_overhead: opt.StepOverhead = 0.0,
    request_overhead: opt.RequestOverhead = 0.0,
    host_overlap: opt.HostOverlap = False,
    batch_attention: opt.BatchAttention = "varlen",
    seed: opt.Seed = 0,
    ttft_slo: opt.TtftTarget = None,
    tpot_slo: opt.TpotTarget = None,
    percentile: opt.Percentile = 99.0,
    search: opt.Search = False,
    timeline: opt.Timeline = None,
    scenario: opt.Scenario = None,
    instances: opt.Instances = 1,
    duration: opt.Duration = None,
    dtype: opt.Dtype = None,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    fmt: opt.Format = "table",
    output: opt.Output = None,
    w_bits: opt.WBits = None,
    a_bits: opt.ABits = None,
    kv_bits: opt.KvBits = None,
    w_dtype: opt.WDtype = None,
    a_dtype: opt.ADtype = None,
    kv_dtype: opt.KvDtype = None,
    group_size: opt.GroupSize = None,
    attention: opt.Attention = None,
    kv_block: opt.KvBlock = None,
    tp: opt.Tp = None,
    pp: opt.Pp = None,
    ep: opt.Ep = None,
    micro_batches: opt.MicroBatches = None,
    link_bw: opt.LinkBw = None,
    link_latency: opt.LinkLatency = None,
    zero_points: opt.ZeroPoints = None,
    memory_utilization: opt.MemoryUtilization = None,
    execution: opt.Execution = None,
    replicas: opt.Replicas = 1,
    route: opt.Route = "round-robin",
    prefill_replicas: opt.PrefillReplicas = None,
    decode_replicas: opt.DecodeReplicas = None,
    prefill_hardware: opt.PrefillHardware = None,
    decode_hardware: opt.DecodeHardware = None,
    kv_link: opt.KvLinkOption = None,
    draft: opt.Draft = None,
    draft_tokens: opt.DraftTokens = 4,
    acceptance: opt.Acceptance = 0.7,
) -> None:
    """Serve requests with continuous batching: latency percentiles, throughput, KV use;
    replicas behind a router, disaggregated pools, speculative decodes (docs/fleet.md)."""
    check_format(fmt)
    if not 0 < percentile <= 100:
        raise typer.BadParameter(f"--percentile must be in (0, 100], got {percentile}")
    sched = scheduler(ctx.params)
    # no --attention: the policy's (vLLM V1 runs flash); the output says which
    d = deployment({**ctx.params, "attention": attention or default_attention(sched.policy)})
    if scenario is not None:
        run = mlperf_scenario(ctx.params, d, sched, duration)
    else:
        slos = {"ttft_slo": ttft_slo, "tpot_slo": tpot_slo, "percentile": percentile}
        arrivals = {name: ctx.params[name] for name in ARRIVALS}
        serve = fleet_server(d, sched, **fleet_options(ctx.params, d))
        run = simulate_serving(d, sched, **arrivals, search=search, **slos, progress=simulation_progress, fleet=serve)
    if timeline is not None:
        write_text(timeline, run["result"].timeline_frame.to_csv(index=False))
    text = simulation_text(run, fmt)
    tables = simulation_tables(run, percentile) + scenario_lines(run) if text is None else []
    emit(text, tables, output)


def mlperf_scenario(p: dict[str, Any], d, sched: Scheduler, duration: float | None) -> dict[str, Any]:
    """``--scenario``: LoadGen's rules set the arrivals, lengths and latency bounds."""
    clash = [f"--{k.replace('_', '-')}" for k in ("trace", "search", "ttft_slo", "tpot_slo") if p[k]]
    if clash:
        raise typer.BadParameter(f"--scenario sets its own arrivals and latency bounds; drop {', '.join(clash)}")
    keep = {k: p[k] for k in ("requests", "seed", "instances", "rate")}
    return simulate_scenario(d, sched, p["scenario"], **keep, duration_s=duration)


def fleet_options(params: dict[str, Any], d) -> dict[str, Any]:
    """simulate's fleet options as ``fleet_server``'s keywords; each pool's device resolved."""
    keys = {name: params[name] for name in ("replicas", "route", "seed", "draft", "draft_tokens", "acceptance")}
    counts = (params["prefill_replicas"], params["decode_replicas"])
    if counts == (None, None):
        if any(params[k] is not None for k in ("prefill_hardware", "decode_hardware", "kv_link")):
            raise typer.BadParameter(
                "--prefill-hardware, --decode-hardware and --kv-link need --prefill-replicas and --decode-replicas"
            )
        return keys
    if None in counts:
        raise typer.BadParameter("disaggregation needs both --prefill-replicas and --decode-replicas")
    for name, n in zip(("prefill", "decode"), counts):
        device = params[f"{name}_hardware"]
        on = {**params, "hardware": device, "attention": d.settings.attention}
        keys[name] = (n, d if device is None else deployment(on))
    keys["kv_link"] = parse_link(params["kv_link"]) if params["kv_link"] is not None else None
    return keys


def scheduler(params: dict[str, Any]) -> Scheduler:
    """The batching policy simulate's options describe."""
    host = {"step_overhead_s": params["step_overhead"], "request_overhead_s": params["request_overhead"]}
    policy = {name: params[name] for name in SCHEDULER}
    return Scheduler(**policy, **host, host_overlap=params["host_overlap"], batch_attention=params["batch_attention"])


@app.command("simulate-check")
def simulate_check(
    ctx: typer.Context,
    model: opt.CheckModel = "qwen2-0.5b",
    layers: opt.Layers = None,
    requests: opt.CheckRequests = 48,
    rate: opt.CheckRate = 2.0,
    prompt_range: opt.PromptRange = CHECK_PROMPT_RANGE,
    output_range: opt.OutputRange = CHECK_OUTPUT_RANGE,
    repeats: opt.CheckRepeats = 3,
    seed: opt.CheckSeed = 0,
    dtype: opt.CheckDtype = "bf16",
    clock: opt.Clock = None,
    device: opt.CheckDevice = "cpu",
    overhead_from: opt.OverheadFrom = None,
    fit_overhead: opt.FitOverhead = None,
    resimulate: opt.Resimulate = None,
    profile: opt.Profile = None,
    output: opt.Output = None,
) -> None:
    """Replay a trace on transformers' continuous batching (CPU or GPU) and compare with the simulator."""
    from kernels.servecheck import cb_server

    overhead = cb_server.overhead_from(overhead_from) if overhead_from is not None else None
    if fit_overhead is not None:
        typer.echo(overhead_line(cb_server.overhead_from(fit_overhead), fit_overhead))
    elif resimulate is not None:
        result = cb_server.resimulate(resimulate, overhead, profile=profile)
        echo_lines(cb_server.report_lines(result))
        if output is not None:  # the comparison and the waterfall as JSON; never over a committed file
            echo_err(f"wrote {cb_server.write_resimulated(result, resimulate, output)}")
    else:
        result, path = replay(ctx.params, overhead)
        echo_lines(cb_server.report_lines(result))
        echo_err(f"wrote {path}")


def replay(p: dict[str, Any], overhead: dict | None):
    """simulate-check's measurement: its options checked, then transformers' server run."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise MissingDependencyError("transformers", "hf") from None
    from kernels.e2e.e2e import resolve_device
    from kernels.servecheck.cb_server import run_check

    gpu = p["device"].startswith("cuda")
    clock = p["clock"] or ("device" if gpu else "cpu")
    if p["requests"] < 2 or p["rate"] <= 0 or p["repeats"] < 1 or clock not in ("cpu", "wall", "device"):
        raise typer.BadParameter("--requests must be >= 2, --rate > 0, --repeats >= 1 and --clock cpu, device or wall")
    if (clock == "device") != gpu and clock != "wall":
        raise typer.BadParameter(f"--clock {clock} goes with --device {'cpu' if clock == 'cpu' else 'cuda'}")
    device = resolve_device(p["device"])
    if p["dtype"] not in ("bf16", "fp32"):
        raise typer.BadParameter(f"--dtype {p['dtype']!r}: transformers' check runs bf16 or fp32")
    prompt, output = p["prompt_range"], p["output_range"]
    if not 1 <= prompt[0] <= prompt[1] or not 1 <= output[0] <= output[1]:
        raise typer.BadParameter("--prompt-range and --output-range take MIN MAX with 1 <= MIN <= MAX")
    same = {name: p[name] for name in ("layers", "requests", "rate", "repeats", "seed", "dtype", "profile")}
    return run_check(
        p["model"],
        **same,
        prompt=prompt,
        output=output,
        clock=clock,
        out=p["output"],
        overhead=overhead,
        device=device,
        log=echo_err,
    )


@app.command()
def serve(
    host: opt.Host = "127.0.0.1",
    port: opt.Port = 8050,
    debug: opt.Debug = False,
    waitress: opt.Waitress = False,
    threads: opt.ServeThreads = 8,
) -> None:
    """Start the dashboard (Dash) and print its URL."""
    if waitress and debug:
        raise typer.BadParameter("--debug runs Flask's development server; drop --debug or --waitress")
    run_dashboard(host, port, debug, waitress, threads)


def run_dashboard(host: str, port: int, debug: bool, waitress: bool, threads: int) -> None:
    """Build the dashboard and serve it until stopped (needs the viewer extra)."""
    try:
        from viewer.app import create_app
    except ImportError as err:
        raise MissingDependencyError("dash, plotly and dash-cytoscape", "viewer") from err
    if waitress:
        try:
            from waitress import serve as wsgi_serve
        except ImportError as err:
            raise MissingDependencyError("waitress", "viewer") from err
    dashboard = create_app()
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"ridgeline dashboard on http://{shown}:{port}/ (Ctrl+C stops it)")
    try:
        if waitress:
            wsgi_serve(dashboard.server, host=host, port=port, threads=threads)
        else:
            # no version check: it calls plotly.com, and the dashboard works offline
            dashboard.run(host=host, port=port, debug=debug, dev_tools_disable_version_check=True)
    except OSError as err:
        raise RidgelineError(f"cannot listen on {host}:{port} ({err.strerror or err}); pick another --port") from None
