"""The one GPU run: every stage of :mod:`kernels.gpu.plan` in priority order, each under its
own time cap and what is left of the whole budget, each writing straight into ``OUT/<stage>``.

After each stage ``OUT`` is repacked: the stage's files (and a ``stage.json`` with its
commands, exit code, seconds and the GPU's clocks before and after) go into
``OUT/results.tar.gz``, rewritten whole and renamed into place, and the stage folder is
removed. ``OUT/manifest.json`` (rewritten the same way) says which stages finished, and
``OUT/run.log`` holds everything printed. So ``OUT`` never holds more than four entries, at
most two folders deep, and a kill at any moment loses only the stage in flight. Nothing is
written into the checkout: user data goes to a temporary ``RIDGELINE_HOME``.

    bash kernels/gpu/run.sh OUT                     # on the GPU machine
    STAGES=draw,transfer bash kernels/gpu/run.sh OUT2   # only the stages a cut run lost
    SIZES=cpu-test bash kernels/gpu/run.sh OUT      # the same plan on a CPU, tiny sizes
    BUDGET_S=540 bash kernels/gpu/run.sh OUT        # another budget than the preset's 480 s
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernels.gpu.plan import CASE_BUDGET, Stage, sizes, stages
from ridgeline.errors import RidgelineError
from ridgeline.io.catalog import REPORTS_DIR
from ridgeline.io.files import write_atomic

ARCHIVE, MANIFEST, LOG = "results.tar.gz", "manifest.json", "run.log"
OTHER_GPU = {"cuda-nvidia-h200": "cuda-nvidia-h100-80gb-hbm3", "cuda-nvidia-h100-80gb-hbm3": "cuda-nvidia-h200"}


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


def pack(out: Path, folder: Path, kept: Path) -> list[str]:
    """Add ``folder``'s files to ``OUT/results.tar.gz`` under ``<folder name>/`` (the archive
    rewritten to a temporary name and renamed: a kill leaves the old or the new archive,
    never half of one), then move the folder out of ``OUT`` into ``kept`` (later stages
    read it there: the draw, this run's profile). Returns the names added."""
    archive, members = out / ARCHIVE, {}
    if archive.is_file():
        with tarfile.open(archive) as tar:
            members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    added = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = f"{folder.name}/{path.relative_to(folder)}"
        members[name] = path.read_bytes()
        added.append(name)
    tmp = out / (ARCHIVE + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, archive)
    kept.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(kept / folder.name, ignore_errors=True)
    shutil.move(str(folder), str(kept / folder.name))
    return added


def gpu_state(device: str) -> dict[str, Any]:
    if device != "cuda":
        return {}
    from kernels.bench.provenance import nvml_state

    return nvml_state()


def run_command(cmd: Sequence[str], seconds: float, log) -> int:
    """One command in this process group (a kill of the run ends it too), stopped with
    SIGINT, then SIGKILL, when its seconds are up; 124 when it was stopped."""
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    deadline = time.monotonic() + seconds
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    stopped = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 and not stopped:
            log(f"time cap reached: stopping {cmd[3] if len(cmd) > 3 else cmd[0]}")
            proc.send_signal(signal.SIGINT)
            deadline, stopped = time.monotonic() + 10, True
            continue
        if left <= 0:
            proc.kill()
            break
        if sel.select(timeout=min(left, 1.0)):
            line = proc.stdout.readline()
            if not line:
                break
            log(line.rstrip("\n"))
    proc.wait()
    return 124 if stopped else proc.returncode


def run_stage(stage: Stage, out: Path, kept: Path, seconds: float, device: str, log) -> dict[str, Any]:
    folder = out / stage.name
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "stage": stage.name,
        "why": stage.why,
        "started": now(),
        "cap_s": stage.cap_s,
        "allowed_s": round(seconds, 1),
        "commands": [list(c) for c in stage.commands],
        "gpu_before": gpu_state(device),
        "commit": commit(),
    }
    start, rc = time.monotonic(), 0
    for cmd in stage.commands:
        left = seconds - (time.monotonic() - start)
        if left <= 5:
            rc = 124
            break
        cmd = [part.replace(CASE_BUDGET, str(max(int(left - stage.setup_s), 10))) for part in with_profile(cmd, log)]
        record.setdefault("ran", []).append(cmd)  # as run: budget filled in, profile checked
        log(f"== {stage.name}: {' '.join(cmd)} (up to {left:.0f} s)")
        rc = run_command(cmd, left, log) or rc
    record.update(
        rc=rc,
        seconds=round(time.monotonic() - start, 1),
        ended=now(),
        gpu_after=gpu_state(device),
        status="ok" if rc == 0 else "cut" if rc == 124 else "failed",
    )
    write_json(folder / "stage.json", record)
    record["files"] = pack(out, folder, kept)
    return record


