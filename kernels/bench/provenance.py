"""Provenance of a measurement: which device, software and code produced a number.

Every result written by ``kernels`` carries the dict ``collect`` returns as its ``meta``
block. GPU clocks, power and temperature come from pynvml (read only; clocks are never set).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import platform
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from ridgeline.engine.device import DeviceSpec
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import ROOT
from ridgeline.io.host import cpu_name, cpu_signature
from ridgeline.io.resolve import measuring_device


def read_result(path: Path, what: str, keys: tuple[str, ...] = ("meta",)) -> dict[str, Any]:
    """A result file a measure-nothing command reads (a validation snapshot, an e2e or a
    serving run): its JSON, or one line saying why it is not one."""
    path = Path(path)
    if not path.is_file():
        raise RidgelineError(f"no {what} at {path}")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RidgelineError(f"{path} is not a {what} (malformed JSON: {err})") from None
    missing = [k for k in keys if not isinstance(data, dict) or k not in data]
    if missing:
        raise RidgelineError(f"{path} is not a {what} (no {', '.join(missing)})")
    return data


def read_results(path: Path) -> dict[str, Any]:
    """Every JSON file of a GPU run (``kernels.gpu.run``): from its ``results.tar.gz`` or an
    unpacked folder."""
    path = Path(path)
    if path.is_dir():
        return {str(p.relative_to(path)): json.loads(p.read_text()) for p in sorted(path.rglob("*.json"))}
    if not path.is_file():
        raise RidgelineError(f"no run results at {path}: give OUT/results.tar.gz or its folder")
    try:
        with tarfile.open(path) as tar:
            return {
                m.name: json.load(io.BytesIO(tar.extractfile(m).read()))
                for m in tar.getmembers()
                if m.isfile() and m.name.endswith(".json")
            }
    except (tarfile.TarError, json.JSONDecodeError, OSError) as err:
        why = str(err).splitlines()[0].rstrip(":")  # tarfile lists every method it tried, a line each
        raise RidgelineError(
            f"{path}: not a run's results archive ({why}); give OUT/results.tar.gz or its folder"
        ) from None


def git_commit(root: Path = ROOT) -> str:
    """``$RIDGELINE_COMMIT`` when the copier of the tree set it (a GPU machine's copy may
    carry a stale ``.git``: seen on 2026-11-26, whose HEAD was the session's first commit),
    else HEAD's hash, '+dirty' when the tree has uncommitted changes; 'none' outside git."""
    if os.environ.get("RIDGELINE_COMMIT"):
        return os.environ["RIDGELINE_COMMIT"]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return "none"
    try:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        dirty = False
    return head + ("+dirty" if dirty else "")


def measured_key(device: str, threads: int | None = None) -> str:
    """File stem of the device measured here, as 'ridgeline calibrate' names its profile:
    'cuda-nvidia-h100-80gb-hbm3', or 'cpu-<model>-f<family>m<model>-<threads>t'."""
    from ridgeline.io.host import cpu_key_name
    from ridgeline.io.profile import device_key

    if device.startswith("cuda"):
        import torch

        return device_key("cuda", torch.cuda.get_device_name(device))
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    return device_key("cpu", cpu_key_name(), threads)


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (platform.processor() elsewhere)."""
    return cpu_name()


def nvml_state(index: int = 0) -> dict[str, Any]:
    """SM/memory clocks (MHz), power (W), temperature (C) and driver of GPU ``index``;
    {} when pynvml or the driver is missing."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        driver = pynvml.nvmlSystemGetDriverVersion()
        state = {
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        }
    except Exception:  # noqa: BLE001 - any NVML failure means "no readings", never a crash
        return {}
    return state


def _loadavg() -> list[float] | None:
    try:
        import os

        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def device_name(device: str) -> str:
    """'cpu' -> the CPU model; 'cuda' -> the GPU's name as torch reports it."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return cpu_model()


def datasheet_device(device: str, threads: int | None = None, hardware: str | None = None) -> DeviceSpec:
    """The datasheet device a measurement here is predicted with
    (``ridgeline.io.resolve.measuring_device``): ``hardware`` when it names one, else the
    detected CPU for ``threads`` (torch's when None), or the catalog GPU of the driver's name."""
    import torch

    if device.startswith("cuda"):
        return measuring_device("cuda", gpu_name=torch.cuda.get_device_name(device), hardware=hardware)
    return measuring_device("cpu", threads or torch.get_num_threads(), hardware=hardware)


def collect(device: str, threads: int | None = None) -> dict[str, Any]:
    """The ``meta`` block: device, software versions, threads, clocks, date, commit."""
    import ridgeline

    meta: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "ridgeline": ridgeline.__version__,
        "python": platform.python_version(),
        "device_kind": device,
        "device": device_name(device),
        "cpu": cpu_model(),
        "cpu_signature": cpu_signature(),
        "threads": threads,
        "loadavg": _loadavg(),  # other processes competing for the cores while measuring
    }
    try:
        import torch

        meta["torch"] = str(torch.__version__)
        if device == "cuda":
            props = torch.cuda.get_device_properties(0)
            meta.update(
                cuda=str(torch.version.cuda),
                cudnn=torch.backends.cudnn.version(),
                capability=f"{props.major}.{props.minor}",
                multiprocessors=props.multi_processor_count,
                l2_bytes=props.L2_cache_size,
                memory_bytes=props.total_memory,
            )
    except ImportError:
        meta["torch"] = None
    if device == "cuda":
        meta["nvml"] = nvml_state()
    return meta
