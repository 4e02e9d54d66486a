"""Outputs: JSON, CSV, rich tables, and atomic file writes. A module per command family
(``analysis``, ``frames`` for sweep/compare/frontier, ``serving``, ``plan``, ``catalog``) on
``terminal``'s numbers, tables and printing; the names the CLI, the viewer and the measuring
commands use are here."""

from ridgeline.report.analysis import outside_note, render, rich_tables, verdict
from ridgeline.report.catalog import (
    DEVICE_HEADER,
    MODEL_HEADER,
    device_line,
    device_rows,
    model_line,
    model_rows,
    registered_line,
)
from ridgeline.report.frames import (
    ProgressAfter,
    deployment_notes,
    frontier_notes,
    show_deployment_frame,
    show_frame,
)
from ridgeline.report.plan import plan_output
from ridgeline.report.serving import (
    overhead_line,
    simulation_output,
    simulation_progress,
    simulation_tables,
    simulation_text,
)
from ridgeline.report.terminal import check_format, console, emit, plain_number, print_lines

__all__ = [
    "DEVICE_HEADER",
    "MODEL_HEADER",
    "ProgressAfter",
    "check_format",
    "console",
    "deployment_notes",
    "device_line",
    "device_rows",
    "emit",
    "frontier_notes",
    "model_line",
    "model_rows",
    "outside_note",
    "overhead_line",
    "plain_number",
    "plan_output",
    "print_lines",
    "registered_line",
    "render",
    "rich_tables",
    "show_deployment_frame",
    "show_frame",
    "simulation_output",
    "simulation_progress",
    "simulation_tables",
    "simulation_text",
    "verdict",
]
