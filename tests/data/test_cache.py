"""The decoded-image cache: an unwritable cache_dir, a changed folder, two processes building it."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from experiments.config.schemas import DatasetConfig
from experiments.data import loading
from experiments.data.types import Split
from helpers import CAT_DOG, Folders, compose_config, load, load_error, small_folder


@pytest.mark.slow
def test_a_cache_dir_that_cannot_be_written_is_refused(folders: Folders, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file, where the cache's parent folder should be")
    cache_dir = tmp_path / "file" / "cache"
    assert load_error(
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=memory",
        f"dataset.cache_dir={cache_dir}",
    ) == (
        f"dataset.cache_dir={cache_dir} is not a writable folder (Not a directory); name another "
        "folder, or set dataset.cache=false to keep nothing there"
    )


@pytest.mark.slow
def test_a_changed_folder_gets_a_new_cache_entry(folders: Folders, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    shutil.copytree(folders.png, root)
    overrides = (
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.loader=memory",
        f"dataset.cache_dir={tmp_path / 'cache'}",
    )

    def entries() -> dict[str, tuple[str, bool]]:
        cache = load(*overrides).record["cache"]
        return {split: (Path(cache[split]["path"]).name, cache[split]["built"]) for split in cache}

    first = entries()
    assert all(built for _, built in first.values())
    assert entries() == {split: (name, False) for split, (name, _) in first.items()}

    touched = next((root / "train").glob("*/010.png"))
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    second = entries()
    assert second["test"] == (first["test"][0], False)
    assert second["train"][0] != first["train"][0] and second["train"][1] is True

    replaced = next((root / "test").glob("*/20.png"))
    Image.new("RGB", (32, 32), "white").save(replaced)
    third = entries()
    assert third["train"] == (second["train"][0], False)
    assert third["test"][0] != first["test"][0] and third["test"][1] is True
    kept = {path.name for path in (tmp_path / "cache").iterdir() if path.is_dir()}
    assert kept == {first["train"][0], first["test"][0], second["train"][0], third["test"][0]}


def _build_cache(config: DatasetConfig, start: Any, records: Any) -> None:
    """In a process of its own: load `config` once the other builder is ready too."""
    torch.set_num_threads(1)  # as DataLoader workers do: the pool forked with them is unusable
    start.wait()
    records.put(loading.load(config).record["cache"])


def test_two_processes_building_the_same_cache_at_once_share_one_entry(
    folders: Folders, sample: tuple[Split, Split], tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    config = compose_config(
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=memory",
        f"dataset.cache_dir={cache_dir}",
        "dataset.workers=0",
    ).dataset
    # Forked, so both have everything imported already, and load at the same moment.
    context = multiprocessing.get_context("fork")
    start, records = context.Barrier(2), context.Queue()
    builders = [
        context.Process(target=_build_cache, args=(config, start, records)) for _ in range(2)
    ]
    for builder in builders:
        builder.start()
    try:
        found = [records.get(timeout=120) for _ in builders]
        for builder in builders:
            builder.join(timeout=60)
            assert builder.exitcode == 0
    finally:
        for builder in builders:
            if builder.is_alive():
                builder.kill()

    for split, count, images in (("train", 300, sample[0].images), ("test", 100, sample[1].images)):
        # One process built the entry; the other waited for it, and used it.
        assert sorted(record[split]["built"] for record in found) == [False, True]
        (path,) = {record[split]["path"] for record in found}
        entry = Path(path)
        meta = json.loads((entry / "meta.json").read_text())
        assert meta["count"] == count
        assert (entry / "images.npy").stat().st_size == meta["images_bytes"]
        assert np.array_equal(np.load(entry / "images.npy"), images[:count].numpy())
    assert sorted(path.name for path in cache_dir.iterdir() if path.is_dir()) == sorted(
        Path(record[split]["path"]).name for record in found[:1] for split in ("train", "test")
    )


def _small_folder_in_memory(tmp_path: Path) -> tuple[str, ...]:
    """Overrides for a four-image folder loaded into memory, cached under tmp_path."""
    return (
        "dataset=image_folder",
        f"dataset.root={small_folder(tmp_path / 'folder', CAT_DOG)}",
        "dataset.loader=memory",
        f"dataset.cache_dir={tmp_path / 'cache'}",
    )


def _overwrite(path: Path, old: bytes, new: bytes) -> None:
    """Replace `old` with `new` (as long) in the file at `path`, its size kept."""
    content = path.read_bytes()
    assert old in content and len(old) == len(new)
    path.write_bytes(content.replace(old, new, 1))


def _zero_images(entry: Path) -> None:
    images = entry / "images.npy"
    header = len(images.read_bytes()) - np.load(images).nbytes
    with open(images, "r+b") as file:  # the pixels zeroed in place: the same size
        file.seek(header)
        file.write(bytes(images.stat().st_size - header))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        (_zero_images, "images.npy is not what was written: its CRC-32 differs"),
        # np.load's "This file contains pickled (object) data", once every later run.
        (
            lambda entry: _overwrite(entry / "labels.npy", b"'<i8'", b"'|O' "),
            "labels.npy is not what was written: its CRC-32 differs",
        ),
        (
            lambda entry: _overwrite(entry / "images.npy", b"'|u1'", b"'|O' "),
            "images.npy is not what was written: its CRC-32 differs",
        ),
    ],
)
def test_a_cache_entry_changed_in_place_is_named_and_decoded_again(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    spoil: Callable[[Path], None],
    problem: str,
) -> None:
    overrides = _small_folder_in_memory(tmp_path)
    first = load(*overrides)
    assert isinstance(first.train, Split)
    images, labels = first.train.images.clone(), first.train.labels.clone()
    entry = Path(first.record["cache"]["train"]["path"])
    spoil(entry)

    data = load(*overrides)

    assert f"cache {entry} is corrupt ({problem}): decoding again" in caplog.messages
    assert data.record["cache"]["train"]["built"] is True
    assert data.record["cache"]["test"]["built"] is False
    assert isinstance(data.train, Split)
    assert torch.equal(data.train.images, images) and torch.equal(data.train.labels, labels)


def test_torn_statistics_are_named_and_computed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = _small_folder_in_memory(tmp_path)
    first = load(*overrides)
    (kept,) = (tmp_path / "cache").glob("*-statistics.json")
    kept.write_text(kept.read_text()[:20])  # a copy cut short

    again = load(*overrides)

    assert (again.mean, again.std) == (first.mean, first.std)
    assert again.record["statistics"] == "computed from 4 training images"
    (warning,) = [message for message in caplog.messages if str(kept) in message]
    assert warning.startswith(f"statistics {kept} cannot be read (")
    assert warning.endswith("): computing them again")
    assert json.loads(kept.read_text())["mean"] == first.mean  # written whole again
    assert load(*overrides).record["statistics"].endswith(f"read from {kept.resolve()}")


# Takes the lock file it is given and holds it, as a build would: a builder stopped (SIGSTOP) or
# hung mid-build.
HOLD_LOCK = """
import fcntl, sys, time
lock = open(sys.argv[1], "w")
fcntl.flock(lock, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.slow
def test_waiting_on_another_processs_build_says_so_and_gives_up_in_one_line(
    folders: Folders, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = (
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=memory",
        f"dataset.cache_dir={tmp_path / 'cache'}",
    )
    entry = Path(load(*overrides).record["cache"]["train"]["path"])
    lock = entry.with_name(entry.name + ".lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        began = time.monotonic()
        with caplog.at_level(logging.INFO, logger="experiments"):
            error = load_error(*overrides, "dataset.cache_timeout=0.5")
        waited = time.monotonic() - began
    finally:
        holder.kill()
        holder.wait()
    assert error == (
        f"cache entry {entry} is still being built by another process after "
        f"dataset.cache_timeout=0.5 s (it holds {lock}); if that process is stopped or hung, end "
        "it, or give it longer with dataset.cache_timeout=SECONDS"
    )
    assert 0.5 <= waited < 20
    assert (
        f"waiting for another process to build the cache entry {entry} (it holds {lock}; "
        "giving up after dataset.cache_timeout=0.5 s)"
    ) in caplog.text


# A build that takes its time (a slow image a second), in a process that takes SIGTERM as every
# command does.
SLOW_BUILD = """
import sys, time
from pathlib import Path
import torch
from experiments.core.interrupts import take_interrupts
from experiments.data import cache

class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 60

    def __getitem__(self, index):
        time.sleep(1)
        return torch.zeros(3, 8, 8, dtype=torch.uint8), 0

take_interrupts()
try:
    cache.decoded(Slow(), Path(sys.argv[1]), (3, 8, 8), workers=0, timeout=60)
except KeyboardInterrupt as interrupt:
    print(type(interrupt).__name__, flush=True)
"""


@pytest.mark.slow
def test_sigterm_mid_build_leaves_no_temporary_folder(tmp_path: Path) -> None:
    entry = tmp_path / "image_folder-train-0123456789abcdef"
    builder = subprocess.Popen(
        [sys.executable, "-c", SLOW_BUILD, str(entry)], stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f"{entry.name}.tmp-*/images.npy")):
            assert time.monotonic() < deadline and builder.poll() is None
            time.sleep(0.05)
        builder.send_signal(signal.SIGTERM)
        stdout, _ = builder.communicate(timeout=30)
    finally:
        builder.kill()
        builder.wait()
    assert stdout == "Terminated\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"{entry.name}.lock"]
