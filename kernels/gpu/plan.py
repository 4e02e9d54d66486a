"""What the GPU run measures, as data: the stages in priority order, each a list of commands
with a time cap, built from a *sizes* preset. The sizes are the plan's only parameter: the
CPU test runs exactly this plan with the ``cpu-test`` sizes (one layer, tiny prompts, one
thread), so every stage's code path is exercised without a GPU.

Order where a device-time profile of this GPU is committed (``profiled``):
  1. ``e2e-graph``: decode captured in CUDA graphs, every model x batch, prompt 512, 32 tokens;
  2. ``e2e-eager``: the same, eager;
  3. ``hf-eager`` then ``hf-compiled``: transformers ``generate`` (static cache), eager, then
     transformers' own compilation (CUDA graphs);
  4. ``serving``: ``simulate-check --device cuda`` against transformers' continuous batching;
  5. ``agree``: graph replay against profiler kernel durations;
  6. ``calibrate``: a compact GPU-range calibration, then ``draw``: a fresh GPU-range draw
     measured and predicted by it;
  7. ``transfer``: the draw and e2e rows predicted from the other GPU's profile.
Where none is committed, ``calibrate`` runs first, ``host-terms`` merges the eager host
terms into that profile, and the rest follow in the same order, predicted with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PY = "python3"
# in a command, the seconds of cases a measuring stage may spend: what the stage is allowed
# less its ``setup_s`` for starting, measuring the roofs, fitting and writing (kernels.gpu.run)
CASE_BUDGET = "{case_budget_s}"

SIZES: dict[str, dict[str, Any]] = {
    "gpu": {
        "device": "cuda",
        "threads": [],
        "budget_s": 480,
        "e2e": {
            "models": ["llama-2-7b", "llama-3-8b"],
            "layers": [],
            "batches": [1, 8, 64],
            "prompt": 512,
            "generate": 32,
            "repeats": 3,
            "dtype": "bf16",
        },
        "executions": {"e2e-graph": "graph", "e2e-eager": "eager"},
        "hf": {
            "model": "llama-3-8b",
            "layers": [],
            "batches": [1, 8],
            "compiled_batches": [1],
            "prompt": 512,
            "generate": 32,
            "repeats": 3,
            "dtype": "bf16",
        },
        "serving": {
            "model": "qwen2-0.5b",
            "layers": [],
            "dtype": "bf16",
            "requests": 64,
            "repeats": 3,
            "rates": [8],
            "output_range": [],
        },
        "agree_every": 20,
        "calibrate": ["--compact", "--budget-s", "{case_budget_s}"],
        "draw": ["--budget-s", "{case_budget_s}"],
        "draw_seed": 1202,  # 1201: the H200 run of 2026-11-26
        "host": {"model": "llama-3-8b", "layers": ["--layers", "4"], "prompt": 512, "steps": 16},
        "caps": {
            "e2e-graph": 90,
            "e2e-eager": 70,
            "hf-eager": 50,
            "hf-compiled": 90,
            "serving": 110,
            "agree": 40,
            "calibrate": 240,
            "host-terms": 50,
            "draw": 150,
            "transfer": 30,
        },
    },
    # the same plan on a CPU in well under a minute a stage: the run script's own test
    "cpu-test": {
        "device": "cpu",
        "threads": ["--threads", "1"],
        "budget_s": 900,
        "e2e": {
            "models": ["qwen2-0.5b"],
            "layers": ["--layers", "1"],
            "batches": [1, 2],
            "prompt": 16,
            "generate": 3,
            "repeats": 1,
            "dtype": "fp32",
        },
        # a CPU runs no CUDA graphs: both e2e stages run eager there
        "executions": {"e2e-graph": "eager", "e2e-eager": "eager"},
        "hf": {
            "model": "qwen2-0.5b",
            "layers": ["--layers", "1"],
            "batches": [1],
            "compiled_batches": [],
            "prompt": 16,
            "generate": 3,
            "repeats": 1,
            "dtype": "fp32",
        },
        "serving": {
            "model": "qwen2-0.5b",
            "layers": ["--layers", "1"],
            "dtype": "fp32",
            "requests": 6,
            "repeats": 1,
            "rates": [8],
            "output_range": ["4", "8"],
        },
        "agree_every": 20,
        "calibrate": ["--quick", "--budget-s", "{case_budget_s}"],
        "draw": ["--budget-s", "{case_budget_s}"],
        "draw_seed": 7,
        "host": {"model": "qwen2-0.5b", "layers": ["--layers", "1"], "prompt": 32, "steps": 2},
        "caps": {
            "e2e-graph": 120,
            "e2e-eager": 120,
            "hf-eager": 120,
            "hf-compiled": 60,
            "serving": 120,
            "agree": 60,
            "calibrate": 300,
            "host-terms": 120,
            "draw": 300,
            "transfer": 60,
        },
    },
}
# The second GPU run on a GPU that has one already (2026-11-27): models, prompt, batches and
# draw seed that no GPU run has measured, so every row is held out from the profile and from
# the earlier runs. Its own stage list: STAGES=e2e-graph,e2e-eager,hf-eager,hf-compiled,draw,transfer
SIZES["gpu-heldout"] = {
    **SIZES["gpu"],
    "e2e": {
        **SIZES["gpu"]["e2e"],
        "models": ["mistral-7b", "phi-3-mini", "qwen2-7b"],
        "batches": [1, 16, 64],
        "prompt": 1024,
    },
    "hf": {**SIZES["gpu"]["hf"], "model": "qwen2-7b", "prompt": 1024},
    "draw_seed": 2711,
    "caps": {**SIZES["gpu"]["caps"], "e2e-graph": 120, "e2e-eager": 70, "hf-eager": 45, "hf-compiled": 80, "draw": 150},
}

# The third (2026-11-27, afternoon): families no GPU run has measured (Gemma: head_dim 256 and
# tanh-GELU; Falcon: multi-query attention, LayerNorm, parallel attention; OPT: LayerNorm with
# bias, ReLU, no gate), a prompt and batches no run used, transformers on Llama-2-13B (multi-head,
# no GPU run's model; its client builds Llama and Qwen2 only), a seed no draw used.
# Its own stage list: STAGES=e2e-graph,e2e-eager,hf-eager,hf-compiled,draw,transfer
SIZES["gpu-families"] = {
    **SIZES["gpu"],
    "e2e": {
        **SIZES["gpu"]["e2e"],
        "models": ["gemma-7b", "falcon-7b", "opt-6.7b"],
        "batches": [1, 4, 32],
        "prompt": 768,
    },
    "hf": {**SIZES["gpu"]["hf"], "model": "llama-2-13b", "batches": [1, 4], "prompt": 768},
    "draw_seed": 2719,
    "caps": {
        **SIZES["gpu"]["caps"],
        "e2e-graph": 110,
        "e2e-eager": 100,
        "hf-eager": 50,
        "hf-compiled": 80,
        "draw": 150,
    },
}

# The fourth (2026-11-27, evening): GPT-J-6B (parallel attention, head_dim 256, GELU, no gate),
# Llama-2-13B end to end (multi-head, 40 heads; only transformers had run it) and Llama-3.2-1B
# (a small model, where launches weigh), a prompt and batches no run used, transformers on
# Llama-3.2-1B, and a seed no draw used. Llama-2-13B at batch 32 and 1568 tokens needs ~67 GB,
# so the plan fits an H100 too. Its own stage list: STAGES=e2e-graph,e2e-eager,hf-eager,hf-compiled,draw,transfer
SIZES["gpu-heldout2"] = {
    **SIZES["gpu"],
    "e2e": {
        **SIZES["gpu"]["e2e"],
        "models": ["gpt-j-6b", "llama-2-13b", "llama-3.2-1b"],
        "batches": [2, 12, 32],
        "prompt": 1536,
    },
    "hf": {**SIZES["gpu"]["hf"], "model": "llama-3.2-1b", "batches": [1, 12], "compiled_batches": [1], "prompt": 1536},
    "draw_seed": 2731,
    "caps": {**SIZES["gpu-families"]["caps"], "e2e-graph": 120, "e2e-eager": 80, "hf-eager": 45},
}

# The fifth (2026-11-28): Mistral-7B-v0.1 (sliding-window attention over 4096 keys, no GPU run's
# model) and Qwen2-0.5B (the smallest catalog model; tied lm_head) end to end at a prompt past
# that window (4608), batches no run used, transformers on Qwen2-0.5B, a seed no draw used.
# Its own stage list: STAGES=e2e-graph,e2e-eager,hf-eager,draw
SIZES["gpu-heldout3"] = {
    **SIZES["gpu"],
    "e2e": {
        **SIZES["gpu"]["e2e"],
        "models": ["mistral-7b-v0.1", "qwen2-0.5b"],
        "batches": [1, 4, 16],
        "prompt": 4608,
    },
    "hf": {**SIZES["gpu"]["hf"], "model": "qwen2-0.5b", "batches": [1, 4], "compiled_batches": [1], "prompt": 4608},
    "draw_seed": 2733,
    "caps": {**SIZES["gpu-heldout2"]["caps"]},
}


@dataclass(frozen=True)
class Stage:
    name: str
    cap_s: int
    commands: tuple[tuple[str, ...], ...]
    why: str = ""
    needs: tuple[str, ...] = field(default=())  # stages whose files it reads
    setup_s: int = 0  # seconds kept back from a CASE_BUDGET for all but the cases


def sizes(name: str) -> Mapping[str, Any]:
    if name not in SIZES:
        from ridgeline.errors import RidgelineError

        raise RidgelineError(f"unknown sizes preset {name!r}; use one of: {', '.join(SIZES)}")
    return SIZES[name]


def _flags(name: str, values) -> list[str]:
    return [part for v in values for part in (name, str(v))]


def _profile(path: str | None) -> list[str]:
    return ["--profile", path] if path else []


def e2e_commands(s: Mapping[str, Any], execution: str, folder: str, profile: str | None) -> list[tuple[str, ...]]:
    e = s["e2e"]
    return [
        (
            PY,
            "-m",
            "ridgeline.cli",
            "e2e",
            model,
            "--device",
            s["device"],
            *s["threads"],
            *_profile(profile),
            "--dtype",
            e["dtype"],
            *e["layers"],
            *_flags("--batch", e["batches"]),
            "--prompt",
            str(e["prompt"]),
            "--generate",
            str(e["generate"]),
            "--repeats",
            str(e["repeats"]),
            "--execution",
            execution,
            "--output",
            f"{folder}/e2e-{model}-{execution}.json",
        )
        for model in e["models"]
    ]


def hf_command(s: Mapping[str, Any], mode: str, batches, folder: str, profile: str | None) -> tuple[str, ...]:
    h = s["hf"]
    return (
        PY,
        "-m",
        "kernels.e2e.hf_client",
        h["model"],
        "--device",
        s["device"],
        *h["layers"],
        *_profile(profile),
        "--dtype",
        h["dtype"],
        *_flags("--batch", batches),
        "--prompt",
        str(h["prompt"]),
        "--generate",
        str(h["generate"]),
        "--repeats",
        str(h["repeats"]),
        "--mode",
        mode,
        "--output",
        f"{folder}/hf-{h['model']}-{mode}.json",
    )


def serving_commands(s: Mapping[str, Any], folder: str, profile: str | None) -> list[tuple[str, ...]]:
    v = s["serving"]
    out_range = ["--output-range", *v["output_range"]] if v["output_range"] else []
    return [
        (
            PY,
            "-m",
            "ridgeline.cli",
            "simulate-check",
            v["model"],
            "--device",
            s["device"],
            *v["layers"],
            *_profile(profile),
            "--dtype",
            v["dtype"],
            "--requests",
            str(v["requests"]),
            "--repeats",
            str(v["repeats"]),
            *out_range,
            "--rate",
            str(rate),
            "--output",
            f"{folder}/serving-{v['model']}-{rate}rps.json",
        )
        for rate in v["rates"]
    ]


def stages(
    s: Mapping[str, Any], out: str, profiled: bool, committed: str | None, other_profile: str | None, kept: str
) -> list[Stage]:
    """Every stage in the order it runs; ``out`` the folder the stages write under (each
    its own sub-folder, ``out/<stage>``, moved to ``kept/<stage>`` once packed). The measured stages are predicted with the
    committed device-time profile of this device (``profiled``), else with the profile
    this run's ``calibrate`` stage writes (a command whose ``--profile`` file is missing
    when it starts runs without it: ``kernels.gpu.run``)."""

    def at(name: str) -> str:
        return f"{out}/{name}"

    dev, caps = s["device"], s["caps"]
    fresh = f"{kept}/calibrate/profile.yaml"
    cal = Stage(
        "calibrate",
        caps["calibrate"],
        (
            (
                PY,
                "-m",
                "kernels.gpu.cases",
                "calibrate",
                "--device",
                dev,
                *s["threads"],
                *s["calibrate"],
                "--output",
                f"{at('calibrate')}/profile.yaml",
            ),
        ),
        "a GPU-range profile of this GPU, this run",
        setup_s=75,
    )
    draw = Stage(
        "draw",
        caps["draw"],
        (
            (
                PY,
                "-m",
                "kernels.gpu.cases",
                "validate",
                "--device",
                dev,
                *s["threads"],
                *s["draw"],
                "--draw",
                str(s["draw_seed"]),
                "--profile",
                fresh,
                "--output-dir",
                at("draw"),
            ),
        ),
        "a fresh GPU-range draw, predicted by this run's profile",
        ("calibrate",),
        setup_s=40,
    )
    host = s["host"]
    terms = Stage(
        "host-terms",
        caps["host-terms"],
        (
            (
                PY,
                "-m",
                "kernels.calibrate.host_profile",
                host["model"],
                "--device",
                dev,
                *host["layers"],
                "--prompt",
                str(host["prompt"]),
                "--steps",
                str(host["steps"]),
                "--no-compile",
                "--profile",
                fresh,
            ),
            ("cp", fresh, f"{at('host-terms')}/profile.yaml"),
        ),
        "eager host dispatch per engine op and kernels per op, merged into this run's profile",
        ("calibrate",),
    )
    hf, profile = s["hf"], committed if profiled else fresh
    measured = [
        Stage(
            "e2e-graph",
            caps["e2e-graph"],
            tuple(e2e_commands(s, s["executions"]["e2e-graph"], at("e2e-graph"), profile)),
            "end-to-end decode captured in CUDA graphs (device time + launch gaps)",
        ),
        Stage(
            "e2e-eager",
            caps["e2e-eager"],
            tuple(e2e_commands(s, s["executions"]["e2e-eager"], at("e2e-eager"), profile)),
            "the same decode, eager (host dispatch per kernel)",
        ),
        Stage(
            "hf-eager",
            caps["hf-eager"],
            (hf_command(s, "eager", hf["batches"], at("hf-eager"), profile),),
            "transformers generate, static cache, eager",
        ),
        Stage(
            "hf-compiled",
            caps["hf-compiled"],
            (hf_command(s, "compiled", hf["compiled_batches"], at("hf-compiled"), profile),)
            if hf["compiled_batches"]
            else (),
            "transformers generate, static cache, compiled",
        ),
        Stage(
            "serving",
            caps["serving"],
            tuple(serving_commands(s, at("serving"), profile)),
            "transformers' continuous batching against the simulator",
        ),
        Stage(
            "agree",
            caps["agree"],
            (
                (
                    PY,
                    "-m",
                    "kernels.gpu.cases",
                    "agree",
                    "--device",
                    dev,
                    "--every",
                    str(s["agree_every"]),
                    "--output-dir",
                    at("agree"),
                ),
            ),
            "graph replay against profiler kernel durations",
        ),
    ]
    transfer = Stage(
        "transfer",
        caps["transfer"],
        ((PY, "-m", "kernels.gpu.run", "transfer", out, other_profile or ""),),
        "this run's draw and e2e rows predicted from the other GPU's profile",
        ("draw", "e2e-graph", "e2e-eager"),
    )
    order = measured + [cal, draw] if profiled else [cal, terms] + measured + [draw]
    return [st for st in order + ([transfer] if other_profile else []) if st.commands]
