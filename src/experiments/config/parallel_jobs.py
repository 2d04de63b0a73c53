"""How many of a sweep's jobs run at once on this machine, as its launcher and sweeper say."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SUBMITIT_LOCAL = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
SUBMITIT_SLURM = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
SLURM = "hydra_plugins.experiments_launcher.SlurmLauncher"  # hydra/launcher=slurm
# The launchers that start a process of its own for each job.
PROCESS_PER_JOB = (SUBMITIT_LOCAL, SUBMITIT_SLURM, SLURM)
# The launchers that run a sweep's jobs side by side on the machine that launched them.
ON_THIS_MACHINE = (JOBLIB, SUBMITIT_LOCAL)
# A process group's processes other than 0 (torchrun's, a SLURM job's tasks): no .hydra/
# snapshot, no train.log, warnings and errors only.
WORKER_OVERRIDES = ["hydra.output_subdir=null", "hydra/job_logging=worker"]


def shares_this_machine(launcher: Mapping[str, Any]) -> bool:
    """Whether `launcher` (hydra.launcher) runs jobs side by side here (SLURM's run elsewhere)."""
    return launcher.get("_target_") in ON_THIS_MACHINE


def jobs_at_once(
    launcher: Mapping[str, Any], sweeper: Mapping[str, Any], planned: int | None, cores: int
) -> int | None:
    """The most jobs that run at once: the launcher's workers (joblib's `n_jobs`, counted as
    joblib counts them among `cores`), the sweeper's batch, and the `planned` jobs of the sweep;
    None where none of them is known (submitit's local launcher starts a whole batch at once)."""
    bounds = [_workers(launcher, cores), _batch(sweeper), planned]
    known = [bound for bound in bounds if bound is not None]
    return min(known) if known else None


def _workers(launcher: Mapping[str, Any], cores: int) -> int | None:
    if launcher.get("_target_") != JOBLIB:
        return None
    workers = launcher.get("n_jobs")
    if workers is None:  # joblib's None: one
        return 1
    return workers if workers > 0 else max(1, cores + 1 + workers)  # -1: one per core


def _batch(sweeper: Mapping[str, Any]) -> int | None:
    # The basic sweeper's batches, an Optuna sweeper's trials at once and in all.
    bounds = [sweeper.get(key) for key in ("max_batch_size", "n_jobs", "n_trials")]
    known = [int(bound) for bound in bounds if bound is not None]
    return min(known) if known else None
