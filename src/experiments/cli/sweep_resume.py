"""`python train.py -m resume=<sweep folder>`: the sweep's jobs left to run, launched again in
their own folders (an interrupted one from its last checkpoint), its completed ones left as they
are, by whatever launcher is given now.

Launchers number the jobs of a launch from 0, so each job is given its folder by name."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.sweeper import Sweeper

from experiments.cli.run_folder import Refused
from experiments.config.naming import job_name, planned_job_names, sweep_keys
from experiments.config.paths import as_value
from experiments.config.saved_overrides import refuse_read_only
from experiments.core.errors import ExperimentError
from experiments.core.text import display_path
from experiments.records import running

log = logging.getLogger("experiments")

# Where a job run again from its start keeps what its earlier attempt left (`earlier-attempt-2`
# for the second): inside its own folder, where the report does not take it for a run.
EARLIER_ATTEMPT = "earlier-attempt"
# A job's own checkpoint to go on from (records.checkpoints.LAST, which loads torch).
LAST_CHECKPOINT = Path("checkpoints") / "last.pt"


@dataclass(frozen=True)
class JobLeft:
    """A job of the sweep to launch: its number, its folder's name and what became of it."""

    number: int
    name: str
    was: str  # "not run", or the status its results.json records ("crashed" where it died)
    from_checkpoint: bool

    def overrides(self, sweep_dir: Path) -> list[str]:
        """What the job is given beyond its sweep's overrides: its own folder, and where it goes
        on from its checkpoint, that folder as `resume=` (whose snapshot stays as it is)."""
        folder = [f"hydra.sweep.subdir={as_value(self.name)}"]
        if not self.from_checkpoint:
            return folder
        return [
            *folder,
            f"resume={as_value(str(sweep_dir / self.name))}",
            "hydra.output_subdir=null",
        ]

    def said(self) -> str:
        if self.was == "not run":
            return f"{self.name}: not run"
        if self.from_checkpoint:
            return f"{self.name}: {self.was}, goes on from its last checkpoint"
        return f"{self.name}: {self.was} before its first checkpoint, runs again from the start"


def jobs_left(sweep_dir: Path, names: Sequence[str], given: str) -> list[JobLeft]:
    """The jobs named `names` (in their order) that did not complete, refused in one line where
    the folder holds jobs of another plan, or one still training, or one that is read-only."""
    started = {
        entry.name.split("_")[0]: entry.name
        for entry in sweep_dir.iterdir()
        if entry.is_dir() and entry.name.split("_")[0].isdigit()
    }
    left = []
    for number, name in enumerate(names):
        found = started.pop(str(number), None)
        if found is None:
            left.append(JobLeft(number, name, "not run", from_checkpoint=False))
            continue
        if found != name:
            raise ExperimentError(
                f"{given}: its job {number} is planned as {name}, but its folder is {found}: the "
                "folder holds jobs of another sweep; resume that sweep in its own folder"
            )
        folder = sweep_dir / name
        results = running.read_results(folder)
        status = results.get("status") or "no results"
        if status == "completed":
            continue
        running.refuse_if_running(str(folder))
        if status == "running":
            status = "crashed"  # (its process is gone: refused above where it is alive here)
        refuse_read_only(folder, f"{given}: its job {name}")
        left.append(JobLeft(number, name, status, (folder / LAST_CHECKPOINT).is_file()))
    if started:
        stray = sorted(started.values())[0]
        raise ExperimentError(
            f"{given}: its folder holds {stray}, which is no job of its sweep's plan "
            f"({len(names)} jobs); move it out of the folder, and resume again"
        )
    return left


def set_aside(folder: Path) -> Path | None:
    """Move what an earlier attempt left in `folder` (but Hydra's copy of its config, which the
    new attempt writes again the same) into a folder of its own inside; that folder, if any."""
    earlier = [
        entry
        for entry in folder.iterdir()
        if entry.name != ".hydra" and not entry.name.startswith(EARLIER_ATTEMPT)
    ]
    if not earlier:
        return None
    attempts = sum(1 for entry in folder.iterdir() if entry.name.startswith(EARLIER_ATTEMPT))
    kept = folder / (EARLIER_ATTEMPT if not attempts else f"{EARLIER_ATTEMPT}-{attempts + 1}")
    kept.mkdir()
    for entry in earlier:
        entry.rename(kept / entry.name)
    return kept


class SweepResumer(BasicSweeper):
    """The basic sweeper's plan of the sweep in `hydra.sweep.dir`, of which it launches the jobs
    that did not complete, all in one batch."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None):
        # As the basic sweeper's, whose `super(BasicSweeper, self)` fails where Hydra's scan of
        # its plugins imported that module again (a class of the same name, not this one's base).
        Sweeper.__init__(self)
        self.overrides = None
        self.batch_index = 0
        self.max_batch_size = max_batch_size
        self.params = params or {}
        self.hydra_context = self.config = self.launcher = None

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        given = f"resume={display_path(sweep_dir)}"
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        read = parser.parse_overrides([*self._parse_config(), *arguments])
        (jobs,) = self.split_arguments(read, max_batch_size=None)
        multirun_yaml = sweep_dir / "multirun.yaml"
        varying = sweep_keys(multirun_yaml)
        names = [job_name(number, job, varying) for number, job in enumerate(jobs)]
        planned = planned_job_names(multirun_yaml)
        try:
            refuse_another_plan(names, planned, given)
            left = jobs_left(sweep_dir, names, given)
        except ExperimentError as refused:
            raise Refused(str(refused)) from None
        log.info(
            "Resuming the sweep in %s: %d of %d jobs completed, left as they are; %d to run",
            display_path(sweep_dir),
            len(jobs) - len(left),
            len(jobs),
            len(left),
        )
        batch = []
        for job in left:
            log.info("\t%s", job.said())
            if not job.from_checkpoint and job.was != "not run":
                set_aside(sweep_dir / job.name)
            # One batch of them all: what a job's share of the cores is made from.
            at_once = f"hydra.sweeper.max_batch_size={len(left)}"
            batch.append([*jobs[job.number], *job.overrides(sweep_dir), at_once])
        if not batch:
            return []
        self.validate_batch_is_legal(batch)
        returns = self.launcher.launch(batch, initial_job_idx=0)
        for finished in returns:
            _ = finished.return_value  # raises, as the basic sweeper's, where a job raised
        return [returns]


def refuse_another_plan(names: Sequence[str], planned: Sequence[str] | None, given: str) -> None:
    """Refused in one line where the configs plan other jobs now than the sweep planned."""
    if planned is None or list(names) == list(planned):
        return
    if len(names) != len(planned):
        difference = f"{len(names)} jobs where the sweep planned {len(planned)}"
    else:
        job, was = next(
            (now, then) for now, then in zip(names, planned, strict=True) if now != then
        )
        difference = f"job {job} where the sweep planned {was}"
    raise ExperimentError(
        f"{given}: the configs it was made from plan {difference} now; resume it where those "
        "configs are as they were"
    )
