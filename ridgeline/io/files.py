"""Reading and writing files: small text files read with a size limit, YAML and JSON
parsed into one-line errors, and atomic writes (never a half-written file)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from ridgeline.errors import InvalidConfigError, InvalidSpecError, UnwritableOutputError

MAX_FILE_BYTES = 1_000_000  # a config.json, device YAML or profile is a few KB (as the dashboard's uploads)
# libyaml's safe loader where PyYAML was built with it: the same safe constructor and
# resolver as ``yaml.safe_load``, several times faster (the 56 KB spec-intervals file is read
# by every command that resolves a deployment)
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_small_text(path: Path, error) -> str:
    """The text of a config or spec file, refusing what is not one: a folder, a device or
    pipe (``/dev/zero``), a file over 1 MB (read no further than that). ``error(where,
    problem)`` builds the one-line error to raise."""
    if path.is_dir():
        raise error(str(path), "is a folder; pass the file itself")
    if path.exists() and not path.is_file():
        raise error(str(path), "is not a regular file (a device, pipe or socket); pass a file")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise error(str(path), f"cannot read file ({err.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        size = max(path.stat().st_size, len(data)) / 1e6
        size = f"{size:,.0f}" if size >= 100 else f"{size:.3g}"
        raise error(
            str(path),
            f"file is {size} MB; the limit is 1 MB (a config or spec file is a few KB: is it the right file?)",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(str(path), "not a UTF-8 text file") from None


def parse_yaml(text: str, where: str) -> Any:
    """safe_load YAML text; any syntax problem becomes one InvalidSpecError line. Text the
    fast loader refuses is read again by PyYAML's own, whose message the line quotes."""
    try:
        return yaml.load(text, Loader=FAST_LOADER)
    except yaml.YAMLError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise InvalidSpecError(where, f"malformed YAML{at}: {getattr(err, 'problem', err)}") from None


def read_yaml(path: Path) -> Any:
    """safe_load a YAML file; any syntax problem becomes one InvalidSpecError line."""
    return parse_yaml(read_small_text(path, InvalidSpecError), str(path))


def yaml_text(data: Any, width: int | None = 100, flow: bool | None = False) -> str:
    """YAML as the project writes it (profiles, terms): keys in their order, block style
    (``flow=None``: lists of plain values on one line), lines up to ``width`` (None:
    PyYAML's own)."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=flow, width=width)


def parse_json(text: str, where: str) -> Any:
    """json.loads; a syntax problem becomes one InvalidConfigError line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidConfigError(where, f"malformed JSON at line {err.lineno}: {err.msg}") from None


def read_json(path: Path) -> Any:
    return parse_json(read_small_text(path, InvalidConfigError), str(path))


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename: never a half-written file.
    Missing parent folders are created; a path that cannot be written raises
    UnwritableOutputError (one line) and leaves nothing behind."""
    path = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except (FileExistsError, NotADirectoryError):
        raise UnwritableOutputError(path, "part of its folder path is a file") from None
    except OSError as err:
        raise UnwritableOutputError(path, err.strerror or str(err)) from None
    try:
        with os.fdopen(fd, mode) as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        reason = "it is a folder" if path.is_dir() else (err.strerror or str(err))
        raise UnwritableOutputError(path, reason) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(path: Path) -> None:
    """Refuse an output path that cannot be written before a long run spends its time on it."""
    if path.is_dir():
        raise UnwritableOutputError(path, "it is a folder")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise UnwritableOutputError(path, "part of its folder path is a file")
    if not os.access(folder, os.W_OK):
        raise UnwritableOutputError(path, f"no permission to write in {folder}")
    try:  # root passes os.access everywhere: a virtual or read-only file system shows only on a try
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".ridgeline-probe.")
    except OSError as err:
        raise UnwritableOutputError(path, err.strerror or str(err)) from None
    os.close(fd)
    os.unlink(probe)
