"""The transformers continuous-batching replay (skipped without transformers)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from kernels.cb_server import ServerSettings, build_model, compare, make_trace, matching_scheduler, replay_virtual  # noqa: E402
from ridgeline.simulate import simulate  # noqa: E402


@pytest.mark.bench
def test_virtual_replay_serves_every_token():
    """Two decoder layers of qwen2-0.5b with random weights, 6 requests: every request gets
    its output tokens; queueing <= TTFT <= latency; the first request finds an idle server."""
    torch.set_num_threads(1)
    model = build_model("qwen2-0.5b", 2, seed=0)
    trace = make_trace(6, 5.0, (16, 48), (2, 6), seed=1)
    out = replay_virtual(model, trace, ServerSettings(max_batch_tokens=64, max_requests_per_batch=4))
    np.testing.assert_array_equal(out["tokens"], trace.output)
    assert np.all(out["queue_s"] >= 0) and out["queue_s"][0] == 0
    assert np.all(out["queue_s"] <= out["ttft_s"]) and np.all(out["ttft_s"] <= out["latency_s"])
    assert out["cpu_s"] > 0


def test_trace_and_matching_scheduler():
    trace = make_trace(50, 2.0, (32, 64), (4, 8), seed=0)
    assert trace.time_s[0] == 0 and trace.prompt.min() >= 32 and trace.output.max() <= 8
    s = matching_scheduler(ServerSettings())
    assert (s.token_budget, s.max_batch, s.admit_margin, s.prefix_hit) == (256, 16, 0.15, 0.0)
    sim = simulate("qwen2-0.5b", "a6000", trace, s)
    table = compare({k: sim.requests[k] for k in ("ttft_s", "latency_s", "queue_s")}, sim)
    assert table["ttft_s"]["error"]["p50"] == 0.0  # the simulation against itself
