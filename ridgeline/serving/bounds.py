"""The analytical pass of ``ridgeline plan``: every deployment of a search space, and the
steady-state roofline bounds that discard the ones that cannot meet the SLO at the
workload's rate, before any simulation (:mod:`ridgeline.serving.plan` simulates the rest).

A deployment is a device, a count of them split into tensor x pipeline parallel, weight and
KV-cache types, and the server's max batch and token budget (vLLM's ``max_num_seqs`` and
``max_num_batched_tokens``). It is discarded, with the first reason that applies, when:

- ``settings``: the settings do not make a plan (tp does not divide the heads, a type the
  device cannot run);
- ``memory``: the KV cache the simulator would allot (what is left after the weights and the
  activations of a full token budget) holds less than one request;
- ``ttft``: one prompt alone, prefilled on an idle server, takes longer than the TTFT SLO;
- ``throughput``: the server cannot produce the workload's decode tokens per second,
  rate x (output - 1), even at its largest batch (the max batch, or the requests the KV cache
  holds); or the prompts' arithmetic alone, rate x prefill compute seconds, exceeds one
  second per second;
- ``tpot``: Little's law puts rate x (output - 1) x TPOT requests in decode; at TPOT = the SLO
  that batch b must produce rate x (output - 1) tokens per second, b / step(b) >= demand.
  Tokens per second, b / step(b), rises with b (a step costs a fixed part plus a part per
  sequence), so if the batch at TPOT = SLO is too slow, every smaller TPOT is too.

Each bound is a steady-state mean on the engine's datasheet roofline, the same numbers the
simulator prices its steps with; a steady state's mean TPOT above the SLO leaves requests that
miss it. One vectorised engine evaluation covers the weight x KV types of a device and split
that compute alike (fp8 and fp4 weights each compute in their own type): the plan's bytes
per weight and per KV element are arrays (``ridgeline.engine.ops.when``). The types searched
on a device are those it computes (``type_pairs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from ridgeline.engine.analyze import memory_totals, stage_totals, steady_decode_ops
from ridgeline.engine.deployment import model_plan
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.layers import Plan, pipeline_factors, stage_ops
from ridgeline.engine.memory import kv_bytes_per_token
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.roofline import Ceilings, spec_ceilings, with_links
from ridgeline.engine.workload import Settings, Workload, check_slos
from ridgeline.errors import InvalidWorkloadError, RidgelineError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

COUNTS = (1, 2, 4, 8)  # devices per deployment
W_DTYPES = ("fp16", "int8", "int4", "fp8", "fp4")  # weights 16, 8, 4 bits; fp8 and fp4 where the device computes them
KV_DTYPES = ("fp16", "int8", "fp8")  # KV cache 16, 8 bits; fp8 where the device computes it
# Types whose deployments compute in them (fp8: W8A8 as on Hopper; fp4: W4A4, NVFP4/MXFP4 on
# Blackwell and the MI355X: activations in the same type), searched on a device only where its
# datasheet states a matrix rate for them. fp16, int8 and int4 weights are weight-only
# (activations fp16): every device searched computes them in fp16.
MATRIX_TYPES = ("fp8", "fp4")
MAX_BATCHES = (64, 128, 256)
TOKEN_BUDGETS = (512, 2048)  # the prefill chunk: tokens per step
REASONS = ("settings", "memory", "ttft", "throughput", "tpot")
MOST_DEPLOYMENTS = 20_000
MOST_REQUESTS = 1_000_000


def activation_type(w_dtype: str) -> str:
    """The activations' type beside ``w_dtype`` weights: the weights' own where the matrix
    units compute in it (``MATRIX_TYPES``), else fp16 (weight-only quantisation)."""
    return w_dtype if w_dtype in MATRIX_TYPES else "fp16"


def computes(dtype: str, device: DeviceSpec) -> bool:
    """Whether ``device`` is searched with ``dtype`` (weights or KV): a type of
    ``MATRIX_TYPES`` only where its datasheet states that matrix rate (the engine would run
    fp8 on an A100 in fp16: no deployment an A100 can serve as fp8)."""
    return dtype not in MATRIX_TYPES or dtype in device.matrix_peak


def type_pairs(w_dtypes, kv_dtypes, device: DeviceSpec) -> list[tuple[str, str]]:
    """The (weight, KV) types searched on ``device``: those it computes, every pairing, except
    that with both 8-bit KV types on offer, fp8 and fp4 weights take the fp8 cache and the
    others the int8 one: the engine prices the two alike (a byte an element), so the other
    pairing would only repeat a deployment."""
    ws = [w for w in w_dtypes if computes(w, device)]
    kvs = [kv for kv in kv_dtypes if computes(kv, device)]
    both = "int8" in kvs and "fp8" in kvs
    return [(w, kv) for w, kv in product(ws, kvs) if not (both and kv == ("int8" if w in MATRIX_TYPES else "fp8"))]


def _whole(name: str, value, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InvalidWorkloadError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Load:
    """Poisson arrivals: ``requests`` requests at ``rate`` per second, each ``prompt`` tokens in
    and ``output`` tokens out; ``seed`` draws the gaps (the same for every deployment)."""

    rate: float
    prompt: int
    output: int
    requests: int
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or not 0 < self.rate < math.inf:
            raise InvalidWorkloadError(
                f"the workload's rate must be a positive number of requests/s, got {self.rate!r}"
            )
        _whole("the workload's prompt", self.prompt)
        _whole("the workload's output", self.output)
        _whole("the workload's n", self.requests, 2)
        _whole("the seed", self.seed, 0)
        if self.requests > MOST_REQUESTS:
            raise InvalidWorkloadError(
                f"the workload's n={self.requests} is over {MOST_REQUESTS:,} requests a simulation"
            )


@dataclass(frozen=True)
class Slo:
    """The latency targets a request must meet, seconds (None: no target)."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self) -> None:
        check_slos(ttft=self.ttft_s, tpot=self.tpot_s)
        if self.ttft_s is None and self.tpot_s is None:
            raise InvalidWorkloadError("the search needs an SLO: ttft=SECONDS and/or tpot=SECONDS")


