"""``ridgeline plan``'s output: the search's counts, the Pareto set, the cheapest deployments
simulated, the one chosen and the prices used; every deployment as JSON where asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ridgeline.report.terminal import (
    add_column,
    choose_columns,
    compact_table,
    console_width,
    fit_columns,
    left_out_line,
    show,
    to_terminal,
    write_text,
)

PLAN_COLUMNS = {  # the optional ones (fleet, basis, max rate) where the search has them
    "device": ("device", "{}"),
    "fleet": ("fleet", "{}"),
    "gpus": ("gpus", "{}"),
    "tp": ("tp", "{}"),
    "pp": ("pp", "{}"),
    "w_dtype": ("weights", "{}"),
    "kv_dtype": ("kv", "{}"),
    "max_batch": ("max batch", "{}"),
    "token_budget": ("chunk", "{}"),
    "usd_per_hour": ("$/hour", "{:.2f}"),
    "usd_per_million_tokens": ("$/M tokens", "{:.3f}"),
    "goodput_rps": ("goodput req/s", "{:.2f}"),
    "slo_attainment": ("met SLO", "{:.4f}"),
    "ttft_p99_s": ("TTFT p99 s", "{:.3f}"),
    "tpot_p99_s": ("TPOT p99 s", "{:.4f}"),
    "max_rate_rps": ("max rate req/s", "{:.2f}"),
    "basis": ("basis", "{}"),
}


PLAN_DROP_FIRST = ("$/hour", "chunk", "pp", "basis", "fleet")  # what a narrow terminal leaves out first
PLAN_TEXT = ("device", "fleet", "w_dtype", "kv_dtype", "basis")


def plan_table(frame, title: str) -> list[Any]:
    """Deployments of a plan, one row each (the columns of PLAN_COLUMNS that fit the terminal;
    terminal.choose_columns), and the line naming the columns left out."""
    shown = [(key, *how) for key, how in PLAN_COLUMNS.items() if key in frame]
    cols = [(header, [fmt.format(v) for v in frame[key]], key in PLAN_TEXT) for key, header, fmt in shown]
    keep, left_out = choose_columns(cols, console_width(), PLAN_DROP_FIRST)
    out = compact_table(title)
    for header, _, text in (cols[i] for i in keep):
        add_column(out, header, text)
    for row in zip(*(cols[i][1] for i in keep)):
        out.add_row(*row)
    fit_columns(out, [cols[i][1] for i in keep], console_width())
    return [out, *left_out_line(left_out)]


def plan_output(result, top: int, output: Path | None) -> None:
    """``plan``'s result: every deployment, with the search's counts, as JSON to ``output``
    where asked; then the view of the ``top`` cheapest."""
    if output is not None:
        write_text(output, json.dumps(result.to_dict(), indent=1) + "\n")
    show(plan_view(result, top), whole_lines=not to_terminal())  # as analyze: wrapped at a terminal's width


def plan_view(result, top: int) -> list[Any]:
    """A plan's search counts, its Pareto set, the ``top`` cheapest simulated, the choice and the
    prices used: lines of text and rich tables, in order."""
    counts, frame, meta = result.counts, result.frame, result.meta
    bounds = {reason: n for reason, n in counts["pruned"].items() if reason != "dominated"}
    pruned = ", ".join(f"{n} {reason}" for reason, n in bounds.items()) or "none"
    view: list[Any] = [
        f"{meta['model']}: {counts['enumerated']} deployments enumerated; {sum(bounds.values())} pruned by the "
        f"bounds ({pruned}); {counts['pruned'].get('dominated', 0)} dominated (they cost more than a simulated "
        f"one that met the SLO for every request); {counts['simulated']} simulated on "
        f"{'datasheet rooflines' if 'roofs' not in meta else meta['basis']} ({meta['executor']} executor)"
    ]
    if counts["may_be_on_front"]:
        view.append(
            f"the Pareto set is of the deployments the bounds keep: {counts['may_be_on_front']} pruned by a steady-state "
            "bound (throughput, tpot) cost less than the cheapest that met the SLO for every request and may serve "
            "some requests in time, so may be on the front of all deployments (not simulated; -o marks them "
            "may_be_on_front)"
        )
    if result.chosen is None and counts["simulated"]:
        return [*view, "no simulated deployment served a request within the SLO"]
    if result.chosen is None:
        return [*view, "no deployment survived the bounds: none can meet the SLO at this rate"]
    view += plan_table(frame.loc[result.pareto], "Pareto set: cost per million output tokens vs goodput")
    simulated = frame[frame["reason"] == ""].sort_values("rank_cost").head(top)
    view += plan_table(simulated, f"The {len(simulated)} cheapest simulated")
    row = frame.loc[result.chosen]
    fleet = f" as {row['fleet']}" if row.get("fleet") else ""
    view.append(
        f"chosen: {row['gpus']} x {row['device']}{fleet} (tp {row['tp']}, pp {row['pp']}), weights {row['w_dtype']}, KV "
        f"{row['kv_dtype']}, max batch {row['max_batch']}, chunk {row['token_budget']}: "
        f"${row['usd_per_million_tokens']:.3f} per million output tokens, goodput {row['goodput_rps']:.2f} req/s "
        f"({row['slo_attainment']:.4f} of requests met the SLO)"
    )
    prices = meta["prices"].items()
    return view + [f"price of {name}: ${p['usd_per_gpu_hour']:.2f}/GPU-hour, {p['source']}" for name, p in prices]
