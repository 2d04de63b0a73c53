"""What Hydra tells a training job, and what that lets a resumed or replayed run's config build."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from experiments.config import trust
from experiments.config.naming import sweep_keys

log = logging.getLogger("experiments")


def refuse_targets_not_typed(cfg: DictConfig) -> list[trust.Target]:
    """A resumed or replayed run's targets, refused unless shipped or typed (`trust.refusal`)."""
    key = "resume" if cfg.resume else "replay" if cfg.replay else None
    if key is None:
        return []
    built = trust.Built.in_config(trust.resolved_so_far(cfg))
    typed = trust.Built.in_overrides(overrides())
    trust.refuse_untrusted(built, typed, f"{key}={cfg[key]}: its config")
    return list(built.targets)


def say_what_a_replay_builds(replayed: str, built: list[trust.Target]) -> None:
    others = [f"{found.target} ({found.key})" for found in built if not _ours(found.target)]
    log.info(
        f"replay={replayed} runs that run's config, as running its script would; besides the "
        f"project's own code it builds {', '.join(others) or 'nothing'}"
    )


def _ours(target: str) -> bool:
    return target.startswith("experiments.")


def overrides() -> list[str]:
    """The command line's overrides of this job, with a sweep's values."""
    if not HydraConfig.initialized():
        return []
    # As typed: an override's ${...} is resolved in the config, not here.
    return OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)


def sweep_folder() -> str | None:
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return str(HydraConfig.get().sweep.dir)


def swept_keys() -> set[str]:
    """The keys this job's sweep varies, as its `multirun.yaml` says; none outside a sweep."""
    if (folder := sweep_folder()) is None:
        return set()
    multirun_yaml = Path(folder) / "multirun.yaml"
    return sweep_keys(multirun_yaml, HydraConfig.get()) if multirun_yaml.is_file() else set()
