"""An outside client: Hugging Face ``transformers`` ``generate`` against ridgeline's prediction.

    python -m kernels.e2e.hf_client llama-3-8b --device cuda --batch 1 --batch 8 --prompt 512 \
        --generate 32 --mode eager --mode compiled

The model is built from its config (the catalog's ``config.json`` snapshot or a local one)
with random weights (no hub, no download), in bf16 by default, with ``attn_implementation=
"sdpa"``, and run through ``model.generate`` with a static KV cache (``cache_implementation=
"static"``), greedy, exactly ``generate`` new tokens. Modes:

- ``eager``: ``disable_compile=True``; predicted with ``execution="eager"``;
- ``compiled``: transformers' own automatic compilation of the decode step with a static
  cache (``torch.compile`` mode ``reduce-overhead``: CUDA graphs); predicted with
  ``execution="graph"``. transformers compiles only on accelerators, so on a CPU this mode
  is refused with one line.

TTFT and TPOT come from a logits processor that ``generate`` calls once per new token:
it waits for the device and takes the time, so TTFT = from the call to the first token's
logits (prefill), TPOT = the mean interval between the later ones (``generate`` waits
for the device at every step anyway, to check its stopping criteria). A warm-up
generation (and compilation) runs first; each row keeps medians over ``repeats``.
Results go to ``reports/validation/hf-<device_key>-<model>-<date>.json`` in the e2e
format (``client: transformers``).

Each row also times the first token's lm_head as ``generate`` calls it (a [B, 1, H] slice of
the last hidden state; on a CPU in bf16 PyTorch copies the weight once per sequence, see
``ridgeline.engine.basis.generate_notes``) and as a 2-D linear, counts the bytes it copies,
and prints the prediction plus the measured gap.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from kernels.bench.provenance import datasheet_device
from kernels.e2e.e2e import (
    NOISE_CPU,
    NOISE_CUDA,
    Case,
    Result,
    measured_key,
    predicted_columns,
    provenance,
    read_peak,
    reset_peak,
    resolve_device,
    signed_error,
    summarize,
    write_rows,
)
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.units import format_bytes
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import MODELS_DIR, user_data_dir
from ridgeline.io.files import read_json
from ridgeline.io.resolve import calibrated_for

MODEL_TYPES = ("llama", "qwen2")
MODES = {"eager": "eager", "compiled": "graph"}  # client mode -> ridgeline execution
TORCH_DTYPES = ("fp32", "bf16", "fp16")


def need_transformers():
    try:
        import transformers
    except ImportError:
        raise RidgelineError(
            "the transformers client needs the 'hf' extra: pip install 'ridgeline[hf]' (or pip install transformers)"
        ) from None
    return transformers


def read_config(name: str) -> tuple[dict[str, Any], str]:
    """The raw Hugging Face config of a catalog name or a config.json path, and its name."""
    path = Path(name)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        path = MODELS_DIR / f"{name}.json"
        if not path.is_file():
            raise RidgelineError(f"no model '{name}': give a catalog name or a config.json")
    raw = read_json(path)
    if raw.get("model_type") not in MODEL_TYPES:
        raise RidgelineError(
            f"{name}: model_type {raw.get('model_type')!r}; the transformers client builds {', '.join(MODEL_TYPES)}"
        )
    stem = path.parent.name if path.name == "config.json" else path.stem
    return raw, stem


def hf_raw(raw: Mapping[str, Any], layers: int | None) -> dict[str, Any]:
    """The config transformers is given: our keys, private ones dropped, ``layers`` kept."""
    out = {k: v for k, v in raw.items() if not k.startswith("_")}
    if layers is not None:
        total = int(out["num_hidden_layers"])
        if not 1 <= layers <= total:
            raise RidgelineError(f"--layers must be between 1 and {total}, got {layers}")
        out["num_hidden_layers"] = layers
    return out


def engine_config(raw: Mapping[str, Any], name: str) -> ModelConfig:
    return ModelConfig.from_hf_config(raw, name=name)


def build_model(raw: Mapping[str, Any], dtype: str, device: str, seed: int = 0):
    """A ``*ForCausalLM`` from the config with random weights, built on ``device``."""
    import torch

    transformers = need_transformers()
    from kernels.e2e.decoder import torch_dtype

    fields = {k: v for k, v in raw.items() if k not in ("model_type", "architectures", "torch_dtype", "dtype")}
    config = transformers.AutoConfig.for_model(raw["model_type"], **fields)
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch_dtype(dtype), attn_implementation="sdpa"
        )
    return model.eval().requires_grad_(False)


class StepClock:
    """A logits processor that takes the time (after the device is done) at every step."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")
        self.times: list[float] = []

    def __call__(self, input_ids, scores):
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        return scores


