"""Deployment settings written as text, as the command line takes them: '16,8,4' or
'1,2,4..256' lists, *_bits widths as types, each option named by the Settings field it sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from typing_extensions import Doc

from ridgeline.errors import InvalidOptionError, InvalidWorkloadError
from ridgeline.io.resolve import Deployment, deploy, target

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
# the deployment options of analyze, sweep, compare, frontier and simulate, in their help's order
DEPLOYMENT = (
    *("w_bits", "a_bits", "kv_bits", "w_dtype", "a_dtype", "kv_dtype", "group_size", "attention", "kv_block"),
    *("tp", "pp", "ep", "micro_batches", "link_bw", "link_latency", "zero_points", "memory_utilization", "execution"),
    *("engine", "fusion"),
)

MAX_LIST_VALUES = 100_000  # values one list option may expand to


def parse_values(text: str, cast=int) -> list:
    """'1,2,4..256' -> 1 2 4 8 ... 256 (geometric when the last two values given double or
    multiply evenly, else arithmetic); '16,8,4' -> the values as given."""
    return [cast(word) for word in list_words(text, cast)]


def list_words(text: str, cast=int) -> list[str]:
    """The words of a list, each one value as text, checked to read as ``cast``: '16,8,4' ->
    '16' '8' '4'; a range '1,2,4..256' -> '1' '2' '4' '8' ... '256' (``parse_values``). Each
    word is then read once, where its option is (``setting_lists``)."""
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
                raise InvalidOptionError(
                    f"the range '{text}' does not rise to its end: its last two values must increase "
                    f"and the end be at least the last, e.g. 1,2,4..256"
                )
            geometric = a > 0 and b % a == 0 and b // a >= 2 if cast is int else False
            values = list(given)
            while True:
                nxt = values[-1] * (b // a) if geometric else values[-1] + (b - a)
                if nxt > stop:
                    return [str(v) for v in values]
                if len(values) >= MAX_LIST_VALUES:
                    raise InvalidOptionError(
                        f"the range '{text}' gives more than {MAX_LIST_VALUES:,} values; use a coarser step"
                    )
                values.append(nxt)
        if not parts:
            raise ValueError
        for p in parts:
            cast(p)
        return parts
    except (ValueError, ZeroDivisionError):
        raise InvalidOptionError(f"cannot read the list '{text}': write values like 1,2,4..256") from None


BIT_TYPES = {16: "fp16", 8: "int8", 4: "int4", 2: "int2", 1: "int1"}  # --*-bits: 16 is fp16, lower widths integers


def setting_lists(params: dict[str, Any], allow_lists: bool = True) -> dict[str, list]:
    """A command's parameters -> {Settings field: [values]} for each deployment option given
    (one value each unless lists are allowed): each word read here, once, into the field's
    value ('4' of --w-bits into w_dtype 'int4'), which Settings then carries to the engine."""
    out: dict[str, list] = {}
    for name in DEPLOYMENT:
        text, field, option = params.get(name), SETTING_FIELDS.get(name, name), f"--{name.replace('_', '-')}"
        if text is None:
            continue
        if field in out:
            raise InvalidOptionError(f"give {option} or its *-dtype/*-bits twin, not both")
        cast = int if name in INTEGERS or name.endswith("_bits") else NUMBERS.get(name, str)
        words = list_words(text, cast) if cast is not str else [v.strip() for v in str(text).split(",")]
        values = [cast(word) for word in words]
        if name.endswith("_bits"):
            wrong = [v for v in values if v not in BIT_TYPES]
            if wrong:
                raise InvalidWorkloadError(f"--{name.split('_')[0]}-bits must be 16, 8, 4, 2 or 1, got {wrong[0]}")
            values = [BIT_TYPES[v] for v in values]
        if len(values) > 1 and not allow_lists:
            raise InvalidOptionError(f"{option} takes one value here; use 'ridgeline sweep' for lists")
        out[field] = values
    return out


def model_name(model: str | None, config: Path | None) -> str:
    """The model a command names: a catalog name or a config.json (--config), one of them."""
    if config is not None and model is not None:
        raise InvalidOptionError("give a catalog model name or --config, not both")
    if config is None and model is None:
        raise InvalidOptionError("name a model (see 'ridgeline models list') or pass --config config.json")
    return str(config) if config is not None else model


def check_transfer(profile: Path | None, transfer: bool) -> None:
    if transfer and profile is None:
        raise InvalidOptionError("--transfer needs --profile")


# fmt: off
def resolve_options(
    *,
    model: str | None = None,
    config: Annotated[Path | None, Doc("A Hugging Face config.json instead of a catalog name.")] = None,
    hardware: Annotated[str, Doc("Catalog device, 'host', or a device YAML file.")] = "a6000",
    dtype: Annotated[str | None, Doc("Weights, activations and KV cache type: fp32, bf16, fp16, fp8, int8, int4. Default: fp16, or bf16/fp32 on a device without fp16 matrix units (said in the output).")] = None,
    profile: Annotated[Path | None, Doc("Measured device profile YAML ('ridgeline calibrate' writes one; reports/profiles holds the committed ones): the calibrated roofline of the device it was measured on. Measuring commands default to the measured device's own.")] = None,
    transfer: Annotated[bool, Doc("Apply --profile to another GPU of its architecture: its measured fractions on this device's datasheet roofs (labelled 'transferred'; it keeps how the profile was timed: an eager-timed one, as the H100's of 2026-11-23, prices eager execution only). Its measured error between the H100 and the H200: reports/RESULTS.md, 'Transfer between the GPUs'.")] = False,
    settings: dict[str, Any] | None = None,
    **options: Any,
) -> Deployment:
    """A command's model, hardware, dtype, profile and deployment options (or ``settings``)
    resolved once (ridgeline.io.resolve): what they name first, then the settings' text read
    against it. Each option but the deployment's is declared here, once."""
    check_transfer(profile, transfer)
    named = target(model_name(model, config), hardware, profile=profile, transfer=transfer)
    if settings is None:  # one value each
        settings = {field: values[0] for field, values in setting_lists(options, allow_lists=False).items()}
    return deploy(named, dtype, None, settings)
# fmt: on
