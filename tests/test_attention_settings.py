"""The attention settings (docs/model.md, "Attention settings"): each priced as the kernels
it runs, ``auto`` resolved to the path transformers' ``sdpa`` attention takes, and a
prediction that rests on another kernel's class says so."""

from __future__ import annotations

import json
import tarfile
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from ridgeline.api import analyze
from ridgeline.cli import app
from ridgeline.engine import ops as O
from ridgeline.engine.basis import basis
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.precision import resolve_attention
from ridgeline.engine.roofline import Ceilings
from ridgeline.engine.workload import ATTENTION_KERNELS, Settings
from ridgeline.io.catalog import ROOT


def _attention(model: str, setting: str, hardware: str = "epyc-9654", **kw):
    a = analyze(model, hardware, batch=1, seq_len=100, generate=2, dtype="bf16", attention=setting, **kw)
    ops = stage_ops(a.model, "decode", 1, 100, a.plan)  # one step after 100 cached keys
    return a, [op for op in ops if op.kind == "attention"]


def test_auto_is_transformers_sdpa_on_every_device():
    assert Settings().attention == "auto"
    assert resolve_attention("auto") == "sdpa-gqa"
    assert all(resolve_attention(k) == k for k in ATTENTION_KERNELS if k != "auto")
    for hardware in ("epyc-9654", "h100-sxm", "tpu-v5e"):
        a, ops = _attention("llama-3.2-1b", "auto", hardware)
        assert a.plan.attention == "sdpa-gqa" and [op.name for op in ops] == ["sdpa_gqa"]


def test_the_h100_run_recorded_transformers_taking_enable_gqa_at_every_prompt(tmp_path):
    """The evidence for ``auto`` on a GPU: transformers' ``generate`` (default ``sdpa``) on
    the H100 of 2026-11-26 called SDPA once per layer (32) at the prompt, each with
    ``enable_gqa`` and no mask, at batch 1 and 8; the client priced the run as ``sdpa-gqa``.
    Its decode steps passed a mask (the static cache) and repeated K/V."""
    archive = ROOT / "reports/validation/gpu-runs/cuda-nvidia-h100-80gb-hbm3-2026-11-26/run2-hf/results.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    rows = json.loads((tmp_path / "hf-eager" / "hf-llama-3-8b-eager.json").read_text())["rows"]
    assert [r["batch"] for r in rows] == [1, 8]
    for row in rows:
        assert row["attention_paths"] == {"prefill:enable_gqa": 32, "decode:repeat_kv+mask": 31 * 32}
        assert row["attention_priced"] == resolve_attention("auto") == "sdpa-gqa"


@pytest.mark.slow
def test_cpu_default_follows_transformers_use_gqa_in_sdpa():
    """transformers decides by the mask: none (a batch without padding) gives SDPA the
    grouped K/V with enable_gqa (our CPU default, sdpa-gqa); a mask makes it repeat K/V at a
    prompt (sdpa-repeat)."""
    torch = pytest.importorskip("torch")
    sdpa = pytest.importorskip("transformers.integrations.sdpa_attention")
    k = torch.zeros(1, 8, 4, 64)
    assert sdpa.use_gqa_in_sdpa(None, k, k) is True
    assert sdpa.use_gqa_in_sdpa(torch.ones(1, 1, 4, 4, dtype=torch.bool), k, k) is False
    assert resolve_attention("auto") == "sdpa-gqa"


