"""The run folder's Hydra callback (cli.run_folder): where Hydra writes its copy of the config,
noted from the run's start until its job starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.cli.run_folder import RunFolderCheck, config_copy
from helpers import compose_config


@pytest.fixture(autouse=True)
def no_copy_noted() -> Iterator[None]:
    config_copy.folder = None
    yield
    config_copy.folder = None


def test_the_config_copy_is_noted_from_the_runs_start_until_its_jobs(tmp_path: Path) -> None:
    config = compose_config(f"hydra.run.dir={tmp_path}/run", hydra=True)
    check = RunFolderCheck()
    check.on_run_start(config)
    assert config_copy.folder == tmp_path / "run" / ".hydra"
    check.on_job_start(config, task_function=print)
    assert config_copy.folder is None


def test_no_config_copy_is_noted_where_hydra_writes_none(tmp_path: Path) -> None:
    # As for torchrun's processes other than 0, and a resume.
    config = compose_config(f"hydra.run.dir={tmp_path}", "hydra.output_subdir=null", hydra=True)
    config_copy.folder = tmp_path / "an earlier run" / ".hydra"
    RunFolderCheck().on_run_start(config)
    assert config_copy.folder is None
