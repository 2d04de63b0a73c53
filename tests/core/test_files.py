"""Atomic writes: nothing half-written is left, by a failed write or by a killed one. Bounded reads:
only a regular file is read, and no more of it than its kind may be."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from experiments.core.errors import ExperimentError
from experiments.core.files import (
    LOG,
    RECORD,
    Bound,
    UnreadableFile,
    as_json,
    as_json_lines,
    as_text,
    as_yaml,
    opened,
    read_data,
    remove_leftovers,
    write_atomically,
    write_text_atomically,
)
from helpers import failing_if_still_reading


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


# A bound small enough to write past in a test.
SMALL_BOUND = Bound("a test record", 100, "write a smaller one")


@pytest.mark.parametrize("parse", [as_json_lines, as_yaml, as_json, as_text])
def test_a_record_that_links_to_a_device_is_refused_before_it_is_read(
    tmp_path: Path, parse: Callable[[IO[bytes]], object]
) -> None:
    """Read to its end, /dev/zero would fill the memory (a record linked to it, in a run folder
    from elsewhere)."""
    record = tmp_path / "results.json"
    record.symlink_to("/dev/zero")
    with pytest.raises(ExperimentError) as refused:
        read_data(record, RECORD, parse)
    assert str(refused.value) == (
        f"{record} is not a regular file (a character device); the tool wrote it in a run "
        "folder: put it back from a copy, or move it out of the folder"
    )


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    pipe = tmp_path / "metrics.jsonl"
    os.mkfifo(pipe)
    with (
        failing_if_still_reading(),
        pytest.raises(ExperimentError, match=r"is not a regular file \(a named pipe\); "),
    ):
        read_data(pipe, LOG, as_json_lines)


def test_a_file_larger_than_its_kind_may_be_is_refused_unread(tmp_path: Path) -> None:
    record = tmp_path / "record"
    record.write_bytes(b"x" * 100)
    assert read_data(record, SMALL_BOUND, as_text) == "x" * 100
    record.write_bytes(b"x" * 3000)
    with pytest.raises(ExperimentError) as refused:
        read_data(record, SMALL_BOUND, as_text)
    assert str(refused.value) == (
        f"{record} is 2.93 KiB: more than 100 bytes, the most a test record may be; write a "
        "smaller one"
    )


def test_a_file_that_grows_past_its_bound_as_it_is_read_is_refused(tmp_path: Path) -> None:
    record = tmp_path / "record"
    record.write_bytes(b"x" * 60)
    with opened(record, SMALL_BOUND) as file:
        assert file.read(10) == b"x" * 10
        with record.open("ab") as appended:  # another process writing on, past the bound
            appended.write(b"y" * 1000)
        with pytest.raises(ExperimentError) as refused:
            file.read()
    assert str(refused.value) == (
        f"{record} grew past 100 bytes as it was read: more than 100 bytes, the most a test "
        "record may be; write a smaller one"
    )


@pytest.mark.parametrize(
    ("written", "parse", "why"),
    [
        (b'{"a": ', as_json, "is not JSON (Expecting value: line 1 column 7)"),
        (b"\xff\xfe", as_text, "is not text (not UTF-8)"),
        (b'{"a": 1}\nnot json\n', as_json_lines, "line 2 is not a JSON row (Expecting value)"),
        (b"a: [\n", as_yaml, "is not YAML (did not find expected node content at line 2)"),
    ],
    ids=["json", "text", "json-lines", "yaml"],
)
def test_a_file_its_parser_cannot_read_is_one_line_naming_it(
    tmp_path: Path, written: bytes, parse: Callable[[IO[bytes]], object], why: str
) -> None:
    record = tmp_path / "record"
    record.write_bytes(written)
    with pytest.raises(UnreadableFile) as unreadable:
        read_data(record, RECORD, parse, name="the record")
    assert unreadable.value.why == why
    assert str(unreadable.value).startswith(f"the record {why}")
    assert "\n" not in str(unreadable.value)
    with pytest.raises(UnreadableFile) as missing:
        read_data(tmp_path / "gone", RECORD, as_json)
    assert missing.value.why == "cannot be read (No such file or directory)"
    assert isinstance(missing.value.__cause__, FileNotFoundError)
