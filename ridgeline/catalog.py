"""Where the shipped data lives, and exact name lookup over it."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARDWARE_DIR = ROOT / "hardware"
MODELS_DIR = ROOT / "models" / "catalog"
REPORTS_DIR = ROOT / "reports"


def list_names(folder: Path, suffix: str) -> list[str]:
    """Catalog names: the file stems in ``folder`` ending with ``suffix``, sorted."""
    return sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))


def looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.endswith((".json", ".yaml", ".yml"))


MAX_FILE_BYTES = 1_000_000  # a config.json, device YAML or profile is a few KB (as the dashboard's uploads)


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
        raise error(str(path), f"file is {size} MB; the limit is 1 MB (a config or spec file "
                               "is a few KB: is it the right file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(str(path), "not a UTF-8 text file") from None
