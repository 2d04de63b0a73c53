"""How many of a sweep's jobs run at once here: the launcher's workers, the sweeper's batch."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.config.parallel_jobs import (
    JOBLIB,
    SUBMITIT_LOCAL,
    jobs_at_once,
    shares_this_machine,
)

BASIC = {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"}
OPTUNA = {"_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"}


@pytest.mark.parametrize(
    ("launcher", "sweeper", "planned", "at_once"),
    [
        ({"_target_": JOBLIB, "n_jobs": 2}, BASIC, 6, 2),
        ({"_target_": JOBLIB, "n_jobs": -1}, BASIC, 3, 3),  # one worker per core, 3 jobs
        ({"_target_": JOBLIB, "n_jobs": -1}, BASIC, 40, 16),
        ({"_target_": JOBLIB, "n_jobs": -2}, BASIC, 40, 15),
        ({"_target_": JOBLIB, "n_jobs": 4}, {**BASIC, "max_batch_size": 3}, 40, 3),
        ({"_target_": JOBLIB, "n_jobs": -1}, {**OPTUNA, "n_jobs": 2, "n_trials": 20}, None, 2),
        ({"_target_": SUBMITIT_LOCAL}, BASIC, 5, 5),  # a whole batch at once
        ({"_target_": SUBMITIT_LOCAL}, BASIC, None, None),  # glob(...): the sweep's size unknown
    ],
)
def test_jobs_at_once_are_the_least_of_the_launchers_workers_and_the_sweeps_batch(
    launcher: dict[str, Any], sweeper: dict[str, Any], planned: int | None, at_once: int | None
) -> None:
    assert jobs_at_once(launcher, sweeper, planned, cores=16) == at_once


def test_jobs_that_slurm_runs_on_other_machines_share_no_cores_here() -> None:
    slurm = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert shares_this_machine({"_target_": JOBLIB})
    assert shares_this_machine({"_target_": SUBMITIT_LOCAL})
    assert not shares_this_machine({"_target_": slurm})
