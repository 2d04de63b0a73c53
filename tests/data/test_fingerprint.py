"""The data's fingerprint: the same for the same data wherever it lies, and a difference named in
words (what a resume on other data is refused with)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from experiments.data import fingerprint, loading, validation
from experiments.data.types import ImageData
from helpers import CAT_DOG, compose_config, small_folder


def fingerprint_of(*overrides: str, data: ImageData | None = None) -> dict[str, Any]:
    """The fingerprint of what `python train.py <overrides>` would train and validate on (`data`:
    the dataset as loaded already, before its validation split is held out)."""
    config = compose_config(*overrides).dataset
    data = data if data is not None else loading.load(config)
    return fingerprint.data_fingerprint(validation.with_validation(data, config), config)


@pytest.mark.slow
def test_the_validation_split_and_the_dataset_are_told_apart() -> None:
    sample = loading.load(compose_config().dataset)
    recorded = fingerprint_of("dataset.val_fraction=0.1", data=sample)
    assert fingerprint.difference(recorded, recorded) is None
    assert fingerprint.difference(
        recorded, fingerprint_of("dataset.val_fraction=0.5", data=sample)
    ) == ("validation split: 400 images then, 2002 now (dataset.val_fraction=0.1 then, 0.5 now)")
    assert fingerprint.difference(
        recorded, fingerprint_of("dataset.val_fraction=0.1", "dataset.val_seed=1", data=sample)
    ) == ("validation split: other images held out of train (dataset.val_seed=0 then, 1 now)")
    # Images of the same shape and classes, from elsewhere.
    few = ("dataset=synthetic", "dataset.train_size=40", "dataset.test_size=10")
    synthetic = fingerprint_of(*few)
    assert (
        fingerprint.difference(recorded, synthetic) == "dataset=cifar10_sample then, synthetic now"
    )
    assert fingerprint.difference(synthetic, fingerprint_of(*few, "dataset.data_seed=1")) == (
        "dataset.source: seed=0 then, 1 now"
    )


def folder_fingerprint(root: Path) -> dict[str, Any]:
    """An image folder's, its files listed but none decoded."""
    return fingerprint_of(
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.loader=stream",
        "dataset.workers=0",
        "dataset.mean=[0.5]",
        "dataset.std=[0.5]",
    )


def test_an_image_folder_is_the_same_moved_and_another_with_files_added_or_changed(
    tmp_path: Path,
) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    recorded = folder_fingerprint(root)
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    assert fingerprint.difference(recorded, folder_fingerprint(moved)) is None

    # An image replaced by another of another size: the same number of images.
    Image.new("RGB", (16, 16), (1, 2, 3)).save(moved / "train" / "dog" / "1.png")
    assert fingerprint.difference(recorded, folder_fingerprint(moved)) == (
        f"train split: its 4 images are other files, or files changed since (dataset.root={root} "
        f"then, {moved} now)"
    )
    Image.new("RGB", (8, 8), (1, 2, 3)).save(root / "train" / "dog" / "2.png")
    assert fingerprint.difference(recorded, folder_fingerprint(root)) == (
        "train split: 4 images then, 5 now (with the same settings: the data changed at its source)"
    )


def test_a_csv_file_edited_since_is_other_data(tmp_path: Path) -> None:
    """Its rows and columns count the same; a value changed is told by the values' digest."""
    table = tmp_path / "table.csv"
    table.write_text("a,b,y\n" + "".join(f"{row},{row % 3},{2 * row}\n" for row in range(20)))
    csv = ("task=regression", "dataset=csv", f"dataset.path={table}", "dataset.target=y")
    held_out = "dataset.val_fraction=0.2"
    recorded = fingerprint_of(*csv, held_out)
    assert fingerprint.difference(recorded, fingerprint_of(*csv, held_out)) is None

    table.write_text(table.read_text().replace("\n7,1,14\n", "\n7,1,15\n"))
    edited = fingerprint_of(*csv, held_out)
    assert fingerprint.difference(recorded, edited) == (
        "train split: its 13 rows hold other values than then (with the same settings: the data "
        "changed at its source)"
    )
    # A checkpoint from before the values' digests resumes on the counts it holds.
    older = {key: value for key, value in recorded.items() if key != "rows"}
    assert fingerprint.difference(older, edited) is None
