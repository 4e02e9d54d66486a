"""'Extrapolated': an op past the grid its profile measured is named, per op and in the basis
(ridgeline.engine.grid, ridgeline.engine.basis); datasheet roofs say nothing of it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from kernels.bench.cases import build_op, precision
from ridgeline.engine import ops as O
from ridgeline.engine.analyze import analyze_deployment, build_stage, deployment_basis
from ridgeline.engine.basis import basis, basis_lines
from ridgeline.engine.grid import measured_spans, outside_spans
from ridgeline.engine.layers import stage_ops
from ridgeline.engine.roofline import ATTENTION_AXES, GridTable, spec_ceilings
from ridgeline.io.catalog import PROFILES_DIR
from ridgeline.io.profile import calibrated_ceilings, load_profile
from ridgeline.io.resolve import load_device, load_model, resolve

# measured head_dim 64, 96, 128 (decode attention) and (K, N) from 896 to 18944, rows to 384
EPYC = PROFILES_DIR / "cpu-amd-epyc-1t.yaml"
# also size tables: attn_add@bf16 from 12 KiB to 192 MiB
XEON = PROFILES_DIR / "cpu-intel-r-xeon-r-processor-f6m207-1t.yaml"
ROOT = Path(__file__).resolve().parent.parent
NOTE = "extrapolated past the measured grid: "


@pytest.fixture(scope="module")
def device():
    return load_device("epyc-9654")


@pytest.fixture(scope="module")
def epyc(device):
    return calibrated_ceilings(load_profile(EPYC), device)


def qk(head_dim: int, rows: int = 1):
    """A decode q.K^T over 512 cached tokens, ``rows`` query heads per K/V head."""
    recipe = dict(builder="attention_grid", kernel="qk_matmul", batch=1, kv_heads=16, kv_len=512, dtype="bf16")
    return build_op({**recipe, "rows": rows, "head_dim": head_dim})


def product(m, k: int, n: int, name: str = "down_proj"):
    """A bf16 product of ``m`` rows (an array: one per workload point)."""
    return O.linear(name, m, k, n, q=precision("bf16").quant, ab=2.0, count=1, dtype="bf16", inputs=())


def notes(ops, ceilings, device) -> list[str]:
    return [n for n in basis({"decode": ops}, ceilings, device)["notes"] if n.startswith(NOTE)]


def test_head_dim_256_past_a_grid_that_stops_at_128_is_named(epyc, device):
    b = basis({"decode": [qk(256)]}, epyc, device)
    assert b["extrapolated"] == [
        {"op": "qk_matmul", "dimension": "head_dim", "outside": [256.0, 256.0], "measured": [64.0, 128.0]}
    ]
    assert notes([qk(256)], epyc, device) == [NOTE + "qk_matmul head_dim 256 (measured 64–128)"]
    assert "note: " + NOTE + "qk_matmul head_dim 256 (measured 64–128)" in basis_lines(b)


def test_head_dim_128_on_the_grid_is_not_named(epyc, device):
    b = basis({"decode": [qk(128), qk(96, rows=4)]}, epyc, device)
    assert b["extrapolated"] == [] and notes([qk(128)], epyc, device) == []


def test_a_decode_past_the_tables_rows_is_held_and_named(epyc):
    # 512 query rows per K/V head: past the table's 64 rows, priced at 64 rows' rate
    spans = measured_spans(qk(256, rows=512), epyc)
    assert [(s.dimension, bool(np.all(s.outside))) for s in spans] == [("rows", True), ("head_dim", True)]
    assert epyc.row_fraction(qk(256, rows=512)) == pytest.approx(epyc.row_fraction(qk(256, rows=64)))


def test_a_product_with_k_past_its_row_table_is_named(epyc, device):
    assert [s.dimension for s in outside_spans(product(5, 28672, 8192), epyc)] == ["k"]
    assert notes([product(5, 28672, 8192)], epyc, device) == [NOTE + "down_proj k 28672 (measured 896–18944)"]
    assert notes([product(5, 18944, 3584), product(384, 896, 4864)], epyc, device) == []


def test_rows_are_judged_per_workload_point(epyc, device):
    rows = next(
        s for s in measured_spans(product(np.array([1, 384, 512, 768]), 2048, 2048), epyc) if s.dimension == "rows"
    )
    assert (rows.low, rows.high) == (1.0, 384.0)
    assert rows.outside.tolist() == [False, False, True, True]
    merged = notes(
        [product(np.array([1, 512, 768]), 2048, 2048, "q_proj"), product(5, 2048, 30000, "q_proj")], epyc, device
    )
    assert merged == [NOTE + "q_proj rows 512–768 (measured 1–384); q_proj n 30000 (measured 896–18944)"]


def test_ops_past_the_same_span_are_named_together(epyc, device):
    ops = [product(5, 8192, 24576, "gate_proj"), product(5, 8192, 24576, "up_proj"), qk(256)]
    assert notes(ops, epyc, device) == [
        NOTE + "gate_proj, up_proj n 24576 (measured 896–18944); qk_matmul head_dim 256 (measured 64–128)"
    ]


def test_sizes_past_a_size_table_are_named(device):
    xeon = calibrated_ceilings(load_profile(XEON), device)
    big = build_op({"builder": "size_grid", "kernel": "residual_add", "tokens": 2**16, "width": 2048, "dtype": "bf16"})
    assert big.bytes == 3 * 2**16 * 2048 * 2  # 768 MiB: past the table's 192 MiB
    assert notes([big], xeon, device) == [NOTE + "attn_add bytes 768MiB (measured 12KiB–192MiB)"]


def test_a_gpu_attention_grid_names_each_axis_past_its_knots(device):
    table = GridTable.of(ATTENTION_AXES, [[1, 8], [64, 4096], [128]], np.full((2, 2, 1), 0.5))
    c = replace(
        spec_ceilings(device),
        mode="calibrated",
        attention_tables=MappingProxyType({"attention:qk_matmul@bf16": MappingProxyType({"decode": table})}),
    )
    b = basis({"decode": [qk(256, rows=4)]}, c, device)
    assert [(e["dimension"], e["outside"]) for e in b["extrapolated"]] == [("head_dim", [256.0, 256.0])]
    assert notes([qk(128, rows=4)], c, device) == []


def test_a_gemma_decode_names_its_head_dim_and_mlp_width_per_op(epyc, device):
    model, plan = load_model("gemma-7b"), precision("bf16")
    ops = stage_ops(model, "decode", 1, 512, plan)
    records = {r["name"]: r for r in build_stage(ops, epyc, plan, "decode").records()}
    assert records["qk_matmul"]["extrapolated"] == "head_dim 256 (measured 64–128)"
    assert records["down_proj"]["extrapolated"] == "k 24576 (measured 896–18944)"
    assert "extrapolated" not in records["q_proj"]  # 3072 x 4096 at one row: inside
    (note,) = notes(ops, epyc, device)
    assert "qk_matmul, sv_matmul head_dim 256 (measured 64–128)" in note
    assert "down_proj k 24576 (measured 896–18944)" in note


def test_a_multi_query_decode_is_on_a_grid_that_reaches_its_heads(device):
    """Falcon-7B folds 71 query heads onto one K/V head: a grid to 128 rows per K/V head
    prices every setting's decode inside it; one whose transformers paths stop at 16 names
    the rows (repeat_kv at one K/V head is a view, priced as enable_gqa)."""
    model, plan = load_model("falcon-7b"), precision("bf16")
    reached = calibrated_ceilings(load_profile(PROFILES_DIR / "cpu-intel-r-xeon-r-processor-f6m167-1t.yaml"), device)
    short = calibrated_ceilings(load_profile(PROFILES_DIR / "cpu-amd-epyc-f25m17-1t.yaml"), device)
    for attention in ("eager", "flash", "sdpa-gqa", "sdpa-repeat"):
        p = replace(plan, attention=attention)
        ops = [op for op in stage_ops(model, "decode", 16, 512, p) if op.kind == "attention"]
        assert ops and not any(outside_spans(op, reached) for op in ops)
        records = {r["name"]: r for r in build_stage(ops, short, p, "decode").records()}
        if attention.startswith("sdpa"):
            assert set(records) == {"sdpa_gqa"}
            assert records["sdpa_gqa"]["extrapolated"] == "rows 71 (measured 2–16)"


def test_datasheet_roofs_say_nothing_of_a_grid(device):
    model, plan = load_model("gemma-7b"), precision("bf16")
    ops = {stage: stage_ops(model, stage, 1, 512, plan) for stage in ("prefill", "decode")}
    b = basis(ops, spec_ceilings(device), device)
    assert b["extrapolated"] == [] and not any(n.startswith(NOTE) for n in b["notes"])
    stage = build_stage(ops["decode"], spec_ceilings(device), plan, "decode")
    assert all("extrapolated" not in r for r in stage.records())


def test_a_sweep_basis_judges_every_point_of_its_grid(epyc):
    d = resolve("llama-3.2-1b", "epyc-9654", dtype="bf16", ceilings=epyc)
    rows = [e for e in deployment_basis(d, [1, 8], [64])["extrapolated"] if e["dimension"] == "rows"]
    # prefill rows: batch x tokens = 64 and 512; the table measured 1 ... 384
    assert {e["op"] for e in rows} == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert {(tuple(e["outside"]), tuple(e["measured"])) for e in rows} == {((512.0, 512.0), (1.0, 384.0))}
    assert not any(e["dimension"] == "rows" for e in deployment_basis(d, 1, 64)["extrapolated"])


def test_the_json_with_extrapolated_ops_matches_the_schema(epyc):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text())
    gemma = resolve("gemma-7b", "epyc-9654", dtype="bf16", attention="eager", ceilings=epyc)
    out = analyze_deployment(gemma, 1, 512).to_dict()
    qk_matmul = next(r for r in out["decode"]["ops"] if r["name"] == "qk_matmul")
    assert out["basis"]["extrapolated"] and qk_matmul["extrapolated"] == "head_dim 256 (measured 64–128)"
    jsonschema.validate(out, schema)
