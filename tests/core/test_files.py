"""Atomic writes: nothing half-written is left, by a failed write or by a killed one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import pytest

from experiments.core.files import remove_leftovers, write_atomically, write_text_atomically


def test_a_write_cut_short_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_text_atomically(path, "before")

    def interrupted(file: IO[bytes]) -> None:
        file.write(b"half of it")
        raise KeyboardInterrupt  # Ctrl-C, or SIGTERM taken as one

    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, interrupted)
    assert sorted(tmp_path.iterdir()) == [path]
    assert path.read_text() == "before"


def test_temporary_files_a_killed_writer_left_are_removed(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    left = [
        tmp_path / "checkpoints" / ".last.pt.4242.tmp",
        tmp_path / "checkpoints" / ".best.pt.4243.tmp",
        tmp_path / ".results.json.4242.tmp",
    ]
    kept = [tmp_path / "checkpoints" / "last.pt", tmp_path / ".hydra.tmp", tmp_path / "notes.tmp"]
    for path in left + kept:
        path.write_bytes(b"")
    assert sorted(remove_leftovers(tmp_path, tmp_path / "checkpoints")) == sorted(left)
    assert sorted(path for path in tmp_path.rglob("*") if path.is_file()) == sorted(kept)
    assert not any(path.exists() for path in left)
    assert os.listdir(tmp_path / "checkpoints") == ["last.pt"]
