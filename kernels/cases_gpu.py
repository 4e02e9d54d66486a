"""The GPU case set: shapes that load an H100, and the reference kernels reported apart.

``kernels.cases`` sizes its cases for a CPU core; on an H100 most of them finish in a few
microseconds and measure launch cost. These load the device:

- prefill of 512, 2048 and 8192 tokens (calibration: 1536 and 6144 at batch 2);
- decode at batch 1 to 256 with 512 to 32768 cached tokens (calibration: batches 2-128,
  1536-24576 tokens; K/V of a set kept under ``MAX_KV_TOKENS`` batch x tokens so that the
  rotated input sets fit the GPU's memory);
- GQA and MHA models in both splits (calibration qwen2-7b, phi-3-mini; validation
  llama-3-8b, llama-2-7b), held out in every dimension as in ``kernels.cases``;
- fp8 ``torch._scaled_mm`` in prefill, int4 weight-only in decode, SDPA through the flash,
  cuDNN and memory-efficient backends;
- the rotary embedding exactly as ``kernels.decoder.apply_rope`` runs it (rotate-half in
  the model's type, q and k; kernel ``rope_decoder``).

Reference kernels - ones no serving stack runs for speed: SDPA's ``math`` backend and
``torch._weight_int8pack_mm`` on CUDA - are measured too, but :func:`is_reference` marks
them so that summaries give the headline figures without them (:func:`split_summary`).

``gpu_case_set()`` makes ``ridgeline calibrate`` / ``validate`` measure this set instead of
``kernels.cases.suite_cases`` (``python -m kernels.cases_gpu calibrate|validate``).
"""
from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from .cases import Case, Options, _stage_cases, dedupe, is_reference, sweep_cases

CALIBRATION_MODELS = ("qwen2-7b", "phi-3-mini")       # GQA, MHA (widths 3584 / 3072)
VALIDATION_MODELS = ("llama-3-8b", "llama-2-7b")       # GQA, MHA (width 4096)
MAX_KV_TOKENS = 2**20                                  # batch x cached tokens per case
# held out in every dimension (kernels.cases.check_disjoint): no model, batch, length or
# width of validation is measured in calibration
WORKLOADS = {
    "calibration": {"prefill": [(2, 1536), (2, 6144)],
                    "decode": [(2, 1536), (2, 24576), (16, 3072), (128, 1536), (32, 6144)]},
    "validation": {"prefill": [(1, 512), (1, 2048), (1, 8192)],
                   "decode": [(1, 512), (1, 32768), (8, 4096), (64, 2048), (256, 512),
                              (256, 4096)]},
}
QUICK = {"calibration": {"prefill": [(2, 1536)], "decode": [(2, 1536), (32, 6144)]},
         "validation": {"prefill": [(1, 2048)], "decode": [(1, 512), (64, 2048)]}}
# --device cpu: the same plumbing on tiny shapes (a dry run; no GPU figure comes from it)
DRY = {"models": {"calibration": ("qwen2-0.5b",), "validation": ("llama-3.2-1b",)},
       "calibration": {"prefill": [(2, 16)], "decode": [(2, 64)]},
       "validation": {"prefill": [(1, 24)], "decode": [(1, 96)]}}
DTYPES = ("bf16",)                                     # what serving runs; fp16 and fp32 are in
CUDA_BACKENDS = ("math", "flash", "efficient", "cudnn")  # kernels.cases' set


def _decoder_rope_cases(model: str, stage: str, batch: int, length: int, dtype: str,
                        split: str) -> list[Case]:
    base = {"builder": "engine", "model": model, "stage": stage, "batch": batch,
            "length": length, "dtype": dtype, "op": "rope"}
    name = f"{model}/{stage}/b{batch}x{length}/rope_decoder/{dtype}"
    return [Case(name, "elementwise", "rope_decoder", dtype, MappingProxyType(base), "", split,
                 stage)]


def gpu_cases(split: str, opts: Options | None = None, quick: bool = False) -> list[Case]:
    """Every case of a split (deduplicated by shape); ``opts`` only filters the backends
    and types the device offers."""
    opts = opts or Options(DTYPES, CUDA_BACKENDS, "cuda")
    dry = opts.device == "cpu"
    opts = replace(opts, dtypes=tuple(d for d in opts.dtypes if d in DTYPES) or opts.dtypes[:1],
                   device="cuda" if not dry else "cpu")
    models = CALIBRATION_MODELS if split == "calibration" else VALIDATION_MODELS
    loads = (QUICK if quick else WORKLOADS)[split]
    if dry:
        models, loads = DRY["models"][split], DRY[split]
    cases: list[Case] = []
    for model in models[:1] if quick else models:
        for dtype in opts.dtypes:
            for stage in ("prefill", "decode"):
                for batch, length in loads[stage]:
                    if stage == "decode" and batch * length > MAX_KV_TOKENS:
                        continue
                    cases += [c for c in _stage_cases(model, stage, batch, length, dtype,
                                                      split, opts) if c.kernel != "rope"]
                    cases += _decoder_rope_cases(model, stage, batch, length, dtype, split)
    if split == "validation" and not dry:
        cases += sweep_cases("bf16")
        # held out: no shape that a calibration run (full or quick) measures, e.g. a decode
        # norm of two models with the same hidden size
        fitted = {c.shape_key() for q in (False, True) for c in gpu_cases("calibration", opts, q)}
        cases = [c for c in cases if c.shape_key() not in fitted]
    return dedupe(cases)


