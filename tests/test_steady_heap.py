"""The timing harness puts glibc's malloc in its steady state before any case (``steady_heap``):
a 16 MiB temporary then comes from the heap, as in a process that has run a model's forward,
instead of fresh pages faulted in on every call as in a fresh process."""

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import ctypes, sys
import torch

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "steady":
    from kernels.bench.suite import steady_heap
    print(steady_heap())
else:
    print("fresh")
for mib in (16, 40):
    before = libc.mallinfo2().hblkhd
    block = torch.empty(mib * 2**20, dtype=torch.uint8)
    print(libc.mallinfo2().hblkhd - before)
    del block
"""


def mmapped(mode: str) -> tuple[str, list[int]]:
    """What steady_heap said, and the bytes newly mmapped by a 16 MiB and a 40 MiB tensor."""
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    said, *sizes = out.stdout.split("\n")[:3]
    return said, [int(s) for s in sizes]


glibc = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or tuple(map(int, platform.libc_ver()[1].split("."))) < (2, 33),
    reason="mallinfo2 needs glibc 2.33 or later",
)


@glibc
@pytest.mark.slow
def test_a_fresh_process_maps_a_16_mib_temporary_afresh():
    _, (small, large) = mmapped("fresh")
    assert small >= 16 * 2**20 and large >= 40 * 2**20


@glibc
@pytest.mark.slow
def test_after_steady_heap_a_16_mib_temporary_comes_from_the_heap_and_40_mib_is_still_mapped():
    said, (small, large) = mmapped("steady")
    assert said == "glibc: mmap threshold raised to its 32 MiB maximum before timing"
    assert small == 0
    assert large >= 40 * 2**20  # above glibc's 32 MiB maximum: first-touched, as the engine prices it


def test_the_cpu_run_config_records_the_heap_state():
    from kernels.bench.suite import setup

    cfg = setup("cpu", 1)
    assert cfg.to_dict()["heap"] == cfg.heap != ""
