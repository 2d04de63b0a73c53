"""The folder Hydra is about to make for a job, refused while an earlier run or sweep is in it: a
new run never writes over another (`experiments.records.own_folder`).

Hydra calls `RunFolderCheck` (`hydra.callbacks` of conf/train.yaml and conf/eval.yaml) once it has
composed the config, with `hydra.run.dir` (`hydra.sweep.dir` for -m) as it will be, and before it
makes the folder, writes its snapshot (.hydra/) there and opens the log. Hydra makes an Exception
of a callback a warning and goes on; the refusal is `Refused`, which Hydra passes on and the
command line says in one line. It also notes where Hydra is about to write its copy of the config
(`config_copy`), until the job starts: Hydra's error for a write there that fails names no file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from experiments.core.errors import ExperimentError
from experiments.devices.process_group import ProcessGroup
from experiments.records.own_folder import refuse_writing_over


class Refused(BaseException):
    """A folder refused before Hydra made it; like SystemExit, no Exception, so Hydra passes it
    on without a word."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ConfigCopy:
    """The folder Hydra is writing its copy of the config in (`<run dir>/.hydra`), from a run's
    start until its job starts (Hydra writes the copy in between); None outside that, in a sweep
    (Hydra names a job's folder only as it writes there), and where Hydra writes no copy (a
    resume, torchrun's processes other than 0)."""

    folder: Path | None = None


# Hydra makes `RunFolderCheck` from the config, so nothing can hand it an object to write in:
# this one, cleared by the command line as each command starts, read when a command fails.
config_copy = ConfigCopy()


class RunFolderCheck(Callback):
    """Refuses a run folder (or a sweep's) that holds an earlier run, before anything is written
    there. `evaluation`: the command is eval.py."""

    def __init__(self, evaluation: bool = False) -> None:
        self.evaluation = evaluation

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        subdir = config.hydra.output_subdir  # None: Hydra writes no copy
        run_dir = Path(os.path.abspath(str(config.hydra.run.dir)))  # (as Hydra makes it)
        config_copy.folder = None if subdir is None else run_dir / str(subdir)
        if config.get("resume"):  # continues a run in its own folder
            return
        folder = str(config.hydra.run.dir)
        if self.evaluation:
            remedy = (
                "an evaluation writes a folder of its own: leave hydra.run.dir out, or name a "
                "folder no run has written"
            )
        else:
            remedy = (
                f"a new run never writes over another: resume={folder} continues that run, "
                f"replay={folder} repeats it in a new folder, or leave hydra.run.dir out for a "
                "folder of its own"
            )
        _refuse_writing_over(f"hydra.run.dir={folder}", Path(folder), remedy)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        config_copy.folder = None  # written

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = str(config.hydra.sweep.dir)
        remedy = (
            "a new sweep never writes over another: leave hydra.sweep.dir out for a folder of its "
            "own, or name a folder no run has written"
        )
        _refuse_writing_over(f"hydra.sweep.dir={folder}", Path(folder), remedy, sweep=True)


def _refuse_writing_over(given: str, folder: Path, remedy: str, *, sweep: bool = False) -> None:
    """Refuse the folder, or let Hydra make it. torchrun's processes name one folder, which
    process 0's Hydra makes (the others may find it made): process 0 decides for all, and says
    why; the others end without a word."""

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
