"""How many places change each command-line option's meaning on its way to the engine (issue 56).

An option's value starts as the word on the command line and ends where the engine takes it.
A *place* changes its meaning when it hands the value on in a form it did not receive: another
representation (the text '4' -> the number 4 -> 'int4' -> 0.5 bytes a weight in the Plan) or
the same value under another name (the key ``w_bits`` -> the field ``w_dtype``). The count of
an option is the number of such places; ``--w-bits`` had 4 (parse_values, dtype_for_bits,
setting_lists, Deployment.of), now 2 (setting_lists reads the word into w_dtype; the Plan).

Measured, not declared: each command runs in-process without the option (its default; the
one run all its options are compared with) and with it, under ``sys.setprofile``. Every call
of a project function (ridgeline/, kernels/, viewer/) is recorded with the scalar leaves of its
arguments and of its return value (str, int, float, bool, Path, a numpy number; through dicts,
lists, tuples, dataclasses and a click context's params, 4 levels deep; a numpy array is data
computed with the options, not a form of one), each named by the key, field or keyword that
holds it; a bare return value and a bare argument of a call have no name. A call's twin in the
other run is the next call of the same function by its caller's twin. Then:

- A leaf *carries* the option where it differs from its twin's at the same path (or the call
  has no twin). Prose (a string with a space) is a message about the value, not a form of it.
- A call *receives* the carrying leaves of its arguments and of what its callees return; it
  *hands on* the carrying leaves of its return value and of the arguments it passes to its
  callees. It is a place when it hands on a value it did not receive (a conversion), or a
  named value under a name it did not receive (a rename); a call that receives none hands on
  data or its object's state, not the option. A function counts once per option.
- click's conversion of the word into the option's declared type (an int, a float, a path) is
  a place ('click') when the value differs from the word.
- Where it ends: a call into ridgeline/engine/ or ridgeline/serving/ is one step (what runs
  inside is not followed). One that returns an input record of the engine (Settings, Workload,
  Plan, Deployment: what the resolver builds at the edge) is followed on like any call; any
  other that takes the option (by name: not in a ``**keywords`` that catches all) is the engine
  taking it, and the trace ends there; so does a call into ridgeline/report/ (the output takes
  it). It ends, too, at a call that opens a file the option names (the file is an input of its
  own: read once per command, tests/test_architecture.py) and at a call into kernels/ or
  viewer/ (a measuring or serving command's own function, which would run the device or a
  server). Only calls that returned before the end are judged.

Run: python tests/benchmarks/option_meaning.py [COMMAND ...]   (all commands by default; a few
minutes) OPTION_LIST=1 also prints each place, OPTION_WHY=1 what each received and handed on.
The counts depend only on the code. Limits: a value kept in an object's state (not a record)
is not followed; the options of a measuring command (kernels/) or of the dashboard are
followed to their own function only; --executor ray, --address and --refresh are not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tuple(f"{ROOT / name}{os.sep}" for name in ("ridgeline", "kernels", "viewer"))
ENGINE = tuple(f"{ROOT / 'ridgeline' / name}{os.sep}" for name in ("engine", "serving"))
REPORT = f"{ROOT / 'ridgeline' / 'report'}{os.sep}"
DEVICE_SIDE = tuple(f"{ROOT / name}{os.sep}" for name in ("kernels", "viewer"))
RECORDS = ("Settings", "Workload", "Plan", "Deployment")  # the engine's input records
SCALARS = (str, int, float, bool, Path)
LIMIT = 2  # the most places an option may change its meaning in (issue 56)


class Ended(BaseException):
    """Raised in a run once the engine has taken every option (nothing after it is judged)."""


# -- the leaves of a value -------------------------------------------------------------------


def leaves(value, name, path: str, depth: int, out: dict) -> None:
    """path -> (name, value) for each scalar in ``value``."""
    for rest, key, item in parts(value, name, depth):
        out[path + rest] = (key, item)


MEMO: dict[int, tuple] = {}  # id -> (a frozen record, its parts): records pass through many calls


def parts(value, name, depth: int) -> list[tuple]:
    """(path below ``value``, name, scalar) for each scalar in ``value``, ``depth`` levels down."""
    if type(value).__module__ == "numpy":  # a number, or an array: data computed with the options
        value = value.item() if getattr(value, "ndim", 1) == 0 else None
    if isinstance(value, SCALARS):
        return [("", name, value)]
    if depth == 0 or value is None:
        return []
    frozen = dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen
    if frozen and id(value) in MEMO and MEMO[id(value)][0] is value and MEMO[id(value)][1] == depth:
        return MEMO[id(value)][2]
    if hasattr(value, "params") and type(value).__name__ == "Context":  # click's: what a command got
        value = {**value.params, **value.meta.get("values", {})}
    out: list[tuple] = []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    elif hasattr(value, "_fields") and isinstance(value, tuple):  # a NamedTuple
        items = list(zip(value._fields, value))
    elif hasattr(value, "items") and hasattr(value, "keys"):
        items = [(k, v) for k, v in list(value.items())[:64] if isinstance(k, str)]
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, item in enumerate(list(value)[:16]):
            out += [(f"[{i}]{rest}", key, v) for rest, key, v in parts(item, name, depth - 1)]
        return out
    else:
        return out
    for key, item in items:
        out += [(f".{key}{rest}", k, v) for rest, k, v in parts(item, key, depth - 1)]
    if frozen:
        MEMO[id(value)] = (value, depth, out)
    return out


def frame_arguments(frame) -> dict:
    """The leaves of a frame's arguments, each bare one named by its keyword."""
    code, local = frame.f_code, frame.f_locals
    count = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:count])
    for flag in (0x04, 0x08):  # *args, **kwargs
        if code.co_flags & flag:
            names.append(code.co_varnames[len(names)])
    out: dict = {}
    for n in names:
        if n in local:
            leaves(local[n], n, n, 4, out)
    return out


