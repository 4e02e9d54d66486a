"""The GPU case set: a calibration grid over the ranges GPU users run, and held-out draws.

Calibration measures on a grid of powers of two (:data:`GRIDS`):

- decode attention on a table (``kernels.bench.cases.attention_grid_cases``'s recipe): query rows
  per K/V head x cached tokens (64 to 32,768) x head_dim, per kernel: SDPA through the flash,
  cuDNN and memory-efficient backends, the two paths Hugging Face transformers takes
  (``gqa``: ``enable_gqa=True``, no mask; ``repeat_kv``: K/V copied to every query head, then
  SDPA with a mask; ``kernels.bench.cases.TRANSFORMERS_PATHS``), and eager q.K^T and P.V;
- prefill attention likewise over prompts of 64 to 8,192 tokens (causal);
- element-wise kernels and norms from one token up, so that the per-kernel overhead is
  measured where it dominates; the softmax at rows on both sides of 1,024 columns (PyTorch's
  CUDA softmax switches kernels there);
- the models' projections, rotary (``rope_decoder``: the decoder's rotate-half) and
  quantised kernels at decode batches 1 to 256 and prompts up to 8,192 tokens, GQA and MHA
  (qwen2-7b, phi-3-mini).

Validation (llama-3-8b, llama-2-7b) and the draws (``gpu_drawn_cases``) use values strictly
between the grid's points, never on them, and models and widths the grid never measures
(``kernels.bench.cases.check_disjoint``; :func:`check_between`).

Cases are ordered by priority (:func:`priority`): a ``--compact`` calibration (the compact
grid; ``--budget-s`` caps its seconds) measures the kernels users run first and stops where
the budget ends, listing what it left out. ``--device cpu`` runs the same code on the tiny
``dry`` grid (a dry run; no GPU figure comes from it).

Reference kernels - ones no serving stack runs for speed: SDPA's ``math`` backend and
``torch._weight_int8pack_mm`` on CUDA - are measured too, but :func:`is_reference` marks
them so that summaries give the headline figures without them (:func:`split_summary`).

``gpu_case_set()`` is this set as ``calibrate`` and ``validate`` take it (their ``case_set``;
``python -m kernels.gpu.cases calibrate|validate`` runs them on it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kernels.bench.cases import (
    Case,
    Options,
    _stage_cases,
    dedupe,
    dimension_values,
    is_reference,
    size_grid_series,
    sweep_cases,
)

DTYPES = ("bf16",)  # what serving runs
# SDPA's backends (kernels.bench.cases) and transformers' two paths, in the order measured
CUDA_BACKENDS = ("gqa", "repeat_kv", "flash", "efficient", "cudnn", "math")
FUSED = ("gqa", "repeat_kv", "flash", "efficient", "cudnn")
MAX_KV_TOKENS = 2**20  # batch x cached tokens per model case
MAX_SIZE_BYTES = 2**30  # element-wise grid: bytes moved, at most


def powers(lo: int, hi: int, step: int = 1) -> tuple[int, ...]:
    """lo, 2^step lo, ... up to hi (powers of two)."""
    return tuple(2**i for i in range(int(math.log2(lo)), int(math.log2(hi)) + 1, step))


@dataclass(frozen=True)
class Grid:
    """One calibration grid: where each kind of case is measured."""

    decode_contexts: tuple[int, ...]  # cached tokens of the decode attention table
    prefill_lengths: tuple[int, ...]  # prompt tokens of the prefill attention table
    decode_batches: tuple[int, ...]  # the batch range draws come from (its ends)
    rows: tuple[int, ...]  # query rows per K/V head (1: MHA; the GQA group)
    head_dims: tuple[int, ...]
    attention_batch: int  # sequences of a decode attention grid point
    kv_heads: int  # K/V heads of an attention grid point
    eager_rows: tuple[int, ...]  # rows of the eager q.K^T / P.V table
    size_tokens: tuple[int, ...]  # element-wise grid: token counts
    size_widths: Mapping[str, int]  # element-wise grid: width per kernel
    softmax_widths: tuple[int, ...]  # columns of the softmax grid (both sides of 1024)
    size_max_bytes: int
    models: tuple[str, ...]  # calibration models
    workloads: Mapping[str, tuple[tuple[int, int], ...]]  # stage -> (batch, length)


_GPU_WIDTHS = MappingProxyType({"rmsnorm": 3584, "residual_add": 3584, "silu_mul": 18944})
GRIDS = {
    "full": Grid(
        decode_contexts=powers(64, 32768),
        prefill_lengths=powers(64, 8192),
        decode_batches=powers(1, 256),
        rows=(1, 2, 4, 8),
        head_dims=(64, 128),
        attention_batch=8,
        kv_heads=8,
        eager_rows=(1, 4, 8),
        size_tokens=powers(1, 2**16),
        size_widths=_GPU_WIDTHS,
        softmax_widths=(256, 1024, 2048, 8192),
        size_max_bytes=MAX_SIZE_BYTES,
        models=("qwen2-7b", "phi-3-mini"),
        workloads=MappingProxyType(
            {
                "prefill": ((1, 512), (1, 2048), (1, 8192)),
                "decode": ((1, 1024), (4, 32768), (16, 4096), (64, 2048), (256, 512), (256, 4096)),
            }
        ),
    ),
    "compact": Grid(
        decode_contexts=powers(64, 32768),
        prefill_lengths=powers(64, 8192),
        decode_batches=powers(1, 256),
        rows=(1, 4, 8),
        head_dims=(128,),
        attention_batch=8,
        kv_heads=8,
        eager_rows=(1, 4, 8),
        size_tokens=powers(1, 2**16, 2),
        size_widths=_GPU_WIDTHS,
        softmax_widths=(256, 1024, 2048, 8192),
        size_max_bytes=MAX_SIZE_BYTES,
        models=("qwen2-7b", "phi-3-mini"),
        workloads=MappingProxyType({"prefill": ((1, 2048),), "decode": ((1, 1024), (16, 4096), (256, 512))}),
    ),
    # --device cpu: the same plumbing on tiny shapes (a dry run; no GPU figure comes from it)
    "dry": Grid(
        decode_contexts=(64, 128, 256),
        prefill_lengths=(16, 32, 64),
        decode_batches=(1, 2, 4, 8),
        rows=(1, 4),
        head_dims=(64,),
        attention_batch=2,
        kv_heads=2,
        eager_rows=(1, 4),
        size_tokens=powers(1, 64, 2),
        size_widths=MappingProxyType({"rmsnorm": 896, "residual_add": 896, "silu_mul": 4864}),
        softmax_widths=(256, 2048),
        size_max_bytes=2**20,
        models=("qwen2-0.5b",),
        workloads=MappingProxyType({"prefill": ((2, 32),), "decode": ((2, 64),)}),
    ),
}
# Validation: other models, and batches and lengths strictly between the grid's points.
# Prompts stay at or under 12288 tokens and 8192 a sequence: the math backend (a reference
# kernel) writes an fp32 score matrix per head, 8 GiB for 3 x 4608 tokens of 32 heads.
VALIDATION_MODELS = ("llama-3-8b", "llama-2-7b")  # GQA, MHA (width 4096)
WORKLOADS = {
    "prefill": ((3, 384), (3, 1536), (3, 4608)),
    "decode": ((3, 768), (3, 24576), (12, 3072), (48, 1536), (192, 384), (192, 3072)),
}
QUICK_WORKLOADS = {"prefill": ((3, 1536),), "decode": ((3, 768), (48, 1536))}
DRY_VALIDATION = {"models": ("llama-3.2-1b",), "workloads": {"prefill": ((3, 24),), "decode": ((3, 96),)}}
CALIBRATION_MODELS = GRIDS["full"].models


def grid_for(opts: Options, quick: bool = False) -> Grid:
    """The grid a calibration measures: dry on a CPU, compact with ``--quick`` / ``--compact``."""
    return GRIDS["dry" if opts.device == "cpu" else "compact" if quick else "full"]


def _decoder_rope_cases(model: str, stage: str, batch: int, length: int, dtype: str, split: str) -> list[Case]:
    base = {
        "builder": "engine",
        "model": model,
        "stage": stage,
        "batch": batch,
        "length": length,
        "dtype": dtype,
        "op": "rope",
    }
    name = f"{model}/{stage}/b{batch}x{length}/rope_decoder/{dtype}"
    return [Case(name, "elementwise", "rope_decoder", dtype, MappingProxyType(base), "", split, stage)]


def attention_table_cases(grid: Grid, dtype: str, backends: Sequence[str]) -> list[Case]:
    """Decode and prefill attention on the grid, per kernel: the fused backends (SDPA's and
    transformers' paths) at decode and prefill, eager q.K^T and P.V at decode."""
    cases = []

    def add(kernel, backend, stage, rows, d, length, batch):
        recipe = {
            "builder": "attention_grid",
            "rows": rows,
            "batch": batch,
            "kv_heads": grid.kv_heads,
            "kv_len": length,
            "head_dim": d,
            "dtype": dtype,
        }
        if backend:
            recipe.update(kernel="repeat_kv" if backend == "repeat_kv" else "attention")
            if backend != "flash":
                recipe["rename"] = f"sdpa_{backend}"
        else:
            recipe["kernel"] = kernel
        if stage == "prefill":
            recipe["q_len"] = length
        suffix = f"/{backend}" if backend else ""
        name = f"agrid/{stage}/{kernel}/r{rows}xd{d}x{length}xb{batch}/{dtype}{suffix}"
        cases.append(
            Case(
                name,
                "attention",
                "sdpa" if backend else kernel,
                dtype,
                MappingProxyType(recipe),
                backend,
                "calibration",
                stage,
            )
        )

    fused = [b for b in FUSED if b in backends]
    for stage, lengths, batch in (
        ("decode", grid.decode_contexts, grid.attention_batch),
        ("prefill", grid.prefill_lengths, 1),
    ):
        for backend in fused:
            for d in grid.head_dims:
                for rows in grid.rows:
                    for length in lengths:
                        add("sdpa", backend, stage, rows, d, length, batch)
    for kernel in ("qk_matmul", "sv_matmul"):
        for d in grid.head_dims:
            for rows in grid.eager_rows:
                for length in grid.decode_contexts:
                    add(kernel, "", "decode", rows, d, length, grid.attention_batch)
    return cases


def size_table_cases(grid: Grid, dtype: str) -> list[Case]:
    """Element-wise kernels, norms and the softmax from one token up to ``size_max_bytes``
    moved (the softmax at each of ``softmax_widths`` columns)."""
    cases = []
    kernels = [(k, w) for k, w in grid.size_widths.items()]
    kernels += [("softmax", w) for w in grid.softmax_widths]
    for kernel, width in kernels:
        cases += size_grid_series(kernel, width, dtype, grid.size_tokens, grid.size_max_bytes)
    return cases


def model_cases(
    models: Sequence[str],
    workloads: Mapping[str, Sequence[tuple[int, int]]],
    dtypes: Sequence[str],
    split: str,
    opts: Options,
) -> list[Case]:
    """Every kernel of the models' layers at the workloads (the decoder's rotary, not the
    complex-multiply one); decode batch x length kept under ``MAX_KV_TOKENS``."""
    cases: list[Case] = []
    for model in models:
        for dtype in dtypes:
            for stage in ("prefill", "decode"):
                for batch, length in workloads[stage]:
                    if stage == "decode" and batch * length > MAX_KV_TOKENS:
                        continue
                    cases += [
                        c for c in _stage_cases(model, stage, batch, length, dtype, split, opts) if c.kernel != "rope"
                    ]
                    cases += _decoder_rope_cases(model, stage, batch, length, dtype, split)
    return cases


# Priority of a calibration case (lower first): what serving and transformers run at decode,
# then what prices every kernel's fixed cost, then prefill, then the rest
PRIORITY = (
    "decode attention table (fused: transformers' paths, then SDPA's backends)",
    "element-wise, norm and softmax sizes",
    "decode projections and rotary",
    "prefill attention table",
    "prefill projections and rotary",
    "decode attention table (eager q.K^T, P.V)",
    "quantised products",
    "model-shape attention, norms and element-wise",
    "reference kernels (math SDPA, int8 weight-only)",
)


def priority(case: Case) -> int:
    """The case's place in ``PRIORITY``."""
    table = case.recipe.get("builder") == "attention_grid" and "model" not in case.recipe
    if is_reference(case):
        return 8
    if table and case.kernel == "sdpa":
        return 0 if case.stage == "decode" else 3
    if table:
        return 5
    if case.recipe.get("builder") == "size_grid":
        return 1
    if case.op_class == "quant":
        return 6
    if case.kernel in ("linear", "rope_decoder"):
        return 2 if case.stage == "decode" else 4
    return 7


def gpu_options(opts: Options | None) -> Options:
    """The device's options narrowed to the GPU set: its types in ``DTYPES`` (else its first),
    its SDPA backends and transformers' two paths (which need no backend of their own)."""
    opts = opts or Options(DTYPES, CUDA_BACKENDS, "cuda")
    dtypes = tuple(d for d in opts.dtypes if d in DTYPES) or opts.dtypes[:1]
    backends = tuple(b for b in CUDA_BACKENDS if b in opts.sdpa_backends or b in ("gqa", "repeat_kv"))
    return replace(opts, dtypes=dtypes, sdpa_backends=backends, device="cpu" if opts.device == "cpu" else "cuda")


def gpu_cases(split: str, opts: Options | None = None, quick: bool = False) -> list[Case]:
    """Every case of a split (deduplicated by shape), calibration in ``priority`` order;
    ``opts`` only filters the backends and types the device offers. ``quick``: the compact
    grid and validation's quick workloads."""
    opts = gpu_options(opts)
    dry, dtypes, backends = opts.device == "cpu", opts.dtypes, opts.sdpa_backends
    if split == "calibration":
        grid = grid_for(opts, quick)
        cases = model_cases(grid.models, grid.workloads, dtypes, split, opts)
        for dtype in dtypes:
            cases += attention_table_cases(grid, dtype, backends) + size_table_cases(grid, dtype)
        keep = [c for c in cases if not (quick and priority(c) >= 7)]
        return dedupe(sorted(keep, key=priority))
    models, loads = VALIDATION_MODELS, QUICK_WORKLOADS if quick else WORKLOADS
    if dry:
        models, loads = DRY_VALIDATION["models"], DRY_VALIDATION["workloads"]
    cases = model_cases(models, loads, dtypes, split, opts)
    if not dry:
        cases += sweep_cases("bf16")
    return dedupe(cases)


def check_between(cases: Sequence[Case], grid: Grid) -> None:
    """Raise unless every batch and length of ``cases`` lies strictly between two points of
    the grid (batches: ``decode_batches``; lengths: the union of decode contexts and prompt
    lengths), never on one and never outside."""
    used = dimension_values(cases)
    for dim, points in (
        ("batch", grid.decode_batches),
        ("length", sorted({*grid.decode_contexts, *grid.prefill_lengths})),
    ):
        bad = sorted(v for v in used[dim] if v in points or not points[0] < v < points[-1])
        if bad:
            raise ValueError(
                f"drawn {dim} {', '.join(map(str, bad))} not strictly between the "
                f"grid's points {points[0]}..{points[-1]} ({', '.join(map(str, points))})"
            )


def split_summary(rows: Sequence[Mapping[str, Any]], error: str = "error_calibrated") -> dict[str, dict[str, float]]:
    """Median and p90 of |error| for the headline kernels and the reference ones apart."""
    import numpy as np

    out = {}
    for label, keep in (("headline", False), ("reference", True)):
        errs = np.abs(
            [
                r[error]
                for r in rows
                if r.get(error) is not None and r.get("status", "ok") == "ok" and is_reference(r) == keep
            ]
        )
        if errs.size:
            out[label] = {"n": int(errs.size), "median": float(np.median(errs)), "p90": float(np.quantile(errs, 0.9))}
    return out


def agreement_rows(device: str = "cuda", every: int = 20) -> list[dict[str, Any]]:
    """Every ``every``-th validation case timed by graph replay and by profiler kernel
    durations (``kernels.bench.timing.measure(agree=True)``): the two device-time methods side by
    side. On a CPU (a dry run) both columns are the one CPU timing."""
    from kernels.bench.bench import Unsupported, make_bench
    from kernels.bench.timing import agreement, measure

    cache = 50 * 2**20
    if device == "cuda":
        import torch

        cache = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    opts = Options(DTYPES, CUDA_BACKENDS, device)
    for case in gpu_cases("validation", opts)[::every]:
        try:
            bench = make_bench(case, device, cache)
            with bench.context():
                m = measure(bench.fn, bench.arg_sets, device=device, budget_s=0.1, agree=True, cache_bytes=cache)
        except (Unsupported, RuntimeError) as err:
            rows.append({"name": case.name, "status": "skipped", "reason": str(err)[:160]})
            continue
        other = m.extra.get("profiler_s", m.median_s)
        rows.append(
            {
                "name": case.name,
                "status": "ok",
                "method": m.method,
                "graph_s": m.median_s,
                "profiler_s": other,
                "agreement": agreement(m.median_s, other),
                "kernels": m.extra.get("kernels"),
                "host_s": m.extra.get("host_s"),
                "reference": is_reference(case),
            }
        )
    return rows


def write_agreement(device: str, every: int, folder=None) -> str:
    import datetime as dt
    import json

    import numpy as np

    from kernels.bench.provenance import collect, measured_key
    from ridgeline.io.catalog import user_data_dir
    from ridgeline.io.files import write_atomic

    rows = agreement_rows(device, every)
    ok = [r["agreement"] for r in rows if r["status"] == "ok"]
    meta = {**collect(device, None), "device_key": measured_key(device), "every": every}
    summary = {"n": len(ok), "median": float(np.median(ok)) if ok else None, "max": float(np.max(ok)) if ok else None}
    path = (
        Path(folder or user_data_dir() / "validation")
        / f"agreement-{meta['device_key']}-{dt.date.today().isoformat()}.json"
    )
    write_atomic(path, json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2, default=float) + "\n")
    return f"{path}: {summary}"


