"""``ridgeline validate --through transformers``: what a user of transformers runs, a module
at a time, against the engine's ops for it.

For each model (``MODELS``, catalog configs transformers builds) and type, transformers
builds one decoder layer from the config (random weights; ``attn_implementation`` left to
transformers, whose default is ``sdpa``), and the layer's attention module (``self_attn``:
projections, rotary, its attention interface, ``o_proj``) and MLP module (``mlp``) are each
timed as the kernel cases are (``suite.run_bench``: checked against float64, then
``timing.measure``, CPU wall time or CUDA device time, over copies of the module and its
inputs that outgrow the cache). The engine predicts the same module with its ops for that
config (``layers.standard_attention`` or ``layers.mlp_block``, one layer) under the
resolved ``auto`` attention setting: the sum of their per-call times.

Shapes: decode, ``batch`` sequences with one new token over ``length`` cached tokens, held
in a cache that writes the new token in place (as transformers' static cache does) with no
mask (a batch without padding); prefill, ``length`` prompt tokens, no cache, causal. Each
row carries ``through: transformers``, the ops predicted (and each one's time) and the SDPA
paths transformers took (``hf_client.attention_paths``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernels.bench.bench import TOLERANCE, Bench, rel_error
from kernels.bench.cases import QUICK_VALIDATION_MODELS, QUICK_WORKLOADS, VALIDATION_MODELS
from kernels.bench.timing import rotation_sets
from kernels.e2e.hf_client import attention_paths, build_model, engine_config, hf_heads, read_config, sdpa_calls
from kernels.validate.replay import MODES, predict, relative_error
from ridgeline.engine.layers import mlp_block, shard, standard_attention
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.ops import BYTE_FIELDS, Op
from ridgeline.engine.precision import Plan
from ridgeline.errors import RidgelineError
from ridgeline.io.resolve import resolve

# Held out as the kernel validation is (cases.check_disjoint): its models (GQA and MHA Llama;
# quick: the first) at its quick workloads' shapes (batch, length), none of them a model,
# batch size or length that calibration measures.
MODELS, QUICK_MODELS = VALIDATION_MODELS, QUICK_VALIDATION_MODELS
MODULES = ("attention", "mlp")
_HELD_OUT = QUICK_WORKLOADS["validation"]
SHAPES = {"decode": tuple(_HELD_OUT["decode"]), "prefill": tuple(_HELD_OUT["prefill"]["fp32"])}
QUICK_SHAPES = {"decode": SHAPES["decode"][-1:], "prefill": SHAPES["prefill"]}
SMALL_VOCAB = 256  # the layer does not read the vocabulary: a small one keeps the embedding small


@dataclass(frozen=True)
class ModuleCase:
    """One module of one decoder layer at one shape."""

    model: str
    module: str  # attention | mlp
    stage: str  # decode | prefill
    batch: int
    length: int  # decode: tokens cached; prefill: prompt tokens
    dtype: str

    @property
    def name(self) -> str:
        return f"{self.model}/{self.stage}/b{self.batch}x{self.length}/{self.module}/{self.dtype}/transformers"

    @property
    def q_len(self) -> int:
        return 1 if self.stage == "decode" else self.length

    @property
    def kv_len(self) -> int:
        return self.length + 1 if self.stage == "decode" else self.length


def module_cases(
    models: Sequence[str], dtypes: Sequence[str], quick: bool = False, shapes: Mapping | None = None
) -> list[ModuleCase]:
    """Every model x type x shape x module, attention before MLP."""
    shapes = shapes or (QUICK_SHAPES if quick else SHAPES)
    return [
        ModuleCase(model, module, stage, batch, length, dtype)
        for model in models
        for dtype in dtypes
        for stage, pairs in shapes.items()
        for batch, length in pairs
        for module in MODULES
    ]


def layer_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The config transformers builds: one layer, a small vocabulary (token ids beyond it dropped)."""
    out = {k: v for k, v in raw.items() if not k.startswith("_")}
    out.update(num_hidden_layers=1, vocab_size=SMALL_VOCAB)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        out.pop(key, None)
    return out