# -- one run ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Call:
    function: str  # file relative to the root, and qualified name
    parent: int | None  # index of the calling recorded call
    start: int  # sequence number of the call
    arguments: dict
    end: int = -1  # sequence number of the return (-1: raised)
    returned: dict = dataclasses.field(default_factory=dict)
    kind: str = "project"  # project | engine, report (one step each) | device (kernels/, viewer/)
    catchall: str = ""  # its **keywords: what a step takes there it may ignore
    record: bool = False  # an engine step that returned an engine input record
    opens: bool = False  # it (or what it called outside the project) opened a file
    twin: int | None = None  # the same call in the other run (index), None where it has none


def run(argv: list[str], other: list[Call] | None = None) -> tuple[list[Call], int | str]:
    """Every project call of one in-process run of ``ridgeline argv``, and its exit code. Given
    the calls of the ``other`` run, each call is matched to its twin there (the next call of
    the same function by the twin of its caller) and the run stops where the option's trace
    ends."""
    from ridgeline.cli import load_all

    clear_caches()
    MEMO.clear()

    app = load_all()
    calls: list[Call] = []
    stack: list[tuple[object, int]] = []  # (frame, index of its Call)
    clock = [0]
    inside = [None]  # the frame of the engine step or device call being skipped
    children: dict[int | None, list[int]] = {}
    for i, c in enumerate(other or []):
        children.setdefault(c.parent, []).append(i)
    cursor: Counter = Counter()

    def match(call: Call) -> int | None:
        if other is None or (call.parent is not None and calls[call.parent].twin is None):
            return None
        mine = None if call.parent is None else calls[call.parent].twin
        siblings = children.get(mine, [])
        for at in range(cursor[mine], len(siblings)):
            if other[siblings[at]].function == call.function:
                cursor[mine] = at + 1
                return siblings[at]
        return None

    def hook(frame, event, arg):
        clock[0] += 1
        if inside[0] is not None:
            if event == "return" and frame is inside[0]:
                inside[0] = None
                finish(frame, arg)
            elif event == "c_call" and getattr(arg, "__name__", "") == "open" and stack:
                opened(calls[stack[-1][1]])
            return
        if event == "c_call":
            if getattr(arg, "__name__", "") == "open" and stack:
                opened(calls[stack[-1][1]])
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(PROJECT):
            return
        if event == "call":
            name = frame.f_code.co_qualname
            if frame.f_code.co_name.startswith("<"):
                return  # a comprehension or a lambda: part of the function that holds it
            if filename.startswith(ENGINE) and name.split(".")[-1] in ("__post_init__", "__new__", "__init__"):
                return  # a record checking its own fields
            function = f"{Path(filename).relative_to(ROOT)}:{name}"
            parent = stack[-1][1] if stack else None
            call = Call(function, parent, clock[0], frame_arguments(frame))
            if filename.startswith(ENGINE):
                call.kind, inside[0] = "engine", frame
            elif filename.startswith(REPORT):
                call.kind, inside[0] = "report", frame
            elif filename.startswith(DEVICE_SIDE):
                call.kind, inside[0] = "device", frame
            if frame.f_code.co_flags & 0x08:
                call.catchall = frame.f_code.co_varnames[
                    frame.f_code.co_argcount + frame.f_code.co_kwonlyargcount + bool(frame.f_code.co_flags & 0x04)
                ]
            call.twin = match(call)
            calls.append(call)
            stack.append((frame, len(calls) - 1))
            if call.kind == "device":
                raise Ended
        elif event == "return" and stack and stack[-1][0] is frame:
            finish(frame, arg)

    def carries(call: Call) -> bool:
        twin = other[call.twin].arguments if other and call.twin is not None else {}
        return other is not None and taken(call, carrying(call.arguments, twin))

    def opened(call: Call) -> None:
        call.opens = True
        if carries(call):
            raise Ended

    def finish(frame, arg):
        _, index = stack.pop()
        call = calls[index]
        call.end = clock[0]
        if arg is not None:
            leaves(arg, None, "return", 4, call.returned)
            kind = type(arg)
            call.record = kind.__name__ in RECORDS and kind.__module__.startswith("ridgeline.engine")
        if call.kind in ("engine", "report") and not call.record and carries(call):
            raise Ended

    code: int | str = 0
    out, err = io.StringIO(), io.StringIO()
    sys.setprofile(hook)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            app(argv, standalone_mode=False)
    except Ended:
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except Exception as error:  # noqa: BLE001  (a failed run is reported, not raised)
        code = f"{type(error).__name__}: {error}"
    finally:
        sys.setprofile(None)
    if code not in (0, None):
        code = f"{code}: {err.getvalue().strip()[-300:]}"
    return calls, code or 0


