"""The shipped catalogs load, carry sources, and hold the figures the seed paper uses."""

from __future__ import annotations

import json

import pytest

import ridgeline as rl
from ridgeline.errors import InvalidConfigError, UnsupportedArchitectureError
from ridgeline.io.catalog import MODELS_DIR
from ridgeline.io.hardware import device_from_dict
from ridgeline.io.host import cpu_flops_per_cycle

DEVICES = rl.list_devices()
MODELS = rl.list_models()


def test_catalog_sizes():
    assert len(DEVICES) >= 39
    for name in (
        "a6000",
        "a100-40gb",
        "a100-80gb",
        "h100-sxm",
        "h100-pcie",
        "h200",
        "b200",
        "l4",
        "l40s",
        "rtx-4090",
        "rtx-3090",
        "v100",
        "mi300x",
        "tpu-v5e",
        "jetson-agx-orin",
        "epyc-9654",
        "xeon-8480",
    ):
        assert name in DEVICES
    assert any(d.startswith("apple-m") for d in DEVICES)
    for name in (
        "gb200",
        "gb300",
        "b300",
        "mi325x",
        "mi355x",
        "rtx-5090",
        "rtx-pro-6000",
        "tpu-v6e",
        "gaudi3",
        "h20",
        "l20",
        "apple-m4-max",
        "apple-m3-ultra",
        "dgx-spark",
    ):
        assert name in DEVICES  # issue 58's


def test_blackwell_states_fp4_dense_and_nvl72_is_one_72_gpu_domain():
    """NVIDIA's per-GPU dense figures: GB200 fp4 20 PF per GPU with sparsity -> 10 000 dense,
    fp8 5 000, bf16 2 500; GB300's dense fp4 15 000 (Blackwell Ultra: dense given, not half);
    the rack joins 72 GPUs in one NVLink domain, an HGX board 8."""
    gb200, gb300, h100 = (rl.load_device(n) for n in ("gb200", "gb300", "h100-sxm"))
    assert [gb200.matrix_peak[d] / 1e12 for d in ("fp4", "fp8", "bf16")] == [10000, 5000, 2500]
    assert gb300.matrix_peak["fp4"] / 1e12 == 15000
    assert (gb200.interconnect_domain, gb300.interconnect_domain, h100.interconnect_domain) == (72, 72, 8)


def test_desktops_state_their_vendors_figures_and_dgx_spark_halves_its_sparse_fp4():
    """DGX Spark (GB10): NVIDIA's "1 PFLOP - theoretical FP4 TOPS using the sparsity feature"
    -> 500 dense; 128 GB LPDDR5X at 273 GB/s (256 bits x 8,533 MT/s); ~31 TFLOPS fp32 (Hot
    Chips 2025); 6,144 CUDA cores / 128 = 48 SMs; ConnectX-7 at 200 Gb/s = 25 GB/s a direction
    (NVIDIA's DGX Spark page and user guide, hardware overview). Apple's newsrooms: M4 Max up to
    128GB at 546GB/s, 40 GPU cores; M3 Ultra up to 512GB at 819GB/s (Mac Studio), 80 GPU cores.
    Apple publishes no TFLOPS: cores x 128 ALUs x 2 x clock (1.678 GHz for M4 Max, the M3
    Max's 1.398 GHz for M3 Ultra; hmc-tech's listings), fp16 at the fp32 rate, no fp8 or fp4."""
    spark, m4, m3 = (rl.load_device(n) for n in ("dgx-spark", "apple-m4-max", "apple-m3-ultra"))
    assert spark.matrix_peak["fp4"] / 1e12 == 1000 / 2
    assert spark.memory_capacity == 128 * 2**30 and spark.memory_bandwidth == 273e9
    assert spark.matrix_peak["fp32"] == spark.vector_peak["fp32"] == 31e12 and spark.compute_units == 6144 // 128
    assert spark.interconnect_bandwidth == 200e9 / 8 and "ConnectX-7" in spark.interconnect
    assert "UNCERTAIN" in spark.notes and "fp6" in spark.notes  # derived fp8/bf16 said so; fp6 left out
    assert (m4.memory_capacity, m4.memory_bandwidth, m4.compute_units) == (128 * 2**30, 546e9, 40)
    assert (m3.memory_capacity, m3.memory_bandwidth, m3.compute_units) == (512 * 2**30, 819e9, 80)
    for device, cores, ghz in ((m4, 40, 1.678), (m3, 80, 1.398)):
        assert device.matrix_peak["fp32"] == pytest.approx(cores * 128 * 2 * ghz * 1e9, rel=0.005)
        assert device.matrix_peak["fp16"] == device.matrix_peak["fp32"] and "UNCERTAIN" in device.notes
        assert not {"fp8", "fp4", "int8"} & set(device.matrix_peak) and device.interconnect is None


