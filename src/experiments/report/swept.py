"""What the runs of a report differ in: the keys their overrides.yaml (of failed runs: none) or
their sweeps name, each run's value read from its config, so `1e-2` is `0.01`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from experiments.config.naming import sweep_keys
from experiments.core.files import found_below
from experiments.report.run_records import RunRecords

# The statuses of runs whose typed keys do not count: they may be why the run failed.
FAILED = ("failed", "interrupted")
# What a run's config does not hold at all (a training run's `ckpt`), told apart from a null.
_ABSENT = object()


def swept_values(runs: Mapping[Path, RunRecords], folder: Path) -> dict[Path, dict[str, str]]:
    """Each run's values of the keys the runs differ in, in the order the keys were first given."""
    counted = [records for records in runs.values() if records.results.get("status") not in FAILED]
    keys = dict.fromkeys(key for records in counted for key in records.given)
    in_sweeps = set().union(*map(sweep_keys, found_below(folder, "multirun.yaml")))
    keys.update(dict.fromkeys(sorted(in_sweeps - set(keys))))
    values = {run: {key: value_of(records, key) for key in keys} for run, records in runs.items()}
    swept = [key for key in keys if key in in_sweeps or len({values[run][key] for run in runs}) > 1]
    return {run: {key: values[run][key] for key in swept} for run in runs}


def value_of(records: RunRecords, key: str) -> str:
    """The run's value of `key` as its config resolves it (a group: its choice)."""
    if key in records.choices:
        return str(records.choices[key])
    value = OmegaConf.select(
        records.config, key, default=_ABSENT, throw_on_resolution_failure=False
    )
    if value is _ABSENT:
        return ""
    if isinstance(value, DictConfig):  # a group, where Hydra's record of choices is missing
        return records.given.get(key, "")
    return "null" if value is None else str(value)