def clear_caches() -> None:
    """Forget what earlier runs loaded (functools caches below the CLI), so each run reads its
    files as a command run alone does."""
    for name, module in list(sys.modules.items()):
        if name.startswith(("ridgeline.io", "ridgeline.engine", "ridgeline.serving", "ridgeline.api")):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == name:
                    value.cache_clear()


# -- the places of one option ----------------------------------------------------------------


def converts(command: str, param, word: str | None) -> bool:
    """Whether click's type turns the word into another value (an int, a float, a path)."""
    if word is None or param.param_type_name == "argument" or getattr(param, "is_flag", False):
        return False
    ctx = type(commands()[command]).context_class(commands()[command])
    if param.nargs != 1 or param.multiple:  # several words: each converted alike
        return any(form(v) != form(w) for v, w in zip(param.process_value(ctx, word.split()), word.split()))
    return form(param.process_value(ctx, word)) != form(word)


def taken(call: Call, carried: dict) -> bool:
    """Whether ``call`` takes the option: a step takes what it names, not what its
    ``**keywords`` catch (options_scheduler is handed every option of simulate)."""
    if call.kind in ("engine", "report") and call.catchall:
        return any(not p.startswith(f"{call.catchall}.") for p in carried)
    return bool(carried)


def form(value) -> tuple:
    return type(value).__name__, value


def prose(value) -> bool:
    return isinstance(value, str) and " " in value


