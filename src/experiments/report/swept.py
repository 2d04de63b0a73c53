"""What the runs of a report differ in: the keys whose values differ between them, or that a
sweep's command line sweeps over (or its sweeper searches), with each run's value of each.

A key is found in the runs' `.hydra/overrides.yaml`; its value is read from the run's config (a
group's from the choice Hydra recorded), so a run that left a key at its default has a value too,
and `1e-2` and `0.01` are the same value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.config.naming import sweep_keys
from experiments.config.overrides import parsed
from experiments.core.files import read_yaml
from experiments.report.run_configs import run_config

# Where a run came from, not what it ran.
ORIGINS = ("resume", "replay")


def swept_values(runs: Sequence[Path], folder: Path) -> dict[Path, dict[str, str]]:
    """Each run's values of the keys the runs at or below `folder` differ in, in the order the
    keys were first given."""
    given = {run: _given(run) for run in runs}
    keys = dict.fromkeys(key for run in runs for key in given[run])
    in_sweeps = set().union(*map(sweep_keys, folder.rglob("multirun.yaml")))
    keys.update(dict.fromkeys(sorted(in_sweeps - set(keys))))
    values = {run: _values(run, list(keys), given[run]) for run in runs}
    swept = [key for key in keys if key in in_sweeps or len({values[run][key] for run in runs}) > 1]
    return {run: {key: values[run][key] for key in swept} for run in runs}


def _given(run: Path) -> dict[str, str]:
    """The run's overrides, by key (without `+` or `~`), each value as its command line gave it;
    one Hydra's grammar cannot read (a resume= folder's path may not be) left out."""
    path = run / ".hydra" / "overrides.yaml"
    overrides = [str(override) for override in read_yaml(path) or []] if path.is_file() else []
    given = {}
    for override in filter(None, map(parsed, overrides)):
        if override.key_or_group not in ORIGINS:
            value = override.value()
            given[override.key_or_group] = "" if value is None else str(value)
    return given


def _values(run: Path, keys: list[str], given: dict[str, str]) -> dict[str, str]:
    config = run_config(run / ".hydra" / "config.yaml")
    hydra_yaml = run / ".hydra" / "hydra.yaml"
    choices = _recorded_choices(hydra_yaml) if hydra_yaml.is_file() else {}
    values = {}
    for key in keys:
        if key in choices:
            values[key] = str(choices[key])
            continue
        value = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
        if isinstance(value, DictConfig):  # a group, where Hydra's record of choices is missing
            values[key] = given.get(key, "")
        else:
            values[key] = "null" if value is None else str(value)
    return values


def _recorded_choices(hydra_yaml: Path) -> dict[str, Any]:
    """The group choices Hydra recorded in a run's hydra.yaml (`hydra.runtime.choices`)."""
    recorded: Any = read_yaml(hydra_yaml)
    for key in ("hydra", "runtime", "choices"):
        recorded = recorded.get(key) if isinstance(recorded, dict) else None
    return recorded or {}
