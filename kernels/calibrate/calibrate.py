"""``ridgeline calibrate``: measure a device's roofs and fit per-class efficiencies.

1. Roofs: achievable bandwidth (a large copy, bytes read + written), the matrix peak of each
   data type (a large GEMM; int8 through ``torch._int_mm``, fp8 through ``torch._scaled_mm``
   where the GPU has it), and the dispatch/launch overhead (a one-element add).
2. The calibration cases (``cases.suite_cases("calibration")``: other models and sizes than
   validation) are checked and timed, and ``fit.fit_profile_terms`` fits each class's
   efficiencies and overhead on them.
3. The profile is written atomically to ``reports/profiles/<device_key>.yaml`` (with a CSV of
   the calibration rows beside it), with a ``meta`` provenance block.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.bench.cases import case_from_dict, suite_cases
from kernels.bench.suite import CaseSet, RunConfig, device_options, ok_rows, run_case, run_cases, setup
from kernels.calibrate.fit import FIT_RULES
from ridgeline.engine.units import GIGA, TERA
from ridgeline.io.catalog import user_data_dir
from ridgeline.io.files import write_atomic, yaml_text
from ridgeline.io.profile import timing_of
from ridgeline.io.resolve import device_to_dict

GEMM_SIZE = {
    "cpu": {"fp32": 1536, "bf16": 2048, "fp16": 1024, "int8": 2048},
    "cuda": {"fp32": 8192, "bf16": 8192, "fp16": 8192, "int8": 8192, "fp8": 8192},
}
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 2 * 2**30}
FIRST_TOUCH_BYTES = 64 * 2**20  # twice glibc's largest mmap threshold: mapped anew every call


def _timed(fn: Callable, args: tuple, cfg: RunConfig, budget: float | None = None):
    from kernels.bench.timing import measure

    return measure(
        fn,
        [args],
        device=cfg.device,
        budget_s=budget or cfg.budget_s * 2,
        min_reps=cfg.min_reps,
        cache_bytes=cfg.cache_bytes,
        graph=False,
    )


def measure_bandwidth(cfg: RunConfig) -> dict[str, Any]:
    """A copy much larger than the cache: bytes read + bytes written per second. On a GPU
    the copy is a kernel (``torch.mul(src, 1, out=dst)``), the faster of it and ``copy_``:
    a same-type ``copy_`` is a memcpy, which a CUDA graph replays as a memcpy node, slower
    than the kernels it is a roof for (on an H200, 2.77 TB/s against a residual add's 4.17)."""
    import torch

    n = COPY_BYTES[cfg.device] // 4
    src = torch.randn(n, device=cfg.device)
    dst = torch.empty_like(src)
    copies = {"copy_": lambda s, d: d.copy_(s)}
    if cfg.device.startswith("cuda"):
        copies["mul"] = lambda s, d: torch.mul(s, 1.0, out=d)
    rates = {name: _timed(fn, (src, dst), cfg) for name, fn in copies.items()}
    name, m = min(rates.items(), key=lambda kv: kv[1].median_s)
    return {
        "bytes": 2 * n * 4,
        **m.to_dict(),
        "gb_s": 2 * n * 4 / m.median_s / GIGA,
        **(
            {"kernel": name, "runs_gb_s_by_kernel": {k: 2 * n * 4 / v.median_s / GIGA for k, v in rates.items()}}
            if len(rates) > 1
            else {}
        ),
    }


def measure_gemm(cfg: RunConfig, dtype: str) -> dict[str, Any] | None:
    """Large square GEMM rate in tera-ops/s (2 n^3 per product); None if unsupported."""
    import torch

    from kernels.bench.bench import TORCH_DTYPES, _nonzero_int8

    n = GEMM_SIZE[cfg.device].get(dtype)
    if n is None:
        return None
    dev = cfg.device
    try:
        if dtype == "int8":
            a, b = _nonzero_int8(n, n, device=dev), _nonzero_int8(n, n, device=dev).t()
            fn, args = torch._int_mm, (a, b)
        elif dtype == "fp8":
            if dev != "cuda" or torch.cuda.get_device_capability() < (8, 9):
                return None
            f8 = torch.float8_e4m3fn
            a = torch.randn(n, n, device=dev).to(f8)
            b = torch.randn(n, n, device=dev).to(f8).t()
            one = torch.tensor(1.0, device=dev)

            def fn(x, y):
                return torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

            args = (a, b)
        else:
            dt = TORCH_DTYPES[dtype]
            a, b = torch.randn(n, n, device=dev).to(dt), torch.randn(n, n, device=dev).to(dt)
            fn, args = torch.matmul, (a, b)
        fn(*args)
    except (RuntimeError, AttributeError, NotImplementedError):
        return None
    m = _timed(fn, args, cfg)
    return {"n": n, **m.to_dict(), "tops": 2 * n**3 / m.median_s / TERA}


def _quiet(cfg: RunConfig, cases: int = 10) -> None:
    """Before a roof: wait as long as for ``cases`` cases for other load to go (if asked)."""
    if cfg.quiet_wait_s:
        from kernels.bench.timing import wait_for_quiet

        wait_for_quiet(cases * cfg.quiet_wait_s)


def best_roofs(
    cfg: RunConfig, bandwidth: dict[str, Any], gemms: dict[str, Any], log: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The copy and GEMM roofs measured again after the cases; the faster of the two runs
    is kept (a roof is what the device can reach: on a shared machine another process may
    have held the core during one of them), the other recorded beside it."""
    _quiet(cfg)
    again = measure_bandwidth(cfg)
    best_bw = max(bandwidth, again, key=lambda m: m["gb_s"])
    best_bw = {**best_bw, "runs_gb_s": [bandwidth["gb_s"], again["gb_s"]]}
    best = {}
    for dtype, first in gemms.items():
        second = measure_gemm(cfg, dtype) or first
        best[dtype] = {**max(first, second, key=lambda m: m["tops"]), "runs_tops": [first["tops"], second["tops"]]}
    log(
        f"  roofs again: copy {again['gb_s']:.1f} GB/s, "
        + ", ".join(f"{d} {g['runs_tops'][1]:.3g} TOPS" for d, g in best.items())
    )
    return best_bw, best


def measure_dispatch(cfg: RunConfig) -> dict[str, Any]:
    """Fixed cost of one tiny kernel call: dispatch on a CPU, launch on a GPU."""
    import torch

    a = torch.ones(1, device=cfg.device)
    b = torch.ones(1, device=cfg.device)
    m = _timed(torch.add, (a, b), cfg, budget=0.1)
    return {**m.to_dict(), "us": m.median_s * 1e6}


def mmap_threshold() -> int:
    """The C allocator's threshold from which every allocation is mapped fresh: glibc's
    largest dynamic one (32 MiB), or the static one ``MALLOC_MMAP_THRESHOLD_`` sets."""
    import os

    from ridgeline.engine.roofline import MMAP_THRESHOLD

    raw = os.environ.get("MALLOC_MMAP_THRESHOLD_", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else MMAP_THRESHOLD


def fresh_pages(n: int) -> None:
    """Fill n bytes of a private anonymous mapping of their own, then unmap them: what glibc
    does for an allocation at or above its mmap threshold, without its heap, so a freed hole
    in the heap can never hand back pages that were already touched."""
    import mmap

    import torch

    pages = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = torch.frombuffer(pages, dtype=torch.uint8)
    view.fill_(1)
    del view
    pages.close()


def measure_first_touch(cfg: RunConfig, copy_gb_s: float) -> dict[str, Any] | None:
    """CPU: the rate at which the operating system hands over fresh pages (the fault and the
    zeroing), from filling 64 MiB of fresh pages against filling a reused buffer; an eager
    kernel pays it for every output at or above the mmap threshold (glibc maps such
    allocations anew and unmaps them when freed). None on a GPU (a caching allocator) or
    where fresh memory costs nothing more. A rate above ``copy_gb_s`` cannot be a page fault
    (zeroing a page writes it): the pages were not fresh, so nothing is kept."""
    if cfg.device != "cpu":
        return None
    import torch

    n = FIRST_TOUCH_BYTES
    reused = _timed(lambda b: b.fill_(1), (torch.empty(n, dtype=torch.uint8),), cfg)
    fresh = _timed(fresh_pages, (n,), cfg)
    extra = fresh.median_s - reused.median_s
    gb_s = n / extra / GIGA if extra > 0 else None
    if gb_s is None or gb_s > copy_gb_s:
        return None
    return {
        "bytes": n,
        "fresh_s": fresh.median_s,
        "reused_s": reused.median_s,
        "fresh_spread": fresh.spread,
        "reused_spread": reused.spread,
        "gb_s": gb_s,
        "mmap_threshold_bytes": mmap_threshold(),
        "pages": "a private anonymous mapping per fill",
    }


def first_touch_line(touch: dict[str, Any] | None, device: str) -> str | None:
    """What calibrate says of the first touch: its rate, or on a CPU why none is kept."""
    if touch:
        return (
            f"  first touch {touch['gb_s']:.2f} GB/s (fresh pages of allocations from "
            f"{touch['mmap_threshold_bytes'] / 2**20:g} MiB)"
        )
    if device != "cpu":
        return None
    return "  first touch: none kept (fresh pages cost no more than reused ones, or faster than the copy): priced at 0"


def rows_csv(rows: list[dict[str, Any]]) -> str:
    import json

    import pandas as pd

    frame = pd.DataFrame(rows)
    if "recipe" in frame:  # kept as JSON so that 'refit' can rebuild each case's Op
        frame["recipe_json"] = [json.dumps(dict(r)) for r in frame["recipe"]]
    drop = [c for c in ("recipe", "timing_extra") if c in frame]
    buffer = io.StringIO()
    frame.drop(columns=drop).to_csv(buffer, index=False)
    return buffer.getvalue()


def calibrate(
    device: str = "cpu",
    *,
    quick: bool = False,
    threads: int | None = None,
    output: Path | None = None,
    progress: bool = True,
    quiet_wait_s: float = 0.0,
    case_set: CaseSet = CaseSet(),
    log: Callable[[str], None] = print,
) -> tuple[Path, dict[str, Any]]:
    """Measure ``case_set``'s calibration cases, fit, write the profile; returns its path and
    contents."""
    from kernels.bench.provenance import collect, datasheet_device, device_name, measured_key

    cfg = setup(device, threads, quick, quiet_wait_s)
    name = device_name(device)
    key = measured_key(device, cfg.threads)
    log(f"calibrating {name} ({device}, {cfg.threads} threads) -> {key}")
    _quiet(cfg)
    bandwidth = measure_bandwidth(cfg)
    log(f"  copy bandwidth {bandwidth['gb_s']:.1f} GB/s (read + write)")
    opts, skipped = device_options(device)
    gemms = {}
    for dtype in (*opts.dtypes, "int8", "fp8"):
        result = None if dtype in skipped else measure_gemm(cfg, dtype)
        if result is None:
            skipped.setdefault(dtype, f"no large {dtype} GEMM on this device")
            continue
        gemms[dtype] = result
        log(f"  {dtype} GEMM {result['n']}^3: {result['tops']:.3g} TOPS")
    dispatch = measure_dispatch(cfg)
    log(f"  dispatch overhead {dispatch['us']:.2f} us")
    touch = measure_first_touch(cfg, bandwidth["gb_s"])
    if line := first_touch_line(touch, device):
        log(line)

    cases = case_set.cases("calibration", opts, quick)
    rows = case_set.run(cases, cfg, label="calibration", progress=progress)
    rows = remeasure_breaks(rows, cases, cfg, log)
    bandwidth, gemms = best_roofs(cfg, bandwidth, gemms, log)
    good = ok_rows(rows)
    path = Path(output) if output else user_data_dir() / "profiles" / f"{key}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path.with_suffix(".calibration.csv"), rows_csv(rows))  # kept if the fit fails
    spec_device = datasheet_device(device, cfg.threads)
    profile: dict[str, Any] = {
        "meta": {
            **collect(device, cfg.threads),
            "device_key": key,
            "mode": "quick" if quick else "full",
            "run": cfg.to_dict(),
            "spec_device": spec_device.name,
            "calibration_cases": len(cases),
            "calibration_ok": len(good),
            "skipped": skipped,
            "fit": dict(FIT_RULES),
        },
        "bandwidth_gb_s": round(bandwidth["gb_s"], 3),
        "matrix_peak_tops": {d: round(g["tops"], 5) for d, g in gemms.items()},
        "efficiency": {},
        "overhead_us": {"default": round(dispatch["us"], 3)},
        **(
            {"first_touch_gb_s": round(touch["gb_s"], 4), "mmap_threshold_bytes": touch["mmap_threshold_bytes"]}
            if touch
            else {}
        ),
        # the datasheet device the fit ran against: a refit reads it back (never this machine)
        "datasheet": device_to_dict(spec_device),
    }
    profile["measurements"] = {
        "copy": bandwidth,
        "gemm": gemms,
        "dispatch": dispatch,
        **({"first_touch": touch} if touch else {}),
    }
    # how the kernels were timed, from the methods the measurements record (ridgeline.io.profile)
    profile["timing"] = timing_of({**profile, "measurements": {**profile["measurements"], "rows": good}})
    fit_profile(profile, good, spec_device)
    if "stream" in profile["measurements"]:
        log(
            f"  memory roof {profile['bandwidth_gb_s']:.1f} GB/s: "
            f"{profile['measurements']['stream']['case']} streamed faster than the copy"
        )
    for r in profile["refused"]:
        log(f"  refused: {r['class']} wants {r['wanted']:g} of its roof ({r['term']})")
    profile["problems"] = [
        {"case": r["name"], "status": r["status"], "reason": r["reason"]} for r in rows if r["status"] != "ok"
    ]
    write_atomic(path, yaml_text(profile))
    log(f"wrote {path} ({len(good)}/{len(rows)} calibration cases ok, {len(profile['efficiency'])} classes)")
    return path, profile


BREAK = 1.25  # a grid point this much slower than both neighbours is measured again


def grid_breaks(rows: list[dict[str, Any]]) -> list[int]:
    """Indices of grid points slower than both their neighbours by more than ``BREAK``: the
    next smaller and larger m of a skinny product of the same data type and shape, or the
    next smaller and larger size of an element-wise kernel. More rows or more bytes are never
    cheaper by that much, so such a point was most likely disturbed."""
    curves: dict[tuple, list[tuple[float, int]]] = {}
    for i, r in enumerate(rows):
        if r.get("stage") == "grid" and r["status"] == "ok":
            curve, x = _grid_axis(r["recipe"])
            curves.setdefault((r["dtype"], *curve), []).append((x, i))
    out = []
    for points in curves.values():
        idx = [i for _, i in sorted(points)]
        for before, at, after in zip(idx, idx[1:], idx[2:]):
            t = rows[at]["measured_s"]
            if t > BREAK * max(rows[before]["measured_s"], rows[after]["measured_s"]):
                out.append(at)
    return out


def _grid_axis(recipe: dict[str, Any]) -> tuple[tuple, float]:
    """A grid point's curve (a product's kernel, K and N; an element-wise kernel and its width) and
    its place on it (rows, tokens)."""
    if recipe.get("builder") == "size_grid":
        return (recipe["kernel"], recipe["width"]), recipe["tokens"]
    return (recipe.get("rename", "linear"), recipe["k"], recipe["n"]), recipe["m"]


def remeasure_breaks(
    rows: list[dict[str, Any]], cases, cfg, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Measure the ``grid_breaks`` points again and keep the faster run (other work on the
    machine only ever slows a kernel); the row records the first time (``first_s``)."""
    rows = list(rows)
    by_name = {c.name: c for c in cases}
    for i in grid_breaks(rows):
        again = run_case(by_name[rows[i]["name"]], cfg)
        first = rows[i]["measured_s"]
        if again["status"] == "ok" and again["measured_s"] < first:
            rows[i] = {**again, "first_s": first}
        log(
            f"  measured again {rows[i]['name']}: {first * 1e3:.3f} -> "
            f"{again.get('measured_s', float('nan')) * 1e3:.3f} ms"
        )
    return rows


def fit_profile(profile: dict[str, Any], rows: list[dict[str, Any]], spec_device) -> dict[str, Any]:
    """Fill the profile's efficiency / overhead / row-curve tables from ok calibration rows
    (in place): the measured roofs with no efficiencies are the base each class is fitted
    against. Fits that want more than a measured roof are listed under ``refused``."""
    from kernels.calibrate.fit import fit_profile_terms, recorded_rules

    default = profile["overhead_us"]["default"]
    ops = [case_from_dict(r).op for r in rows]
    memory_roof(profile, rows, ops, spec_device)
    fit = fit_profile_terms(
        rows, ops, base_ceilings(profile, spec_device), cpu=spec_device.kind == "cpu", **recorded_rules(profile)
    )
    profile["efficiency"] = fit.efficiency
    profile["row_curves"] = fit.row_curves
    profile.pop("size_curves", None)
    if fit.size_curves:
        profile["size_curves"] = fit.size_curves
    profile.pop("attention_tables", None)
    if fit.attention_tables:
        profile["attention_tables"] = fit.attention_tables
    profile.pop("row_tail_ns", None)
    if fit.row_tails:
        profile["row_tail_ns"] = tail_ns(fit.row_tails)
    profile["overhead_us"] = {"default": default, **{k: round(v * 1e6, 3) for k, v in fit.overhead_s.items()}}
    profile["fit"] = fit.report
    profile["refused"] = fit.refused
    return profile


def tail_ns(row_tails: dict[str, tuple[float, ...]]) -> dict[str, list[float]]:
    """A fit's softmax tails as the profile writes them: ns per row by remainder."""
    return {k: [round(v * 1e9, 3) for v in values] for k, values in row_tails.items()}


# a one-row product's weights at least this large (or the whole last-level cache, where
# that is smaller) are a stream long enough to set the memory roof
STREAM_MIN_BYTES = 64 * 2**20


def memory_roof(profile: dict[str, Any], rows: list[dict[str, Any]], ops, spec_device) -> None:
    """The memory roof (in place): the faster of the copy and the fastest one-row product
    whose weights alone outsize the last-level cache or 64 MiB, whichever is smaller (a pure
    read stream; every case's inputs come from memory, rotated past 3x that cache, so a
    64 MiB matrix on a CPU with a 260 MiB cache is read from memory too). A copy's writes
    cost more than reads on some CPUs (a write first reads its line: on AMD Zen 3 a
    single-thread copy moves about 20 GB/s, a GEMV reads 28), so a roof from the copy alone
    would leave such streams above their roof. The case that set it is recorded under
    ``measurements.stream``."""
    measured = profile.setdefault("measurements", {})
    measured.pop("stream", None)
    copy = (measured.get("copy") or {}).get("gb_s") or profile["bandwidth_gb_s"]
    least = min(spec_device.l2_bytes or STREAM_MIN_BYTES, STREAM_MIN_BYTES)
    streams = [
        (op.bytes / float(r["measured_s"]) / 1e9, r["name"])
        for r, op in zip(rows, ops)
        if op.kind == "linear" and op.dims.get("m") == 1 and op.weight_bytes >= least
    ]
    rate, name = max(streams, default=(0.0, ""))
    if rate > copy:
        measured["stream"] = {"case": name, "gb_s": round(rate, 3), "copy_gb_s": round(copy, 3)}
    profile["bandwidth_gb_s"] = round(max(copy, rate), 3)


def base_ceilings(profile: dict[str, Any], spec_device):
    """A profile's measured roofs with no fitted terms."""
    from ridgeline.io.profile import calibrated_ceilings

    default = profile["overhead_us"]["default"]
    return calibrated_ceilings(
        {
            **profile,
            "efficiency": {},
            "row_curves": {},
            "size_curves": {},
            "attention_tables": {},
            "row_tail_ns": {},
            "overhead_us": {"default": default},
        },
        spec_device,
    )


def refit(path: Path, output: Path | None = None, log: Callable[[str], None] = print) -> tuple[Path, dict[str, Any]]:
    """Fit a profile again from the calibration rows stored beside it (after a change to the
    model or the fit; the measurements are reused as they are). A pure function of the two
    files: the datasheet device is the one the profile records, never this machine's. Writes
    ``output`` (default: ``<stem>.refit.yaml`` in the current folder), never the input."""
    from ridgeline.errors import RidgelineError
    from ridgeline.io.profile import load_profile, recorded_device

    path = Path(path)
    profile = load_profile(path)
    rows = calibration_rows(path)
    target = Path(output) if output else Path.cwd() / f"{path.stem}.refit.yaml"
    if target.resolve() == path.resolve():
        raise RidgelineError(f"--refit writes a new profile, not over its input {path}; pass -o NEW.yaml")
    fit_profile(profile, rows, recorded_device(profile, str(path)))
    profile["meta"]["refit"] = {"date": collect_date(), "commit": _commit(), "from": str(path)}
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, yaml_text(profile))
    write_atomic(target.with_suffix(".calibration.csv"), path.with_suffix(".calibration.csv").read_text())
    log(f"refitted {path} from {len(rows)} calibration rows ({len(profile['efficiency'])} classes) -> {target}")
    return target, profile