def carrying(mine: dict, theirs: dict) -> dict:
    """The leaves of ``mine`` that differ from ``theirs`` at the same path."""
    return {
        p: (n, v) for p, (n, v) in mine.items() if not prose(v) and (p not in theirs or form(theirs[p][1]) != form(v))
    }


def places(clicked: bool, a: list[Call], b: list[Call]) -> list[str]:
    """The places that change the option's meaning in run ``b`` (compared with run ``a``):
    functions, and 'click' where click's type converts the word (``clicked``)."""
    carried_in, carried_out = {}, {}
    for i, call in enumerate(b):
        twin = a[call.twin] if call.twin is not None else None
        carried_in[i] = carrying(call.arguments, twin.arguments if twin else {})
        carried_out[i] = carrying(call.returned, twin.returned if twin else {}) if call.end >= 0 else {}
    children: dict[int, list[int]] = {}
    for i, call in enumerate(b):
        if call.parent is not None:
            children.setdefault(call.parent, []).append(i)
    end = next(
        (
            c.start
            for i, c in enumerate(b)
            if taken(c, carried_in[i])
            and (c.kind in ("device", "report") or c.opens or (c.kind == "engine" and not c.record))
        ),
        None,
    )
    found: list[str] = []
    if clicked:
        found.append("click")
    for i, call in enumerate(b):
        if call.end < 0 or (end is not None and call.end > end) or call.kind == "device" or call.opens:
            continue
        if call.kind in ("engine", "report") and not call.record:
            continue
        received = set(carried_in[i].values())
        handed = [(n, v) for n, v in carried_out[i].values()]
        for child in children.get(i, []):
            if end is not None and b[child].start > end:
                continue
            received |= set(carried_out[child].values())
            bare = {p for p in carried_in[child] if "." not in p and "[" not in p}  # a callee's keyword
            handed += [(None if p in bare else n, v) for p, (n, v) in carried_in[child].items()]
        if not received:  # what it hands on comes from data or its object's state, not the option
            continue
        values, names = {form(v) for _, v in received}, {n for n, _ in received}
        changed = [(n, v) for n, v in handed if form(v) not in values or (n is not None and n not in names)]
        if changed and call.function not in found:
            found.append(call.function)
            if os.environ.get("OPTION_WHY"):
                print(call.function, "received", sorted(received, key=str)[:6], "handed", changed[:4])
    return found


# -- every option of every command -----------------------------------------------------------

HERE = Path(tempfile.gettempdir()) / "ridgeline-option-meaning"
MODEL = ["llama-2-7b"]
PROFILE = ROOT / "reports" / "profiles" / "cuda-nvidia-h200.yaml"
# the rest of each command's line, beside the option traced
BASE = {
    "analyze": MODEL,
    "sweep": MODEL,
    "compare": MODEL,
    "frontier": MODEL,
    "simulate": [*MODEL, "--requests", "8"],
    "plan": [
        *MODEL,
        *("--workload", "poisson:rate=1,prompt=128,output=16,n=8", "--slo", "ttft=2", "--devices", "h200"),
        *("--counts", "1"),
    ],
    "hardware show": ["a6000"],
    "models show": MODEL,
}


def files() -> dict[str, tuple[str, str]]:
    """Pairs of input files that differ only in where they are (the trace ends where one is read)."""
    pairs = {}
    for kind, source, name in (
        ("profile", PROFILE, "profile.yaml"),
        ("config", ROOT / "models" / "catalog" / "llama-2-7b.json", "config.json"),
    ):
        for side in "ab":
            (HERE / side).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, HERE / side / name)
        pairs[kind] = (str(HERE / "a" / name), str(HERE / "b" / name))
    for side, rows in (("a", "0,100,10\n1,200,20\n"), ("b", "0,100,10\n2,200,20\n")):
        (HERE / side / "trace.csv").write_text(f"arrival_s,prompt_tokens,output_tokens\n{rows}")
    pairs["trace"] = (str(HERE / "a" / "trace.csv"), str(HERE / "b" / "trace.csv"))
    rows = "Timestamp,Request tokens,Response tokens,Log Type\n0,100,10,Conversation log\n1,200,20,API log\n"
    (HERE / "burstgpt.csv").write_text(rows)
    pairs["burstgpt"] = (str(HERE / "burstgpt.csv"),) * 2
    for name in ("output", "html", "timeline", "output_dir"):
        pairs[name] = (str(HERE / "a" / f"{name}.out"), str(HERE / "b" / f"{name}.out"))
    return pairs


