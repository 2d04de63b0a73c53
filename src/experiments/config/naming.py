"""The names of sweep job folders: `<job number>_<the choices that vary>`, e.g.
`3_device=cuda-1,model=lenet`.

The sweep's varying keys come from its command line (saved by Hydra in `multirun.yaml`) or from
the sweeper's search space (`hydra.sweeper.params`, e.g. Optuna's). Characters that break on
common filesystems (`:` `/` `\\` and the like) become `-`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

# Longest job folder name; the job number alone keeps names unique, the rest is for people.
MAX_NAME = 120
UNSAFE = re.compile(r"[^\w.,=+-]")


def job_folder_name() -> str:
    """Resolver for `hydra.sweep.subdir`: the job number and this job's varying choices."""
    hydra = HydraConfig.get()
    varying = _varying_keys(hydra)
    choices = [
        f"{override.key_or_group}={override.get_value_element_as_str()}"
        for override in _parser().parse_overrides(list(hydra.overrides.task))
        if varying is None or override.key_or_group in varying
    ]
    name = f"{hydra.job.num}_{','.join(choices)}" if choices else str(hydra.job.num)
    return safe_name(name)[:MAX_NAME]


def safe_name(text: str) -> str:
    # Hydra escapes `:` in override values (`cuda\:1`); brackets and spaces only add noise.
    dropped = str.maketrans("", "", "\\[] ")
    return UNSAFE.sub("-", text.translate(dropped))


def _varying_keys(hydra: DictConfig) -> set[str] | None:
    """Keys the sweep varies; None when it cannot tell (then every override names the job)."""
    keys: set[str] = set()
    params = OmegaConf.select(hydra, "sweeper.params")
    if params:
        keys.update(params.keys())
    saved = Path(hydra.sweep.dir) / "multirun.yaml"
    if not saved.is_file():
        return keys or None
    return keys | _swept_on_command_line(str(saved))


# Every job of a sweep asks (twice): the sweep's file is read, and the parser built, once.
@functools.cache
def _swept_on_command_line(multirun_yaml: str) -> frozenset[str]:
    """The keys the sweep's saved command line sweeps over (`model=tudui,lenet`)."""
    overrides = OmegaConf.load(multirun_yaml).hydra.overrides.task
    parsed = _parser().parse_overrides(list(overrides))
    return frozenset(override.key_or_group for override in parsed if override.is_sweep_override())


@functools.cache
def _parser() -> OverridesParser:
    return OverridesParser.create()