def extend(
    path: Path,
    device: str,
    threads: int | None,
    *,
    in_state: Callable[[Path], bool],
    output: Path | None = None,
    quiet_wait_s: float = 0.0,
    log: Callable[[str], None] = print,
) -> tuple[Path, dict[str, Any]]:
    """Measure the calibration cases this version has that a profile's stored rows lack
    (cases added since it was measured, or whose recipe changed: their rows are replaced),
    on the machine it was measured on and in the state
    it was measured in (``in_state``: ``--check``'s test, a roof that moved more than 10 % refuses),
    then fit it again from all its rows. Writes ``output`` (default:
    ``<stem>.extended.yaml`` in the current folder) and its rows beside it, never the input."""
    import json
    import os

    import pandas as pd

    from ridgeline.errors import RidgelineError
    from ridgeline.io.profile import load_profile, recorded_device

    path = Path(path)
    target = Path(output) if output else Path.cwd() / f"{path.stem}.extended.yaml"
    if target.resolve() == path.resolve():
        raise RidgelineError(f"--extend writes a new profile, not over its input {path}; pass -o NEW.yaml")
    target.parent.mkdir(parents=True, exist_ok=True)  # an unwritable folder refuses before minutes of measuring
    profile = load_profile(path)
    calibration_rows(path)  # refuses rows without their recipes
    if not in_state(path):
        raise RidgelineError(f"this machine is not in the state {path.name} was measured in; calibrate it afresh")
    quick = profile["meta"].get("mode") == "quick"
    cfg = setup(device, threads, quick, quiet_wait_s)
    old = pd.read_csv(path.with_suffix(".calibration.csv"), keep_default_na=False)
    have = dict(zip(old["name"], old["recipe_json"]))
    cases = [
        c
        for c in suite_cases("calibration", device_options(device)[0], quick)
        if c.name not in have or json.loads(have[c.name]) != json.loads(json.dumps(dict(c.recipe)))
    ]
    log(f"extending {path.name}: {len(cases)} calibration cases to measure (missing, or their recipe changed)")
    rows = run_cases(cases, cfg, label="calibration") if cases else []
    frames = [old[~old["name"].isin({c.name for c in cases})]]  # a changed case's row: replaced
    if rows:
        frames.append(pd.read_csv(io.StringIO(rows_csv(rows)), keep_default_na=False))
    write_atomic(target.with_suffix(".calibration.csv"), pd.concat(frames).to_csv(index=False))
    added = ok_rows(rows)
    meta = profile["meta"]
    kept = sum(r["status"] == "ok" for r in frames[0].to_dict("records"))
    meta["calibration_cases"], meta["calibration_ok"] = len(frames[0]) + len(rows), kept + len(added)
    meta.setdefault("extended", []).append(
        {"date": collect_date(), "commit": _commit(), "from": str(path), "cases": len(rows), "ok": len(added),
         "loadavg": [round(x, 2) for x in os.getloadavg()]}
    )  # fmt: skip
    fit_profile(profile, calibration_rows(target), recorded_device(profile, str(path)))
    profile["problems"] = list(profile.get("problems") or []) + [
        {"case": r["name"], "status": r["status"], "reason": r["reason"]} for r in rows if r["status"] != "ok"
    ]
    write_atomic(target, yaml_text(profile))
    log(f"wrote {target} ({len(added)}/{len(rows)} new cases ok, {len(profile['efficiency'])} classes)")
    return target, profile


def calibration_rows(profile_path: Path) -> list[dict[str, Any]]:
    """The ok calibration rows stored beside a profile, each with its case recipe."""
    import json

    import pandas as pd

    from ridgeline.errors import RidgelineError

    rows_path = Path(profile_path).with_suffix(".calibration.csv")
    if not rows_path.is_file():
        raise RidgelineError(
            f"no calibration rows at {rows_path}; --refit needs the CSV that "
            "'ridgeline calibrate' writes beside the profile"
        )
    frame = pd.read_csv(rows_path, keep_default_na=False)
    if "recipe_json" not in frame.columns:
        raise RidgelineError(f"{rows_path} stores no case recipes (written before they were stored); calibrate again")
    return [
        {**r, "recipe": json.loads(r["recipe_json"]), "noisy": str(r["noisy"]) == "True"}
        for r in frame.to_dict("records")
        if r["status"] == "ok"
    ]


def collect_date() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _commit() -> str:
    from kernels.bench.provenance import git_commit

    return git_commit()
