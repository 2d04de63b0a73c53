"""A run's config snapshot (`.hydra/`), written again when a resume is accepted."""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments.core.files import write_text_atomically


def save(cfg: DictConfig, run_dir: Path) -> None:
    """Write it as Hydra writes a run's, so a later resume= or replay= brings back its overrides."""
    if not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    snapshot = {
        "config.yaml": cfg,
        "hydra.yaml": OmegaConf.create({"hydra": hydra}),
        "overrides.yaml": hydra.overrides.task,
    }
    for name, config in snapshot.items():
        write_text_atomically(run_dir / ".hydra" / name, OmegaConf.to_yaml(config))