def split_summary(rows: Sequence[Mapping[str, Any]], error: str = "error_calibrated"
                  ) -> dict[str, dict[str, float]]:
    """Median and p90 of |error| for the headline kernels and the reference ones apart."""
    import numpy as np

    out = {}
    for label, keep in (("headline", False), ("reference", True)):
        errs = np.abs([r[error] for r in rows if r.get(error) is not None
                       and r.get("status", "ok") == "ok" and is_reference(r) == keep])
        if errs.size:
            out[label] = {"n": int(errs.size), "median": float(np.median(errs)),
                          "p90": float(np.quantile(errs, 0.9))}
    return out


def agreement_rows(device: str = "cuda", every: int = 20) -> list[dict[str, Any]]:
    """Every ``every``-th validation case timed by graph replay and by profiler kernel
    durations (``kernels.timing.measure(agree=True)``): the two device-time methods side by
    side. On a CPU (a dry run) both columns are the one CPU timing."""
    from .bench import Unsupported, make_bench
    from .timing import agreement, measure

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
                m = measure(bench.fn, bench.arg_sets, device=device, budget_s=0.1, agree=True,
                            cache_bytes=cache)
        except (Unsupported, RuntimeError) as err:
            rows.append({"name": case.name, "status": "skipped", "reason": str(err)[:160]})
            continue
        other = m.extra.get("profiler_s", m.median_s)
        rows.append({"name": case.name, "status": "ok", "method": m.method,
                     "graph_s": m.median_s, "profiler_s": other,
                     "agreement": agreement(m.median_s, other),
                     "kernels": m.extra.get("kernels"), "host_s": m.extra.get("host_s"),
                     "reference": is_reference(case)})
    return rows


def write_agreement(device: str, every: int, folder=None) -> str:
    import datetime as dt
    import json
    from pathlib import Path

    import numpy as np

    from ridgeline.report import write_atomic

    from ridgeline.catalog import user_data_dir

    from .e2e import measured_key
    from .provenance import collect

    rows = agreement_rows(device, every)
    ok = [r["agreement"] for r in rows if r["status"] == "ok"]
    meta = {**collect(device, None), "device_key": measured_key(device), "every": every}
    summary = {"n": len(ok), "median": float(np.median(ok)) if ok else None,
               "max": float(np.max(ok)) if ok else None}
    path = Path(folder or user_data_dir() / "validation") / f"agreement-{meta['device_key']}-{dt.date.today().isoformat()}.json"
    write_atomic(path, json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2,
                                  default=float) + "\n")
    return f"{path}: {summary}"


DRY_DRAWN = 8   # --device cpu: a dry run measures this many of the drawn (full-size) cases


def gpu_drawn_cases(seed: int, opts: Options | None = None) -> tuple[list[Case], dict[str, Any]]:
    """``validate --draw SEED`` on the GPU set: ``kernels.cases.drawn_cases`` held out from
    what the GPU calibration measures (its models, batches, lengths and widths), in the
    data types it calibrates (``DTYPES``). A CPU dry run keeps the first ``DRY_DRAWN``."""
    from unittest import mock

    from . import cases

    opts = opts or Options(DTYPES, CUDA_BACKENDS, "cuda")
    opts = replace(opts, dtypes=tuple(d for d in opts.dtypes if d in DTYPES) or opts.dtypes[:1])
    with mock.patch.object(cases, "suite_cases", gpu_cases):
        drawn, what = cases.drawn_cases(seed, opts)
    return (drawn[:DRY_DRAWN] if opts.device == "cpu" else drawn), what


@contextlib.contextmanager
def gpu_case_set():
    """Within this block ``kernels.calibrate`` and ``kernels.validate`` measure the GPU set
    (their ``suite_cases`` replaced by :func:`gpu_cases`, ``--draw`` by
    :func:`gpu_drawn_cases`)."""
    from unittest import mock

    from . import calibrate, validate

    with mock.patch.object(calibrate, "suite_cases", gpu_cases), \
            mock.patch.object(validate, "suite_cases", gpu_cases), \
            mock.patch.object(validate, "drawn_cases", gpu_drawn_cases):
        yield


def main(argv: list[str] | None = None) -> int:
    """``calibrate|validate [ridgeline options]``: the ridgeline command on the GPU set;
    ``summary SNAPSHOT.json``: headline and reference figures apart."""
    import json
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("calibrate", "validate", "summary", "list", "agree"):
        print("usage: python -m kernels.cases_gpu calibrate|validate [options] | "
              "summary SNAPSHOT.json | list | agree [--device D] [--every N]", file=sys.stderr)
        return 2
    if args[0] == "agree":
        device = args[args.index("--device") + 1] if "--device" in args else "cuda"
        every = int(args[args.index("--every") + 1]) if "--every" in args else 20
        folder = args[args.index("--output-dir") + 1] if "--output-dir" in args else None
        print(write_agreement(device, every, folder))
        return 0
    if args[0] == "summary":
        rows = json.loads(open(args[1]).read())["rows"]
        for label, stats in split_summary(rows).items():
            print(f"{label:10s} n={stats['n']:4d}  median {stats['median']:.1%}  "
                  f"p90 {stats['p90']:.1%}")
        return 0
    if args[0] == "list":
        for split in ("calibration", "validation"):
            cases = gpu_cases(split)
            print(f"{split}: {len(cases)} cases, "
                  f"{sum(is_reference(c) for c in cases)} reference")
        return 0
    from ridgeline.cli import app

    with gpu_case_set():
        try:
            app(args, standalone_mode=True)
        except SystemExit as done:
            return int(done.code or 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
