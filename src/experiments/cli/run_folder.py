"""A run folder refused while an earlier run is in it, and where Hydra writes its config copy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from experiments.config.naming import resumes_a_sweep
from experiments.core.errors import ExperimentError
from experiments.devices.process_group import ProcessGroup
from experiments.records.own_folder import refuse_writing_over


class Refused(BaseException):
    """A folder refused before Hydra made it; no Exception, which Hydra would make a warning."""


class ConfigCopy:
    """`<run dir>/.hydra` while Hydra writes its copy of the config there; None otherwise."""

    folder: Path | None = None


# Hydra builds `RunFolderCheck` from the config, so nothing can hand it an object to write in.
config_copy = ConfigCopy()


class RunFolderCheck(Callback):
    """Refuses a run folder (or a sweep's) that holds an earlier run; `evaluation`: eval.py's."""

    def __init__(self, evaluation: bool = False) -> None:
        self.evaluation = evaluation

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        subdir = config.hydra.output_subdir  # None: Hydra writes no copy
        run_dir = Path(os.path.abspath(str(config.hydra.run.dir)))  # (as Hydra makes it)
        config_copy.folder = None if subdir is None else run_dir / str(subdir)
        if config.get("resume"):  # continues a run in its own folder
            return
        folder = str(config.hydra.run.dir)
        remedy = (
            "an evaluation writes a folder of its own: leave hydra.run.dir out, or name a "
            "folder no run has written"
            if self.evaluation
            else f"a new run never writes over another: resume={folder} continues that run, "
            f"replay={folder} repeats it in a new folder, or leave hydra.run.dir out for a "
            "folder of its own"
        )
        _refuse_writing_over(f"hydra.run.dir={folder}", Path(folder), remedy)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        config_copy.folder = None  # written

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if resumes_a_sweep(config):  # goes on in its own folder
            return
        folder = str(config.hydra.sweep.dir)
        remedy = (
            "a new sweep never writes over another: leave hydra.sweep.dir out for a folder of its "
            "own, or name a folder no run has written"
        )
        _refuse_writing_over(f"hydra.sweep.dir={folder}", Path(folder), remedy, sweep=True)


def _refuse_writing_over(given: str, folder: Path, remedy: str, *, sweep: bool = False) -> None:
    """Refuse the folder, or let Hydra make it; under torchrun, process 0 decides for all."""

    def refusal() -> str:
        try:
            refuse_writing_over(given, folder, remedy, sweep=sweep)
        except ExperimentError as error:
            return str(error)
        return ""

    group = ProcessGroup.from_env()
    if group.world_size > 1:
        from experiments.devices.distributed import process_0_says  # torch: under torchrun only

        said = process_0_says(group, "run folder", refusal)
    else:
        said = refusal()
    if said and not group.is_main:
        raise SystemExit(1)
    if said:
        raise Refused(said)
