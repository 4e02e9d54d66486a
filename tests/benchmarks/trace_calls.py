"""Follow one CLI option's value through the code, as the program runs.

Runs one `ridgeline` command in-process under `sys.setprofile`. The value is picked up in the
first project function that has a parameter of that name; from there a call is on the trace
when one of its arguments is the value or anything derived from it (what a traced call
returned), directly or one or two levels inside a dataclass, dict, list or tuple. Over the
project's own Python functions (ridgeline/, kernels/, viewer/) it counts, up to the first call
into the operator formulas (`ops.py`) and for the whole command (through the output):
distinct functions, distinct files, and moves between files (consecutive traced calls whose
files differ).

Run: python tests/benchmarks/trace_calls.py w_bits analyze llama-2-7b --w-bits 4
     python tests/benchmarks/trace_calls.py profile analyze llama-2-7b -H h200 --dtype bf16 \
         --profile reports/profiles/cuda-nvidia-h200.yaml
TRACE_LIST=1 lists the traced calls. The counts depend only on the code, not on the machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tuple(str(ROOT / name) + "/" for name in ("ridgeline", "kernels", "viewer"))


def parts(value, depth: int):
    """The value and what it holds, `depth` levels down."""
    yield value
    if depth == 0 or isinstance(value, (str, bytes, int, float)):
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    elif isinstance(value, dict):
        inner = list(value.values())
    elif isinstance(value, (list, tuple)):
        inner = list(value)[:64]
    else:
        return
    for item in inner:
        yield from parts(item, depth - 1)


def picked_up(local: dict, param: str):
    """The option's value where this frame receives it: as a parameter, or in **kwargs."""
    for value in (local, *(v for v in local.values() if isinstance(v, dict))):
        if value.get(param) is not None:
            return value[param]
    return None


def traced_calls(param: str, argv: list[str]) -> list[tuple[str, str]]:
    """(file relative to the root, function) for every project call that carries the value."""
    from ridgeline.cli import app

    carried: dict[int, object] = {}  # id -> object (kept alive so ids are not reused)
    plain: set[tuple[type, object]] = set()
    traced_frames: set[int] = set()
    calls: list[tuple[str, str]] = []

    def holds(frame) -> bool:
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        return any(is_carried(p) for n in names if n in frame.f_locals for p in parts(frame.f_locals[n], 2))

    def is_carried(p) -> bool:
        if type(p) in (str, int, float):  # plain values have no identity to follow: equal ones
            return (type(p), p) in plain
        return id(p) in carried

    def carry(value) -> None:
        for p in parts(value, 1):
            if type(p) in (str, int, float):
                plain.add((type(p), p))
            elif p is not None and not isinstance(p, bool):
                carried[id(p)] = p

    def hook(frame, event, arg):
        if not frame.f_code.co_filename.startswith(PACKAGES) or frame.f_code.co_name.startswith("<"):
            return
        if event == "call":
            if not (carried or plain):
                start = picked_up(frame.f_locals, param)
                if start is not None:
                    carry(start)
            if (carried or plain) and holds(frame):
                traced_frames.add(id(frame))
                calls.append((str(Path(frame.f_code.co_filename).relative_to(ROOT)), frame.f_code.co_name))
        elif event == "return" and id(frame) in traced_frames:
            traced_frames.discard(id(frame))
            if arg is not None and not isinstance(arg, bool):
                carry(arg)

    sys.setprofile(hook)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            app(argv, standalone_mode=False)
    finally:
        sys.setprofile(None)
    return calls


def counts(calls: list[tuple[str, str]]) -> str:
    moves = sum(1 for a, b in zip(calls, calls[1:]) if a[0] != b[0])
    return f"{len(set(calls))} functions, {len({f for f, _ in calls})} files, {moves} moves between files"


def main(param: str, argv: list[str]) -> None:
    calls = traced_calls(param, argv)
    first_op = next((i for i, (f, _) in enumerate(calls) if f.endswith("ops.py")), len(calls) - 1)
    print(f"--{param.replace('_', '-')} in: ridgeline {' '.join(argv)}")
    print(f"  to the first operator: {counts(calls[: first_op + 1])}")
    print(f"  through the output:    {counts(calls)}")
    if os.environ.get("TRACE_LIST"):
        print("\n".join(f"    {f} {n}" for f, n in calls))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
