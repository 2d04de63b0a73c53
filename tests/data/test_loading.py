"""The shipped data is the published data and loads as whole uint8 tensors; torchvision's datasets
load, and missing files say where."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.data import builtin, loading
from helpers import compose_config


@pytest.mark.parametrize("folder", ["cifar10", "diabetes", "mnist"])
def test_shipped_files_match_their_provenance(folder: str) -> None:
    root = builtin.SAMPLE_DATA / folder
    table = re.findall(
        r"^\| (\S+) +\| +[\d]+ \| ([0-9a-f]{64}) \|", (root / "PROVENANCE.md").read_text(), re.M
    )
    assert len(table) == len(list(root.glob("*"))) - 1  # every file but PROVENANCE.md is listed
    for name, sha256 in table:
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == sha256, name


def test_cifar10_sample_is_4000_train_and_1000_test_images_in_canonical_order() -> None:
    train, test = builtin.cifar10_sample()
    assert train.images.shape == (4000, 3, 32, 32) and train.images.dtype == torch.uint8
    assert test.images.shape == (1000, 3, 32, 32)
    # The label orders and class counts PROVENANCE.md gives for data_batch_1 and test_batch.
    assert train.labels[:20].tolist() == [
        6,
        9,
        9,
        4,
        1,
        1,
        2,
        7,
        8,
        3,
        4,
        7,
        7,
        2,
        9,
        9,
        9,
        3,
        2,
        6,
    ]
    assert test.labels[:20].tolist() == [3, 8, 8, 0, 6, 6, 1, 6, 3, 1, 0, 9, 5, 7, 9, 8, 5, 7, 8, 6]
    assert torch.bincount(train.labels).tolist() == [
        396,
        366,
        420,
        384,
        422,
        393,
        414,
        385,
        407,
        413,
    ]
    assert torch.bincount(test.labels).tolist() == [103, 89, 100, 103, 90, 86, 112, 102, 106, 109]


def test_cifar10_sample_images_are_whole_pictures_not_scrambled_rows() -> None:
    # Neighbouring pixels of a natural image are close; a wrong reshape would scatter them.
    images = builtin.cifar10_sample()[0].images.float()
    neighbour = (images[..., 1:] - images[..., :-1]).abs().mean()
    shuffled = (images[..., torch.randperm(32)][..., 1:] - images[..., :-1]).abs().mean()
    assert neighbour < 0.6 * shuffled


def test_mnist_sample_holds_out_every_fifth_image() -> None:
    train, test = builtin.mnist_sample(test_every=5)
    assert train.images.shape == (8000, 1, 28, 28) and test.images.shape == (2000, 1, 28, 28)
    # MNIST's first 20 test labels are 7 2 1 0 4 1 4 9 5 9 ...: indexes 4, 9, 14, 19 go to test.
    assert test.labels[:4].tolist() == [4, 9, 1, 4]
    assert train.labels[:4].tolist() == [7, 2, 1, 0]
    assert torch.bincount(torch.cat([train.labels, test.labels])).tolist() == [
        980,
        1135,
        1032,
        1010,
        982,
        892,
        958,
        1028,
        974,
        1009,
    ]


def test_load_checks_the_data_against_the_declared_shape() -> None:
    cfg = compose_config("dataset=mnist_sample", "dataset.image_size=32")
    with pytest.raises(ExperimentError) as error:
        loading.load(cfg.dataset)
    assert str(error.value) == (
        "dataset mnist_sample has 1x28x28 train images, but its config says 1x32x32 "
        "(dataset.channels, dataset.image_size)"
    )


def test_a_dataset_wants_one_mean_per_channel_or_one_for_all() -> None:
    cfg = compose_config("dataset.mean=[0.5,0.5]")
    with pytest.raises(ExperimentError, match=r"dataset.mean=\[0.5, 0.5\] needs 1 or 3 values"):
        validate(cfg)


def test_synthetic_data_has_the_configured_shape_and_is_the_same_every_time() -> None:
    cfg = compose_config(
        "dataset=synthetic",
        "dataset.channels=1",
        "dataset.image_size=28",
        "dataset.num_classes=4",
        "dataset.train_size=100",
        "dataset.test_size=30",
    )
    first, second = loading.load(cfg.dataset), loading.load(cfg.dataset)
    assert first.train.images.shape == (100, 1, 28, 28) and len(first.test) == 30
    assert set(first.train.labels.tolist()) == {0, 1, 2, 3}
    assert torch.equal(first.train.images, second.train.images)
    assert first.classes == ["0", "1", "2", "3"]


def write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.mark.parametrize(
    ("option", "folder"), [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")]
)
def test_torchvision_datasets_load_through_the_real_classes(
    tmp_path: Path, option: str, folder: str
) -> None:
    # torchvision's own classes read <root>/<folder>/raw: the real MNIST test files, and a small
    # train set cut from them (this machine cannot download the 60,000 train images).
    raw = tmp_path / folder / "raw"
    raw.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        shipped = gzip.decompress((builtin.SAMPLE_DATA / "mnist" / f"{name}.gz").read_bytes())
        (raw / name).write_bytes(shipped)
    images = builtin.read_idx(builtin.SAMPLE_DATA / "mnist" / "t10k-images-idx3-ubyte.gz")
    labels = builtin.read_idx(builtin.SAMPLE_DATA / "mnist" / "t10k-labels-idx1-ubyte.gz")
    write_idx(raw / "train-images-idx3-ubyte", images[:300])
    write_idx(raw / "train-labels-idx1-ubyte", labels[:300])

    cfg = compose_config(f"dataset={option}", f"dataset.root={tmp_path}")
    loaded = loading.load(cfg.dataset)
    assert loaded.train.images.shape == (300, 1, 28, 28)
    assert loaded.test.images.shape == (10000, 1, 28, 28)
    assert torch.equal(loaded.test.labels, torch.from_numpy(labels).long())


def test_missing_cifar10_files_say_which_files_and_where(tmp_path: Path) -> None:
    cfg = compose_config("dataset=cifar10", f"dataset.root={tmp_path}")
    with pytest.raises(ExperimentError) as error:
        loading.load(cfg.dataset)
    assert str(error.value) == (
        f"CIFAR10 files not found in {tmp_path}; put cifar-10-python.tar.gz (from "
        f"https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz) in {tmp_path} and run with "
        "dataset.download=true (it unpacks them there; online, it downloads them)"
    )


@pytest.mark.slow
def test_missing_mnist_files_name_the_raw_folder(tmp_path: Path) -> None:
    cfg = compose_config("dataset=mnist", f"dataset.root={tmp_path}")
    with pytest.raises(
        ExperimentError, match=f"put train-images-idx3-ubyte.gz, .* in {tmp_path}/MNIST/raw"
    ):
        loading.load(cfg.dataset)
