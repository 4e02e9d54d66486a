"""plan's workload, SLO and lists written as text ('poisson:rate=20,prompt=512,...',
'ttft=0.5,tpot=0.05', 'h100-sxm=3.5'), read into Load and Slo with one line naming what is wrong."""

from __future__ import annotations

import math

from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.bounds import Load, Slo


def pairs(text: str, option: str) -> dict[str, str]:
    """'a=1,b=2' -> {'a': '1', 'b': '2'}; anything else is one line naming the option."""
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InvalidWorkloadError(f"{option} takes KEY=VALUE pairs separated by commas, got {item!r} in {text!r}")
        if key.strip() in out:
            raise InvalidWorkloadError(f"{option} names {key.strip()} twice")
        out[key.strip()] = value.strip()
    return out


def number(value: str, what: str, whole: bool = False) -> float | int:
    try:
        parsed = int(value) if whole else float(value)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise InvalidWorkloadError(f"{what} must be {kind}, got {value!r}") from None
    if not math.isfinite(parsed):
        raise InvalidWorkloadError(f"{what} must be a positive, finite number, got {value!r}")
    if parsed <= 0 and not (whole and what.endswith("seed")):
        raise InvalidWorkloadError(f"{what} must be positive, got {value!r}")
    return parsed


def parse_workload(text: str) -> Load:
    kind, sep, rest = text.partition(":")
    if kind != "poisson" or not sep:
        raise InvalidWorkloadError(f"--workload must start with 'poisson:', got {text!r}")
    given = pairs(rest, "--workload")
    keys = {"rate": False, "prompt": True, "output": True, "n": True, "seed": True}
    unknown = sorted(set(given) - set(keys))
    missing = [k for k in ("rate", "prompt", "output", "n") if k not in given]
    if unknown or missing:
        raise InvalidWorkloadError(
            f"--workload {'does not take ' + ', '.join(unknown) if unknown else 'needs ' + ', '.join(missing)}; "
            "give poisson:rate=R,prompt=P,output=O,n=N[,seed=S]"
        )
    values = {k: number(v, f"the workload's {k}", keys[k]) for k, v in given.items()}
    return Load(values["rate"], values["prompt"], values["output"], values["n"], values.get("seed", 0))


def parse_slo(text: str) -> Slo:
    given = pairs(text, "--slo")
    unknown = sorted(set(given) - {"ttft", "tpot"})
    if unknown:
        raise InvalidWorkloadError(f"--slo takes ttft and tpot (seconds), not {', '.join(unknown)}")
    return Slo(*(number(given[k], f"the {k} SLO") if k in given else None for k in ("ttft", "tpot")))


def names(text: str, option: str) -> list[str]:
    out = [n.strip() for n in text.split(",")]
    if not all(out):
        raise InvalidWorkloadError(f"{option} takes names separated by commas, got {text!r}")
    return out


def parse_drafts(text: str) -> list[tuple[str, int, float]]:
    """'NAME:K:A,...' -> [(name, k, acceptance)]."""
    out = []
    for item in names(text, "--drafts"):
        name, k, a = (item.split(":") + [None, None])[:3]
        if k is None or a is None or item.count(":") != 2:
            raise InvalidWorkloadError(f"--drafts takes NAME:K:ACCEPTANCE items, e.g. llama-3.2-1b:4:0.7; got {item!r}")
        try:
            acceptance = float(a)
        except ValueError:
            raise InvalidWorkloadError(f"the draft {name}'s acceptance must be a number, got {a!r}") from None
        out.append((name, int(number(k, f"the draft {name}'s k", whole=True)), acceptance))
    return out


def parse_pools(text: str) -> tuple[tuple[int, int], ...]:
    """'P:D,...' -> ((P, D), ...): prefill and decode servers."""

    def split(item: str) -> tuple[int, int]:
        pre, sep, dec = item.partition(":")
        if not sep:
            raise InvalidWorkloadError(f"--pools takes P:D items (prefill:decode servers), got {item!r}")
        return int(number(pre, "each pool's servers", whole=True)), int(number(dec, "each pool's servers", whole=True))

    return tuple(split(item) for item in names(text, "--pools"))