def test_transformers_sdpa_forward_calls_enable_gqa_without_a_mask(monkeypatch):
    """What transformers' own ``sdpa_attention_forward`` passes to SDPA, recorded: grouped
    K/V with ``enable_gqa=True`` and no mask; with a mask at a prompt, K/V repeated to every
    query head (32 here) and the mask passed."""
    torch = pytest.importorskip("torch")
    sdpa = pytest.importorskip("transformers.integrations.sdpa_attention")
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def record(q, k, v, **kw):
        calls.append((k.shape[1], kw.get("enable_gqa", False), kw.get("attn_mask") is not None))
        return real(q, k, v, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", record)
    module = SimpleNamespace(num_key_value_groups=4, is_causal=True, training=False)
    q, kv = torch.randn(1, 32, 5, 64), torch.randn(1, 8, 5, 64)
    sdpa.sdpa_attention_forward(module, q, kv, kv, None)
    mask = torch.ones(1, 1, 5, 5, dtype=torch.bool).tril()
    sdpa.sdpa_attention_forward(module, q, kv, kv, mask)
    assert calls == [(8, True, False), (32, False, True)]


def test_sdpa_repeat_copies_nothing_for_mha_and_the_group_for_gqa():
    """Issue 55: transformers' ``repeat_kv`` returns its input unchanged when n_rep = heads /
    K/V heads is 1 (src/transformers/models/llama/modeling_llama.py, ``if n_rep == 1: return
    hidden_states``; https://github.com/huggingface/transformers/blob/002272831fba584eb30dca9729c1be456836960a/src/transformers/models/llama/modeling_llama.py),
    so an MHA model pays no copy. One sequence, decode over 100 cached keys and its own
    (101), bf16, head_dim 128, a K and a V row 256 elements:
    Llama-2-7B (32 query and 32 K/V heads): SDPA reads the cache itself once, 32 x 101 x 256
    x 2 B = 1,654,784, and writes nothing but its output (32 x 128 x 2 = 8,192 B); the query
    8,192 B and the mask 101 B are read.
    Llama-3-8B (32 over 8, n_rep 4): the cache, 8 x 101 x 256 x 2 = 413,696 B, is read once
    and copied out to the 32 query heads, 32 x 101 x 256 x 2 = 1,654,784 B written, then read
    by the kernel: 8,192 + 1,654,784 + 101 = 1,663,077 B of activations read."""
    _, (mha,) = _attention("llama-2-7b", "sdpa-repeat")
    assert mha.name == "sdpa_repeat_kv" and mha.dims["heads"] == mha.dims["kv_heads"] == 32
    assert mha.kv_read_bytes == pytest.approx(1_654_784)
    assert mha.act_read_bytes == pytest.approx(8_192 + 101)
    assert mha.act_write_bytes == pytest.approx(8_192)
    _, (gqa,) = _attention("llama-3-8b", "sdpa-repeat")
    assert gqa.kv_read_bytes == pytest.approx(413_696)
    assert gqa.act_write_bytes == pytest.approx(8_192 + 1_654_784)
    assert gqa.act_read_bytes == pytest.approx(1_663_077)


def test_sdpa_repeat_counts_the_copy_and_the_mask():
    """Llama-3.2-1B (32 query heads over 8 K/V heads, head_dim 64), one sequence, decode over
    100 cached keys and its own (101), bf16: the cache is read once (8 x 101 x 128 x 2 B), the
    copies written and read once per query head (32 x 101 x 128 x 2 B each way), the mask
    101 bytes."""
    _, ops = _attention("llama-3.2-1b", "sdpa-repeat")
    (op,) = ops
    cache, copies, q = 8 * 101 * 128 * 2, 32 * 101 * 128 * 2, 32 * 64 * 2
    assert op.name == "sdpa_repeat_kv"
    assert op.kv_read_bytes == pytest.approx(cache)
    assert op.act_read_bytes == pytest.approx(q + copies + 101)
    assert op.act_write_bytes == pytest.approx(q + copies)
    assert op.alloc_bytes == pytest.approx((q, copies / 2, copies / 2))


def test_sdpa_repeat_is_a_view_for_multi_query_attention():
    """Falcon-7B (71 query heads over one K/V head, head_dim 64): transformers' ``repeat_kv``
    expands the one head and reshapes it to a stride-0 view, no copy (checked against torch
    here), so the masked path costs what ``enable_gqa`` does: the cache read once (101 keys x
    128 x 2 B), the mask's 101 bytes on top, priced by the grouped kernel's class."""
    torch = pytest.importorskip("torch")
    from kernels.bench.bench import repeat_kv

    kv = torch.randn(2, 1, 5, 64)
    assert repeat_kv(kv, 71).data_ptr() == kv.data_ptr() and repeat_kv(kv, 71).stride(1) == 0
    assert repeat_kv(torch.randn(2, 2, 5, 64), 4).stride(1) != 0  # two K/V heads: a copy
    _, (repeat,) = _attention("falcon-7b", "sdpa-repeat")
    _, (gqa,) = _attention("falcon-7b", "sdpa-gqa")
    assert repeat.name == gqa.name == "sdpa_gqa"
    assert repeat.kv_read_bytes == gqa.kv_read_bytes == 101 * 128 * 2
    assert repeat.act_read_bytes == gqa.act_read_bytes + 101
    assert repeat.act_write_bytes == gqa.act_write_bytes == 71 * 64 * 2
    from kernels.bench.cases import BUILDERS, transformers_recipe

    base = {"model": "falcon-7b", "stage": "decode", "batch": 2, "length": 100, "dtype": "bf16"}
    assert BUILDERS["attention_grid"](transformers_recipe(base, "repeat_kv")).name == "sdpa_gqa"
    base["model"] = "llama-3.2-1b"  # grouped heads: the copy, its own class
    assert BUILDERS["attention_grid"](transformers_recipe(base, "repeat_kv")).name == "sdpa_repeat_kv"


def test_sdpa_gqa_is_its_own_kernel_only_for_grouped_heads():
    _, gqa = _attention("llama-3.2-1b", "sdpa-gqa")
    _, flash = _attention("llama-3.2-1b", "flash")
    _, mha = _attention("llama-2-7b", "sdpa-gqa")  # MHA: transformers calls plain SDPA
    assert gqa[0].name == "sdpa_gqa" and flash[0].name == "attention" and mha[0].name == "attention"
    assert gqa[0].kv_read_bytes == flash[0].kv_read_bytes == 8 * 101 * 128 * 2


def _calibrated(keys: tuple[str, ...]) -> Ceilings:
    fit = {"compute": 0.5, "memory": 0.5}
    return Ceilings(
        "calibrated", 1e11, {"bf16": 1e12}, {"bf16": 1e11}, efficiency={k: fit for k in keys}, device="test"
    )


def test_a_kernel_priced_by_another_kernels_class_is_named():
    a, ops = _attention("llama-3.2-1b", "sdpa-gqa")
    pooled = basis({"decode": ops}, _calibrated(("attention@bf16",)), a.device)
    own = basis({"decode": ops}, _calibrated(("attention:sdpa_gqa@bf16",)), a.device)
    assert any(
        "no measured class for sdpa_gqa, a kernel of its own" in n and "'attention@bf16'" in n for n in pooled["notes"]
    )
    assert not any("a kernel of its own" in n for n in own["notes"])


def test_unknown_attention_setting_is_one_line_and_exit_2():
    result = CliRunner().invoke(app, ["analyze", "llama-3.2-1b", "--attention", "sdpa"])
    assert result.exit_code == 2
    assert "unknown attention kernel 'sdpa'; use one of: auto, eager, sdpa-repeat, sdpa-gqa" in result.output
    assert "Traceback" not in result.output


def test_the_transformers_client_prices_the_path_its_prompt_took():
    from kernels.e2e.hf_client import priced_attention

    assert priced_attention({"prefill:enable_gqa": 2, "decode:enable_gqa": 4}) == "sdpa-gqa"
    assert priced_attention({"prefill:repeat_kv+mask": 2, "decode:fold_gqa+mask": 4}) == "sdpa-repeat"
    assert priced_attention({"prefill:mha": 2, "decode:mha": 4}) == "flash"


def test_the_simulator_prices_transformers_sdpa_path_as_attention():
    """A simulated step prices ``sdpa_gqa`` per sequence, as attention (not as a token op):
    on the datasheet roofs it has the fused kernel's flops and bytes, so every mix of
    prompt chunks and decodes costs what ``flash`` costs."""
    from ridgeline.io.resolve import resolve
    from ridgeline.serving.step_cost import build_step_cost, step_time

    costs = [
        build_step_cost(d.model, d.plan, d.ceilings, 256, 16)
        for d in (resolve("llama-3.2-1b", "a6000", attention=a) for a in ("auto", "flash"))
    ]
    for mix in (([], [], 2, 900.0), ([30], [], 1, 41.0), ([], [(16, 200)], 3, 3000.0)):
        gqa, flash = (step_time(cost, *mix) for cost in costs)
        assert gqa == pytest.approx(flash, rel=1e-12)
    assert step_time(costs[0], [], [], 1, 4000.0) > step_time(costs[0], [], [], 1, 100.0)


def test_the_cpu_grids_measure_masked_mha_decodes_and_prompts():
    """The decode grid times transformers' masked path (repeat_kv) from one query row per K/V
    head (an MHA model's padded batch: no copy, a mask) and enable_gqa only where heads are
    grouped; the prompt grid is causal over its own prompt, at the same lengths for every
    data type, and every case is built as the engine prices it (its class key and pairs)."""
    from kernels.bench.cases import PREFILL_GRID_LENGTHS, attention_grid_cases, prefill_grid_cases
    from ridgeline.engine.layers import causal_pairs
    from ridgeline.engine.roofline import keys_for

    decode = attention_grid_cases(("bf16",), backends=("flash", "gqa", "repeat_kv"))
    rows = {b: {c.recipe["rows"] for c in decode if c.backend == b} for b in ("gqa", "repeat_kv")}
    assert rows == {"gqa": {2, 4, 8, 16, 32, 64, 128}, "repeat_kv": {1, 2, 4, 8, 16}}
    prompts = prefill_grid_cases(("fp32", "bf16"), ("flash", "gqa", "repeat_kv"))
    assert {c.stage for c in prompts} == {"prefill"}
    for dtype in ("fp32", "bf16"):
        assert sorted({c.recipe["q_len"] for c in prompts if c.dtype == dtype}) == list(PREFILL_GRID_LENGTHS)
    assert all(c.recipe["q_len"] == c.recipe["kv_len"] for c in prompts)
    # the CPU flash kernel's 512-key blocks: 1024 tokens compute 0.75 of the full square
    long = next(c.op for c in prompts if c.recipe["q_len"] == 1024 and c.backend == "flash")
    assert long.dims["pairs"] == causal_pairs(1024, 512) == 0.75 * 1024**2
    keys = {(c.backend, keys_for(c.op)[0]) for c in prompts if c.dtype == "bf16"}
    assert keys == {
        ("flash", "attention:attention@bf16"),
        ("gqa", "attention:sdpa_gqa@bf16"),
        ("repeat_kv", "attention:sdpa_repeat_kv@bf16"),
        ("", "attention:qk_matmul@bf16"),  # the eager products, over the whole square
        ("", "attention:sv_matmul@bf16"),
    }
    square = next(c.op for c in prompts if c.kernel == "qk_matmul" and c.recipe["q_len"] == 1024)
    assert square.flops == 2 * 2 * 2 * 1024 * 1024 * square.dims["head_dim"]  # 2 sequences x 2 heads at 1 row


def test_calibrate_extend_refuses_other_modes_in_one_line(tmp_path):
    for extra in (["--check"], ["--refit", "x.yaml"], ["--quick"]):
        r = CliRunner().invoke(app, ["calibrate", "--extend", str(tmp_path / "p.yaml"), *extra])
        assert r.exit_code == 2
        assert r.output.strip().splitlines() == [
            "error: Invalid value: --extend measures a profile's missing cases: drop --check, --refit and --quick"
        ]


def test_a_decode_past_the_measured_group_holds_the_widest_groups_rate():
    """Falcon's 71 query heads per K/V head against a row table measured up to 16 rows: a
    decode takes the rate measured at the widest group, as every table is held at its edge
    (named as extrapolated), for the folded kernel and PyTorch's enable_gqa alike; a prompt
    past the rows is left to the class's terms (NaN here)."""
    from ridgeline.engine.grid import outside_spans
    from ridgeline.engine.roofline import Curve, RowTable

    table = RowTable(((64.0, 1.0),), (Curve((2.0, 16.0), (0.2, 0.4)),))
    keys = ("attention:sdpa_gqa@bf16", "attention@bf16")
    ceilings = Ceilings(
        "calibrated",
        1e11,
        {"bf16": 1e12},
        {"bf16": 1e11},
        efficiency={k: {"compute": 0.5, "memory": 0.5} for k in keys},
        row_curves=dict.fromkeys(keys, table),
        device="test",
    )
    _, (gqa,) = _attention("falcon-7b", "sdpa-gqa")
    _, (fold,) = _attention("falcon-7b", "flash")
    assert ceilings.row_fraction(gqa) == pytest.approx(0.4)
    assert ceilings.row_fraction(fold) == pytest.approx(0.4)
    assert [(s.dimension, float(s.value), s.high) for s in outside_spans(gqa, ceilings)] == [("rows", 71.0, 16.0)]
    assert np.isnan(ceilings.row_fraction(O.replaced(gqa, dims={**gqa.dims, "q_len": 2})))
