"""Hydra failing to make or fill the run folder, said in one line (cli.folder_errors)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from experiments.cli.folder_errors import run_folder_unmade


def _hydra_opened(folder: Path, *names: str) -> Path:
    """`folder` as Hydra leaves it when a write fails: the files it opened (and so made) there."""
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).touch()
    return folder


@pytest.mark.parametrize(
    ("code", "remedy"),
    [
        (errno.ENOSPC, "free space there"),
        (errno.EDQUOT, "free space within your quota there"),
        (errno.EFBIG, "raise the limit on a file's size (ulimit -f)"),
        (errno.EACCES, "make it writable"),
    ],
)
def test_a_config_copy_that_cannot_be_written_names_the_file_and_the_remedy(
    tmp_path: Path, code: int, remedy: str
) -> None:
    folder = _hydra_opened(tmp_path / "run" / ".hydra", "config.yaml")
    # A failed write names no file.
    said = run_folder_unmade(OSError(code, os.strerror(code)), folder)
    assert said == (
        f"could not write {tmp_path}/run/.hydra/config.yaml, Hydra's copy of the config: "
        f"{os.strerror(code)}; {remedy}, or name another folder with hydra.run.dir= "
        "(hydra.sweep.dir= for -m)"
    )


def test_the_file_named_is_the_last_hydra_opened(tmp_path: Path) -> None:
    folder = _hydra_opened(tmp_path / ".hydra", "config.yaml", "hydra.yaml")
    said = run_folder_unmade(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), folder)
    assert said is not None
    assert said.startswith(f"could not write {folder}/hydra.yaml, Hydra's copy of the config: ")


def test_a_file_hydra_could_not_open_is_named_as_the_error_names_it(tmp_path: Path) -> None:
    folder = _hydra_opened(tmp_path / ".hydra", "config.yaml")
    unopened = OSError(errno.EACCES, os.strerror(errno.EACCES), str(folder / "hydra.yaml"))
    said = run_folder_unmade(unopened, folder)
    assert said is not None
    assert said.startswith(f"could not write {folder}/hydra.yaml, Hydra's copy of the config: ")


def test_an_error_while_hydra_writes_no_copy_is_not_taken_for_one(tmp_path: Path) -> None:
    folder = _hydra_opened(tmp_path / ".hydra", "config.yaml")
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    elsewhere = OSError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path / "data.bin"))
    assert run_folder_unmade(full, None) is None  # before the run's start, or after its job's
    assert run_folder_unmade(elsewhere, folder) is None
    assert run_folder_unmade(full, tmp_path / "unmade") is None  # Hydra opened nothing there
