"""The order of a sweep's jobs: every configuration runs once before any runs twice.

Hydra's basic sweeper runs the product of the swept keys with the first key varying slowest, so
`-m device=cpu,cuda trainer.seed=0,1,2` would run cpu three times, then cuda three times: a drift
of the machine between the two (another program starting, a GPU warming up) would pose as a
difference between the devices. With the seed's sweep first, each configuration's repeats are
spread over the sweep (cpu, cuda, cpu, cuda, ...) and a drift falls on both alike. A sweep whose
seeds vary in a sweeper's own parameters (`hydra.sweeper.params`, set before the command line)
is not reordered; the report warns where repeats ran back to back.
"""

from __future__ import annotations

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from experiments.config.overrides import asks_for_multirun, flags_apart

# The key a training sweep's repeats vary (eval.py's: `seed`, the images its benchmark feeds).
SEED = "trainer.seed"


def with_repeats_interleaved(arguments: list[str], seed: str = SEED) -> list[str]:
    """A sweep's arguments with those sweeping the `seed` key first among the overrides."""
    if not asks_for_multirun(arguments):
        return arguments
    flags, overrides = flags_apart(arguments)
    seeds = [override for override in overrides if _sweeps(seed, override)]
    if not seeds:
        return arguments
    return [*flags, *seeds, *(override for override in overrides if override not in seeds)]


def _sweeps(key: str, argument: str) -> bool:
    if not argument.startswith(f"{key}="):
        return False
    try:
        return OverridesParser.create().parse_override(argument).is_sweep_override()
    except HydraException:  # Hydra says what is wrong with it, in its place
        return False