def test_tensor_parallelism_stays_within_the_interconnect_domain():
    with pytest.raises(rl.RidgelineError, match="tp=16 is more than the 8 devices one NVLink 4 domain of h100-sxm"):
        rl.analyze("llama-3-70b", "h100-sxm", tp=16)
    with pytest.raises(rl.RidgelineError, match="tp=80 is more than the 72 devices"):
        rl.analyze("llama-3-70b", "gb200", tp=80)
    wide = rl.analyze("llama-3-70b", "gb200", tp=16)  # one all-reduce domain past 8
    assert wide.plan.tp == 16 and "attn_allreduce" in wide.decode.names
    assert rl.analyze("llama-3-70b", "l40s", tp=16).plan.tp == 16  # the domain unstated: not checked


@pytest.mark.parametrize("name", DEVICES)
def test_every_device_loads_with_sources(name):
    d = rl.load_device(name)
    assert d.name == name
    assert d.sources and all(s.startswith("http") for s in d.sources)
    assert d.memory_bandwidth > 1e9 and d.memory_capacity > 1e9
    # dense peaks: no device here does more than ~5 PFLOP/s dense fp16
    assert all(v < 5e15 for k, v in d.matrix_peak.items() if k in ("fp16", "bf16"))


def test_seed_paper_a6000(a6000):
    assert a6000.matrix_peak["fp16"] == 155e12
    assert a6000.matrix_peak["int8"] == 310e12
    assert a6000.memory_bandwidth == 768e9
    assert a6000.memory_capacity == 48 * 2**30


def test_h100_has_no_int4_units():
    assert "int4" not in rl.load_device("h100-sxm").matrix_peak


@pytest.mark.parametrize("name", MODELS)
def test_every_model_loads(name):
    m = rl.load_model(name)
    assert m.num_heads % m.num_kv_heads == 0
    assert m.head_dim > 0 and m.num_layers > 0


def test_attention_kinds():
    kinds = {n: rl.load_model(n).attention_kind for n in ("llama-2-7b", "llama-3-8b", "falcon-7b")}
    assert kinds == {"llama-2-7b": "MHA", "llama-3-8b": "GQA", "falcon-7b": "MQA"}
    opt = rl.load_model("opt-6.7b")
    assert (opt.norm, opt.hidden_act, opt.gated_mlp, opt.rotary) == ("layernorm", "relu", False, False)
    gptj = rl.load_model("gpt-j-6b")
    assert (gptj.hidden_size, gptj.num_layers, gptj.intermediate_size) == (4096, 28, 16384)


def test_config_errors():
    with pytest.raises(UnsupportedArchitectureError, match="supported: .*llama"):
        rl.ModelConfig.from_hf_config({"model_type": "t5"})
    with pytest.raises(InvalidConfigError, match="not a multiple"):
        rl.ModelConfig.from_hf_config(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 6,
                "num_key_value_heads": 4,
                "num_hidden_layers": 1,
                "vocab_size": 10,
            }
        )


