"""The options several commands share, each declared once as an ``Annotated`` alias (the
default sits in the command's signature; an option of one command is declared in its
signature), the deployment options as one group, and their text turned into Settings keywords."""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer

from ridgeline.engine.workload import dtype_for_bits

HELP_DTYPE = "Weights, activations and KV cache type: fp32, bf16, fp16, fp8, int8, int4. Default: fp16, or bf16/fp32 on a device without fp16 matrix units (said in the output)."
HELP_PROFILE = "Measured device profile YAML ('ridgeline calibrate' writes one; reports/profiles holds the committed ones): the calibrated roofline of the device it was measured on. Measuring commands default to the measured device's own."
HELP_TRANSFER = "Apply --profile to another GPU of its architecture: its measured fractions on this device's datasheet roofs (labelled 'transferred'; it keeps how the profile was timed: an eager-timed one, as the H100's of 2026-11-23, prices eager execution only). Its measured error between the H100 and the H200: reports/RESULTS.md, 'Transfer between the GPUs'."

ModelArg = Annotated[str | None, typer.Argument(help="Catalog model name (see 'ridgeline models list').")]
Config = Annotated[Path | None, typer.Option(help="A Hugging Face config.json instead of a catalog name.")]
Hardware = Annotated[str, typer.Option("--hardware", "-H", help="Catalog device, 'host', or a device YAML file.")]
Batch = Annotated[int, typer.Option(help="Sequences per batch.")]
SeqLen = Annotated[int, typer.Option(help="Prompt length in tokens.")]
Generate = Annotated[int, typer.Option(help="Output tokens per sequence (0: no generation totals).")]
Dtype = Annotated[str | None, typer.Option(help=HELP_DTYPE)]
Format = Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")]
Output = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")
]
Profile = Annotated[Path | None, typer.Option(help=HELP_PROFILE)]
Transfer = Annotated[bool, typer.Option("--transfer", help=HELP_TRANSFER)]
Draft = Annotated[str | None, typer.Option(help="Draft model for speculative decoding.")]
DraftTokens = Annotated[int, typer.Option(help="Tokens the draft proposes per step (k).")]
Acceptance = Annotated[float, typer.Option(help="Probability each draft token is accepted (a).")]
Layers = Annotated[int | None, typer.Option(help="Keep only the first L decoder layers.")]
MeasureDevice = Annotated[str, typer.Option(help="cpu or cuda.")]
Quick = Annotated[bool, typer.Option("--quick", help="Fewer shapes and repetitions (CI: a few minutes on 2 cores).")]
Threads = Annotated[
    int | None, typer.Option(help="torch CPU threads, fixed for the run (default: all cores this process may use).")
]
QuietWait = Annotated[
    float, typer.Option(help="CPU: before each case, wait up to this many seconds for other processes to go idle.")
]
TorchDevice = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda when torch sees one).")]

Text = str | None  # a deployment option is text, so that sweep and compare take lists ("16,8,4")
HELP_ATTENTION = "auto (sdpa-gqa: transformers' sdpa path), eager, sdpa-repeat, sdpa-gqa, flash, flash-decoding or paged: docs/model.md, Attention settings."
HELP_MEMORY = "Fraction of device memory the runtime may use (vLLM's gpu_memory_utilization; default 0.9)."
HELP_EXECUTION = "graph, eager or compiled (auto: graph on a GPU, eager on a CPU); matters with a device-time profile."


def deployment_options(
    w_bits: Annotated[Text, typer.Option(help="Weight bits: 16, 8, 4, 2, 1 (integers below 16).")] = None,
    a_bits: Annotated[Text, typer.Option(help="Activation bits: 16 or 8.")] = None,
    kv_bits: Annotated[Text, typer.Option(help="KV-cache bits: 16, 8, 4, 2, 1.")] = None,
    w_dtype: Annotated[Text, typer.Option(help="Weight type, e.g. fp8_e4m3, bf16, int4.")] = None,
    a_dtype: Annotated[Text, typer.Option(help="Activation type.")] = None,
    kv_dtype: Annotated[Text, typer.Option(help="KV-cache type.")] = None,
    group_size: Annotated[Text, typer.Option(help="Quantisation group size (0: per channel).")] = None,
    attention: Annotated[Text, typer.Option(help=HELP_ATTENTION)] = None,
    kv_block: Annotated[Text, typer.Option(help="Tokens per KV block (paged).")] = None,
    tp: Annotated[Text, typer.Option(help="Tensor-parallel devices.")] = None,
    pp: Annotated[Text, typer.Option(help="Pipeline-parallel stages.")] = None,
    ep: Annotated[Text, typer.Option(help="Expert-parallel devices (MoE).")] = None,
    micro_batches: Annotated[Text, typer.Option(help="Pipeline micro-batches.")] = None,
    link_bw: Annotated[Text, typer.Option(help="Interconnect GB/s per direction (overrides the catalog).")] = None,
    link_latency: Annotated[Text, typer.Option(help="Interconnect latency per hop, µs.")] = None,
    zero_points: Annotated[
        Text, typer.Option(help="Integer weights' zero points: fp16 or packed (AWQ/GPTQ, at the weight's width).")
    ] = None,
    memory_utilization: Annotated[Text, typer.Option(help=HELP_MEMORY)] = None,
    execution: Annotated[Text, typer.Option(help=HELP_EXECUTION)] = None,
) -> None:
    """The deployment settings (ridgeline.engine.workload.Settings) of analyze, sweep, compare,
    frontier and simulate: typer reads this signature once (deployment_params)."""


