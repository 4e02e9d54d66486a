"""Run cases: feature checks, correctness against float64, then timing -> one row per case.

A row holds the case, its Op's flops and bytes (by destination), the relative error of the
correctness check, and the measurement (median, p20, p80, spread, noisy flag). A case that
this device cannot run is ``skipped`` with the reason; a wrong result or an exception is an
``error`` row (never timed).
"""

from __future__ import annotations

import gc
import os
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kernels.bench.cases import Case, Options, _plain, drawn_cases, suite_cases
from ridgeline.engine.ops import BYTE_FIELDS
from ridgeline.engine.roofline import MMAP_THRESHOLD  # glibc's most: DEFAULT_MMAP_THRESHOLD_MAX

QUICK_BUDGET_S = 0.08  # timing budget per case (seconds of repetitions)
FULL_BUDGET_S = 0.25


@dataclass(frozen=True)
class RunConfig:
    device: str  # cpu | cuda
    threads: int  # torch intra-op threads (CPU)
    cache_bytes: float  # last-level cache (CPU) or L2 (GPU)
    budget_s: float
    min_reps: int
    quiet_wait_s: float = 0.0  # CPU: before each case, wait up to this long for other load to go
    heap: str = ""  # the allocator's state the cases are timed in (steady_heap)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "threads": self.threads,
            "cache_bytes": self.cache_bytes,
            "budget_s": self.budget_s,
            "min_reps": self.min_reps,
            "quiet_wait_s": self.quiet_wait_s,
            "heap": self.heap,
        }


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def setup(device: str = "cpu", threads: int | None = None, quick: bool = False, quiet_wait_s: float = 0.0) -> RunConfig:
    """Fix the thread count and read the cache size the inputs must outgrow."""
    import torch

    from ridgeline.errors import RidgelineError

    if device == "cuda" and not torch.cuda.is_available():
        raise RidgelineError(f"--device cuda: torch sees no CUDA GPU (torch {torch.__version__}); use --device cpu")
    if device not in ("cpu", "cuda"):
        raise RidgelineError(f"--device must be cpu or cuda, got {device!r}")
    if threads is not None and threads < 1:
        raise RidgelineError(f"--threads must be at least 1, got {threads}")
    threads = threads or default_threads()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        cache = float(getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20)
    else:
        from ridgeline.io.host import llc_bytes

        cache = llc_bytes() or 32 * 2**20
    return RunConfig(
        device,
        threads,
        cache,
        QUICK_BUDGET_S if quick else FULL_BUDGET_S,
        5 if quick else 7,
        quiet_wait_s if device == "cpu" else 0.0,
        steady_heap() if device == "cpu" else "",
    )


def steady_heap() -> str:
    """Put glibc's malloc where a framework's process settles before any case is timed.

    A kernel's temporaries (an fp32 copy of a bf16 norm's input, an activation's output) come
    from the heap below malloc's mmap threshold and from fresh pages above it, which a CPU
    faults in at its first-touch rate. The threshold starts at 128 KiB and rises with each
    mmapped block the process frees, up to 32 MiB, so without this a kernel's time depended on
    which cases ran before it (RMSNorm bf16 over 1953 x 2048: 27 ms from a fresh process, 5 ms
    after one 32 MiB block was freed). A process that has run a model's forward once has freed
    such blocks; freeing one here puts every case in that state, the one the engine prices
    (temporaries above 32 MiB first-touched: ``Ceilings.mmap_threshold``)."""
    if platform.libc_ver()[0] != "glibc":
        return f"{platform.libc_ver()[0] or 'unknown libc'}: left as it is"
    import torch

    block = torch.empty(MMAP_THRESHOLD - 2**16, dtype=torch.uint8)  # above 128 KiB: mmapped
    del block  # freed: the threshold rises to its size, the most glibc allows
    return "glibc: mmap threshold raised to its 32 MiB maximum before timing"


def _matmul_seconds(dtype, device: str, n: int = 512, reps: int = 2) -> float:
    import torch

    if dtype == torch.int8:  # int8 x int8 -> int32, as calibrate's int8 GEMM
        a = torch.randint(-8, 8, (n, n), dtype=dtype, device=device)
        b, mm = torch.randint(-8, 8, (n, n), dtype=dtype, device=device), torch._int_mm
    else:
        a = torch.randn(n, n, device=device).to(dtype)
        b, mm = torch.randn(n, n, device=device).to(dtype), torch.matmul
    mm(a, b)
    start = time.perf_counter()
    for _ in range(reps):
        mm(a, b)
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


def device_options(device: str) -> tuple[Options, dict[str, str]]:
    """Data types and sdpa backends worth covering here, and why others are left out.

    bf16 or fp16 on a CPU without native arithmetic for it (fp16 on AMD Zen 5, bf16 on Zen 3)
    runs matmul through a scalar fallback, tens to hundreds of times slower than fp32: it is
    skipped, with the measured ratio as reason.
    """
    import torch

    skipped: dict[str, str] = {}
    dtypes = ["fp32", "bf16"]
    if device == "cuda":
        if not torch.cuda.is_bf16_supported():
            dtypes.remove("bf16")
            skipped["bf16"] = "GPU has no bf16 support"
        dtypes.append("fp16")
        backends = ("math", "flash", "efficient", "cudnn")
    else:
        fp32 = _matmul_seconds(torch.float32, device)
        for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("int8", torch.int8)):
            ratio = _matmul_seconds(dtype, device) / fp32
            if ratio > 3:
                skipped[name] = f"{name} matmul runs {ratio:.0f}x slower than fp32 on this CPU (no native kernel)"
            elif name not in dtypes and name != "int8":
                dtypes.append(name)
        dtypes = [d for d in dtypes if d not in skipped]
        backends = ("math", "flash", "gqa", "repeat_kv")  # and transformers' two paths (TRANSFORMERS_PATHS)
    return Options(tuple(dtypes), backends, device, int8="int8" not in skipped), skipped


