"""Where the shipped data lives, and exact name lookup over it."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARDWARE_DIR = ROOT / "hardware"
MODELS_DIR = ROOT / "models" / "catalog"
REPORTS_DIR = ROOT / "reports"           # committed baselines only
PROFILES_DIR = REPORTS_DIR / "profiles"
VALIDATION_DIR = REPORTS_DIR / "validation"


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


def _home_dir(variable: str, xdg: str, fallback: str) -> Path:
    import os

    if os.environ.get(variable):
        return Path(os.environ[variable])
    base = os.environ.get(xdg)
    return (Path(base) if base else Path.home() / fallback) / "ridgeline"


def user_data_dir() -> Path:
    """Where a user's own measurements go (profiles/, validation/): ``$RIDGELINE_HOME``,
    else ``$XDG_DATA_HOME/ridgeline``, else ``~/.local/share/ridgeline``. ``reports/`` in
    the source tree holds the committed baselines only."""
    return _home_dir("RIDGELINE_HOME", "XDG_DATA_HOME", ".local/share")


def user_cache_dir() -> Path:
    """Where detections are kept between runs: ``$RIDGELINE_CACHE``, else
    ``$XDG_CACHE_HOME/ridgeline``, else ``~/.cache/ridgeline``."""
    return _home_dir("RIDGELINE_CACHE", "XDG_CACHE_HOME", ".cache")
