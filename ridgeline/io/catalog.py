"""Where the shipped data lives, and exact name lookup over it."""

from __future__ import annotations

from pathlib import Path


def data_root() -> Path:
    """Where the shipped data lives: the source checkout this package sits in (its
    ``hardware/`` beside ``ridgeline/``), else the data a wheel installed under
    ``<prefix>/share/ridgeline`` (pyproject.toml's ``data-files``: the install's own
    prefix, or a ``--user`` install's base)."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "hardware").is_dir():
        return checkout
    import site
    import sys
    import sysconfig

    bases = (sysconfig.get_path("data"), sys.prefix, site.getuserbase())
    for base in bases:
        shared = Path(base) / "share" / "ridgeline"
        if (shared / "hardware").is_dir():
            return shared
    return checkout  # nothing installed: every catalog lookup then says what is missing


ROOT = data_root()
HARDWARE_DIR = ROOT / "hardware"
ENGINES_DIR = HARDWARE_DIR / "engines"  # serving engines' descriptions (hardware/engines/README.md)
MODELS_DIR = ROOT / "models" / "catalog"
REPORTS_DIR = ROOT / "reports"  # committed baselines only
PROFILES_DIR = REPORTS_DIR / "profiles"
VALIDATION_DIR = REPORTS_DIR / "validation"


def list_names(folder: Path, suffix: str) -> list[str]:
    """Catalog names: the file stems in ``folder`` ending with ``suffix``, sorted."""
    return sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))


def looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.endswith((".json", ".yaml", ".yml"))


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