def step_times(start: float, stamps: Sequence[float]) -> tuple[float, list[float]]:
    """(TTFT, decode step intervals) from the call's start and the per-token stamps."""
    if not stamps:
        raise RidgelineError("generate produced no tokens")
    return stamps[0] - start, list(np.diff(stamps))


def generate_once(model, input_ids, generate: int, mode: str, device: str):
    """One timed ``generate``: (TTFT, [decode step seconds])."""
    import torch
    from transformers import LogitsProcessorList

    clock = StepClock(device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    model.generate(
        input_ids,
        attention_mask=torch.ones_like(input_ids),
        max_new_tokens=generate,
        min_new_tokens=generate,
        do_sample=False,
        cache_implementation="static",
        disable_compile=mode == "eager",
        logits_processor=LogitsProcessorList([clock]),
        pad_token_id=0,
    )
    return step_times(start, clock.times)


def lm_head_inputs(model, batch: int, prompt: int, device: str):
    """The first token's lm_head input as ``generate`` passes it (``logits_to_keep=1``:
    transformers' ``slice_logits_to_keep``, a [B, 1, H] view of the [B, S, H] last hidden
    state) and as a contiguous [B, H] matrix, as ridgeline's decoder passes it."""
    import torch

    try:
        from transformers.modeling_utils import slice_logits_to_keep
    except ImportError:  # transformers before 5.2x slices inline: hidden[:, -k:, :]

        def slice_logits_to_keep(h, k):
            return h[:, -k:, :]

    weight = model.lm_head.weight
    hidden = torch.randn(batch, prompt, weight.shape[1], dtype=weight.dtype, device=device)  # [B, S, H]
    return slice_logits_to_keep(hidden, 1), hidden[:, -1, :].contiguous()


def copied_bytes(fn, element_size: int) -> int:
    """Bytes written by the ``aten::copy_`` calls ``fn()`` makes (torch.profiler, shapes
    recorded), at ``element_size`` bytes per element."""
    from torch.profiler import profile

    with profile(record_shapes=True) as prof:
        fn()
    return sum(math.prod(e.input_shapes[0]) for e in prof.events() if e.name == "aten::copy_") * element_size


def measure_lm_head(model, batch: int, prompt: int, device: str, repeats: int) -> dict[str, Any]:
    """The first token's lm_head as ``generate`` calls it against a 2-D call of the same
    rows: medians of ``repeats`` timed calls each, after a profiled warm-up that counts the
    bytes copied on the way (on a CPU in bf16: the weight, once per sequence)."""
    import torch

    head, cuda = model.lm_head, device.startswith("cuda")
    sliced, flat = lm_head_inputs(model, batch, prompt, device)
    with torch.inference_mode():
        copied = copied_bytes(lambda: head(sliced), head.weight.element_size())
        head(flat)
        seconds = [[timed(lambda x=x: head(x), cuda) for _ in range(repeats)] for x in (sliced, flat)]
    return {
        "measured_lm_head_generate_s": float(np.median(seconds[0])),
        "measured_lm_head_plain_s": float(np.median(seconds[1])),
        "lm_head_copied_bytes": copied,
    }


def timed(fn, cuda: bool) -> float:
    """Seconds of one call of ``fn``, the device waited for on both sides."""
    import torch

    sync = torch.cuda.synchronize if cuda else lambda: None
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def measure(model, case: Case, mode: str, device: str, repeats: int, seed: int = 0) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, model.config.vocab_size, (case.batch, case.prompt), generator=generator).to(device)
    ttfts, steps = [], []
    reset_peak(device)
    with torch.inference_mode():
        # warm-up (and compilation); eager, it also records the attention path transformers
        # takes (a compiled graph is not patched)
        with sdpa_calls() if mode == "eager" else contextlib.nullcontext([]) as calls:
            generate_once(model, ids, case.generate, mode, device)
        for _ in range(repeats):
            ttft, run = generate_once(model, ids, case.generate, mode, device)
            ttfts.append(ttft)
            steps += run
    noise = NOISE_CUDA if device.startswith("cuda") else NOISE_CPU
    ttft, tpot = (
        summarize(v, inner=1, sets=1, method="perf_counter+sync", noise_threshold=noise) for v in (ttfts, steps)
    )
    return {
        **read_peak(device),
        "attention_paths": attention_paths(calls, *hf_heads(model.config)),
        "measured_ttft_s": ttft.median_s,
        "measured_ttft_p20_s": ttft.p20_s,
        "measured_ttft_p80_s": ttft.p80_s,
        "measured_tpot_s": tpot.median_s,
        "measured_tpot_p20_s": tpot.p20_s,
        "measured_tpot_p80_s": tpot.p80_s,
        "measured_tpot_mean_s": float(np.mean(steps)),
        "noisy": ttft.noisy or tpot.noisy,
    }


