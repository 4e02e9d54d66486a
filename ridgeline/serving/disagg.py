"""Disaggregated prefill and decode (Splitwise, arXiv:2311.18677; DistServe, arXiv:2401.09670):
two pools of servers, the KV cache sent from one to the other over a NIC.

A request queues at the prefill pool (its replicas behind the router,
:mod:`ridgeline.serving.router`), which computes its prompt and emits its first token (the
request is served there with one output token). Its KV cache then crosses the link: latency
plus the bytes over the bandwidth. The bytes are the prompt's KV cache on one prefill device
(``kv_bytes_per_token``: a TP shard; each device sends its own over its own NIC, in
parallel), the draft's beside it when speculating. On arrival the request queues at the
decode pool, whose servers admit it with its prompt already cached and its first token out,
so it only decodes (a decode server that preempts it recomputes it from scratch). A request
of one output token never leaves the prefill pool.

The pools only feed forward: nothing holds the prefill pool back when the decode pool is
full (the KV waits off the decode servers' memory until admitted). So with an instant link
the model is two queues in tandem: the decode pool's arrivals are the prefill pool's
completions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ridgeline.engine.analyze import plain
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.memory import kv_bytes_per_token
from ridgeline.errors import InvalidWorkloadError
from ridgeline.serving.arrivals import Arrivals
from ridgeline.serving.router import Replica, check_fleet, fleet_result, serve_fleet
from ridgeline.serving.scheduler import Scheduler
from ridgeline.serving.simulator import SimResult, _Server, percentiles
from ridgeline.serving.speculative import Speculation, maker

# One NVIDIA ConnectX-7 port, NDR InfiniBand or 400GbE: 400 Gb/s
# (https://docs.nvidia.com/networking/display/ConnectX7VPI/Introduction). Latency: NCCL's
# tuning model for a network hop, ring algorithm, Simple protocol (bulk transfers): 14.0 us
# (NVIDIA/nccl master, src/graph/tuning.cc, hwLat[NCCL_HW_NET]; 9.6 us at the older commit
# 01afd20a77b5).
NIC_GBPS = 400.0
NIC_LATENCY_US = 14.0


@dataclass(frozen=True)
class KvLink:
    """The link the KV cache crosses from a prefill device to a decode device."""

    gbps: float = NIC_GBPS  # gigabits per second (math.inf: instant)
    latency_us: float = NIC_LATENCY_US  # microseconds per transfer

    def __post_init__(self) -> None:
        if not self.gbps > 0:  # also refuses NaN
            raise InvalidWorkloadError(f"--kv-link bandwidth must be a positive number of Gb/s, got {self.gbps}")
        if not 0 <= self.latency_us < math.inf:
            raise InvalidWorkloadError(f"--kv-link latency must be >= 0 microseconds, got {self.latency_us}")

    def seconds(self, nbytes: np.ndarray) -> np.ndarray:
        """Seconds to send ``nbytes`` bytes: latency + 8 x bytes / bandwidth."""
        return self.latency_us * 1e-6 + np.asarray(nbytes, dtype=float) * 8 / (self.gbps * 1e9)


def parse_link(text: str) -> KvLink:
    """``GBPS,US`` (e.g. ``400,14``; ``inf,0``: an instant link) -> a :class:`KvLink`."""
    parts = text.split(",")
    try:
        gbps, latency = (float(p) for p in parts)
    except ValueError:
        raise InvalidWorkloadError(
            f"--kv-link takes GBPS,US (bandwidth in Gb/s, latency in microseconds), e.g. 400,14; got {text!r}"
        ) from None
    return KvLink(gbps, latency)


class TransferredServer(_Server):
    """A decode-pool server: a request arrives with its prompt's KV cache and its first token."""

    def __init__(self, arrivals: Arrivals, *args: Any):
        super().__init__(arrivals, *args)
        self.gen_of[:] = 1
        self.first[:] = arrivals.time_s  # TPOT here counts from the KV's arrival

    def prefix_hit(self, r: int) -> tuple[int, int]:
        """The whole prompt arrived with its KV (in blocks of its own: none held by others)."""
        if self.preempted[r]:  # its cache was dropped: recomputed like any preempted request
            return super().prefix_hit(r)
        return int(self.prompt[r]), 0


def kv_transfer_bytes(d: Deployment, prompt: np.ndarray, speculation: Speculation | None = None) -> np.ndarray:
    """Bytes each request's KV cache takes on one prefill device (the draft's beside it)."""
    per_token = kv_bytes_per_token(d.model, d.plan)
    if speculation is not None:
        per_token += kv_bytes_per_token(speculation.draft.model, speculation.draft.plan)
    return prompt * per_token


def decode_arrivals(arrivals: Arrivals, ready: np.ndarray) -> tuple[Arrivals, np.ndarray]:
    """The requests that go on to decode (two output tokens or more), in the order their KV
    arrives (``ready``; ties in request order), and their indices in ``arrivals``."""
    going = np.flatnonzero(arrivals.output >= 2)
    ids = going[np.argsort(ready[going], kind="stable")]
    return Arrivals(ready[ids], arrivals.prompt[ids], arrivals.output[ids], "decode pool"), ids


