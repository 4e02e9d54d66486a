"""simulate (the serving simulator), simulate-check (transformers' continuous batching against
it) and serve (the dashboard)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ridgeline.api import default_attention, fleet_server, simulate_scenario, simulate_serving
from ridgeline.cli import options as opt
from ridgeline.cli.app import (
    DeploymentCommand,
    app,
    check_format,
    deployment,
    echo_err,
    echo_lines,
    emit,
    values,
    write_text,
)
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

# help texts too long to sit in their option's line
HELP = {
    "trace": "CSV/JSONL trace: arrival_s, prompt_tokens, output_tokens; Azure's, BurstGPT's and Mooncake's load as they are (docs/traces.md).",
    "trace_window": "START,END: only the trace's requests arriving in [START, END) seconds from its first request.",
    "trace_log_type": "BurstGPT traces: only the rows of this Log Type, e.g. 'Conversation log'.",
    "prefix": "shared:system=TOKENS,fanout=N: each N requests in a row share a system prompt of TOKENS tokens (block ids for --prefix-cache).",
    "chunked_prefill": "Split prompts to fit the token budget.",
    "prefix_cache": "Cache prompts' KV blocks by their ids (a Mooncake trace's hash_ids, or --prefix), LRU-evicted within the KV cache.",
    "admit_margin": "New prompts wait below this fraction of free KV blocks (transformers: 0.15).",
    "step_overhead": "Host seconds per step beyond the forward (measured: simulate-check --fit-overhead).",
    "request_overhead": "Host seconds per request in a step, on top of --step-overhead.",
    "host_overlap": "The host terms overlap the device's work (a GPU run eager): a step takes the longer of the forward and the host terms, not their sum.",
    "batch_attention": "varlen: each sequence attends to its own keys (vLLM); masked: one attention over the whole step under a block-diagonal mask; gather: masked as transformers' sdpa path runs it (cache written and read back by index, GQA heads repeated).",
    "scenario": "MLPerf Inference scenario for Llama 2 70B: server, interactive or offline (LoadGen's latency bounds, the data set's lengths; --requests samples).",
    "duration": "With --scenario server/interactive: seconds of arrivals per run (LoadGen's minimum, 600, by default).",
    "route": "How the router picks a replica: round-robin, least-outstanding or prefix-affinity.",
    "prefill_replicas": "Disaggregate: servers in the prefill pool (with --decode-replicas).",
    "prefill_hardware": "Device of the prefill pool (default --hardware).",
    "kv_link": "KV cache link between the pools, GBPS,US (default 400,9.6: a ConnectX-7 port).",
    "prompt_range": "Prompt tokens, uniform on MIN MAX.",
    "output_range": "Output tokens, uniform on MIN MAX.",
    "dtype": "Model data type: bf16, or fp32 on a CPU without bf16 kernels (see 'calibrate').",
    "clock": "cpu: step transformers' server here on a clock of CPU seconds (immune to other processes); device (a GPU): the same, each step's wall seconds with the GPU synchronised; wall: its background thread in real time. Default: cpu, or device with --device cuda.",
    "device": "cpu, or cuda: transformers on the GPU, eager (no CUDA graphs), simulated in eager execution with the GPU's profile.",
    "overhead_from": "Also simulate with the host terms fitted to this recorded run (another trace).",
    "fit_overhead": "Measure nothing: fit the host terms (seconds per step, per request) to this recorded run's steps and print them.",
    "resimulate": "Measure nothing: simulate this recorded run's trace again with today's engine and print the comparison.",
    "waitress": "Serve with waitress, a production WSGI server, instead of Flask's development server.",
}


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


@app.command(cls=DeploymentCommand)
def simulate(
    ctx: typer.Context,
    model: opt.ModelArg = None,
    config: opt.Config = None,
    hardware: opt.Hardware = "a6000",
    rate: Annotated[float, typer.Option(help="Poisson arrivals, requests per second (start of --search).")] = 1.0,
    requests: Annotated[int, typer.Option(help="Poisson requests to simulate.")] = 1000,
    prompt: Annotated[int, typer.Option(help="Prompt tokens per Poisson request.")] = 512,
    output_tokens: Annotated[int, typer.Option(help="Output tokens per Poisson request.")] = 128,
    trace: Annotated[Path | None, typer.Option(help=HELP["trace"])] = None,
    time_scale: Annotated[float, typer.Option(help="Replay the trace this many times faster.")] = 1.0,
    trace_window: Annotated[str | None, typer.Option(help=HELP["trace_window"])] = None,
    trace_log_type: Annotated[str | None, typer.Option(help=HELP["trace_log_type"])] = None,
    prefix: Annotated[str | None, typer.Option(help=HELP["prefix"])] = None,
    max_batch: Annotated[int, typer.Option(help="Sequences per step.")] = 256,
    token_budget: Annotated[int, typer.Option(help="Tokens per step (prefill chunks + decodes).")] = 2048,
    chunked_prefill: Annotated[
        bool, typer.Option("--chunked-prefill/--no-chunked-prefill", help=HELP["chunked_prefill"])
    ] = True,
    prefix_hit: Annotated[float, typer.Option(help="Fraction of each prompt found in the prefix cache.")] = 0.0,
    prefix_cache: Annotated[bool, typer.Option("--prefix-cache/--no-prefix-cache", help=HELP["prefix_cache"])] = False,
    kv_blocks: Annotated[int | None, typer.Option(help="Paged KV blocks (default: what memory leaves).")] = None,
    admit_margin: Annotated[float, typer.Option(help=HELP["admit_margin"])] = 0.0,
    step_overhead: Annotated[float, typer.Option(help=HELP["step_overhead"])] = 0.0,
    request_overhead: Annotated[float, typer.Option(help=HELP["request_overhead"])] = 0.0,
    host_overlap: Annotated[bool, typer.Option("--host-overlap", help=HELP["host_overlap"])] = False,
    batch_attention: Annotated[str, typer.Option(help=HELP["batch_attention"])] = "varlen",
    seed: Annotated[int, typer.Option(help="Seed of the Poisson arrivals.")] = 0,
    ttft_slo: Annotated[float | None, typer.Option("--ttft-slo", help="TTFT target, seconds.")] = None,
    tpot_slo: Annotated[float | None, typer.Option("--tpot-slo", help="TPOT target, seconds.")] = None,
    percentile: Annotated[float, typer.Option(help="Percentile the SLOs apply to.")] = 99.0,
    search: Annotated[bool, typer.Option("--search", help="Find the highest request rate meeting the SLOs.")] = False,
    timeline: Annotated[Path | None, typer.Option(help="Also write the step timeline (KV use, batch) as CSV.")] = None,
    scenario: Annotated[str | None, typer.Option(help=HELP["scenario"])] = None,
    instances: Annotated[int, typer.Option(help="With --scenario: copies of the deployment sharing the load.")] = 1,
    duration: Annotated[float | None, typer.Option(help=HELP["duration"])] = None,
    dtype: opt.Dtype = None,
    profile: opt.Profile = None,
    transfer: opt.Transfer = False,
    fmt: opt.Format = "table",
    output: opt.Output = None,
    replicas: Annotated[int, typer.Option(help="Copies of the server behind a router.")] = 1,
    route: Annotated[str, typer.Option(help=HELP["route"])] = "round-robin",
    prefill_replicas: Annotated[int | None, typer.Option(help=HELP["prefill_replicas"])] = None,
    decode_replicas: Annotated[int | None, typer.Option(help="Disaggregate: servers in the decode pool.")] = None,
    prefill_hardware: Annotated[str | None, typer.Option(help=HELP["prefill_hardware"])] = None,
    decode_hardware: Annotated[str | None, typer.Option(help="Device of the decode pool (default --hardware).")] = None,
    kv_link: Annotated[str | None, typer.Option("--kv-link", help=HELP["kv_link"])] = None,
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
    given = values(ctx)
    d = deployment({**given, "attention": given["attention"] or default_attention(sched.policy)})
    if scenario is not None:
        run = mlperf_scenario(ctx.params, d, sched, duration)
    else:
        slos = {"ttft_slo": ttft_slo, "tpot_slo": tpot_slo, "percentile": percentile}
        arrivals = {name: ctx.params[name] for name in ARRIVALS}
        serve = fleet_server(d, sched, **fleet_options(given, d))
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
    model: Annotated[str, typer.Argument(help="Catalog model (built with random weights).")] = "qwen2-0.5b",
    layers: opt.Layers = None,
    requests: Annotated[int, typer.Option(help="Requests in the Poisson trace.")] = 48,
    rate: Annotated[float, typer.Option(help="Requests per second.")] = 2.0,
    prompt_range: Annotated[tuple[int, int], typer.Option(help=HELP["prompt_range"])] = CHECK_PROMPT_RANGE,
    output_range: Annotated[tuple[int, int], typer.Option(help=HELP["output_range"])] = CHECK_OUTPUT_RANGE,
    repeats: Annotated[int, typer.Option(help="Replays of the trace (per-request medians).")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the trace and the prompts.")] = 0,
    dtype: Annotated[str, typer.Option(help=HELP["dtype"])] = "bf16",
    clock: Annotated[str | None, typer.Option(help=HELP["clock"])] = None,
    device: Annotated[str, typer.Option(help=HELP["device"])] = "cpu",
    overhead_from: Annotated[Path | None, typer.Option(help=HELP["overhead_from"])] = None,
    fit_overhead: Annotated[Path | None, typer.Option(help=HELP["fit_overhead"])] = None,
    resimulate: Annotated[Path | None, typer.Option(help=HELP["resimulate"])] = None,
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
    host: Annotated[str, typer.Option(help="Interface to bind; the default keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8050,
    debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, error pop-ups).")] = False,
    waitress: Annotated[bool, typer.Option("--waitress", help=HELP["waitress"])] = False,
    threads: Annotated[int, typer.Option(min=1, help="waitress: requests served at once.")] = 8,
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