def hf_heads(config) -> tuple[int, int]:
    heads = config.num_attention_heads
    return heads, getattr(config, "num_key_value_heads", None) or heads


@contextlib.contextmanager
def sdpa_calls():
    """Record how each ``scaled_dot_product_attention`` call inside is made (transformers
    looks the function up on ``torch.nn.functional`` at every call): its query and K/V
    head counts, its query rows, whether a mask is passed and whether ``enable_gqa`` is set."""
    import torch.nn.functional as F

    original, calls = F.scaled_dot_product_attention, []

    def recording(query, key, value, attn_mask=None, *args, **kwargs):
        calls.append(
            (
                query.shape[-3],
                key.shape[-3],
                query.shape[-2],
                attn_mask is not None,
                bool(kwargs.get("enable_gqa", False)),
            )
        )
        return original(query, key, value, attn_mask, *args, **kwargs)

    F.scaled_dot_product_attention = recording
    try:
        yield calls
    finally:
        F.scaled_dot_product_attention = original


def attention_paths(calls, heads: int, kv_heads: int) -> dict[str, int]:
    """Counts of SDPA calls by path, for a model of ``heads`` query and ``kv_heads`` K/V
    heads: ``enable_gqa`` (K/V heads shared inside SDPA), ``repeat_kv`` (K/V expanded to
    the query heads first), ``fold_gqa`` (each K/V head's query heads folded into its
    rows, as transformers does for a masked decode), ``mha`` (as many K/V as query heads);
    each ``+mask`` when a mask tensor is passed, and ``prefill`` or ``decode`` by the
    query rows per head."""
    out: Counter[str] = Counter()
    for q_heads, kv, rows, masked, gqa in calls:
        if gqa:
            path = "enable_gqa"
        elif q_heads < heads:
            path, rows = "fold_gqa", rows * q_heads // heads
        else:
            path = "repeat_kv" if kv_heads < heads and kv == q_heads else "mha"
        out[f"{'prefill' if rows > 1 else 'decode'}:{path}{'+mask' if masked else ''}"] += 1
    return dict(out)


def priced_attention(paths: Mapping[str, int]) -> str:
    """The attention setting (docs/model.md, "Attention settings") of the path transformers'
    prompt took, from ``attention_paths``: ``enable_gqa`` is ``sdpa-gqa``, ``repeat_kv`` with a
    mask ``sdpa-repeat``; MHA (plain SDPA) and folded groups are the fused kernel, ``flash``."""
    prompt = [k.split(":", 1)[1] for k in paths if k.startswith("prefill:")]
    if any(p.startswith("enable_gqa") for p in prompt):
        return "sdpa-gqa"
    if any(p.startswith("repeat_kv") for p in prompt):
        return "sdpa-repeat"
    return "flash"