def test_device_schema_errors():
    base = {
        "name": "x",
        "vendor": "v",
        "kind": "gpu",
        "memory_capacity_gib": 8,
        "memory_bandwidth_gb_s": 100,
        "matrix_peak_tops": {"fp16": 10},
        "sources": ["http://x"],
    }
    assert device_from_dict(base).memory_bandwidth == 100e9
    with pytest.raises(rl.RidgelineError, match="'kind' must be one of"):
        device_from_dict({**base, "kind": "fpga"})
    with pytest.raises(rl.RidgelineError, match="must be a positive number"):
        device_from_dict({**base, "memory_bandwidth_gb_s": -1})
    with pytest.raises(rl.RidgelineError, match="unknown data types"):
        device_from_dict({**base, "matrix_peak_tops": {"fp12": 1}})
    with pytest.raises(rl.RidgelineError, match="'derived_rates' names fp8, not in 'matrix_peak_tops'"):
        device_from_dict({**base, "derived_rates": ["fp16", "fp8"]})
    assert device_from_dict({**base, "derived_rates": ["fp16"]}).derived_rates == ("fp16",)


def test_cpu_peak_estimate():
    """Zen 4: two 256-bit FMA pipes -> 32 fp32 ops/cycle; VDPBF16PS doubles it. Zen 5: 512-bit."""
    zen4 = cpu_flops_per_cycle({"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"}, "AuthenticAMD")
    assert zen4 == {"fp32": 32.0, "bf16": 64.0, "int8": 128.0}
    zen5 = cpu_flops_per_cycle({"avx2", "fma", "avx512f", "avx512_bf16"}, "AuthenticAMD", 26)
    assert zen5 == {"fp32": 64.0, "bf16": 128.0}  # two full 512-bit FMA pipes
    spr = cpu_flops_per_cycle({"avx2", "fma", "avx512f", "amx_bf16", "amx_int8"}, "GenuineIntel")
    assert spr["fp32"] == 64.0 and spr["bf16"] == 1024.0


@pytest.mark.slow
def test_host_is_detected():
    host = rl.load_device("host")
    assert host.name == "host" and host.memory_bandwidth > 0
    assert "fp32" in host.matrix_peak


# --- catalog and input nits (issue 26 item 7) ----------------------------------------------


def test_h200_l2_is_what_pytorch_reports():
    """torch.cuda.get_device_properties().L2_cache_size on an H200 is 62,914,560 B = 60 MiB
    (the committed H200 profile records it); the catalog said 50."""
    from ridgeline.io.catalog import PROFILES_DIR
    from ridgeline.io.files import read_yaml

    measured = read_yaml(PROFILES_DIR / "cuda-nvidia-h200.yaml")["meta"]["l2_bytes"]
    assert measured == 62_914_560 == rl.load_device("h200").l2_bytes == 60 * 2**20


def test_b200_notes_give_one_fp32_vector_rate():
    """The notes gave 75 TFLOPS (the YAML's figure) and then 'fp32 vector 80 TFLOPS'."""
    b200 = rl.load_device("b200")
    assert b200.vector_peak["fp32"] == 75e12
    assert "fp32 vector 80" not in b200.notes


def test_b200_prices_16_bit_element_wise_ops_at_its_16_bit_rate():
    """Issue 26 item 7: b200 had no bf16 vector rate, so bf16 element-wise ops fell back to
    fp32's 75 TFLOPS. NVIDIA publishes no non-tensor 16-bit B200 rate; the cited hmc-tech
    listing gives 150.04 TFLOPS for fp16 and bf16 (2 x fp32, Hopper's ratio), said so in the
    notes."""
    b200 = rl.load_device("b200")
    assert b200.vector_peak_for("bf16") == b200.vector_peak_for("fp16") == 150e12 == 2 * b200.vector_peak["fp32"]
    assert "NVIDIA publishes no such B200 rate" in b200.notes and "hmc-tech" in b200.notes


