"""Golden analytic values: the engine's flops/bytes per op, pinned exactly (no torch).

A failure means a formula changed. If the change is deliberate, regenerate with
``python -m kernels.validate.golden --write`` and commit the diff of reports/golden/analytic.json.
"""

from __future__ import annotations

import copy
import json

from kernels.validate.golden import GOLDEN_PATH, compute, differences


def test_engine_matches_golden_values_exactly():
    expected = json.loads(GOLDEN_PATH.read_text())
    actual = json.loads(json.dumps(compute()))
    diff = differences(expected, actual)
    assert not diff, "\n".join(diff[:20])
    assert actual == expected


def test_golden_values_are_the_known_formulas():
    golden = json.loads(GOLDEN_PATH.read_text())
    cfg = next(
        c
        for c in golden["configs"]
        if (c["model"], c["stage"], c["batch"], c["length"], c["attention"])
        == ("llama-2-7b", "prefill", 1, 512, "eager")
    )
    ops = {o["name"]: o for o in cfg["ops"]}
    # q_proj: 2 * tokens * hidden^2 operations; fp16 weight read once (LLM-Viewer's Table 1)
    assert ops["q_proj"]["flops"] == 2 * 512 * 4096 * 4096
    assert ops["q_proj"]["weight_bytes"] == 4096 * 4096 * 2
    assert ops["qk_matmul"]["flops"] == 2 * 32 * 512 * 512 * 128
    assert ops["softmax"]["flops"] == 5 * 32 * 512 * 512


def test_differences_names_the_changed_field():
    golden = json.loads(GOLDEN_PATH.read_text())
    changed = copy.deepcopy(golden)
    changed["configs"][0]["ops"][1]["flops"] += 1
    diff = differences(golden, changed)
    assert len(diff) == 1 and diff[0].endswith(
        f"{golden['configs'][0]['ops'][1]['name']}.flops: "
        f"{golden['configs'][0]['ops'][1]['flops']} -> "
        f"{golden['configs'][0]['ops'][1]['flops'] + 1}"
    )
