"""The resolver: one Deployment from names and profiles; a profile only on its own device,
or transferred when asked (issue 12.1)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

import ridgeline as rl
from ridgeline.cli import app
from ridgeline.errors import ProfileMismatchError, RidgelineError
from ridgeline.io.catalog import HARDWARE_DIR, PROFILES_DIR
from ridgeline.io.profile import load_profile
from ridgeline.io.resolve import load_device, resolve, resolve_each

H100 = str(PROFILES_DIR / "historical/cuda-nvidia-h100-80gb-hbm3-2026-11-23-eager.yaml")  # eager-timed
CPU = str(PROFILES_DIR / "cpu-amd-epyc-1t.yaml")
runner = CliRunner()


def test_resolve_holds_everything_the_engine_needs():
    d = resolve("llama-2-7b", "h100-sxm", dtype="bf16", tp=2, profile=H100)
    assert (d.model.name, d.device.name, d.settings.tp, d.plan.tp, d.mode) == (
        "llama-2-7b",
        "h100-sxm",
        2,
        2,
        "calibrated",
    )
    # the engine loads nothing more: the same numbers as the name-based wrapper
    by_name = rl.analyze("llama-2-7b", "h100-sxm", batch=4, generate=64, dtype="bf16", tp=2, profile=H100)
    assert rl.analyze(d, batch=4, generate=64).to_dict() == by_name.to_dict()
    with pytest.raises(RidgelineError, match="already holds"):
        rl.analyze(d, "a6000")


def test_settings_link_overrides_and_back():
    d = resolve("llama-2-7b", "h100-sxm", link_bw_gb_s=100)
    assert d.ceilings.link_bandwidth == 100e9
    # 450 GB/s per direction: hardware/h100-sxm.yaml (NVLink 4)
    assert d.with_settings(rl.Settings()).ceilings.link_bandwidth == 450e9


@pytest.mark.parametrize("device", ["a6000", "a100-80gb", "h100-pcie", "epyc-9654"])
def test_a_gpu_profile_elsewhere_is_refused(device):
    with pytest.raises(ProfileMismatchError, match=f"measured on h100-sxm, not {device}"):
        resolve("llama-2-7b", device, profile=H100)


def test_a_cpu_profile_on_a_gpu_is_refused():
    with pytest.raises(ProfileMismatchError, match="measured on the CPU 'AMD EPYC'"):
        resolve("llama-2-7b", "a6000", profile=CPU)


def test_transfer_needs_one_architecture():
    with pytest.raises(ProfileMismatchError) as err:
        resolve("llama-2-7b", "a100-80gb", profile=H100, transfer=True)
    assert not err.value.transferable


def test_transfer_applies_measured_fractions_to_the_target_datasheet():
    """H100 profile: 3018.842 GB/s of the SXM's 3350 datasheet (0.9011); bf16 675.78749 of
    989.4 TOPS (0.6830). On the H200 (4800 GB/s, bf16 989.4: hardware/h200.yaml) that is
    4800 x 0.9011 = 4325.5 GB/s and 675.79 TOPS; efficiencies and overheads unchanged."""
    d = resolve("llama-2-7b", "h200", profile=H100, transfer=True)
    own = resolve("llama-2-7b", "h100-sxm", profile=H100)
    h200 = load_device("h200")
    assert d.mode == "transferred" and d.ceilings.device == "h200"
    assert d.ceilings.bandwidth == pytest.approx(3018.842e9 / 3350e9 * h200.memory_bandwidth)
    assert d.ceilings.bandwidth == pytest.approx(4325.5e9, rel=1e-4)
    assert d.ceilings.matrix_peak["bf16"] == pytest.approx(675.78749e12)
    assert d.ceilings.efficiency == own.ceilings.efficiency
    assert d.ceilings.overhead_s == own.ceilings.overhead_s
    assert d.ceilings.exp_rate == h200.exp_rate and d.ceilings.link_bandwidth == 450e9


def test_cli_refuses_another_devices_profile_in_one_line():
    result = runner.invoke(app, ["analyze", "llama-2-7b", "--hardware", "a6000", "--profile", CPU])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "measured on the CPU 'AMD EPYC' (host), not a6000" in result.output


def test_cli_transfer_is_labelled_everywhere():
    args = ["analyze", "llama-2-7b", "--hardware", "h200", "--profile", H100, "--generate", "8"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "--transfer" in refused.output
    table = runner.invoke(app, [*args, "--transfer"])
    assert table.exit_code == 0 and "llama-2-7b on h200 (transferred roofline)" in table.output
    data = json.loads(runner.invoke(app, [*args, "--transfer", "-f", "json"]).output)
    assert data["mode"] == "transferred"
    sweep = json.loads(
        runner.invoke(
            app, ["sweep", "llama-2-7b", "--hardware", "h200", "--profile", H100, "--transfer", "-f", "json"]
        ).output
    )
    assert sweep["mode"] == "transferred"


def test_speculative_keeps_the_profile():
    result = runner.invoke(
        app,
        ["analyze", "llama-2-13b", "--hardware", "h100-sxm", "--profile", H100, "--draft", "llama-2-7b", "-f", "json"],
    )
    data = json.loads(result.output)
    assert data["mode"] == data["speculative"]["mode"] == "calibrated"
    d = resolve("llama-2-13b", "h100-sxm", profile=H100)
    calibrated = rl.speculative(d, draft="llama-2-7b")
    spec = rl.speculative("llama-2-13b", "h100-sxm", "llama-2-7b")
    assert calibrated["target_step_s"] > spec["target_step_s"]  # measured roofs are lower


def test_compare_applies_the_profile_where_it_was_measured():
    rows = rl.compare(resolve_each("llama-2-7b", ["h100-sxm", "a6000"], [{}], profile=H100))
    assert list(rows["mode"]) == ["calibrated", "spec"]


ZEN3 = "AuthenticAMD 25/1: avx2 fma"


HOST = rl.io.host.detect_host(measure=False, gpu=False)


def cpu_host(name: str, signature: str):
    host = HOST
    return replace(host, extra={**host.extra, "cpu": name, "cpu_signature": signature})


def test_host_profile_from_another_cpu_warns():
    profile = load_profile(CPU)  # the committed one predates signatures
    d = resolve("qwen2-0.5b", cpu_host("Some Other CPU", ZEN3), dtype="fp32", profile=profile)
    assert d.mode == "calibrated"
    assert d.notes and "measured on the CPU 'AMD EPYC', this host's is 'Some Other CPU'" in d.notes[0]
    same = resolve("qwen2-0.5b", cpu_host("AMD EPYC", ZEN3), dtype="fp32", profile=profile)
    assert same.notes == (
        f"profile given profile records no CPU signature "
        "(calibrated before they were recorded), so it cannot be checked against "
        f"this host's ({ZEN3}); calibrate again to be sure its roofs hold here",
    )


def test_host_profile_from_a_cpu_of_another_signature_is_refused():
    """A VM shows Zen 3 and Zen 5 both as 'AMD EPYC': the signature tells them apart."""
    profile = load_profile(CPU)
    zen5 = "AuthenticAMD 26/2: avx2 fma avx512f avx512_bf16 avx512_vnni"
    signed = {**profile, "meta": {**profile["meta"], "cpu_signature": zen5}}
    assert resolve("qwen2-0.5b", cpu_host("AMD EPYC", zen5), dtype="fp32", profile=signed).notes == ()
    with pytest.raises(
        ProfileMismatchError,
        match=(
            r"^profile given profile was measured on another CPU \('AMD EPYC', AuthenticAMD 26/2: avx2 fma "
            r"avx512f avx512_bf16 avx512_vnni; this host's: AuthenticAMD 25/1: avx2 fma\), not this "
            r"host; analyse the host on that CPU with it, or calibrate this host$"
        ),
    ):
        resolve("qwen2-0.5b", cpu_host("AMD EPYC", ZEN3), dtype="fp32", profile=signed)


def test_cpu_signature_and_key_name_from_cpuinfo():
    from ridgeline.io.host import cpu_key_name, cpu_signature

    info = {
        "vendor_id": "GenuineIntel",
        "cpu family": "6",
        "model": "143",
        "model name": "Intel(R) Xeon(R) Platinum 8480+",
        "flags": "fpu sse avx2 fma avx512f avx512_bf16 avx512_vnni amx_tile amx_bf16 amx_int8",
    }
    assert cpu_signature(info) == ("GenuineIntel 6/143: avx2 fma avx512f avx512_bf16 avx512_vnni amx_bf16 amx_int8")
    assert cpu_key_name(info) == "Intel(R) Xeon(R) Platinum 8480+ f6m143"
    assert rl.io.profile.device_key("cpu", cpu_key_name(info), 1) == "cpu-intel-r-xeon-r-platinum-8480-f6m143-1t"


def test_a_profile_that_names_no_device_is_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("meta: {device: x}\nbandwidth_gb_s: 600\nmatrix_peak_tops: {fp16: 120}\n")
    with pytest.raises(RidgelineError, match="does not say which device"):
        resolve("llama-2-7b", "a6000", profile=path)


@pytest.mark.parametrize(
    "driver,catalog",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA RTX A6000", "a6000"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla T4", "t4"),
        ("NVIDIA GB10", "dgx-spark"),
        ("Some Future GPU", None),
    ],
)
def test_driver_names_come_from_the_device_files(driver, catalog):
    """The longest matching ``driver_names`` entry wins ('H100 PCIe' over 'H100')."""
    from ridgeline.io.hardware import catalog_name_for_gpu

    assert catalog_name_for_gpu(driver) == catalog


def test_transferred_and_speculative_output_match_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    from pathlib import Path

    schema = json.loads((Path(__file__).parent.parent / "docs" / "analysis.schema.json").read_text())
    result = runner.invoke(
        app,
        [
            "analyze",
            "llama-2-13b",
            "--hardware",
            "h200",
            "--profile",
            H100,
            "--transfer",
            "--draft",
            "llama-2-7b",
            "--generate",
            "8",
            "-f",
            "json",
        ],
    )
    data = json.loads(result.output)
    assert data["mode"] == data["speculative"]["mode"] == "transferred"
    jsonschema.validate(data, schema)


def test_the_dashboard_refuses_another_devices_profile_and_compare_labels_rows():
    pytest.importorskip("dash")
    from viewer import callbacks

    query = "?model=llama-2-7b&batch=1&seq_len=512&generate=16&profile=cuda-nvidia-h100-80gb-hbm3"
    out = callbacks.update_analyze("/", query + "&device=a6000", None)
    assert "measured on h100-sxm, not a6000" in out[0] and "--" not in out[0]
    ok = callbacks.update_analyze("/", query + "&device=h100-sxm", None)
    assert ok[0] == "" and "calibrated roofline" in ok[1]
    _, _, rows = callbacks.update_compare("/compare", query + "&devices=h100-sxm,a6000", None)
    assert [(r["device"], r["roofline"]) for r in rows] == [("h100-sxm", "calibrated"), ("a6000", "spec")]


def test_cli_warns_about_a_profile_from_another_cpu(monkeypatch):
    import ridgeline.io.host as hw

    monkeypatch.setattr(hw, "detect_host", lambda *a, **k: cpu_host("Some Other CPU", ZEN3))
    result = runner.invoke(
        app, ["analyze", "qwen2-0.5b", "--hardware", "host", "--dtype", "fp32", "--profile", CPU, "-f", "json"]
    )
    assert result.exit_code == 0
    assert result.stderr.startswith(f"warning: profile {CPU} was measured on the CPU 'AMD EPYC'")
    assert json.loads(result.stdout)["mode"] == "calibrated"


def test_cli_refuses_a_profile_from_a_cpu_of_another_signature(monkeypatch, tmp_path):
    import ridgeline.io.host as hw

    signed = tmp_path / "zen5.yaml"
    signed.write_text(
        open(CPU)
        .read()
        .replace("  cpu: AMD EPYC\n", "  cpu: AMD EPYC\n  cpu_signature: 'AuthenticAMD 26/2: avx512_bf16'\n")
    )
    monkeypatch.setattr(hw, "detect_host", lambda *a, **k: cpu_host("AMD EPYC", ZEN3))
    result = runner.invoke(
        app, ["analyze", "qwen2-0.5b", "--hardware", "host", "--dtype", "fp32", "--profile", str(signed)]
    )
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "another CPU ('AMD EPYC', AuthenticAMD 26/2" in result.output
    assert result.output.rstrip().endswith("or calibrate this host (ridgeline calibrate --device cpu)")


def test_transfer_across_architectures_says_they_differ():
    """The H100 profile (hopper) to an A100 (ampere) is refused, and the message says why."""
    with pytest.raises(
        ProfileMismatchError, match=r"measured on h100-sxm, not a100-80gb \(architectures differ: hopper, ampere\)"
    ):
        resolve("llama-2-7b", "a100-80gb", profile=H100, transfer=True)


def no_fp16(device):
    """The device without fp16 matrix units (as a CPU with AVX-512 BF16 but no FP16)."""
    from dataclasses import replace

    return replace(device, matrix_peak={k: v for k, v in device.matrix_peak.items() if k != "fp16"})


def test_a_device_without_fp16_units_defaults_to_bf16_and_says_so():
    d = resolve("llama-3.2-1b", no_fp16(load_device("a6000")))
    assert (d.settings.w_dtype, d.settings.a_dtype, d.settings.kv_dtype) == ("bf16", "bf16", "bf16")
    assert d.notes == ("dtype bf16: a6000 has no fp16 matrix units, so bf16 is its default (set with --dtype)",)
    # a type the user gives stays theirs; the others take the device's default
    d = resolve("llama-3.2-1b", no_fp16(load_device("a6000")), w_dtype="int8")
    assert (d.settings.w_dtype, d.settings.a_dtype, d.settings.kv_dtype) == ("int8", "bf16", "bf16")
    # all three given, or a dtype: nothing to say
    assert resolve("llama-3.2-1b", no_fp16(load_device("a6000")), dtype="fp32").notes == ()


def test_a_device_with_fp16_units_keeps_fp16_without_a_note():
    d = resolve("llama-3.2-1b", "a6000")
    assert (d.settings.w_dtype, d.settings.kv_dtype, d.notes) == ("fp16", "fp16", ())


def test_cli_analyses_a_device_without_fp16_in_bf16(tmp_path):
    import yaml

    raw = yaml.safe_load((HARDWARE_DIR / "a6000.yaml").read_text())
    raw["matrix_peak_tops"].pop("fp16")
    path = tmp_path / "no-fp16.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = runner.invoke(app, ["analyze", "llama-3.2-1b", "--hardware", str(path), "-f", "json"])
    assert result.exit_code == 0, result.output
    assert "warning: dtype bf16: " in result.stderr and "has no fp16 matrix units" in result.stderr
    assert json.loads(result.stdout)["workload"]["w_dtype"] == "bf16"