# option -> (A, B, other words it needs): B is measured against the command without the option
# (A where the command needs it: an argument, a required option); a flag is measured given
SAMPLES: dict[str, tuple] = {
    "model": ("llama-2-7b", "llama-3-8b", []),
    "hardware": ("a6000", "h100-sxm", []),
    "batch": ("2", "4", []),
    "seq_len": ("256", "512", []),
    "generate": ("8", "16", []),
    "dtype": ("fp16", "bf16", []),
    "draft": ("llama-3.2-1b", "qwen2-0.5b", []),
    "draft_tokens": ("3", "4", ["--draft", "llama-3.2-1b"]),
    "acceptance": ("0.6", "0.7", ["--draft", "llama-3.2-1b"]),
    "transfer": (None, None, ["--profile", str(PROFILE), "-H", "h200"]),
    "fmt": ("json", "csv", []),
    "w_bits": ("4", "8", []),
    "a_bits": ("16", "8", []),
    "kv_bits": ("8", "4", []),
    "w_dtype": ("int4", "int8", []),
    "a_dtype": ("fp16", "bf16", []),
    "kv_dtype": ("int8", "int4", []),
    "group_size": ("64", "128", ["--w-bits", "4"]),
    "attention": ("flash", "eager", []),
    "kv_block": ("16", "32", []),
    "tp": ("1", "2", []),
    "pp": ("1", "2", []),
    "ep": ("1", "2", []),
    "micro_batches": ("1", "2", ["--pp", "2"]),
    "link_bw": ("100", "200", ["--tp", "2"]),
    "link_latency": ("1", "2", ["--tp", "2"]),
    "zero_points": ("fp16", "packed", ["--w-bits", "4"]),
    "memory_utilization": ("0.9", "0.8", []),
    "execution": ("graph", "eager", []),
    "engine": ("vllm", "sglang", []),
    "fusion": ("qkv", "gate_up", []),
    "tpot_slo": ("0.05", "0.1", []),
    "ttft_slo": ("1", "2", []),
    "rate": ("2", "3", []),
    "requests": ("8", "9", []),
    "prompt": ("100", "200", []),
    "output_tokens": ("10", "20", []),
    "time_scale": ("1", "2", ["--trace", "{trace}"]),
    "trace_window": ("0,10", "0,20", ["--trace", "{trace}"]),
    "trace_log_type": ("Conversation log", "API log", ["--trace", "{burstgpt}"]),
    "prefix": ("shared:system=64,fanout=2", "shared:system=128,fanout=2", []),
    "max_batch": ("8", "16", []),
    "token_budget": ("512", "1024", []),
    "prefix_hit": ("0.1", "0.2", []),
    "kv_blocks": ("1000", "2000", []),
    "admit_margin": ("0.1", "0.2", []),
    "step_overhead": ("0.001", "0.002", []),
    "request_overhead": ("0.0001", "0.0002", []),
    "batch_attention": ("varlen", "masked", []),
    "seed": ("1", "2", []),
    "percentile": ("99", "90", []),
    "scenario": ("offline", "server", []),
    "instances": ("1", "2", ["--scenario", "offline"]),
    "duration": ("10", "20", ["--scenario", "server"]),
    "replicas": ("1", "2", []),
    "route": ("round-robin", "least-loaded", ["--replicas", "2"]),
    "prefill_replicas": ("1", "2", ["--prefill-replicas", "1", "--decode-replicas", "1"]),
    "decode_replicas": ("1", "2", ["--prefill-replicas", "1", "--decode-replicas", "1"]),
    "prefill_hardware": ("h100-sxm", "h200", ["--prefill-replicas", "1", "--decode-replicas", "1"]),
    "decode_hardware": ("h100-sxm", "h200", ["--prefill-replicas", "1", "--decode-replicas", "1"]),
    "kv_link": ("50,5", "100,5", ["--prefill-replicas", "1", "--decode-replicas", "1"]),
    "name": ("a6000", "h100-sxm", []),
    "workload": ("poisson:rate=1,prompt=128,output=16,n=8", "poisson:rate=2,prompt=128,output=16,n=8", []),
    "slo": ("ttft=2", "ttft=3", []),
    "devices": ("h200", "h100-sxm", []),
    "counts": ("1", "2", []),
    "price": ("h200=2", "h200=3", []),
    "executor": "needs a Ray cluster",
    "address": "needs a Ray cluster",
    "refresh": "measures this machine",
    "workers": ("1", "2", []),
    "top": ("3", "7", []),
    "pools": ("1:1", "1:2", ["--counts", "2"]),
    "drafts": ("llama-3.2-1b:3:0.6", "llama-3.2-1b:4:0.6", []),
    "rate_search": (None, None, []),
    "search": (None, None, ["--ttft-slo", "1"]),
}
FILES = ("profile", "config", "trace", "output", "html", "timeline", "output_dir")
# the measuring commands' (kernels/) and the dashboard's: the trace ends at their own function
DEVICE_SAMPLES: dict[str, tuple] = {
    "device": ("cpu", "cuda", []),
    "prompt": ("16", "32", []),
    "layers": ("1", "2", []),
    "repeats": ("1", "2", []),
    "threads": ("1", "2", []),
    "steps": ("1", "2", []),
    "ops": ("linear", "attention", []),
    "prompt_range": ("8 16", "8 32", []),
    "output_range": ("2 4", "2 8", []),
    "clock": ("default", "locked", []),
    "overhead_from": ("{output}", "{html}", []),
    "draw": ("1", "2", []),
    "through": ("1", "2", []),
    "coverage": ("0.8", "0.9", []),
    "execution": ("graph", "eager", []),
    "dtype": ("fp16", "bf16", []),
    "host": ("127.0.0.1", "0.0.0.0", []),
    "port": ("8050", "8051", []),
    "model": ("qwen2-0.5b", "llama-2-7b", []),
    "results": ("{output}", "{html}", ["--predictions", "{output}"]),
    "predictions": ("{output}", "{html}", ["{output}"]),
    "sizes": ("gpu", "cpu", []),
    "quiet_wait": ("10", "20", []),
}
DEVICE_BASE = {"predictions compare": ["{html}", "--predictions", "{output}"]}


