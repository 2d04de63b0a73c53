"""A sweep job's own cores, where its launcher runs other jobs beside it on this machine."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from experiments.config.naming import planned_job_names
from experiments.config.parallel_jobs import jobs_at_once, shares_this_machine
from experiments.devices.free_cores import CoreShare, FreeCores, share_of_cores

log = logging.getLogger("experiments")


@contextmanager
def own_cores(hydra_cfg: DictConfig, cfg: DictConfig, threads_key: str) -> Iterator[None]:
    """The job on its share of the cores (`threads_key`: where `cfg` sets torch's threads), or
    the line that says it shares them; a job alone, or elsewhere (SLURM's), as it is."""
    if not shares_this_machine(hydra_cfg.launcher):
        yield
        return
    from experiments.devices import process_settings  # loads torch: in a job only

    sweep_dir = Path(hydra_cfg.sweep.dir)
    can_pin = hasattr(os, "sched_setaffinity")
    available = os.sched_getaffinity(0) if can_pin else set(range(os.cpu_count() or 1))
    jobs = jobs_at_once(
        hydra_cfg.launcher, hydra_cfg.sweeper, _planned_jobs(sweep_dir), len(available)
    )
    threads = OmegaConf.select(cfg, threads_key, default=None, throw_on_resolution_failure=False)
    with FreeCores(sweep_dir) as free_cores:
        slot = free_cores.take(jobs) if jobs and jobs > 1 else None
        share = share_of_cores(
            available, jobs, slot, threads, can_pin=can_pin, threads_key=threads_key
        )
        if isinstance(share, str):
            log.warning(share)
        elif share is not None:
            log.info(share)
        with process_settings.on_cores(share) if isinstance(share, CoreShare) else nullcontext():
            yield


def _planned_jobs(sweep_dir: Path) -> int | None:
    """How many jobs the sweep has in all, where its sweeper plans them (the basic one)."""
    multirun_yaml = sweep_dir / "multirun.yaml"
    planned = planned_job_names(multirun_yaml) if multirun_yaml.is_file() else None
    return None if planned is None else len(planned)
