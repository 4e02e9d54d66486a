"""simulate (the serving simulator) and plan (the cheapest deployments that serve a workload
within its SLO: docs/plan.md)."""

from __future__ import annotations

import typer

from ridgeline import report
from ridgeline.api import (
    default_attention,
    options_scheduler,
    plan_from_text,
    serving_scheduler,
    simulate_options,
)
from ridgeline.cli.app import app
from ridgeline.cli.command import command, deployment, echo_err, pick, values
from ridgeline.errors import InvalidOptionError, in_percent

SIMULATE = "model config hardware rate requests prompt output_tokens trace time_scale trace_window trace_log_type prefix max_batch token_budget chunked_prefill prefix_hit prefix_cache kv_blocks admit_margin step_overhead request_overhead host_overlap batch_attention seed ttft_slo tpot_slo percentile search timeline scenario instances duration dtype profile transfer fmt output deployment replicas route prefill_replicas decode_replicas prefill_hardware decode_hardware kv_link draft draft_tokens acceptance"


@command(app, SIMULATE, declared=(options_scheduler, simulate_options, report.simulation_output))
def simulate(ctx: typer.Context) -> None:
    """Serve requests with continuous batching: latency percentiles, throughput, KV use;
    replicas behind a router, disaggregated pools, speculative decodes (docs/fleet.md)."""
    v = values(ctx)
    # the percentile is checked before the deployment is resolved (and its notes printed)
    in_percent("--percentile", v["percentile"], InvalidOptionError)
    given = options_scheduler(**v)
    # no --attention: the engine's, or for pytorch the policy's (vLLM V1 runs flash); the output says which
    plain = (v.get("engine") or "pytorch") == "pytorch"
    d = deployment({**v, "attention": v["attention"] or (default_attention("vllm-v1") if plain else None)})
    sched = serving_scheduler(d, given)
    pool = lambda device: deployment({**v, "hardware": device, "attention": d.settings.attention})  # noqa: E731
    run = simulate_options(d, sched, pool, report.simulation_progress, **v)
    report.simulation_output(run, **pick(v, "fmt percentile output timeline"))


PLAN = "model workload slo devices counts price executor address workers top output replicas pools drafts profile transfer rate_search"


@command(app, PLAN, declared=(plan_from_text,))
def plan(ctx: typer.Context) -> None:
    """Search deployments (devices x count x tp/pp x types x batch x chunk): bounds, then simulation; cost vs goodput."""
    v = values(ctx)
    progress = lambda done, total: echo_err(f"price level {done} of {total} done")  # noqa: E731
    report.plan_output(plan_from_text(**v, progress=progress), v["top"], v["output"])