@cache
def deployment_params() -> tuple:
    """The deployment options as typer builds them, for app.DeploymentCommand."""
    group = typer.Typer(add_completion=False)
    group.command()(deployment_options)
    return tuple(typer.main.get_command(group).params)


# option -> the Settings field it sets, where the names differ (*_bits give a width -> a dtype)
SETTING_FIELDS = {
    "w_bits": "w_dtype",
    "a_bits": "a_dtype",
    "kv_bits": "kv_dtype",
    "link_bw": "link_bw_gb_s",
    "link_latency": "link_latency_us",
}
NUMBERS = {"link_bw": float, "link_latency": float, "memory_utilization": float}
INTEGERS = ("group_size", "kv_block", "tp", "pp", "ep", "micro_batches")
DEPLOYMENT = tuple(inspect.signature(deployment_options).parameters)

MAX_LIST_VALUES = 100_000  # values one list option may expand to


def parse_values(text: str, cast=int) -> list:
    """'1,2,4..256' -> 1 2 4 8 ... 256 (geometric when the last two values given double or
    multiply evenly, else arithmetic); '16,8,4' -> the values as given."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        if parts and ".." in parts[-1]:
            last, stop = parts[-1].split("..")
            given = [cast(p) for p in parts[:-1]] + [cast(last)]
            stop = cast(stop)
            if len(given) < 2:
                raise ValueError
            a, b = given[-2], given[-1]
            if not a < b <= stop:
                raise typer.BadParameter(
                    f"the range '{text}' does not rise to its end: its last two values must increase "
                    f"and the end be at least the last, e.g. 1,2,4..256"
                )
            geometric = a > 0 and b % a == 0 and b // a >= 2 if cast is int else False
            values = list(given)
            while True:
                nxt = values[-1] * (b // a) if geometric else values[-1] + (b - a)
                if nxt > stop:
                    return values
                if len(values) >= MAX_LIST_VALUES:
                    raise typer.BadParameter(
                        f"the range '{text}' gives more than {MAX_LIST_VALUES:,} values; use a coarser step"
                    )
                values.append(nxt)
        if not parts:
            raise ValueError
        return [cast(p) for p in parts]
    except (ValueError, ZeroDivisionError):
        raise typer.BadParameter(f"cannot read the list '{text}': write values like 1,2,4..256") from None


def setting_lists(params: dict[str, Any], allow_lists: bool = True) -> dict[str, list]:
    """A command's parameters -> {Settings field: [values]} for each deployment option given
    (one value each unless lists are allowed)."""
    out: dict[str, list] = {}
    for name in DEPLOYMENT:
        text, field, option = params.get(name), SETTING_FIELDS.get(name, name), f"--{name.replace('_', '-')}"
        if text is None:
            continue
        if field in out:
            raise typer.BadParameter(f"give {option} or its *-dtype/*-bits twin, not both")
        cast = int if name in INTEGERS or name.endswith("_bits") else NUMBERS.get(name, str)
        values = parse_values(text, cast) if cast is not str else [v.strip() for v in str(text).split(",")]
        if name.endswith("_bits"):
            values = [dtype_for_bits(v, name.split("_")[0]) for v in values]
        if len(values) > 1 and not allow_lists:
            raise typer.BadParameter(f"{option} takes one value here; use 'ridgeline sweep' for lists")
        out[field] = values
    return out


def settings_keywords(params: dict[str, Any]) -> dict[str, Any]:
    """A command's parameters -> the Settings keywords its deployment options set (one value each)."""
    return {field: values[0] for field, values in setting_lists(params, allow_lists=False).items()}