def run_hf(
    name: str,
    cases: Sequence[Case],
    *,
    dtype: str = "bf16",
    device: str | None = None,
    layers: int | None = None,
    modes: Sequence[str] = ("eager",),
    repeats: int = 3,
    hardware: str | None = None,
    profile: Path | None = None,
    seed: int = 0,
    output: Path | None = None,
    write: bool = True,
    log: Callable[[str], None] = lambda _m: None,
) -> Result:
    """Measure every case in every mode with transformers, predict each, write the rows."""
    transformers = need_transformers()
    from kernels.e2e.e2e import truncate

    if dtype not in TORCH_DTYPES:
        raise RidgelineError(f"--dtype must be one of {', '.join(TORCH_DTYPES)}, got '{dtype}'")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise RidgelineError(f"unknown --mode {unknown[0]!r}; use one of: {', '.join(MODES)}")
    if repeats < 1 or any(c.generate < 2 for c in cases):
        raise RidgelineError("--repeats must be >= 1 and --generate >= 2")
    device = resolve_device(device)
    if "compiled" in modes and not device.startswith("cuda"):
        raise RidgelineError(
            "--mode compiled: transformers compiles generate only on an accelerator; on a CPU use --mode eager"
        )
    raw, stem = read_config(name)
    raw = hf_raw(raw, layers)
    config = truncate(engine_config(raw, stem), None)
    spec = datasheet_device(device, hardware=hardware)
    key = measured_key(device)
    calibrated, used, note = calibrated_for(key, spec, profile)
    meta = provenance(device, spec, used if calibrated else None)
    meta.update(
        client="transformers",
        transformers=transformers.__version__,
        timer="perf_counter after torch.cuda.synchronize, per generated token",
    )
    log(
        f"building {stem} ({config.num_layers} layers, {dtype}) with transformers "
        f"{transformers.__version__} on {device}"
    )
    path = output or user_data_dir() / "validation" / f"hf-{key}-{stem}-{meta['date'][:10]}.json"
    model = build_model(raw, dtype, device, seed)
    rows = []
    for mode in modes:
        for case in cases:
            log(f"generate: batch {case.batch}, prompt {case.prompt}, {case.generate} tokens, {mode}")
            measured = measure(model, case, mode, device, repeats, seed)
            measured.update(measure_lm_head(model, case.batch, case.prompt, device, repeats))
            execution = MODES[mode]
            row = {
                "model": stem,
                "layers": config.num_layers,
                **asdict(case),
                "dtype": dtype,
                "compile": mode == "compiled",
                "execution": execution,
                "client": "transformers",
                "repeats": repeats,
                **measured,
            }
            row["attention_priced"] = priced_attention(measured["attention_paths"])
            row.update(
                predicted_columns(config, spec, case, dtype, calibrated, measured, execution, row["attention_priced"])
            )
            row["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            rows.append(row)
            if write:  # row by row: a run stopped at a time limit keeps what it measured
                write_rows(path, meta, [row])
    return Result(meta, rows, note, path if write else None)


def lm_head_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per row: the first token's lm_head as ``generate`` ran it against a 2-D linear, the
    bytes it copied, and the prediction (which prices the 2-D linear) plus the measured gap."""
    lines = [
        "predictions price lm_head as ridgeline's decoder calls it, a 2-D linear; generate calls it on a "
        "[B, 1, H] slice of the prompt's last hidden state:"
    ]
    for r in rows:
        mode = "calibrated" if r.get("predicted_calibrated_ttft_s") is not None else "spec"
        extra = r["measured_lm_head_generate_s"] - r["measured_lm_head_plain_s"]
        ttft = r[f"predicted_{mode}_ttft_s"] + extra
        lines.append(
            f"lm_head of the first token (batch {r['batch']}, {r['dtype']}): "
            f"{r['measured_lm_head_generate_s'] * 1e3:.2f} ms as generate calls it, "
            f"{r['measured_lm_head_plain_s'] * 1e3:.2f} ms as a 2-D linear, "
            f"{format_bytes(r['lm_head_copied_bytes'])} copied; {mode} TTFT + the gap = {ttft * 1e3:.2f} ms "
            f"({signed_error(ttft, r['measured_ttft_s']):+.0%})"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from kernels.e2e.e2e import report_lines

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="catalog name or config.json (model_type llama or qwen2)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--prompt", type=int, action="append")
    parser.add_argument("--generate", type=int, default=16)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--mode", action="append", help="eager or compiled (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hardware", default=None)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--output", "-o", type=Path, default=None)
    args = parser.parse_args(argv)
    cases = [Case(b, p, args.generate) for b in args.batch or [1] for p in args.prompt or [128]]
    try:
        result = run_hf(
            args.model,
            cases,
            dtype=args.dtype,
            device=args.device,
            layers=args.layers,
            modes=tuple(args.mode or ["eager"]),
            repeats=args.repeats,
            hardware=args.hardware,
            profile=args.profile,
            output=args.output,
            log=lambda m: print(m, file=sys.stderr),
        )
    except RidgelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for line in [*report_lines(result), *lm_head_lines(result.rows)]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
