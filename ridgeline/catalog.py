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
