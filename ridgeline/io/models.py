"""Models from files: the catalog's names and configs, or any Hugging Face ``config.json``
(a file or its folder), read into :class:`~ridgeline.engine.model.ModelConfig`."""

from __future__ import annotations

from pathlib import Path

from ridgeline.engine.model import ModelConfig
from ridgeline.errors import InvalidConfigError, UnknownModelError
from ridgeline.io.catalog import MODELS_DIR, list_names, looks_like_path
from ridgeline.io.files import read_json


def list_models() -> list[str]:
    return list_names(MODELS_DIR, ".json")


def load_model(name: str) -> ModelConfig:
    """A catalog name (``llama-2-7b``) or a path to a Hugging Face ``config.json``."""
    if isinstance(name, ModelConfig):
        return name
    if looks_like_path(name) or Path(name).is_dir():
        path = Path(name)
        if path.is_dir():
            if not (path / "config.json").exists():
                raise InvalidConfigError(str(path), "a folder without a config.json; pass the config file")
            path = path / "config.json"
        if not path.exists():
            raise InvalidConfigError(str(path), "no such config file")
        stem = path.parent.name if path.name == "config.json" else path.stem
        return ModelConfig.from_hf_config(read_json(path), name=stem or None, where=str(path))
    path = MODELS_DIR / f"{name}.json"
    if not path.is_file():
        raise UnknownModelError(name, list_models())
    return ModelConfig.from_hf_config(read_json(path), name=name, where=f"models/catalog/{name}.json")
