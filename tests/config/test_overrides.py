"""resume= and replay= read a run folder before Hydra starts; a folder resume= cannot write into
is refused there, in one line naming what cannot be written."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.config.overrides import with_saved_overrides
from experiments.core.errors import ExperimentError


@pytest.fixture
def read_only_run(tmp_path: Path) -> Iterator[Path]:
    """A run folder (its snapshot, its log) nobody may write into: read-only permissions, or for
    root, whom permissions do not stop, the immutable attribute."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- model=lenet\n")
    (run / "train.log").write_text("")
    if os.geteuid() != 0:
        for path in (run / "train.log", run):
            path.chmod(0o555)
        yield run
        run.chmod(0o755)
        return
    paths, chattr = [str(run / "train.log"), str(run)], shutil.which("chattr")
    try:
        if chattr is None or subprocess.run([chattr, "+i", *paths]).returncode:
            pytest.skip("chattr +i is not available to make a folder read-only for root")
        yield run
    finally:
        if chattr is not None:
            subprocess.run([chattr, "-i", *paths], capture_output=True)


def test_resuming_into_a_read_only_folder_is_refused_in_one_line(read_only_run: Path) -> None:
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"resume={read_only_run}"])
    assert str(error.value) == (
        f"resume={read_only_run}: {read_only_run} is read-only, and a resume writes into the "
        f"run's own folder; make it writable (chmod -R u+w {read_only_run}), or replay= the run "
        "in a new folder"
    )


def test_replaying_a_read_only_folder_is_fine(read_only_run: Path) -> None:
    assert with_saved_overrides([f"replay={read_only_run}"])[-1] == f"replay={read_only_run}"
