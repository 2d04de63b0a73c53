"""Hydra failing to make or fill the run folder, said in one line (cli.folder_errors)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from experiments.cli.folder_errors import run_folder_unmade


def _save_config(output_dir: Path, filename: str, code: int) -> None:
    """Fails as Hydra's `_save_config` does when its write fails: an OSError naming no file."""
    raise OSError(code, os.strerror(code))


@pytest.mark.parametrize(
    ("code", "remedy"),
    [
        (errno.ENOSPC, "free space there"),
        (errno.EDQUOT, "free space within your quota there"),
        (errno.EACCES, "make it writable"),
    ],
)
def test_a_config_copy_that_cannot_be_written_names_the_file_and_the_remedy(
    tmp_path: Path, code: int, remedy: str
) -> None:
    try:
        _save_config(tmp_path / "run" / ".hydra", "config.yaml", code)
    except OSError as error:
        said = run_folder_unmade(error)
    assert said == (
        f"could not write {tmp_path}/run/.hydra/config.yaml, Hydra's copy of the config: "
        f"{os.strerror(code)}; {remedy}, or name another folder with hydra.run.dir= "
        "(hydra.sweep.dir= for -m)"
    )