@functools.cache
def commands() -> dict[str, object]:
    """Every command of the app (group subcommands as 'group name'), by name."""
    import typer

    from ridgeline.cli.app import listed

    group = typer.main.get_command(load_all())
    ctx = group.context_class(group)
    out = {}
    for name in listed():
        command = group.get_command(ctx, name)
        subs = command.commands.items() if hasattr(command, "commands") else [(None, command)]
        out |= {f"{name} {sub}" if sub else name: c for sub, c in subs}
    return out


def words(param, value: str | None, paths: dict) -> list[str]:
    """``param`` given ``value`` on the command line ([] for an absent flag)."""
    if isinstance(value, str) and value.startswith("{"):
        value = paths[value.strip("{}")][0]
    if getattr(param, "is_flag", False):
        if param.secondary_opts:
            return [param.opts[0] if value else param.secondary_opts[0]]
        return [param.opts[0]] if value else []
    if param.param_type_name == "argument":
        return [value]
    return [param.opts[0], *(value.split() if param.nargs > 1 else [value])]


def measure(command: str, param, paths: dict) -> tuple[list[str], str]:
    """The places that change the option ``param`` of ``command``, or why it was not traced."""
    name, argument = param.name, param.param_type_name == "argument"
    device_side = command not in BASE
    table = DEVICE_SAMPLES if device_side and name in DEVICE_SAMPLES else SAMPLES
    flag = getattr(param, "is_flag", False)
    if isinstance(table.get(name), str):
        return [], table[name]
    if name in FILES:
        a, b = paths[name]
        takes = [q.name for q in options_of(command)]
        extra = ["-H", "h200"] if name == "profile" and "hardware" in takes and not device_side else []
        extra += ["--format", "json"] if name == "output" and "fmt" in takes else []
    elif flag:
        a, b, extra = False, True, table.get(name, (None, None, []))[2]
    elif command == "models show":
        a, b, extra = SAMPLES["model"]
    elif name in table:
        a, b, extra = table[name]
    elif getattr(param, "type_descriptor", None) and param.type_descriptor.annotation is Path:
        a, b, extra = "{output}", "{html}", []  # a file a measuring command reads
    else:
        return [], "no sample values"
    if str(param.default) == b:  # the option's run must differ from the one without it
        a, b = b, a
    if name == "config":
        extra = []
    if command == "plan":
        extra = [w for w in extra if w not in ("-H", "h200")]
    base = list(DEVICE_BASE.get(command, [])) if device_side else list(BASE[command])
    if argument or name == "predictions":
        base = [w for w in base if w not in ("{html}", "--predictions", "{output}")]
    if argument or name == "config":
        base = [w for w in base if w not in MODEL] if name in ("model", "config") else base[1:]
    extra = [paths[w.strip("{}")][0] if w.startswith("{") else w for w in extra]
    base = [paths[w.strip("{}")][0] if w.startswith("{") else w for w in base]
    head, given = [*command.split(), *base, *extra], lambda v: words(param, v, paths)  # noqa: E731
    if argument:
        head, reference = [*command.split(), *given(b), *base, *extra], [*command.split(), *given(a), *base, *extra]
    else:  # the command without the option (its default), one run for all its options alike
        reference = [*head, *given(a)] if name == "config" or param.required else head
    if tuple(reference) not in REFERENCE:
        REFERENCE[tuple(reference)] = run(reference)
    calls_a, code_a = REFERENCE[tuple(reference)]
    calls_b, code_b = run(head if argument else [*head, *given(b)], calls_a)
    if code_a or code_b:
        return [], f"failed: {code_a or code_b}"
    word = None if flag else (paths[b.strip("{}")][0] if str(b).startswith("{") else b)
    return places(converts(command, param, word), calls_a, calls_b), ""


