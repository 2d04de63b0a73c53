"""Every configuration of a sweep runs once before any runs twice, so a drift of the machine
falls on all alike (Hydra's basic sweeper varies the first key slowest)."""

from __future__ import annotations

from experiments.config.overrides import asks_for_multirun, flags_apart
from experiments.config.paths import parsed

SEED = "trainer.seed"  # what a training sweep's repeats vary (eval.py's: `seed`)


def with_repeats_interleaved(arguments: list[str], seed: str = SEED) -> list[str]:
    if not asks_for_multirun(arguments):
        return arguments
    flags, overrides = flags_apart(arguments)
    seeds = [override for override in overrides if _sweeps(seed, override)]
    if not seeds:
        return arguments
    return [*flags, *seeds, *(override for override in overrides if override not in seeds)]


def _sweeps(key: str, argument: str) -> bool:
    read = parsed(argument) if argument.startswith(f"{key}=") else None
    return read is not None and read.is_sweep_override()