def with_profile(cmd: Sequence[str], log) -> list[str]:
    """The command without ``--profile P`` when P does not exist (this run's calibration
    was cut, or not run): it then falls back to the device's committed profile, as any
    measuring command does, and names the profile it used."""
    cmd = list(cmd)
    if "--profile" in cmd:
        at = cmd.index("--profile")
        if not Path(cmd[at + 1]).is_file():
            log(
                f"no profile at {cmd[at + 1]}: running without --profile (the command then uses the "
                "device's committed profile, and names it, or predicts from the datasheet alone)"
            )
            del cmd[at : at + 2]
    return cmd


def commit() -> str:
    from kernels.bench.provenance import git_commit

    return git_commit()


def device_key(device: str, threads: Sequence[str]) -> str:
    from kernels.bench.provenance import measured_key
    from kernels.e2e.e2e import resolve_device

    resolve_device(device)  # one line and exit 2 when the GPU is not there
    return measured_key(device, int(threads[1]) if threads else None)


def device_timed(path: Path) -> bool:
    """A committed profile timed from the device's side (``ridgeline.io.profile.timing_of``)."""
    from ridgeline.io.profile import load_profile, timing_of

    return path.is_file() and timing_of(load_profile(path), str(path)) == "device"


def plan_for(out: Path, kept: Path, preset: str, order: str = "auto") -> tuple[dict[str, Any], list[Stage]]:
    s = sizes(preset)
    key = device_key(s["device"], s["threads"])
    committed = REPORTS_DIR / "profiles" / f"{key}.yaml"
    profiled = device_timed(committed) if order == "auto" else order == "profiled"
    other = REPORTS_DIR / "profiles" / f"{OTHER_GPU.get(key, '')}.yaml"
    other_timed = device_timed(other)  # an eager-timed profile prices no graph decode
    plan = stages(
        s,
        str(out),
        profiled,
        str(committed) if committed.is_file() else None,
        str(other) if other_timed else None,
        str(kept),
    )
    return {
        "sizes": preset,
        "device_key": key,
        "profiled": profiled,
        "profile": str(committed) if committed.is_file() else None,
        "other_profile": str(other) if other_timed else None,
        "no_transfer": None
        if other_timed
        else f"no device-time profile of the other GPU ({other.name}): nothing to transfer",
    }, plan


def run(out: Path, preset: str = "gpu", only: Sequence[str] = (), order: str = "auto") -> int:
    """Check everything the caller gave (sizes, stages, budget, the GPU) before ``OUT`` is
    made: a refused run leaves nothing behind."""
    kept = Path(os.environ.get("RIDGELINE_KEPT") or Path(tempfile.gettempdir()) / f"ridgeline-run-{os.getpid()}")
    s = dict(sizes(preset))
    s["budget_s"] = budget_seconds(os.environ.get("BUDGET_S"), s["budget_s"])
    info, plan = plan_for(out, kept, preset, order)
    unknown = set(only) - {st.name for st in plan}
    if unknown:
        raise RidgelineError(
            f"STAGES names {', '.join(sorted(unknown))}, not stages of this "
            f"run; use: {', '.join(st.name for st in plan)}"
        )
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOG, "a", buffering=1) as logfile:

        def log(line: str) -> None:
            print(line, flush=True)
            logfile.write(line + "\n")

        return run_logged(out, s, info, [st for st in plan if not only or st.name in only], kept, log)