# A fresh held-out draw (``validate --draw SEED``): DRAW_MODEL_COUNT catalog models that the
# grid never measures, one prompt and DRAW_DECODES decode steps, each batch and length drawn
# log-uniformly over the GPU ranges (lengths in steps of ``step``) and redrawn until it lies
# strictly between the grid's points; prompts keep batch x tokens under ``prefill_tokens``,
# decodes batch x cached tokens under ``decode_tokens``.
DRAW_MODELS = ("llama-2-7b", "llama-3-8b", "llama-2-13b")
DRAW_MODEL_COUNT, DRAW_DECODES = 2, 2
DRAW_RANGES = {
    "gpu": {
        "decode_batch": (1, 256),
        "decode_length": (64, 32768),
        "prefill_batch": (1, 8),
        "prefill_length": (64, 8192),
        "prefill_tokens": 12288,
        "decode_tokens": MAX_KV_TOKENS,
        "step": 16,
    },
    "dry": {
        "decode_batch": (1, 8),
        "decode_length": (64, 256),
        "prefill_batch": (1, 4),
        "prefill_length": (16, 64),
        "prefill_tokens": 192,
        "decode_tokens": 1024,
        "step": 8,
    },
}
DRY_DRAW_MODELS = ("llama-3.2-1b",)


