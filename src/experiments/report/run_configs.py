"""A run's config (`.hydra/config.yaml`) as the report reads it: parsed once while the file is
unchanged, though the report reads it twice per run."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from experiments.core.files import RECORD, read_data


def run_config(path: Path) -> DictConfig:
    """The config at `path`, read-only: every reader shares it."""
    status = path.stat()
    return _parsed(path, status.st_mtime_ns, status.st_size)


@lru_cache(maxsize=256)  # keyed on the file's time and size: rewritten, it is read again
def _parsed(path: Path, modified_ns: int, size: int) -> DictConfig:
    config = OmegaConf.create(read_data(path, RECORD))
    OmegaConf.set_readonly(config, True)
    return config
