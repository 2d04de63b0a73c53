"""The report at the end of every sweep (a Hydra callback), and of a sweep its launcher gave up on.
This module must not import torch or matplotlib: Hydra loads it for every run."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from experiments.config.naming import resumes_a_sweep
from experiments.core.files import write_text_atomically
from experiments.devices.process_group import ProcessGroup

log = logging.getLogger("experiments")

# Sweeps this process started whose end Hydra has not reached: reported if a launcher gives up.
_unreported: list[Path] = []
# Of those, the sweeps whose folder this process made (not a resumed one's).
_made: set[Path] = set()


class SweepReport(Callback):
    """At the end of a multirun, in torchrun's process 0 alone: the report, and exit code 1 if any
    job failed."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not ProcessGroup.from_env().is_main:
            return
        # Hydra's basic sweeper saves the sweep's config too; other sweepers (Optuna) do not.
        sweep_dir = Path(config.hydra.sweep.dir)
        if not resumes_a_sweep(config):  # (a resumed one's stays its plan)
            sweep_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomically(sweep_dir / "multirun.yaml", OmegaConf.to_yaml(config))
            _made.add(sweep_dir)
        _unreported.append(sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not ProcessGroup.from_env().is_main:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        _unreported.remove(sweep_dir)
        _made.discard(sweep_dir)
        if not report(sweep_dir):
            raise SystemExit(1)


def report_unfinished_sweeps() -> None:
    """Report on the sweeps this process started that never reached their end."""
    if not _unreported:  # a plain run's failure: nothing to report, nothing to load
        return
    from experiments.report.summary import find_runs  # loads matplotlib: only when needed

    while _unreported:
        sweep_dir = _unreported.pop()
        made = sweep_dir in _made
        _made.discard(sweep_dir)
        if find_runs(sweep_dir):
            report(sweep_dir)
        elif made and [entry.name for entry in sweep_dir.iterdir()] == ["multirun.yaml"]:
            # No job started (a typo in a swept value, no cluster): leave no empty sweep behind.
            (sweep_dir / "multirun.yaml").unlink()
            sweep_dir.rmdir()


def forget_unfinished_sweeps() -> None:
    """An interrupted command's sweeps: the command line says how they go on, unreported."""
    _unreported.clear()
    _made.clear()


def report(sweep_dir: Path) -> bool:
    """Write the sweep's report, show its table; whether every job completed."""
    from experiments.report.summary import table, write_report  # loads matplotlib, as above

    rows = write_report(sweep_dir)
    print(table(rows, sweep_dir), file=sys.stderr)
    print(f"report: {sweep_dir}/summary.md (and .csv, plots)", file=sys.stderr)
    return all(row["status"] == "completed" for row in rows)