def test_reserve_beyond_the_device_and_fractional_units_are_refused(tmp_path):
    """runtime_reserve_gib 100 on an 80 GiB device left -28 GiB usable and exited 0;
    compute_units 13.7 was truncated to 13. Both: one line, exit 2."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    base = {
        "name": "x",
        "vendor": "v",
        "kind": "gpu",
        "memory_capacity_gib": 80,
        "memory_bandwidth_gb_s": 100,
        "matrix_peak_tops": {"fp16": 10},
        "sources": ["http://x"],
    }
    assert device_from_dict({**base, "runtime_reserve_gib": 79.5, "compute_units": 14}).compute_units == 14
    with pytest.raises(rl.RidgelineError, match=r"'runtime_reserve_gib' \(100\) must be below"):
        device_from_dict({**base, "runtime_reserve_gib": 100})
    with pytest.raises(rl.RidgelineError, match="'compute_units' must be a whole number, got 13.7"):
        device_from_dict({**base, "compute_units": 13.7})
    with pytest.raises(rl.RidgelineError, match="'interconnect_domain_devices' must be a whole number, got 8.5"):
        device_from_dict({**base, "interconnect_domain_devices": 8.5})
    spec = tmp_path / "big-reserve.yaml"
    spec.write_text("\n".join(f"{k}: {v}" for k, v in {**base, "runtime_reserve_gib": 100}.items()) + "\n")
    out = CliRunner().invoke(app, ["analyze", "llama-2-7b", "-H", str(spec)])
    assert out.exit_code == 2 and "runtime_reserve_gib" in out.output


# --- YAML reading (libyaml's loader; issue 30's speed items) ---------------------------------


@pytest.mark.slow
def test_read_yaml_gives_what_safe_load_gives_for_every_committed_file():
    """``read_yaml`` parses with libyaml's safe loader where PyYAML has it: the same values as
    ``yaml.safe_load`` for every device and profile."""
    import yaml

    from ridgeline.io.catalog import HARDWARE_DIR, PROFILES_DIR
    from ridgeline.io.files import read_yaml

    files = [*sorted(HARDWARE_DIR.glob("*.yaml")), *sorted(PROFILES_DIR.glob("*.yaml"))]
    assert len(files) > 20
    for path in files:
        assert read_yaml(path) == yaml.safe_load(path.read_text()), path


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: [1, 2", "malformed YAML at line 1: expected ',' or ']', but got '<stream end>'"),
        ("name: x\n  kind: [gpu", "malformed YAML at line 2: mapping values are not allowed here"),
    ],
)
def test_malformed_yaml_keeps_pyyaml_s_own_message(text, line):
    """libyaml words its errors otherwise (and puts the first at line 2): the message quoted is
    PyYAML's, as before."""
    from ridgeline.errors import InvalidSpecError
    from ridgeline.io.files import parse_yaml

    with pytest.raises(InvalidSpecError) as err:
        parse_yaml(text, "bad.yaml")
    assert str(err.value).endswith(line)


def test_a_missing_mlp_width_is_an_error_but_where_the_architecture_defaults_it(tmp_path):
    """Issue 59 item 1: a llama config without intermediate_size was priced at 4 x hidden,
    silently; only falcon's and GPT-J's published configs omit it (their modeling files take
    4 x hidden_size), and the answer says so."""
    from typer.testing import CliRunner

    from ridgeline.cli import app

    llama = json.loads((MODELS_DIR / "llama-2-7b.json").read_text())
    del llama["intermediate_size"]
    (tmp_path / "config.json").write_text(json.dumps(llama))
    bad = CliRunner().invoke(app, ["analyze", "--config", str(tmp_path / "config.json"), "-H", "a6000"])
    assert bad.exit_code == 2 and bad.output == (
        f"error: {tmp_path / 'config.json'}: missing 'intermediate_size' "
        "(also accepted: ffn_dim, n_inner, ffn_hidden_size)\n"
    )
    gptj = CliRunner().invoke(app, ["analyze", "gpt-j-6b", "-H", "a6000"])
    assert gptj.exit_code == 0
    assert "warning: no intermediate_size in the config: gptj's MLP is 4 x hidden_size = 16384 wide" in gptj.output
    assert rl.resolve("falcon-7b", "a6000").notes[-1] == (
        "no intermediate_size in the config: falcon's MLP is 4 x hidden_size = 18176 wide"
    )