def op_fields(case: Case) -> dict[str, Any]:
    op = case.op
    row = {
        "op_name": op.name,
        "op_kind": op.kind,
        "matrix": bool(op.matrix),
        "op_dtype": op.dtype,
        "dims": {k: _plain(v) for k, v in op.dims.items()},
        "flops": float(op.flops),
        "vector_flops": float(getattr(op, "vector_flops", 0) or 0),
        "bytes": float(op.bytes),
    }
    row.update({f: float(getattr(op, f)) for f in BYTE_FIELDS})
    return row


def run_case(case: Case, cfg: RunConfig) -> dict[str, Any]:
    """Check, then time, one case. Never raises: problems become skipped/error rows."""
    from kernels.bench.bench import make_bench, tolerance

    row: dict[str, Any] = {
        **case.to_dict(),
        **op_fields(case),
        "status": "ok",
        "reason": "",
        "rel_error": None,
        "tolerance": tolerance(case),
    }
    return run_bench(row, lambda: make_bench(case, cfg.device, cfg.cache_bytes), cfg)


def run_bench(row: dict[str, Any], make: Callable[[], Any], cfg: RunConfig) -> dict[str, Any]:
    """Build the bench (``make``), check it against its tolerance (``row["tolerance"]``),
    then time it into ``row``. Never raises: problems become skipped/error rows."""
    from kernels.bench.bench import Unsupported
    from kernels.bench.timing import measure, wait_for_quiet

    if cfg.quiet_wait_s:
        row["quiet_waited_s"] = round(wait_for_quiet(cfg.quiet_wait_s), 2)
    bench, start = None, time.perf_counter()
    try:
        bench = make()
        with bench.context():
            err = bench.check()
            row["rel_error"] = err
            if not err <= row["tolerance"]:
                row.update(status="error", reason=f"wrong result: relative error {err:.3g} > {row['tolerance']:g}")
                return row
            m = measure(
                bench.fn,
                bench.arg_sets,
                device=cfg.device,
                budget_s=cfg.budget_s,
                min_reps=cfg.min_reps,
                cache_bytes=cfg.cache_bytes,
            )
        row.update(
            measured_s=m.median_s,
            p20_s=m.p20_s,
            p80_s=m.p80_s,
            spread=m.spread,
            reps=m.reps,
            inner=m.inner,
            sets=m.sets,
            method=m.method,
            noisy=m.noisy,
            set_bytes=bench.set_bytes,
            timing_extra=dict(m.extra),
            **bench.notes,
        )
    except Unsupported as err:
        row.update(status="skipped", reason=str(err))
    except Exception as err:  # noqa: BLE001 - one failing kernel must not stop the suite
        row.update(
            status="error",
            reason=f"{type(err).__name__}: {str(err).splitlines()[0][:200]}" if str(err) else type(err).__name__,
        )
    finally:
        row["wall_s"] = time.perf_counter() - start
        del bench
        gc.collect()
        if cfg.device == "cuda":
            import torch

            torch.cuda.empty_cache()
    return row


def run_cases(
    cases: Sequence[Any],
    cfg: RunConfig,
    *,
    label: str = "cases",
    progress: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    run: Callable[[Any, RunConfig], dict[str, Any]] = run_case,
) -> list[dict[str, Any]]:
    """All cases in order (each by ``run``), with a rich progress bar and remaining-time estimate."""
    rows: list[dict[str, Any]] = []
    if not progress:
        for case in cases:
            rows.append(run(case, cfg))
        return rows
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("remaining"),
        TimeRemainingColumn(),
        TextColumn("[dim]{task.fields[case]}"),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(label, total=len(cases), case="")
        for case in cases:
            bar.update(task, case=case.name[-60:])
            row = run(case, cfg)
            rows.append(row)
            if on_row:
                on_row(row)
            bar.advance(task)
    return rows


@dataclass(frozen=True)
class CaseSet:
    """What ``calibrate`` and ``validate`` measure, and how they run it: a split's cases
    (``cases(split, opts, quick)``), a fresh held-out draw (``draw(seed, opts)``: ``validate
    --draw SEED``) and the run over a list of cases (``run``, as :func:`run_cases`). The
    default is the CPU set of ``kernels.bench.cases``; ``kernels.bench.cases_gpu.gpu_case_set``
    gives the GPU's."""

    cases: Callable[..., list[Case]] = suite_cases
    draw: Callable[..., tuple[list[Case], dict[str, Any]]] = drawn_cases
    run: Callable[..., list[dict[str, Any]]] = run_cases


def ok_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["status"] == "ok"]