@dataclass(frozen=True)
class Pool:
    """One pool of a disaggregated deployment: its servers' deployment, scheduler and count."""

    deployment: Deployment
    replicas: int = 1
    scheduler: Scheduler | None = None

    def serve(self, arrivals: Arrivals, how: dict, kind: type[_Server] = _Server) -> list[Replica]:
        s = self.scheduler or Scheduler()
        spec = how["speculation"]
        if spec is not None:  # the draft runs on this pool's devices
            spec = replace(spec, draft=self.deployment.with_model(spec.draft.model))
        make = maker(self.deployment, arrivals, s, spec, kind)
        return serve_fleet(make, arrivals, self.replicas, how["route"], how["seed"], how["progress"])

    def result(self, fleet: list[Replica], arrivals: Arrivals, route: str) -> SimResult:
        return fleet_result(fleet, arrivals, self.deployment, self.scheduler or Scheduler(), route)


def simulate_disaggregated(
    prefill: Pool,
    decode: Pool,
    arrivals: Arrivals,
    *,
    link: KvLink | None = None,
    route: str = "least-outstanding",
    seed: int = 0,
    speculation: Speculation | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Serve ``arrivals`` on a prefill pool and a decode pool joined by ``link`` (default: a
    400 Gb/s NIC, :data:`NIC_GBPS`); both pools route with ``route``. Per request: TTFT from
    the prefill pool, TPOT from the first token to the last (the transfer and the decode
    queue included); ``summary["pools"]`` holds each pool's own summary."""
    for pool in (prefill, decode):
        check_fleet(pool.replicas, route)
    link = link or KvLink()
    how = {"route": route, "seed": seed, "speculation": speculation, "progress": progress}
    first_only = Arrivals(arrivals.time_s, arrivals.prompt, np.ones_like(arrivals.output), arrivals.source)
    pre_fleet = prefill.serve(first_only, how)
    pre = prefill.result(pre_fleet, first_only, route)
    nbytes = kv_transfer_bytes(prefill.deployment, arrivals.prompt, speculation)
    transfer = link.seconds(nbytes)
    ready = pre.requests["finish_s"] + transfer
    later, ids = decode_arrivals(arrivals, ready)
    dec = decode.result(decode.serve(later, how, TransferredServer), later, route) if len(ids) else None
    sent = float(nbytes[arrivals.output > 1].sum())
    return _joined(arrivals, pre, dec, ids, transfer, {"route": route, "link": link, "sent": sent})


def _joined(arrivals: Arrivals, pre: SimResult, dec: SimResult | None, ids, transfer, how: dict) -> SimResult:
    """One result from the two pools' results: per request, and pooled percentiles."""
    n, out = len(arrivals), arrivals.output
    first = pre.requests["finish_s"]
    finish, dec_queue, dec_replica = first.copy(), np.full(n, np.nan), np.full(n, -1)
    preempted = pre.requests["preemptions"].copy()
    if dec is not None:
        finish[ids] = dec.requests["finish_s"]
        dec_queue[ids] = dec.requests["queue_s"]
        dec_replica[ids] = dec.requests["replica"]
        preempted[ids] += dec.requests["preemptions"]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1), np.nan)
    requests = {
        "arrival_s": arrivals.time_s,
        "prompt": arrivals.prompt,
        "output": out,
        "queue_s": pre.requests["queue_s"],
        "ttft_s": first - arrivals.time_s,
        "transfer_s": np.where(out > 1, transfer, np.nan),
        "decode_queue_s": dec_queue,
        "tpot_s": tpot,
        "latency_s": finish - arrivals.time_s,
        "finish_s": finish,
        "preemptions": preempted,
        "prefill_replica": pre.requests["replica"],
        "decode_replica": dec_replica,
    }
    span = float(np.max(finish) - arrivals.time_s[0])
    summary: dict[str, Any] = {
        "requests": n,
        "steps": pre.summary["steps"] + (dec.summary["steps"] if dec is not None else 0),
        "duration_s": span,
        "requests_per_s": n / span,
        "output_tokens_per_s": float(out.sum()) / span,
        "prompt_tokens": int(arrivals.prompt.sum()),
        "output_tokens": int(out.sum()),
        "preemptions": int(preempted.sum()),
        "kv_transferred_bytes": how["sent"],  # per prefill device
        # the prefill pool computes the prompts: its cache's hits are the fleet's
        "prefix_hit_tokens": pre.summary["prefix_hit_tokens"],
        "prefix_hit_rate": pre.summary["prefix_hit_rate"],
    }
    for key in ("queue_s", "ttft_s", "transfer_s", "decode_queue_s", "tpot_s", "latency_s"):
        summary[key] = percentiles(requests[key])
    decoding = None if dec is None else {k: v for k, v in dec.summary.items() if k != "ttft_s"}  # no first tokens
    summary["pools"] = {"prefill": pre.summary, "decode": decoding}
    if decoding is not None and "speculative" in decoding:
        summary["speculative"] = decoding["speculative"]
    link = how["link"]
    meta = {
        **pre.meta,
        "disaggregated": {
            "prefill": {"hardware": pre.meta["hardware"], "replicas": pre.meta["replicas"]},
            "decode": {"hardware": dec.meta["hardware"], "replicas": dec.meta["replicas"]} if dec else None,
            "route": how["route"],
            "kv_link": {"gbps": link.gbps if link.gbps < math.inf else "inf", "latency_us": link.latency_us},
        },
    }
    timeline = _timelines(pre, dec)
    return SimResult(requests, timeline, plain(summary), plain(meta))


def _timelines(pre: SimResult, dec: SimResult | None) -> dict[str, np.ndarray]:
    """Both pools' steps, one after the other, with the ``pool`` each ran in."""
    parts = [(pre.timeline, "prefill")] + ([(dec.timeline, "decode")] if dec is not None else [])
    out = {k: np.concatenate([t[k] for t, _ in parts]) for k in pre.timeline}
    out["pool"] = np.concatenate([np.full(len(t["start_s"]), name) for t, name in parts])
    return out