REFERENCE: dict[tuple, tuple] = {}  # argv -> the run each option's run is compared with


def options_of(command: str) -> list:
    return commands()[command].params


def table(names: list[str] | None = None, only: tuple[str, ...] = ()) -> list[tuple[str, str, list[str], str]]:
    """(command, option, places, why not traced) for every option of ``names`` (all commands),
    or for those named ``only``."""
    paths = files()
    rows = []
    for command, click_command in commands().items():
        if names and command not in names:
            continue
        if command in BASE:  # once untraced: what it imports late is imported whole
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                with contextlib.suppress(SystemExit):
                    load_all()([*command.split(), *BASE[command]], standalone_mode=False)
        for param in click_command.params:
            if only and param.name not in only:
                continue
            found, why = measure(command, param, paths)
            rows.append((command, param.name, found, why))
    return rows


def load_all():
    from ridgeline.cli import load_all

    return load_all()


def main(names: list[str]) -> None:
    rows = table(names or None)
    listing = os.environ.get("OPTION_LIST")
    for command, option, found, why in rows:
        print(f"{command:16} --{option.replace('_', '-'):22} {why or len(found)}")
        if listing:
            print("".join(f"    {p}\n" for p in found), end="")
    counts = [len(f) for _, _, f, why in rows if not why]
    over = [(c, o, len(f)) for c, o, f, why in rows if len(f) > LIMIT]
    print(f"\n{len(counts)} options traced, {len(rows) - len(counts)} not; most places: {max(counts, default=0)}")
    print("over", LIMIT, ":", ", ".join(f"{c} --{o.replace('_', '-')} ({n})" for c, o, n in over) or "none")


if __name__ == "__main__":
    main(sys.argv[1:])
