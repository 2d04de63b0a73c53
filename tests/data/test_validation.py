"""The validation split: held out stratified and seeded, an image folder's val/, streamed splits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset

from experiments.core.errors import ExperimentError
from experiments.data import loading, validation
from experiments.data.types import ImageData, Split, Streamed
from helpers import CIFAR10_CLASSES, compose_config, write_image_folder

CLASSES = CIFAR10_CLASSES


def test_the_held_out_images_are_disjoint_stratified_and_seeded(
    sample: tuple[Split, Split],
) -> None:
    labels = sample[0].labels
    kept, held_out = validation.held_out_rows(labels, 0.1, seed=0, classes=CLASSES)
    assert set(kept.tolist()).isdisjoint(held_out.tolist())
    assert sorted(kept.tolist() + held_out.tolist()) == list(range(len(labels)))
    per_class = torch.bincount(labels, minlength=10)
    held_per_class = torch.bincount(labels[held_out], minlength=10)
    assert held_per_class.tolist() == [int(0.1 * n + 0.5) for n in per_class.tolist()]
    again, _ = validation.held_out_rows(labels, 0.1, seed=0, classes=CLASSES)
    other, _ = validation.held_out_rows(labels, 0.1, seed=1, classes=CLASSES)
    assert torch.equal(again, kept) and not torch.equal(other, kept)


def test_a_share_that_leaves_a_class_no_training_image_is_refused(
    sample: tuple[Split, Split],
) -> None:
    with pytest.raises(ExperimentError) as error:
        validation.held_out_rows(sample[0].labels, 0.999, seed=0, classes=CLASSES)
    assert str(error.value) == (
        "dataset.val_fraction=0.999 would leave class airplane no training image (it has 396); "
        "lower dataset.val_fraction, or give the class more images"
    )


def test_a_share_too_small_to_hold_out_an_image_is_refused() -> None:
    config = compose_config("dataset.val_fraction=0.001").dataset
    with pytest.raises(ExperimentError) as error:
        validation.with_validation(loading.load(config), config)
    assert str(error.value) == (
        "dataset.val_fraction=0.001 holds out no image (the largest class has 422); raise it, "
        "or leave it at 0 for no validation split"
    )


@pytest.fixture(scope="module")
def folder_with_val(tmp_path_factory: pytest.TempPathFactory, sample: tuple[Split, Split]) -> Path:
    train, test = sample
    splits = {
        "train": Split(train.images[:200], train.labels[:200]),
        "val": Split(train.images[200:260], train.labels[200:260]),
        "test": Split(test.images[:50], test.labels[:50]),
    }
    return write_image_folder(tmp_path_factory.mktemp("folder") / "images", splits, CLASSES)


@pytest.mark.slow
@pytest.mark.parametrize("loader", ["memory", "stream"])
def test_an_image_folder_validates_on_its_own_val_folder(
    folder_with_val: Path, tmp_path: Path, loader: str, sample: tuple[Split, Split]
) -> None:
    config = compose_config(
        "dataset=image_folder",
        f"dataset.root={folder_with_val}",
        f"dataset.loader={loader}",
        f"dataset.cache_dir={tmp_path}",
        "dataset.workers=0",
    ).dataset
    data = validation.with_validation(loading.load(config), config)
    assert data.val is not None and len(data.val) == 60 and len(data.train) == 200
    counts = torch.bincount(sample[0].labels[200:260], minlength=10).tolist()
    assert data.record["validation"] == {
        "origin": "the dataset's own",
        "images": 60,
        "per_class": dict(zip(CLASSES, counts, strict=True)),
    }

    config.val_fraction = 0.2
    with pytest.raises(ExperimentError) as error:
        validation.with_validation(loading.load(config), config)
    assert str(error.value) == (
        "dataset.val_fraction=0.2: dataset image_folder has a validation split of its own (its "
        "val/ folder), which the run validates on; leave dataset.val_fraction at 0"
    )


def test_a_streamed_train_split_is_held_out_by_its_labels(
    folder_with_val: Path, tmp_path: Path
) -> None:
    config = compose_config(
        "dataset=image_folder",
        f"dataset.root={folder_with_val}",
        "dataset.loader=stream",
        "dataset.workers=0",
    ).dataset
    loaded = dataclasses.replace(loading.load(config), val=None)  # as if it had no val/
    config.val_fraction = 0.25
    data = validation.with_validation(loaded, config)
    assert isinstance(data.train, Streamed) and isinstance(data.val, Streamed)
    assert len(data.train) + len(data.val) == 200
    train_labels, val_labels = validation.labels_of(data.train), validation.labels_of(data.val)
    assert train_labels is not None and val_labels is not None
    everything = validation.labels_of(loaded.train)
    assert everything is not None
    assert (torch.bincount(train_labels) + torch.bincount(val_labels)).tolist() == (
        torch.bincount(everything).tolist()
    )
    # The streamed subsets decode the rows the split chose: the same image, by its label.
    image, label = data.val.dataset[0]
    assert image.shape == (3, 32, 32) and label == val_labels[0].item()


class Unlabelled(Dataset):
    """A user's Dataset that does not list its labels."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.zeros(1, 4, 4, dtype=torch.uint8), index % 2


@pytest.mark.slow
def test_holding_out_from_a_dataset_without_targets_says_what_it_needs() -> None:
    streamed = Streamed(Unlabelled(), workers=0)
    data = ImageData("mine", streamed, streamed, ["a", "b"], [0.5], [0.5], (1, 4, 4))
    config = compose_config("dataset.val_fraction=0.25").dataset
    with pytest.raises(ExperimentError) as error:
        validation.with_validation(data, config)
    assert str(error.value) == (
        "dataset.val_fraction=0.25 needs the training labels without decoding every image: give "
        "the train Dataset of mine a `targets` list (as torchvision's have), or return a "
        "validation split of its own"
    )
