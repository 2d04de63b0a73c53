"""Sweep job folders' names (`3_device-cuda-1+model-lenet`): one plain value of Hydra's grammar
and of a shell, so the folder works as printed in `resume=`, `replay=` and `ckpt=`."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from experiments.core.errors import ExperimentError
from experiments.core.files import RECORD, as_yaml, read_data
from experiments.core.text import display_path

# Longest job folder name; the job number alone keeps names unique, the rest is for people.
MAX_NAME = 120
UNSAFE = re.compile(r"[^\w.+-]")
CHOICES_JOINED_BY = "+"


def job_folder_name() -> str:
    """Resolver for `hydra.sweep.subdir`: the job number and this job's varying choices."""
    hydra = HydraConfig.get()
    varying = _varying_keys(hydra, Path(hydra.sweep.dir) / "multirun.yaml")
    return job_name(hydra.job.num, list(hydra.overrides.task), varying)


def job_name(number: int, overrides: Sequence[str], varying: Set[str] | None) -> str:
    """The folder name of job `number` (`varying`: the keys the sweep varies; None: all)."""
    choices = [
        safe_name(f"{override.key_or_group}={override.get_value_element_as_str()}")
        for override in _parser().parse_overrides(list(overrides))
        if varying is None or override.key_or_group in varying
    ]
    return f"{number}_{CHOICES_JOINED_BY.join(choices)}"[:MAX_NAME] if choices else str(number)


def safe_name(choice: str) -> str:
    # Hydra escapes `:` in override values (`cuda\:1`); brackets and spaces only add noise.
    dropped = str.maketrans("", "", "\\[] ")
    return UNSAFE.sub("-", choice.translate(dropped))


def planned_job_names(multirun_yaml: Path) -> list[str] | None:
    """Every job's folder name of a basic sweeper's sweep; None for others (Optuna's)."""
    hydra = sweep_hydra_section(multirun_yaml)
    if not planned_ahead(hydra):
        return None
    params = [f"{key}={value}" for key, value in (hydra["sweeper"].get("params") or {}).items()]
    # As the basic sweeper does: a key's last override counts, in the place of its first.
    values: dict[str, list[str]] = {}
    try:
        for override in _parser().parse_overrides([*params, *hydra["overrides"]["task"]]):
            key, swept = override.get_key_element(), override.is_sweep_override()
            each = (
                override.sweep_string_iterator() if swept else [override.get_value_element_as_str()]
            )
            values[key] = [f"{key}={value}" for value in each]
    except HydraException:  # glob(...) over a group's options: only Hydra's config loader knows
        return None
    varying = _varying_keys(hydra, multirun_yaml)
    jobs = itertools.product(*values.values())
    return [job_name(number, job, varying) for number, job in enumerate(jobs)]


def planned_ahead(hydra: Mapping[str, Any]) -> bool:
    """Whether the sweep's sweeper planned its jobs before any ran (Hydra's basic one does)."""
    return str(hydra["sweeper"]["_target_"]).endswith((".BasicSweeper", ".ResumingSweeper"))


def resumes_a_sweep(config: Mapping[str, Any]) -> bool:
    """Whether the multirun of `config` resumes a sweep, in its folder (hydra/sweeper=resume)."""
    return str(config["hydra"]["sweeper"].get("_target_", "")).endswith(".ResumingSweeper")


def sweep_keys(multirun_yaml: Path, hydra: Mapping[str, Any] | None = None) -> set[str]:
    """The keys a sweep varies (`hydra`: the sweep's Hydra config, in one of its jobs)."""
    if hydra is None:
        hydra = sweep_hydra_section(multirun_yaml)
    return _varying_keys(hydra, multirun_yaml) or set()


def _varying_keys(hydra: Mapping[str, Any], multirun_yaml: Path) -> set[str] | None:
    """None when it cannot tell (then every override names the job)."""
    keys = set((hydra.get("sweeper") or {}).get("params") or ())
    if not multirun_yaml.is_file():
        return keys or None
    where = multirun_yaml.resolve()
    return keys | _swept_on_command_line(str(where), where.stat().st_mtime_ns)


# Every job of a sweep asks (twice): the sweep's file is read, and the parser built, once per
# version of the file (a process may read several sweeps' files of the same relative path).
@functools.cache
def _swept_on_command_line(multirun_yaml: str, version: int) -> frozenset[str]:
    overrides = sweep_hydra_section(Path(multirun_yaml))["overrides"]["task"]
    parsed = _parser().parse_overrides(list(overrides))
    return frozenset(override.key_or_group for override in parsed if override.is_sweep_override())


def sweep_hydra_section(multirun_yaml: Path) -> dict[str, Any]:
    """The `hydra` section of a sweep's multirun.yaml, refused in one line where it holds none."""
    multirun = read_data(multirun_yaml, RECORD, as_yaml)
    hydra = multirun.get("hydra") if isinstance(multirun, dict) else None
    sweeper = hydra.get("sweeper") if isinstance(hydra, dict) else None
    overrides = hydra.get("overrides") if isinstance(hydra, dict) else None
    task = overrides.get("task") if isinstance(overrides, dict) else None
    if not isinstance(sweeper, dict) or "_target_" not in sweeper or not isinstance(task, list):
        raise ExperimentError(
            f"{display_path(multirun_yaml)} holds no record of a sweep (Hydra writes its sweeper "
            "and command line under hydra:); put it back from a copy, or move it out of the folder"
        )
    return hydra


@functools.cache
def _parser() -> OverridesParser:
    return OverridesParser.create()
