"""A named pipe, socket or other file that is not a regular one, where an image belongs, is refused
by name before anything reads it (reading a named pipe waits for ever); a link to an image is an
image."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from torchvision.datasets import ImageFolder

from experiments.core.errors import ExperimentError
from experiments.data import own_data
from experiments.records import checkpoints
from experiments.training.models import LeNet
from experiments.training.weights import load_weights
from helpers import CAT_DOG, failing_if_still_reading, load, load_error, small_folder

IMAGE_FOLDER = "class folders hold only image files"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return small_folder(tmp_path / "images", CAT_DOG)


def test_a_named_pipe_named_as_an_image_is_refused_before_it_is_read(folder: Path) -> None:
    pipe = folder / "train" / "cat" / "0.png"  # the first image, read first for its size
    pipe.unlink()
    os.mkfifo(pipe)
    with failing_if_still_reading():
        said = load_error("dataset=image_folder", f"dataset.root={folder}")
    assert said == f"{pipe} is not a regular file (a named pipe); {IMAGE_FOLDER}"


def test_a_socket_or_a_link_to_a_pipe_is_refused_by_the_name_in_the_folder(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = folder / "test" / "dog" / "1.png"
    served.unlink()
    monkeypatch.chdir(served.parent)  # a socket's path is at most 107 bytes: bind it by its name
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(served.name)
        said = load_error("dataset=image_folder", f"dataset.root={folder}")
    assert said == f"{served} is not a regular file (a socket); {IMAGE_FOLDER}"

    served.unlink()
    os.mkfifo(folder / "pipe")
    served.symlink_to(folder / "pipe")
    with failing_if_still_reading():
        said = load_error("dataset=image_folder", f"dataset.root={folder}")
    assert said == f"{served} is not a regular file (a named pipe); {IMAGE_FOLDER}"


def test_a_link_to_an_image_is_an_image(folder: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "kept.png"
    (folder / "train" / "dog" / "1.png").rename(elsewhere)
    (folder / "train" / "dog" / "1.png").symlink_to(elsewhere)
    data = load("dataset=image_folder", f"dataset.root={folder}", "dataset.cache=false")
    assert data.train is not None and (len(data.train), len(data.test)) == (4, 4)


def test_a_dataset_of_ones_own_naming_a_pipe_is_refused_before_it_is_read(folder: Path) -> None:
    pipe = folder / "test" / "dog" / "0.png"
    pipe.unlink()
    os.mkfifo(pipe)
    # torchvision's own ImageFolder takes any file with an image's name.
    made = (ImageFolder(str(folder / "train")), ImageFolder(str(folder / "test")))
    with pytest.raises(ExperimentError) as refused, failing_if_still_reading():
        own_data.splits(made, "my_data.folders")
    assert str(refused.value) == (
        f"{pipe} is not a regular file (a named pipe); my_data.folders's test split names "
        "it as an image file"
    )


def test_a_named_pipe_given_as_a_checkpoint_or_weights_is_refused(tmp_path: Path) -> None:
    pipe = tmp_path / "last.pt"
    os.mkfifo(pipe)
    with failing_if_still_reading(), pytest.raises(ExperimentError) as as_checkpoint:
        checkpoints.find(pipe)
    assert str(as_checkpoint.value) == (
        f"{pipe} is not a regular file (a named pipe); give a .pt file or a run folder"
    )
    with failing_if_still_reading(), pytest.raises(ExperimentError) as as_weights:
        load_weights(LeNet(3, 32, 10), str(pipe))
    assert str(as_weights.value).startswith(f"{pipe} is not a regular file (a named pipe); ")