@dataclass(frozen=True)
class Draft:
    """A draft model the decodes may speculate with (:mod:`ridgeline.serving.speculative`):
    ``tokens`` (k) a step, each accepted with probability ``acceptance``."""

    model: ModelConfig
    tokens: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        _whole(f"the draft {self.model.name}'s tokens k", self.tokens)
        if isinstance(self.acceptance, bool) or not 0 <= self.acceptance <= 1:  # also refuses NaN
            raise InvalidWorkloadError(
                f"the draft {self.model.name}'s acceptance must be between 0 and 1, got {self.acceptance!r}"
            )

    @property
    def label(self) -> str:
        return f"{self.model.name}:{self.tokens}:{self.acceptance:g}"


@dataclass(frozen=True)
class Space:
    """The dimensions searched: devices x count x every tp x pp split of the count x weight
    type x KV type x max batch x token budget; opt-in, the count as ``replicas`` behind a
    least-outstanding router or as prefill + decode ``pools`` (each pool's device any of
    ``devices``), and decodes speculating with each of ``drafts``. ``roofs``: each device's
    ceilings (default: its datasheet's)."""

    devices: tuple[DeviceSpec, ...]
    counts: tuple[int, ...] = COUNTS
    w_dtypes: tuple[str, ...] = W_DTYPES
    kv_dtypes: tuple[str, ...] = KV_DTYPES
    max_batches: tuple[int, ...] = MAX_BATCHES
    token_budgets: tuple[int, ...] = TOKEN_BUDGETS
    attention: str = "flash"  # vLLM V1's, the simulator's default policy
    replicas: tuple[int, ...] = (1,)  # R: R replicas of count / R devices each
    pools: tuple[tuple[int, int], ...] = ()  # (P, D): P prefill and D decode servers of count / (P + D)
    drafts: tuple[Draft, ...] = ()  # each besides no draft
    roofs: tuple[Ceilings, ...] = ()  # one per device, in order; none: the datasheets'

    def __post_init__(self) -> None:
        if not self.devices:
            raise InvalidWorkloadError("name at least one device")
        for name in ("counts", "max_batches", "token_budgets"):
            values = getattr(self, name)
            if not values:
                raise InvalidWorkloadError(f"the search's {name.replace('_', ' ')} are empty")
            for value in values:
                _whole(f"each of the search's {name.replace('_', ' ')}", value)
        for value in self.replicas:
            _whole("each of the search's replicas", value)
        for pool in self.pools:
            if len(pool) != 2:
                raise InvalidWorkloadError(f"a pool split is (prefill servers, decode servers), got {pool!r}")
            for value in pool:
                _whole("each pool's servers", value)
        for servers, what in [(r, f"replicas {r}") for r in self.replicas] + [
            (p + d, f"pools {p}:{d} ({p + d} servers)") for p, d in self.pools
        ]:
            if not any(n % servers == 0 for n in self.counts):
                raise InvalidWorkloadError(
                    f"{what} divide none of the counts {', '.join(map(str, self.counts))}; "
                    "a count of devices is split evenly over its servers"
                )
        if self.roofs and len(self.roofs) != len(self.devices):
            raise InvalidWorkloadError("give one set of roofs per device searched")
        if self.size > MOST_DEPLOYMENTS:
            raise InvalidWorkloadError(
                f"the search would enumerate {self.size:,} deployments, over {MOST_DEPLOYMENTS:,}; "
                "name fewer devices or counts"
            )

    @property
    def splits(self) -> list[tuple[int, int, int]]:
        """(count, tp, pp) with tp x pp = count, every split of every count."""
        return [(n, tp, n // tp) for n in self.counts for tp in range(1, n + 1) if n % tp == 0]

    @property
    def shapes(self) -> list[tuple[int, int, int, int, int, int]]:
        """(count, replicas R, prefill servers P, decode servers D, tp, pp): each count as R
        replicas or P + D pooled servers (P = D = 0: not pooled), where they divide it, each
        server split every tp x pp way."""
        out = []
        for n in self.counts:
            for r, p, d in [(r, 0, 0) for r in self.replicas] + [(1, p, d) for p, d in self.pools]:
                each = n // (p + d or r)
                if n % (p + d or r) == 0:
                    out += [(n, r, p, d, tp, each // tp) for tp in range(1, each + 1) if each % tp == 0]
        return out

    @property
    def fleet(self) -> bool:
        """Whether any fleet dimension (replicas, pools, drafts) is searched."""
        return self.replicas != (1,) or bool(self.pools) or bool(self.drafts)

    def types(self, device: DeviceSpec, other: DeviceSpec | None = None) -> list[tuple[str, str]]:
        """The (weight, KV) types searched on ``device`` (pools: on it and ``other`` both)."""
        own = type_pairs(self.w_dtypes, self.kv_dtypes, device)
        return own if other is None else [t for t in own if t in type_pairs(self.w_dtypes, self.kv_dtypes, other)]

    @property
    def size(self) -> int:
        per_types = len(self.max_batches) * len(self.token_budgets) * (1 + len(self.drafts))
        pairs = [(d, o) for d in self.devices for o in self.devices]
        one = sum(len(self.types(d)) for d in self.devices)
        two = sum(len(self.types(d, o)) for d, o in pairs)
        return sum(two if shape[2] else one for shape in self.shapes) * per_types

    def roofs_of(self, device: DeviceSpec) -> Ceilings:
        return self.roofs[self.devices.index(device)] if self.roofs else spec_ceilings(device)


DTYPE_FIELDS = ("wb", "kvb", "scale_bytes", "dequant")  # what the types change in a plan


def stacked(plans: list[Plan]) -> Plan | None:
    """One plan whose per-type fields are columns (variants x 1), pricing every variant in
    one evaluation; None where the plans differ in anything else (the compute type)."""
    blank = {f: 0 for f in DTYPE_FIELDS}
    if any(replace(p, **blank) != replace(plans[0], **blank) for p in plans):
        return None
    return replace(plans[0], **{f: np.array([getattr(p, f) for p in plans]).reshape(-1, 1) for f in DTYPE_FIELDS})


def _columns(value, shape) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=float), shape)


def _blocks(tokens, model: ModelConfig, block: int) -> int:
    """KV blocks ``tokens`` positions take (a sliding window caps them; with layers that
    differ, each kind keeps its span: its layers' share of the whole-model positions)."""
    if model.layer_groups:
        kept = sum(g.count * min(tokens, g.window or g.chunk or tokens) for g in model.layer_groups)
        return math.ceil(kept / model.num_layers / block)
    kept = min(tokens, model.sliding_window) if model.sliding_window else tokens
    return -(-kept // block)


def bound_plans(
    model: ModelConfig,
    device: DeviceSpec,
    p: Plan,
    settings: Settings,
    space: Space,
    load: Load,
    slo: Slo,
    part: str = "both",
    draft: tuple[Draft, Plan] | None = None,
):
    """The bounds of the variants of ``p`` (its type fields columns of V variants), as
    arrays [V, max batch, token budget]: the reason each is discarded ("" kept), TTFT of
    one prompt alone, and the decode tokens/s of the largest batch that fits.

    ``part``: a prefill-pool server computes prompts and emits first tokens only (no TPOT);
    a decode-pool server only decodes (no prompt arithmetic, no TTFT). ``draft`` (a draft
    and its plan, stacked like ``p``): its weights and KV share the memory; a verify step
    yields at most k + 1 tokens a sequence and costs at least a decode step, so the decode
    rates and the step time a TPOT allows are k + 1 times the plain ones (a bound that
    holds whatever the acceptance)."""
    prompts, decodes = part != "decode", part != "prefill"
    roofs = with_links(space.roofs_of(device), device, settings)
    budgets = np.array(space.token_budgets)
    lengths = np.concatenate([[load.prompt], budgets])[None, :]  # [1, 1 + T]
    ops = stage_ops(model, "prefill", 1, lengths, p)
    pre, table = stage_totals(ops, roofs, p, "prefill")
    v = np.asarray(p.wb).shape[0] if np.ndim(p.wb) else 1
    shape = (v, lengths.shape[1])
    ttft = _columns(pre["time_s"], shape)[:, 0]
    factor, _ = pipeline_factors(p, "prefill")
    compute = factor * _columns(np.sum(table["count"] * table["compute_s"], axis=0), shape)[:, 0]
    room = _columns(memory_totals(model, device, Workload(1, lengths, 0), p, ops)["kv_capacity_bytes"], shape)[:, 1:]
    per_token = _columns(kv_bytes_per_token(model, p), (v, 1))
    gain = 1
    if draft is not None:  # as kv_blocks_with_draft: the draft's weights out of the room, its KV per token beside
        small, dp = draft
        room = room - _columns(memory_totals(small.model, device, Workload(1, 1, 0), dp)["weights_bytes"], (v, 1))
        per_token = per_token + _columns(kv_bytes_per_token(small.model, dp), (v, 1))
        gain = small.tokens + 1
    blocks = np.maximum(np.floor(room / (p.kv_block * per_token)), 0)  # [V, T]
    longest = load.prompt + load.output - 1 if decodes else load.prompt
    fits = blocks >= max(_blocks(longest, model, p.kv_block), 1)
    held = blocks // _blocks(load.prompt + 1, model, p.kv_block)  # decoding requests the cache holds
    demand = load.rate * (load.output - 1) if decodes else 0.0  # decode tokens per second
    cap = np.minimum(np.array(space.max_batches)[None, :, None], held[:, None, :])  # [V, B, T]
    at_slo = np.ceil(demand * slo.tpot_s) if slo.tpot_s is not None and decodes else np.inf
    little = np.minimum(cap, at_slo)
    grid = np.unique(np.maximum(np.concatenate([cap.ravel(), little.ravel()]), 1))
    last = load.prompt + max(load.output - 2, 0)  # a decode's cached lengths: prompt .. last
    steps, table = stage_totals(steady_decode_ops(model, grid[None, :], load.prompt, last, p), roofs, p, "decode")
    factor, _ = pipeline_factors(p, "decode")
    work = factor * _columns(np.sum(table["count"] * table["compute_s"], axis=0), (v, grid.size))  # [V, G]
    rate = gain * grid[None, :] / _columns(steps["time_s"], (v, grid.size))  # [V, G] decode tokens/s

    def at(values, batch):
        """``values`` [V, G] at each variant's batches ``batch`` [V, ...] (grid points)."""
        where = np.searchsorted(grid, np.maximum(batch, 1)).reshape(v, -1)
        return np.take_along_axis(values, where, 1).reshape(batch.shape)

    prefill_share = load.rate * compute * prompts  # [V] seconds of prompt arithmetic per second
    busy = prefill_share + demand * np.min(work / grid[None, :], axis=1)  # arithmetic seconds per second
    top = np.where(cap >= 1, at(rate, cap), 0.0)
    # a step of the Little's-law batch also carries its share of the prompts' arithmetic
    allowed = gain * np.nan_to_num(slo.tpot_s or np.inf) * (1 - prefill_share)[:, None, None]
    slow = (at(work, little) > allowed) & decodes
    reason = np.full(cap.shape, "", dtype=object)
    checks = [
        ("tpot", (at(rate, little) < demand) | slow),
        ("throughput", (top < demand) | (busy >= 1)[:, None, None]),
        ("ttft", (ttft > slo.ttft_s if slo.ttft_s is not None and prompts else np.zeros(v, bool))[:, None, None]),
        ("memory", ~fits[:, None, :]),
    ]
    for name, failed in checks:  # the last applied wins: the first in REASONS
        reason = np.where(np.broadcast_to(failed, cap.shape), name, reason)
    return reason, np.broadcast_to(ttft[:, None, None], cap.shape), top


def _rank(reason: str) -> int:
    return next((i for i, r in enumerate(REASONS) if reason.startswith(r)), len(REASONS))


def _first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element by element, the reason that comes first in REASONS ("" last)."""
    return np.where(np.vectorize(_rank, otypes=[int])(a) <= np.vectorize(_rank, otypes=[int])(b), a, b)


def _variant_bounds(model, space: Space, load: Load, slo: Slo, device, tp: int, pp: int, part: str, draft):
    """{(w, kv): (reason, ttft, top)}, arrays [max batch, token budget], for one device, split,
    part and draft (None: none)."""
    variants = space.types(device)
    sizes = (len(space.max_batches), len(space.token_budgets))
    settings = [
        Settings(w_dtype=w, a_dtype=activation_type(w), kv_dtype=kv, tp=tp, pp=pp, attention=space.attention)
        for w, kv in variants
    ]
    try:
        plans = [model_plan(s, device, model) for s in settings]
        smalls = [model_plan(s, device, draft.model) for s in settings] if draft else plans
        groups: list[list[int]] = []  # variants priced in one evaluation: plans alike but in their types
        for i in range(len(plans)):
            alike = (g for g in groups if all(stacked([x[g[0]], x[i]]) is not None for x in (plans, smalls)))
            group = next(alike, None)
            if group is None:
                groups.append([i])
            else:
                group.append(i)
        out = {}
        for group in groups:
            p = stacked([plans[i] for i in group])
            dp = (draft, stacked([smalls[i] for i in group])) if draft else None
            bounds = bound_plans(model, device, p, settings[group[0]], space, load, slo, part, dp)
            out.update(zip(group, zip(*bounds)))
    except RidgelineError as err:
        out = {
            i: (np.full(sizes, f"settings: {err}", dtype=object), np.full(sizes, np.nan), np.zeros(sizes))
            for i in range(len(variants))
        }
    return {variant: out[i] for i, variant in enumerate(variants)}


FLEET = ["replicas", "prefill_servers", "decode_servers", "decode_device", "draft"]  # columns of a fleet search


def analytic_pass(model: ModelConfig, space: Space, load: Load, slo: Slo) -> pd.DataFrame:
    """Every deployment of ``space`` with its bounds: a row each, ``reason`` "" where it
    survives to the simulation. A fleet search (``Space.fleet``) adds the ``FLEET`` columns.

    Replicas: a replica is bounded as one server at rate / R. Its decode tokens/s,
    b / step(b), is concave in its batch b, so with the Little's-law batch split unevenly
    over the replicas they produce no more than split evenly (Jensen): what the even split
    cannot produce, no routing can. Pools: the prefill pool's servers are bounded at rate / P
    as prefill-only servers (memory for a prompt, TTFT, prompt arithmetic), the decode
    pool's at rate / D as decode-only ones (memory for a request, throughput, TPOT); the KV
    transfer only adds time, so leaving it out keeps the bound sound."""
    rows = []
    drafts = [None, *space.drafts]
    memo: dict = {}

    def bounds(device, r, tp, pp, part, draft):
        key = (device.name, r, tp, pp, part, draft.label if draft else "")
        if key not in memo:
            at = replace(load, rate=load.rate / r)
            memo[key] = _variant_bounds(model, space, at, slo, device, tp, pp, part, draft)
        return memo[key]

    for device, (count, r, pre, dec, tp, pp) in product(space.devices, space.shapes):
        for other, draft in product(space.devices if pre else [device], drafts):
            if pre:
                first, second = (
                    bounds(device, pre, tp, pp, "prefill", draft),
                    bounds(other, dec, tp, pp, "decode", draft),
                )
                out = {
                    k: (_first(first[k][0], second[k][0]), first[k][1], second[k][2] * dec)
                    for k in first
                    if k in second
                }
            else:
                out = {
                    k: (reason, ttft, top * r)
                    for k, (reason, ttft, top) in bounds(device, r, tp, pp, "both", draft).items()
                }
            fleet = (r, pre, dec, other.name if pre else "", draft.label if draft else "")
            for (w, kv), (reason, ttft, top) in out.items():
                for (b, mb), (t, budget) in product(enumerate(space.max_batches), enumerate(space.token_budgets)):
                    rows.append(
                        (device.name, count, tp, pp, w, kv, mb, budget, reason[b, t], ttft[b, t], top[b, t], *fleet)
                    )
    columns = ["device", "gpus", "tp", "pp", "w_dtype", "kv_dtype", "max_batch", "token_budget", "reason"]
    import pandas as pd  # only when a search runs: the CLI's import stays light

    frame = pd.DataFrame(rows, columns=[*columns, "ttft_bound_s", "decode_tokens_per_s_bound", *FLEET])
    if not space.fleet:
        frame = frame.drop(columns=FLEET)
    frame["why"] = frame["reason"].where(frame["reason"].str.startswith("settings: "), "").str[len("settings: ") :]
    frame["reason"] = frame["reason"].where(~frame["reason"].str.startswith("settings"), "settings")
    return frame
