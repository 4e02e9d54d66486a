"""simulate (the serving simulator), simulate-check (transformers' continuous batching against
it) and serve (the dashboard)."""

from __future__ import annotations

from typing import Any

import typer

from ridgeline.api import default_attention, fleet_server, simulate_scenario, simulate_serving
from ridgeline.cli.app import (
    app,
    check_format,
    command,
    deployment,
    echo_err,
    echo_lines,
    emit,
    values,
    write_text,
)
from ridgeline.errors import MissingDependencyError, RidgelineError
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


SIMULATE = "model config hardware rate requests prompt__simulate output_tokens trace time_scale trace_window trace_log_type prefix max_batch token_budget chunked_prefill prefix_hit prefix_cache kv_blocks admit_margin step_overhead request_overhead host_overlap batch_attention seed ttft_slo__simulate tpot_slo__simulate percentile search timeline scenario instances duration dtype profile transfer fmt output deployment replicas route prefill_replicas decode_replicas prefill_hardware decode_hardware kv_link draft draft_tokens acceptance"
CHECK = "model__check layers__decode requests__check rate__check prompt_range output_range repeats__check seed__check dtype__check clock device__check overhead_from fit_overhead resimulate profile output"


@command(app, SIMULATE)
def simulate(ctx: typer.Context) -> None:
    """Serve requests with continuous batching: latency percentiles, throughput, KV use;
    replicas behind a router, disaggregated pools, speculative decodes (docs/fleet.md)."""
    v = values(ctx)
    check_format(v["fmt"])
    if not 0 < v["percentile"] <= 100:
        raise typer.BadParameter(f"--percentile must be in (0, 100], got {v['percentile']}")
    sched = scheduler(v)  # no --attention: the policy's (vLLM V1 runs flash); the output says which
    d = deployment({**v, "attention": v["attention"] or default_attention(sched.policy)})
    run = mlperf_scenario(v, d, sched) if v["scenario"] is not None else serving(v, d, sched)
    if v["timeline"] is not None:
        write_text(v["timeline"], run["result"].timeline_frame.to_csv(index=False))
    text = simulation_text(run, v["fmt"])
    emit(text, simulation_tables(run, v["percentile"]) + scenario_lines(run) if text is None else [], v["output"])


def serving(v: dict[str, Any], d, sched: Scheduler) -> dict[str, Any]:
    """simulate without --scenario: the arrivals served by one server or the fleet's options."""
    keys = {name: v[name] for name in (*ARRIVALS, "search", "ttft_slo", "tpot_slo", "percentile")}
    fleet = fleet_server(d, sched, **fleet_options(v, d))
    return simulate_serving(d, sched, **keys, progress=simulation_progress, fleet=fleet)


def mlperf_scenario(p: dict[str, Any], d, sched: Scheduler) -> dict[str, Any]:
    """``--scenario``: LoadGen's rules set the arrivals, lengths and latency bounds."""
    clash = [f"--{k.replace('_', '-')}" for k in ("trace", "search", "ttft_slo", "tpot_slo") if p[k]]
    if clash:
        raise typer.BadParameter(f"--scenario sets its own arrivals and latency bounds; drop {', '.join(clash)}")
    keep = {k: p[k] for k in ("requests", "seed", "instances", "rate")}
    return simulate_scenario(d, sched, p["scenario"], **keep, duration_s=p["duration"])


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


@command(app, CHECK, "simulate-check")
def simulate_check(ctx: typer.Context) -> None:
    """Replay a trace on transformers' continuous batching (CPU or GPU) and compare with the simulator."""
    from kernels.servecheck import cb_server

    v = values(ctx)
    overhead_from, fit_overhead, resimulate, output = (
        v[k] for k in ("overhead_from", "fit_overhead", "resimulate", "output")
    )
    overhead = cb_server.overhead_from(overhead_from) if overhead_from is not None else None
    if fit_overhead is not None:
        typer.echo(overhead_line(cb_server.overhead_from(fit_overhead), fit_overhead))
    elif resimulate is not None:
        result = cb_server.resimulate(resimulate, overhead, profile=v["profile"])
        echo_lines(cb_server.report_lines(result))
        if output is not None:  # the comparison and the waterfall as JSON; never over a committed file
            echo_err(f"wrote {cb_server.write_resimulated(result, resimulate, output)}")
    else:
        result, path = replay(v, overhead)
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


@command(app, "host port debug waitress threads__serve")
def serve(ctx: typer.Context) -> None:
    """Start the dashboard (Dash) and print its URL."""
    v = values(ctx)
    if v["waitress"] and v["debug"]:
        raise typer.BadParameter("--debug runs Flask's development server; drop --debug or --waitress")
    run_dashboard(**v)


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