def engine_model(raw: Mapping[str, Any], name: str) -> ModelConfig:
    """The engine's config of the same layer; a model whose layer is not plain attention and
    a dense MLP is refused in one line."""
    config = engine_config(raw, name)
    if config.is_moe or config.is_mla or config.layer_groups:
        raise RidgelineError(f"--through transformers measures dense models with plain attention; {name} is not one")
    return replace(config, num_layers=1)


def module_ops(config: ModelConfig, case: ModuleCase, plan: Plan) -> list[Op]:
    """The engine's ops of one layer's module at the case's shape: ``standard_attention``
    (projections, rotary, the attention setting's kernels, o_proj) or ``mlp_block``."""
    s = shard(config, plan)
    if case.module == "attention":
        return standard_attention(config, s, case.batch, case.q_len, case.kv_len, plan, case.stage == "prefill")
    return mlp_block(config, s, case.batch * case.q_len, plan, "mlp_norm")


class HeldCache:
    """K/V of ``length + 1`` positions per layer; ``update`` writes the new token's K/V in
    place at the end and returns the whole cache (transformers' ``Cache.update`` contract)."""

    def __init__(self, key, value):
        self.key, self.value = key, value

    def update(self, key, value, *_layer_and_kwargs, **_cache_kwargs):  # transformers passes the layer index
        self.key[:, :, -key.shape[2] :] = key
        self.value[:, :, -value.shape[2] :] = value
        return self.key, self.value


def _inputs(model, case: ModuleCase, device: str):
    """(hidden states, and for attention: (cos, sin) and the cache or None) in the model's type."""
    import torch

    config, dtype = model.config, model.dtype
    x = torch.randn(case.batch, case.q_len, config.hidden_size, device=device).to(dtype)
    if case.module == "mlp":
        return (x,)
    first = case.kv_len - case.q_len
    positions = torch.arange(first, case.kv_len, device=device).expand(case.batch, case.q_len)
    cos, sin = model.model.rotary_emb(x, positions)
    if case.stage == "prefill":
        return x, cos, sin, None
    heads, kv_heads = hf_heads(config)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    shape = (case.batch, kv_heads, case.kv_len, head_dim)  # [B, kv heads, cached + 1, d]
    cache = HeldCache(*(torch.randn(shape, device=device).to(dtype) for _ in range(2)))
    return x, cos, sin, cache


def _forward(module, x, cos=None, sin=None, cache=None):
    if cos is None:
        return module(x)
    return module(x, (cos, sin), None, past_key_values=cache)[0]


def _nbytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in values)


def _tensors(value) -> list:
    """The tensors an input holds (a cache holds two; None none)."""
    if isinstance(value, HeldCache):
        return [value.key, value.value]
    return [] if value is None else [value]


def _cast(value, dtype):
    """A copy of an input at another address, in ``dtype`` (None: its own)."""
    if value is None:
        return None
    if isinstance(value, HeldCache):
        return HeldCache(*(_cast(t, dtype) for t in _tensors(value)))
    return value.clone() if dtype is None else value.to(dtype)


def module_bench(model, case: ModuleCase, device: str, cache_bytes: float, paths: dict) -> Bench:
    """The module of ``model``'s first layer, its inputs, copies of both to rotate through,
    and a float64 check that also records the SDPA calls transformers makes (into ``paths``)."""
    import torch

    layer = model.model.layers[0]
    module = layer.self_attn if case.module == "attention" else layer.mlp
    inputs = _inputs(model, case, device)
    set_bytes = _nbytes([*module.parameters(), *(t for a in inputs for t in _tensors(a))])
    sets = [(module, *inputs)]
    for _ in range(rotation_sets(set_bytes, cache_bytes) - 1):
        sets.append((copy.deepcopy(module), *(_cast(a, None) for a in inputs)))

    def check() -> float:
        wide = tuple(_cast(a, torch.float64) for a in inputs)
        with torch.inference_mode():
            reference = _forward(copy.deepcopy(module).double(), *wide)
            with sdpa_calls() as calls:
                out = _forward(module, *inputs)
        paths.update(attention_paths(calls, *hf_heads(model.config)))
        return rel_error(out, reference)

    def timed(*args):
        with torch.inference_mode():
            return _forward(*args)

    return Bench(timed, sets, check, set_bytes=set_bytes, notes={"attention_paths": paths})


