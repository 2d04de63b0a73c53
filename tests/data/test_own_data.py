"""A custom torch Dataset as a source (dataset=custom): it trains with what its data tells, and a
source breaking the contract is refused in one line; the loader chosen for data of one's own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from experiments.config.choices import Loader
from experiments.data import own_data
from experiments.data.types import Split
from helpers import TRAIN, load, load_error, metrics, results, train_cli


@pytest.mark.parametrize(
    ("requested", "decoded_bytes", "max_gb", "chosen", "reason"),
    [
        (
            "auto",
            3_500_000_000,
            4.0,
            "memory",
            "auto: 3,500.0 MB decoded fits dataset.cache_max_gb=4",
        ),
        (
            "auto",
            4_000_000_000,
            4.0,
            "memory",
            "auto: 4,000.0 MB decoded fits dataset.cache_max_gb=4",
        ),
        (
            "auto",
            4_000_000_001,
            4.0,
            "stream",
            "auto: 4,000.0 MB decoded exceeds dataset.cache_max_gb=4",
        ),
        ("auto", 1, 0.0, "stream", "auto: 0.0 MB decoded exceeds dataset.cache_max_gb=0"),
        ("memory", 10**12, 4.0, "memory", "dataset.loader=memory"),
        ("stream", 1, 4.0, "stream", "dataset.loader=stream"),
    ],
)
def test_choose_loader(
    requested: str, decoded_bytes: int, max_gb: float, chosen: str, reason: str
) -> None:
    assert own_data.choose_loader(Loader[requested], decoded_bytes, max_gb) == (
        Loader[chosen],
        reason,
    )


# A user's own source: a module on PYTHONPATH whose functions return torch Datasets.
SOURCE = '''
"""Stripes across or down, as torch Datasets: a source for dataset=custom."""

import torch
from torch.utils.data import Dataset


class Stripes(Dataset):
    classes = ["across", "down"]

    def __init__(self, count, size=16, floats=False):
        self.count, self.size, self.floats = count, size, floats

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        label = index % 2
        generator = torch.Generator().manual_seed(index)
        image = torch.randint(0, 100, (1, self.size, self.size), generator=generator)
        if label == 0:
            image[:, ::2, :] += 150
        else:
            image[:, :, ::2] += 150
        image = image.to(torch.uint8)
        return (image.float() / 255 if self.floats else image), label


def make_splits(train_size=96, test_size=32, size=16):
    """uint8 training images, float test images (torchvision's ToTensor gives floats)."""
    return Stripes(train_size, size), Stripes(test_size, size, floats=True)


class Broken(Stripes):
    def __init__(self, kind, at):
        super().__init__(8)
        self.kind, self.at = kind, at

    def __getitem__(self, index):
        image, label = super().__getitem__(index)
        if index != self.at:
            return image, label
        return {
            "bare": image,
            "numpy": (image.numpy(), label),
            "int32": (image.int(), label),
            "normalized": ((image.float() / 255 - 0.5) / 0.5, label),
            "smaller": (image[:, 1:, 1:], label),
            "oblong": (image[:, :, 2:], label),
            "label": (image, 2),
        }[self.kind]


def broken(kind, at=0):
    return Broken(kind, at), Stripes(4)


class Unnamed(Stripes):
    classes = None


def unnamed():
    return Unnamed(8), Unnamed(4)


def returns(what):
    return {
        "int": 3,
        "one": (Stripes(4),),
        "int test": (Stripes(4), 5),
        "empty test": (Stripes(4), Stripes(0)),
    }[what]
'''
MODULE = "own_stripes"


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder holding the source's module, on this process's import path."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return tmp_path


@pytest.mark.slow
def test_a_custom_dataset_trains_with_what_its_data_tells(source: Path) -> None:
    done = train_cli(
        source / "cwd",
        "dataset=custom",
        f"dataset.source._target_={MODULE}.make_splits",
        "+dataset.source.size=24",
        *TRAIN,
        "trainer.epochs=1",
        env={"PYTHONPATH": str(source)},
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["status"] == "completed"
    data = result["data"]
    assert (data["channels"], data["image_size"]) == (1, 24)
    assert (data["num_classes"], data["classes"]) == (2, ["across", "down"])
    assert data["images"] == {"train": 96, "test": 32}
    assert data["loader"] == "memory"
    not_cached = {"cached": False, "why": "the Dataset names no files to key it by"}
    assert data["cache"] == {"train": not_cached, "test": not_cached}
    # The mean and std of the training images, as fractions of 255.
    train, _ = __import__(MODULE).make_splits(size=24)
    pixels = torch.stack([train[index][0] for index in range(96)]).double() / 255
    assert data["mean"] == [round(pixels.mean().item(), 4)]
    assert data["std"] == [round(pixels.std(unbiased=False).item(), 4)]
    assert [row["epoch"] for row in metrics(done.run_dir, "epoch")] == [1]


CONTRACT = "(train, test) or (train, test, val) torch Datasets of (image tensor, int label)"
NOT_A_TENSOR = (
    "holds a numpy.ndarray, not an image tensor; return a uint8 (C, H, W) tensor (torchvision's "
    "PILToTensor) or a float one in [0, 1] (ToTensor)"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [f"dataset.source._target_={MODULE}.nothing"],
            f"dataset.source._target_={MODULE}.nothing: module '{MODULE}' has no attribute "
            "'nothing'",
        ),
        (
            ["dataset.source._target_=no_such_module.make_splits"],
            "dataset.source._target_=no_such_module.make_splits cannot be imported (No module "
            "named 'no_such_module'); put its module in the folder you run in, or its folder on "
            "PYTHONPATH",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what=int"],
            f"{MODULE}.returns returned an int; it must return {CONTRACT}",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what=one"],
            f"{MODULE}.returns returned a tuple of 1 (Stripes); it must return {CONTRACT}",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what='int test'"],
            f"{MODULE}.returns returned an int as its test split; it must return {CONTRACT}",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what='empty test'"],
            f"{MODULE}.returns returned an empty test split",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=bare"],
            f"{MODULE}.broken's train[0] is a torch.Tensor, not (image tensor, int label)",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=numpy"],
            f"{MODULE}.broken's train[0] {NOT_A_TENSOR}",
        ),
        (
            [
                f"dataset.source._target_={MODULE}.broken",
                "+dataset.source.kind=numpy",
                "+dataset.source.at=5",
            ],
            f"{MODULE}.broken's train[5] {NOT_A_TENSOR}",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=int32"],
            f"{MODULE}.broken's train[0] holds a torch.int32 image; use uint8 or float in [0, 1]",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=normalized"],
            f"{MODULE}.broken's train[0] holds values from -1 to 0.953; return images before "
            "normalizing (floats in [0, 1] or uint8): dataset.mean and dataset.std normalize them",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=oblong"],
            f"{MODULE}.broken's train[0] is a 1x16x14 image; the models take square images: crop "
            "them in the Dataset",
        ),
        (
            [
                f"dataset.source._target_={MODULE}.broken",
                "+dataset.source.kind=smaller",
                "+dataset.source.at=3",
            ],
            f"{MODULE}.broken's train[3] is a 1x15x15 image; the split's images are 1x16x16 "
            "(dataset.channels, dataset.image_size)",
        ),
        (
            [
                f"dataset.source._target_={MODULE}.broken",
                "+dataset.source.kind=label",
                "+dataset.source.at=2",
            ],
            f"{MODULE}.broken's train[2] has label 2; labels are ints from 0 to 1",
        ),
        (
            [f"dataset.source._target_={MODULE}.make_splits", "dataset.classes=[dark,light]"],
            f"{MODULE}.make_splits: the train split has 2 classes (across, down); leave "
            "dataset.classes and dataset.num_classes null to take them",
        ),
        (
            [f"dataset.source._target_={MODULE}.make_splits", "dataset.num_classes=3"],
            f"{MODULE}.make_splits: the train split has 2 classes (across, down); leave "
            "dataset.classes and dataset.num_classes null to take them",
        ),
        (
            [f"dataset.source._target_={MODULE}.unnamed"],
            f"dataset.num_classes is needed: {MODULE}.unnamed's train Dataset has no `classes` "
            "list",
        ),
    ],
)
def test_a_custom_source_breaking_the_contract_is_refused_in_one_line(
    source: Path, overrides: list[str], message: str
) -> None:
    assert load_error("dataset=custom", *overrides) == message


def test_a_custom_dataset_without_classes_is_named_by_number(source: Path) -> None:
    data = load(
        "dataset=custom", f"dataset.source._target_={MODULE}.unnamed", "dataset.num_classes=2"
    )
    assert data.classes == ["0", "1"]
    assert isinstance(data.train, Split) and data.train.images.shape == (8, 1, 16, 16)
