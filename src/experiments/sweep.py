"""Multirun support: a readable folder per job, GPUs handed out to parallel jobs, and the report
at the end of every sweep.

Job folders are named `<job number>_<the choices that vary>`, e.g. `3_device=cuda-1,model=lenet`:
the sweep's varying keys come from its command line (saved by Hydra in `multirun.yaml`) or from
the sweeper's search space (`hydra.sweeper.params`, e.g. Optuna's). Characters that break on
common filesystems (`:` `/` `\\` and the like) become `-`.

This module must not import torch or matplotlib: Hydra loads it for every run.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import IO, Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("experiments")

# Longest job folder name; the job number alone keeps names unique, the rest is for people.
MAX_NAME = 120
UNSAFE = re.compile(r"[^\w.,=+-]")


def job_folder_name() -> str:
    """Resolver for `hydra.sweep.subdir`: the job number and this job's varying choices."""
    hydra = HydraConfig.get()
    parser = OverridesParser.create()
    varying = _varying_keys(hydra, parser)
    choices = [
        f"{override.key_or_group}={override.get_value_element_as_str()}"
        for override in parser.parse_overrides(list(hydra.overrides.task))
        if varying is None or override.key_or_group in varying
    ]
    name = f"{hydra.job.num}_{','.join(choices)}" if choices else str(hydra.job.num)
    return safe_name(name)[:MAX_NAME]


def safe_name(text: str) -> str:
    # Hydra escapes `:` in override values (`cuda\:1`); brackets and spaces only add noise.
    dropped = str.maketrans("", "", "\\[] ")
    return UNSAFE.sub("-", text.translate(dropped))


def _varying_keys(hydra: DictConfig, parser: OverridesParser) -> set[str] | None:
    """Keys the sweep varies; None when it cannot tell (then every override names the job)."""
    keys: set[str] = set()
    params = OmegaConf.select(hydra, "sweeper.params")
    if params:
        keys.update(params.keys())
    saved = Path(hydra.sweep.dir) / "multirun.yaml"
    if not saved.is_file():
        return keys or None
    overrides = OmegaConf.load(saved).hydra.overrides.task
    parsed = parser.parse_overrides(list(overrides))
    keys.update(o.key_or_group for o in parsed if o.is_sweep_override())
    return keys


class FreeGpus:
    """GPUs handed out to the jobs of one sweep that run side by side (hydra/launcher=joblib).

    A job whose request leaves the GPU open (device=cuda or device=auto) takes the first GPU no
    other running job of the sweep holds, and holds it until it ends: a lock file per GPU in the
    sweep folder (`.gpus/<index>.lock`), which the system releases even if the job dies. With
    more parallel jobs than GPUs, or jobs of unequal length, a job waits for a GPU to come free:
    no two jobs of a sweep ever share one. (Linux and macOS: the locks are POSIX file locks.)
    """

    def __init__(self, sweep_dir: Path, poll_seconds: float = 1.0) -> None:
        self.folder = sweep_dir / ".gpus"
        self.poll_seconds = poll_seconds
        self._held: IO[str] | None = None

    def __enter__(self) -> FreeGpus:
        return self

    def __exit__(self, *exception: object) -> None:
        if self._held is not None:
            self._held.close()  # releases the lock
            self._held = None

    def take(self, count: int) -> int:
        """The index of a GPU (of `count`) that no other job holds, held from now on."""
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        said = False
        while True:
            for index in range(count):
                lock = open(self.folder / f"{index}.lock", "w")  # noqa: SIM115 - held until exit
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    lock.close()
                    continue
                self._held = lock
                return index
            if not said:
                log.info("waiting for a GPU: this sweep's other jobs hold all %d", count)
                said = True
            time.sleep(self.poll_seconds)


# Sweeps started in this process whose end Hydra has not reached yet. When a launcher gives up
# on a sweep (a joblib worker killed by the system, say), the command line still reports on it.
_unreported: list[Path] = []


class SweepReport(Callback):
    """At the end of a multirun: the report in the sweep folder, a table of what completed and
    what failed, and exit code 1 if any job failed (every job has run by then)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not _main_process():
            return
        # Hydra's basic sweeper saves the sweep's config too; other sweepers (Optuna) do not.
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(config, sweep_dir / "multirun.yaml")
        _unreported.append(sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not _main_process():
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        _unreported.remove(sweep_dir)
        if not report(sweep_dir):
            raise SystemExit(1)


def report_unfinished_sweeps() -> None:
    """Report on the sweeps this process started that never reached their end, if any of their
    jobs started."""
    from experiments.report import find_runs

    while _unreported:
        sweep_dir = _unreported.pop()
        if find_runs(sweep_dir):
            report(sweep_dir)
        elif [entry.name for entry in sweep_dir.iterdir()] == ["multirun.yaml"]:
            # No job started (a typo in a swept value, no cluster): leave no empty sweep behind.
            (sweep_dir / "multirun.yaml").unlink()
            sweep_dir.rmdir()


def report(sweep_dir: Path) -> bool:
    """Write the sweep's report, show its table; whether every job completed."""
    from experiments.report import table, write_report  # loads matplotlib

    rows = write_report(sweep_dir)
    print(table(rows, sweep_dir), file=sys.stderr)
    print(f"report: {sweep_dir}/summary.md (and .csv, plots)", file=sys.stderr)
    return all(row["status"] == "completed" for row in rows)


def _main_process() -> bool:
    """False in torchrun's processes other than 0, which leave the sweep's files to process 0."""
    return os.environ.get("RANK", "0") == "0"