def module_row(case: ModuleCase, ops: Sequence[Op], attention: str, implementation: str) -> dict[str, Any]:
    """The row of a module case before it is measured: what it is, the ops predicting it and
    their summed flops and bytes."""
    return {
        "name": case.name,
        "through": "transformers",
        "op_class": f"module:{case.module}",
        "kernel": f"transformers.{case.module}",
        "backend": implementation if case.module == "attention" else "",
        "dtype": case.dtype,
        "stage": case.stage,
        "model": case.model,
        "attention": attention,
        "op_name": "+".join(op.name for op in ops),
        "op_kind": "module",
        "op_dtype": ops[0].dtype,  # its matrix ops' compute type
        "ops": [op.name for op in ops],
        "dims": {"batch": case.batch, "q_len": case.q_len, "kv_len": case.kv_len},
        "flops": float(sum(np.sum(op.flops) for op in ops)),
        "bytes": float(sum(np.sum(op.bytes) for op in ops)),
        **{f: float(sum(np.sum(getattr(op, f)) for op in ops)) for f in BYTE_FIELDS},
        "status": "ok",
        "reason": "",
        "rel_error": None,
        "tolerance": TOLERANCE[case.dtype],
    }


def add_module_predictions(rows: list[dict], ops_of: Sequence[Sequence[Op]], ceilings: Mapping[str, Any]) -> None:
    """Each ok row's predicted time in both modes: the sum of its ops' per-call times (each
    op's too, ``predicted_ops_<mode>_s``), and the signed error."""
    for row, ops in zip(rows, ops_of):
        if row["status"] != "ok":
            continue
        for mode in MODES:
            times = predict(ops, ceilings[mode])["time_s"]
            total = float(times.sum())
            row[f"predicted_{mode}_s"] = total
            row[f"predicted_ops_{mode}_s"] = [float(t) for t in times]
            row[f"error_{mode}"] = float(relative_error(total, row["measured_s"]))
        row["intensity"] = row["flops"] / row["bytes"] if row["bytes"] else None


def measure_modules(
    cfg,
    dtypes: Sequence[str],
    ceilings: Mapping[str, Any],
    spec_device,
    *,
    models: Sequence[str] = MODELS,
    quick: bool = False,
    shapes: Mapping | None = None,
    raws: Mapping[str, Mapping[str, Any]] | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Build, measure and predict every module case (``raws``: configs by model name in
    place of the catalog's, for a test's tiny model)."""
    rows, ops_of = [], []
    for name in models:
        raw = layer_config(raws[name] if raws else read_config(name)[0])
        config = engine_model(raw, name)
        for dtype in dtypes:
            plan = resolve(config, spec_device, dtype=dtype).plan
            measured, ops = _measure_model(raw, module_cases([name], [dtype], quick, shapes), config, plan, cfg, log)
            rows += measured
            ops_of += ops
    add_module_predictions(rows, ops_of, ceilings)
    return rows


def _measure_model(raw, cases: Sequence[ModuleCase], config: ModelConfig, plan: Plan, cfg, log):
    """One model in one type: built once, each case measured (rows) and its ops."""
    from kernels.bench.suite import run_bench

    model = build_model(raw, cases[0].dtype, cfg.device)
    implementation = model.config._attn_implementation
    log(f"{cases[0].model} {cases[0].dtype}: transformers' {implementation} attention, priced as {plan.attention}")
    rows, ops_of = [], []
    for case in cases:
        ops, paths = module_ops(config, case, plan), {}
        row = module_row(case, ops, plan.attention, implementation)
        make = lambda c=case, p=paths: module_bench(model, c, cfg.device, cfg.cache_bytes, p)  # noqa: E731
        rows.append(run_bench(row, make, cfg))
        ops_of.append(ops)
    return rows, ops_of