def run_logged(out: Path, s: dict[str, Any], info: dict[str, Any], plan: Sequence[Stage], kept: Path, log) -> int:
    os.environ.setdefault("RIDGELINE_HOME", tempfile.mkdtemp(prefix="ridgeline-home-"))
    os.environ["PYTHONUNBUFFERED"] = "1"
    manifest = {
        "started": now(),
        "commit": commit(),
        **info,
        "kept": str(kept),
        "budget_s": s["budget_s"],
        "gpu": gpu_state(s["device"]),
        "python": sys.version.split()[0],
        "order": [st.name for st in plan],
        "stages": [],
    }
    write_json(out / MANIFEST, manifest)
    start, done = time.monotonic(), {}
    for stage in plan:
        left = s["budget_s"] - (time.monotonic() - start)
        missing = [n for n in stage.needs[:1] if n in done and done[n] != "ok"]
        if left <= 10 or missing:
            why = "budget spent" if left <= 10 else f"needs {missing[0]}, which did not finish"
            log(f"== {stage.name}: skipped ({why})")
            manifest["stages"].append({"stage": stage.name, "status": "skipped", "reason": why})
            write_json(out / MANIFEST, manifest)
            continue
        manifest["running"] = stage.name
        write_json(out / MANIFEST, manifest)
        record = run_stage(stage, out, kept, min(stage.cap_s, left), s["device"], log)
        done[stage.name] = record["status"]
        manifest["stages"].append(record)
        manifest.pop("running")
        write_json(out / MANIFEST, manifest)
        log(f"== {stage.name}: {record['status']} in {record['seconds']} s")
    manifest["ended"] = now()
    write_json(out / MANIFEST, manifest)
    for st in manifest["stages"]:
        log(f"{st['stage']:12s} {st['status']:8s} {st.get('seconds', '')}")
    return 0 if all(st["status"] == "ok" for st in manifest["stages"]) else 1


def budget_seconds(text: str | None, default: float) -> float:
    """``BUDGET_S`` (seconds for the whole run) when set, else the preset's."""
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise RidgelineError(f"BUDGET_S must be a positive number of seconds, got {text!r}")
    return value


def transfer(out: Path, other: Path) -> int:
    """This run's draw snapshot and e2e files (from the archive: exactly the files the run
    wrote), predicted from the other GPU's profile; the report goes into ``OUT/transfer``."""
    from kernels.gpu.transfer import transfer_report

    with tarfile.open(out / ARCHIVE) as tar, tempfile.TemporaryDirectory() as tmp:
        names = [m.name for m in tar.getmembers() if m.name.endswith(".json") and not m.name.endswith("stage.json")]
        snaps = [n for n in names if n.startswith("draw/")]
        e2e = [n for n in names if n.startswith("e2e-")]
        if not snaps:
            raise RidgelineError(
                "no draw snapshot in this run's archive: the transfer needs "
                "the draw stage (STAGES=calibrate,draw,transfer)"
            )
        tar.extractall(tmp, members=[tar.getmember(n) for n in snaps + e2e], filter="data")
        report = transfer_report(Path(tmp) / snaps[0], other, [Path(tmp) / n for n in e2e])
    report["meta"].update(snapshot=snaps[0], e2e=e2e, profile=str(other))
    folder = out / "transfer"
    folder.mkdir(exist_ok=True)
    write_atomic(folder / f"transfer-{other.stem}.json", json.dumps(report, indent=2, default=float) + "\n")
    for label, stats in report["kernels"]["split"].items():
        print(f"{label:10s} n={stats['n']:4d}  median {stats['median']:.1%}  p90 {stats['p90']:.1%}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["transfer"] and len(args) == 3:
            return transfer(Path(args[1]), Path(args[2]))
        if len(args) != 1:
            print(
                "usage: python -m kernels.gpu.run OUT  (SIZES=gpu|gpu-heldout|cpu-test, STAGES=a,b, "
                "ORDER=auto|profiled|unprofiled)",
                file=sys.stderr,
            )
            return 2
        only = [n for n in os.environ.get("STAGES", "").split(",") if n]
        return run(Path(args[0]), os.environ.get("SIZES", "gpu"), only, os.environ.get("ORDER", "auto"))
    except RidgelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # OUT cannot be made or written
        print(
            f"error: cannot write the run's folder: {err.strerror or err} ({err.filename}); give a writable OUT",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
