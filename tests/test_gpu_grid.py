"""The GPU calibration grid and its held-out draws (kernels.bench.cases_gpu): what the grid covers,
that draws lie strictly between its points, transformers' two attention paths as kernels of
their own, the compact calibration's priority order and budget. CPU only."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.bench import cases_gpu as G
from kernels.bench.cases import Options, build_op, check_disjoint, held_out_overlap
from kernels.gpu import cases as command
from ridgeline.engine.roofline import keys_for

CUDA = Options(("fp32", "bf16", "fp16"), G.CUDA_BACKENDS, "cuda")
CPU = Options(("fp32", "bf16"), ("math", "flash"), "cpu")


def _calibration(opts=CUDA):
    return G.gpu_cases("calibration", opts) + G.gpu_cases("calibration", opts, True)


def test_the_grid_spans_the_gpu_ranges():
    full = G.GRIDS["full"]
    assert full.decode_contexts == tuple(2**i for i in range(6, 16))  # 64 ... 32768
    assert full.prefill_lengths == tuple(2**i for i in range(6, 14))  # 64 ... 8192
    assert full.decode_batches == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    cal = G.gpu_cases("calibration", CUDA)
    table = [c for c in cal if c.recipe.get("builder") == "attention_grid" and "model" not in c.recipe]
    decode = {int(c.recipe["kv_len"]) for c in table if c.stage == "decode"}
    prefill = {int(c.recipe["q_len"]) for c in table if c.stage == "prefill"}
    assert decode == set(full.decode_contexts) and prefill == set(full.prefill_lengths)
    batches = {int(c.recipe["batch"]) for c in cal if "model" in c.recipe and c.stage == "decode"}
    assert min(batches) == 1 and max(batches) == 256


def test_softmax_both_sides_of_1024_columns_and_element_wise_from_one_token():
    for quick in (False, True):
        grid = [c for c in G.gpu_cases("calibration", CUDA, quick) if c.recipe.get("builder") == "size_grid"]
        widths = {int(c.recipe["width"]) for c in grid if c.kernel == "softmax"}
        assert min(widths) <= 1024 < max(widths)
        for kernel in ("rmsnorm", "residual_add", "silu_mul", "softmax"):
            tokens = sorted(int(c.recipe["tokens"]) for c in grid if c.kernel == kernel)
            assert tokens[0] == 1 and tokens[-1] >= 1024, kernel
        # one token of a 3584-wide add moves 3 x 3584 x 2 bytes: overhead, not bandwidth
        add = next(c for c in grid if c.kernel == "residual_add" and c.recipe["tokens"] == 1)
        assert add.op.bytes == 3 * 3584 * 2


def test_transformers_paths_are_kernels_of_their_own():
    cal = G.gpu_cases("calibration", CUDA)
    names = {(c.backend, c.op.name) for c in cal if c.kernel == "sdpa"}
    assert {
        ("gqa", "sdpa_gqa"),
        ("repeat_kv", "sdpa_repeat_kv"),
        ("flash", "attention"),
        ("efficient", "sdpa_efficient"),
        ("cudnn", "sdpa_cudnn"),
    } <= names
    gqa = next(c for c in cal if c.backend == "gqa")
    rkv = next(c for c in cal if c.backend == "repeat_kv")
    assert keys_for(gqa.op)[0] == "attention:sdpa_gqa@bf16"
    assert keys_for(rkv.op)[0] == "attention:sdpa_repeat_kv@bf16"
    # both in the decode and the prefill tables, and in every validation model stage
    assert {c.stage for c in cal if c.backend == "repeat_kv"} == {"decode", "prefill"}
    val = G.gpu_cases("validation", CUDA)
    for backend in ("gqa", "repeat_kv"):
        stages = {(c.recipe["model"], c.stage, c.recipe["length"]) for c in val if c.backend == backend}
        flash = {(c.recipe["model"], c.stage, c.recipe["length"]) for c in val if c.backend == "flash"}
        assert stages == flash


def test_repeat_kv_op_counts_the_copy_and_the_mask():
    """Decode, 1 sequence, 2 K/V heads x 4 rows = 8 query heads, 64 cached tokens of
    head_dim 64 in bf16 (2 bytes):
    K/V in the cache 2 x 1 x 2 x 64 x 64 x 2 = 32768 B; copied to 8 heads 2 x 8 x 64 x 64 x 2
    = 131072 B written, then read by SDPA; q 8 x 64 x 2 = 1024 B; mask 1 x 1 x 64 = 64 B."""
    recipe = {
        "builder": "attention_grid",
        "kernel": "repeat_kv",
        "rows": 4,
        "batch": 1,
        "kv_heads": 2,
        "kv_len": 64,
        "head_dim": 64,
        "dtype": "bf16",
        "rename": "sdpa_repeat_kv",
    }
    op = build_op(recipe)
    assert op.name == "sdpa_repeat_kv"
    assert op.kv_read_bytes == 32768
    assert op.act_read_bytes == 1024 + 131072 + 64
    assert op.act_write_bytes == 1024 + 131072
    gqa = build_op({**recipe, "kernel": "attention", "rename": "sdpa_gqa"})
    assert gqa.kv_read_bytes == 32768 and gqa.act_read_bytes == 1024  # K/V once per K/V head
    # MHA: repeat_kv returns its input; only the mask is extra
    mha = build_op({**recipe, "rows": 1, "kv_heads": 8})
    flash = build_op({**recipe, "rows": 1, "kv_heads": 8, "kernel": "attention"})
    assert mha.kv_read_bytes == flash.kv_read_bytes
    assert mha.act_read_bytes == flash.act_read_bytes + 64


@pytest.mark.parametrize("backend", ["gqa", "repeat_kv"])
@pytest.mark.parametrize("stage", ["decode", "prefill"])
def test_transformers_paths_run_and_match_float64(backend, stage):
    torch = pytest.importorskip("torch")
    from kernels.bench.bench import make_bench, repeat_kv

    cases = [
        c
        for c in G.gpu_cases("calibration", CPU)
        if c.backend == backend and c.stage == stage and c.recipe["rows"] == 4
    ]
    bench = make_bench(cases[0], "cpu", 2**16)
    assert bench.check() < 2e-2
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).view(2, 3, 4, 5)
    assert torch.equal(repeat_kv(x, 2), x.repeat_interleave(2, dim=1))  # HF's semantics
    assert repeat_kv(x, 1) is x


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**9))
@pytest.mark.slow
def test_a_draw_lies_strictly_between_grid_points_and_is_held_out(seed):
    cases, drawn = G.gpu_drawn_cases(seed, CUDA)
    check_disjoint(_calibration(), cases)
    assert not any(held_out_overlap(_calibration(), cases).values())
    grid = G.GRIDS["full"]
    lengths = sorted({*grid.decode_contexts, *grid.prefill_lengths})
    pairs = [tuple(w) for w in drawn["decode"]] + [tuple(w) for w in drawn["prefill"]["bf16"]]
    for batch, length in pairs:
        assert batch not in grid.decode_batches and 1 < batch < 256
        assert length not in lengths and 64 < length < 32768
        # strictly between two neighbouring grid points
        assert any(lo < length < hi for lo, hi in itertools.pairwise(lengths))
    for batch, length in drawn["decode"]:
        assert batch * length <= G.MAX_KV_TOKENS
    batch, length = drawn["prefill"]["bf16"][0]
    assert length < 8192 and batch * length <= G.DRAW_RANGES["gpu"]["prefill_tokens"]
    assert not set(drawn["models"]) & set(G.CALIBRATION_MODELS)
    again, _ = G.gpu_drawn_cases(seed, CUDA)
    assert [c.name for c in again] == [c.name for c in cases]


def test_the_dry_draw_is_held_out_from_the_dry_grid():
    for seed in range(5):
        cases, drawn = G.gpu_drawn_cases(seed, CPU)
        assert drawn["ranges"] == "dry" and drawn["models"] == ["llama-3.2-1b"]
        check_disjoint(_calibration(CPU), cases)
    check_disjoint(_calibration(CPU), G.gpu_cases("validation", CPU))


def test_check_between_names_the_value_on_a_grid_point():
    grid = G.GRIDS["full"]
    on = G.model_cases(
        ["llama-3-8b"], {"prefill": [], "decode": [(3, 4096)]}, ("bf16",), "validation", G.gpu_options(CUDA)
    )
    with pytest.raises(ValueError, match=r"drawn length 4096 not strictly between"):
        G.check_between(on, grid)
    beyond = G.model_cases(
        ["llama-3-8b"], {"prefill": [], "decode": [(300, 96)]}, ("bf16",), "validation", G.gpu_options(CUDA)
    )
    with pytest.raises(ValueError, match=r"drawn batch 300 not strictly between"):
        G.check_between(beyond, grid)


def test_calibration_is_in_priority_order_and_compact_leaves_the_rest_out():
    for quick in (False, True):
        cases = G.gpu_cases("calibration", CUDA, quick)
        tiers = [G.priority(c) for c in cases]
        assert tiers == sorted(tiers)
        first = cases[0]
        assert (first.kernel, first.backend, first.stage) == ("sdpa", "gqa", "decode")
    compact = G.gpu_cases("calibration", CUDA, True)
    assert max(G.priority(c) for c in compact) == 6  # no model-shape attention, no reference
    assert len(compact) < len(G.gpu_cases("calibration", CUDA)) / 2


def test_compact_flag_becomes_quick_with_a_budget():
    args, budget = command.compact_args(["calibrate", "--device", "cuda", "--compact", "-o", "p.yaml"])
    assert args == ["calibrate", "--device", "cuda", "-o", "p.yaml", "--quick"]
    assert budget == command.COMPACT_BUDGET_S
    args, budget = command.compact_args(["calibrate", "--compact", "--budget-s", "60", "--quick"])
    assert args == ["calibrate", "--quick"] and budget == 60.0
    assert command.compact_args(["calibrate", "--device", "cpu"]) == (["calibrate", "--device", "cpu"], None)
    with pytest.raises(SystemExit, match="--budget-s needs"):
        command.compact_args(["calibrate", "--budget-s"])


def test_a_budget_measures_in_order_and_lists_the_rest(monkeypatch):
    from kernels.bench import suite

    clock = [0.0]  # each case takes one second

    def run_case(case, cfg):
        clock[0] += 1.0
        return {"name": case.name, "status": "ok"}

    monkeypatch.setattr(G.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(suite, "run_case", run_case)
    cases = G.gpu_cases("calibration", CUDA, True)[:6]
    logged = []
    rows = G.budgeted_run_cases(2.5, logged.append)(cases, None)
    # case i starts when i seconds have gone: measured while that is at most 2.5
    assert [r["status"] for r in rows] == ["ok"] * 3 + ["skipped"] * 3
    assert rows[3]["reason"].startswith("--budget-s 2.5: not reached")
    assert [r["name"] for r in rows] == [c.name for c in cases]
    assert "3 of 6 cases not measured" in logged[-1]


def test_a_budget_is_the_gpu_sets_run_only_when_given():
    from kernels.bench import suite

    assert G.gpu_case_set().run is suite.run_cases
    capped = G.gpu_case_set(10.0)
    assert capped.run is not suite.run_cases and capped.cases is G.gpu_cases


@pytest.mark.slow
def test_compact_calibrate_on_a_cpu_with_no_budget_left_lists_every_case(tmp_path):
    """The command the GPU run calls, as a dry run whose budget ends before the first case:
    the roofs are measured, every case is listed as not reached, a profile is written."""
    import yaml

    pytest.importorskip("torch")
    out = tmp_path / "p.yaml"
    code = command.main(
        ["calibrate", "--device", "cpu", "--threads", "1", "--compact", "--budget-s", "0", "--output", str(out)]
    )
    assert code == 0
    profile = yaml.safe_load(out.read_text())
    problems = profile["problems"]
    assert profile["meta"]["mode"] == "quick" and profile["efficiency"] == {}
    assert profile["meta"]["fit"] == {"overhead_cap": True, "judge_between": True, "kind_classes": True}
    assert len(problems) == profile["meta"]["calibration_cases"] > 50
    first = problems[0]["case"]  # priority 0: transformers' enable_gqa path
    assert first.startswith("agrid/decode/sdpa/") and first.endswith("/gqa")
    assert all(p["reason"].startswith("--budget-s 0: not reached") for p in profile["problems"])


def test_the_calibration_doc_counts_the_cases_of_each_part():
    """docs/calibration.md's cost table: the case counts per priority are the code's, and each
    estimate is cases x 0.23 s (compact, quick timing) or x 0.40 s (full), rounded."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "calibration.md").read_text()
    rows = re.findall(r"^\| (\d) \| [^|]+ \| (\d+|—) \| (\d+|—) s? ?\| (\d+) \| (\d+) s \|$", text, re.M)
    table = {int(row[0]): row for row in rows}
    assert sorted(table) == list(range(len(G.PRIORITY)))
    for quick, count, seconds, per_case in ((True, 1, 2, 0.23), (False, 3, 4, 0.40)):
        cases = G.gpu_cases("calibration", CUDA, quick)
        for tier, row in table.items():
            n = sum(G.priority(c) == tier for c in cases)
            assert row[count] == (str(n) if n else "—"), (quick, tier)
            if n:
                assert int(row[seconds]) == int(n * per_case + 0.5), (quick, tier)  # half up
