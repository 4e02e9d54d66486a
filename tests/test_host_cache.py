"""The detected CPU's caches come from sysfs (issue 30 item 9: ``hardware show host`` said
'L1/shared per unit 0 KiB' where sysfs says 32K). Fake sysfs trees in a temporary folder,
with the formats the kernel writes and some it does not."""

from __future__ import annotations

import pytest

from ridgeline.engine.units import KIB, MIB
from ridgeline.io import host
from ridgeline.report import device_rows

# cpu0/cache of an AMD EPYC (Zen 4) as Linux shows it: L1d, L1i, L2, L3
EPYC = {
    "index0": {"level": "1", "type": "Data", "size": "32K"},
    "index1": {"level": "1", "type": "Instruction", "size": "32K"},
    "index2": {"level": "2", "type": "Unified", "size": "1024K"},
    "index3": {"level": "3", "type": "Unified", "size": "32768K"},
}


def sysfs(root, indexes):
    """A cpu0/cache folder holding ``indexes`` (index -> {file: text}); returns the folder."""
    cache = root / "cpu0" / "cache"
    for name, files in indexes.items():
        (cache / name).mkdir(parents=True)
        for file, text in files.items():
            (cache / name / file).write_text(text + "\n")
    return cache


def test_an_epyc_tree_gives_its_l1_data_cache_and_l3(tmp_path):
    caches = host.cache_sizes(sysfs(tmp_path, EPYC))
    assert caches == {
        (1, "Data"): 32 * KIB,
        (1, "Instruction"): 32 * KIB,
        (2, "Unified"): MIB,
        (3, "Unified"): 32 * MIB,
    }
    assert host.l1_data_bytes(caches) == 32 * KIB  # the data cache, not the instruction cache
    assert host.llc_bytes(caches) == 32 * MIB


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("32K", 32 * KIB),
        ("48K\n", 48 * KIB),
        ("1M", MIB),
        ("2m", 2 * MIB),
        ("1024KB", MIB),
        ("32768", 32768.0),  # a bare number is bytes
        ("", None),
        ("K", None),
        ("lots", None),
        ("0K", None),
        ("-32K", None),
        ("infK", None),
    ],
)
def test_cache_sizes_are_read_in_any_unit_or_refused(text, size):
    assert host.cache_size_bytes(text) == size


def test_missing_and_malformed_files_leave_that_cache_out(tmp_path):
    tree = {
        "index0": {"level": "1", "type": "Data"},  # no size
        "index1": {"level": "one", "type": "Instruction", "size": "32K"},  # level not a number
        "index2": {"level": "2", "type": "Unified", "size": "big"},
        "index3": {"type": "Unified", "size": "8M"},  # no level
    }
    caches = host.cache_sizes(sysfs(tmp_path, tree))
    assert caches == {}
    assert host.l1_data_bytes(caches) == 0.0
    assert host.llc_bytes(caches) == 0.0


def test_no_cache_folder_at_all_is_unknown(tmp_path):
    assert host.cache_sizes(tmp_path / "cpu0" / "cache") == {}


def test_a_unified_l1_stands_for_the_data_cache_and_l2_is_last_without_l3(tmp_path):
    tree = {
        "index0": {"level": "1", "type": "Unified", "size": "64K"},
        "index1": {"level": "2", "type": "Unified", "size": "2048K"},
    }
    caches = host.cache_sizes(sysfs(tmp_path, tree))
    assert host.l1_data_bytes(caches) == 64 * KIB
    assert host.llc_bytes(caches) == 2 * MIB


def test_hardware_show_host_shows_the_l1_data_cache(tmp_path, monkeypatch):
    sysfs(tmp_path, EPYC)
    monkeypatch.setattr(host, "CPU_SYSFS", tmp_path)
    device = host.detect_host(measure=False, gpu=False)
    rows = device_rows(device)
    assert "L1/shared per unit     32 KiB" in rows
    assert "L2 / last-level cache  32 MiB" in rows
    assert "caches: sysfs" in device.sources[0]


def test_a_host_recorded_before_caches_were_read_is_detected_again(tmp_path, monkeypatch):
    """The caches are part of the host's fingerprint: another cache tree is another host,
    so a record kept from before (its L1 0 KiB) is not read back."""
    sysfs(tmp_path / "a", EPYC)
    sysfs(tmp_path / "b", {**EPYC, "index0": {"level": "1", "type": "Data", "size": "48K"}})
    info = host._cpuinfo()
    monkeypatch.setattr(host, "CPU_SYSFS", tmp_path / "a")
    first = host._fingerprint(info)
    monkeypatch.setattr(host, "CPU_SYSFS", tmp_path / "b")
    assert host._fingerprint(info) != first