def _calibration_values(opts: Options) -> dict[str, set]:
    """Every model, batch, length and width a calibration (full or compact) measures."""
    return dimension_values(gpu_cases("calibration", opts) + gpu_cases("calibration", opts, True))


def gpu_drawn_cases(seed: int, opts: Options | None = None) -> tuple[list[Case], dict[str, Any]]:
    """``validate --draw SEED`` on the GPU set: models, batches and lengths that the GPU
    calibration never measures (``DRAW_RANGES``; the ``dry`` ones on a CPU), in the data
    types it calibrates (``DTYPES``). Returns the cases and what was drawn."""
    import random

    opts = gpu_options(opts)
    dry, dtypes = opts.device == "cpu", opts.dtypes
    grid, ranges = GRIDS["dry" if dry else "full"], DRAW_RANGES["dry" if dry else "gpu"]
    used = _calibration_values(opts)
    points = {"batch": grid.decode_batches, "length": sorted({*grid.decode_contexts, *grid.prefill_lengths})}
    rnd = random.Random(seed)

    def fresh(dim: str, lo: int, hi: int, step: int = 1) -> int:
        """Log-uniform in [lo, hi], a multiple of ``step``, strictly between grid points."""
        for _ in range(10_000):
            value = int(round(math.exp(rnd.uniform(math.log(lo), math.log(hi))) / step)) * step
            if (
                lo <= value <= hi
                and points[dim][0] < value < points[dim][-1]
                and value not in points[dim]
                and value not in used[dim]
            ):
                return value
        raise ValueError(f"no {dim} in [{lo}, {hi}] lies between the grid's points")

    pool = [m for m in (DRY_DRAW_MODELS if dry else DRAW_MODELS) if m not in used["model"]]
    picked = sorted(rnd.sample(pool, min(DRAW_MODEL_COUNT, len(pool))))
    batch = fresh("batch", *ranges["prefill_batch"])
    hi = min(ranges["prefill_length"][1], ranges["prefill_tokens"] // batch)
    prefill = [(batch, fresh("length", ranges["prefill_length"][0], hi, ranges["step"]))]
    decode = []
    for _ in range(DRAW_DECODES):
        batch = fresh("batch", *ranges["decode_batch"])
        hi = min(ranges["decode_length"][1], ranges["decode_tokens"] // batch)
        decode.append((batch, fresh("length", ranges["decode_length"][0], hi, ranges["step"])))
    cases = dedupe(model_cases(picked, {"prefill": prefill, "decode": decode}, dtypes, "validation", opts))
    check_between(cases, grid)
    return cases, {
        "seed": seed,
        "models": picked,
        "ranges": "dry" if dry else "gpu",
        "prefill": {d: [list(w) for w in prefill] for d in dtypes},
        "decode": [list(w) for w in decode],
    }


def budgeted_run_cases(budget_s: float | None, log: Callable[[str], None] = print):
    """``kernels.bench.suite.run_cases`` that measures cases in order until ``budget_s`` seconds
    have gone and lists every later one as skipped (its reason names the budget); None: all."""
    from kernels.bench.suite import op_fields, run_case

    def run(
        cases: Sequence[Case], cfg, *, label: str = "cases", progress: bool = True, on_row=None
    ) -> list[dict[str, Any]]:
        start, rows = time.perf_counter(), []
        for i, case in enumerate(cases):
            spent = time.perf_counter() - start
            if budget_s is not None and spent > budget_s:
                rows.append(
                    {
                        **case.to_dict(),
                        **op_fields(case),
                        "status": "skipped",
                        "reason": f"--budget-s {budget_s:g}: not reached ({spent:.0f} s spent on {i} cases)",
                        "rel_error": None,
                    }
                )
                continue
            rows.append(run_case(case, cfg))
            if on_row:
                on_row(rows[-1])
            if progress and (i + 1) % 50 == 0:
                log(f"  {label}: {i + 1}/{len(cases)} cases, {spent:.0f} s")
        left = sum(r["status"] == "skipped" and r["reason"].startswith("--budget-s") for r in rows)
        if left:
            log(
                f"  {label}: budget of {budget_s:g} s reached; {left} of {len(cases)} cases "
                f"not measured (from {PRIORITY[priority(cases[len(cases) - left])]})"
            )
        return rows

    return run


def gpu_case_set(budget_s: float | None = None):
    """The GPU set, for ``calibrate`` and ``validate`` to measure (``case_set``): the cases of
    :func:`gpu_cases` and the draws of :func:`gpu_drawn_cases`; with ``budget_s`` a run
    measures cases in priority order for that many seconds at most (:func:`budgeted_run_cases`)."""
    from kernels.bench.suite import CaseSet, run_cases

    return CaseSet(gpu_cases, gpu_drawn_cases, run_cases if budget_s is None else budgeted_run_cases(budget_s))
