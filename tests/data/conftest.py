"""The CIFAR-10 sample and the image folders written from it, once a session, for tests/data/."""

from __future__ import annotations

import pytest

from experiments.data import builtin
from experiments.data.types import Split
from helpers import CIFAR10_CLASSES, Folders, first_images, write_image_folder


@pytest.fixture(scope="session")
def sample() -> tuple[Split, Split]:
    return builtin.cifar10_sample()


@pytest.fixture(scope="session")
def folders(tmp_path_factory: pytest.TempPathFactory, sample: tuple[Split, Split]) -> Folders:
    root = tmp_path_factory.mktemp("folders")
    train, test = sample
    first = {"train": first_images(train, 300), "test": first_images(test, 100)}
    return Folders(
        png=write_image_folder(root / "png", first, CIFAR10_CLASSES),
        jpeg=write_image_folder(root / "jpeg", first, CIFAR10_CLASSES, ".jpg", size=48),
        whole=write_image_folder(root / "whole", {"train": train, "test": test}, CIFAR10_CLASSES),
    )
