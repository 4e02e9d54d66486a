"""plan: the cheapest deployments that serve a workload within its SLO (docs/plan.md)."""

from __future__ import annotations

import json

import typer

from ridgeline import api
from ridgeline.cli.app import app, command, echo_err, values, write_text
from ridgeline.report import console, plan_view


@command(app, "model workload slo devices counts price executor address workers top output__plan")
def plan(ctx: typer.Context) -> None:
    """Search deployments (devices x count x tp/pp x types x batch x chunk): bounds, then simulation; cost vs goodput."""
    v = values(ctx)
    if v["model"] is None:
        raise typer.BadParameter("name a model (see 'ridgeline models list')")
    text = {key: v[key] for key in ("devices", "workload", "slo", "price", "counts", "top", "output")}
    how = {key: v[key] for key in ("executor", "workers", "address")}
    progress = lambda done, total: echo_err(f"price level {done} of {total} done")  # noqa: E731
    result = api.plan_from_text(v["model"], **text, **how, progress=progress)
    if v["output"] is not None:
        write_text(v["output"], json.dumps(result.to_dict(), indent=1) + "\n")
    out = console()
    for item in plan_view(result, v["top"]):  # a line of text is never wrapped
        out.print(item, soft_wrap=isinstance(item, str))
