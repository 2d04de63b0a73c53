"""Streaming through DataLoader workers: undecodable images named, the workers let go."""

from __future__ import annotations

import gc
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from helpers import CAT_DOG, Folders, load, load_error, on, small_folder


@pytest.mark.slow
def test_a_worker_that_cannot_decode_an_image_names_it_and_is_let_go(tmp_path: Path) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    bad = root / "train" / "dog" / "1.png"
    bad.write_bytes(b"not a PNG after all")
    before = set(multiprocessing.active_children())
    message = load_error(
        "dataset=image_folder",
        f"dataset.root={root}",
        f"dataset.cache_dir={tmp_path / 'cache'}",
        "dataset.loader=memory",
        "dataset.workers=1",  # decoded by a worker process
    )
    assert message == f"{bad} cannot be decoded as an image (it is in no image format Pillow reads)"
    assert lingering(set(multiprocessing.active_children()) - before) == []


def test_an_image_that_cannot_be_decoded_while_streaming_is_named(tmp_path: Path) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    bad = root / "test" / "cat" / "0.png"
    bad.write_bytes(b"")
    data = load(
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.loader=stream",
        "dataset.mean=[0.5]",
        "dataset.std=[0.5]",
    )
    batches = Batches(data.test, batch_size=2, mean=[0.5], std=[0.5], runtime=on("cpu"))
    with pytest.raises(ExperimentError) as error:
        list(batches)
    assert str(error.value) == (
        f"{bad} cannot be decoded as an image (it is in no image format Pillow reads)"
    )


@pytest.mark.slow
def test_a_streamed_split_lets_its_workers_go_when_it_is_dropped(folders: Folders) -> None:
    data = load(
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=stream",
        "dataset.mean=[0.5]",
        "dataset.std=[0.5]",
        "dataset.workers=1",
    )
    before = set(multiprocessing.active_children())
    batches = Batches(data.test, batch_size=64, mean=[0.5], std=[0.5], runtime=on("cpu"))
    assert sum(len(labels) for _, labels in batches) == 100
    workers = set(multiprocessing.active_children()) - before
    assert len(workers) == 1
    del batches  # at once, not when the garbage collector finds it (5 s a worker, then)
    assert lingering(workers) == []


def lingering(workers: set[multiprocessing.process.BaseProcess]) -> list[Any]:
    """The worker processes still alive half a second from now."""
    deadline = time.monotonic() + 0.5
    while any(worker.is_alive() for worker in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [worker for worker in workers if worker.is_alive()]
    gc.collect()  # if they linger, let them go before the next test rather than in it
    return alive
