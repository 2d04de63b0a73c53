"""Datasets as whole uint8 tensors: each split loaded once, then cut into batches by
`experiments.batches`.

Each split is one uint8 tensor (N, C, H, W) and int64 labels, from a source named by the dataset
config's `source._target_`: the files shipped in `sample_data/`, torchvision's dataset classes, or
generated images. `load` checks what a source returns against the shape the config declares.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from hydra.utils import get_class
from PIL import Image

from experiments.config import DatasetConfig, build
from experiments.errors import ExperimentError, one_line
from experiments.placement import Placement

SAMPLE_DATA = Path(__file__).parent / "sample_data"


@dataclass
class Split:
    images: torch.Tensor  # uint8 (N, C, H, W)
    labels: torch.Tensor  # int64 (N,)

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class ImageData:
    name: str
    train: Split
    test: Split
    classes: list[str]
    mean: list[float]
    std: list[float]

    @property
    def shape(self) -> tuple[int, int, int]:
        channels, height, width = self.train.images.shape[1:]
        return channels, height, width


def load(config: DatasetConfig) -> ImageData:
    """Load both splits as the dataset config says, and check them against its declared shape."""
    channels, size, classes = config.channels, config.image_size, config.num_classes
    train, test = build(config.source)
    for split_name, split in (("train", train), ("test", test)):
        if len(split) == 0:
            raise ExperimentError(f"dataset {config.name} has no {split_name} images")
        found = tuple(split.images.shape[1:])
        if found != (channels, size, size):
            raise ExperimentError(
                f"dataset {config.name} has {_shape(found)} {split_name} images, but its config "
                f"says {_shape((channels, size, size))} (dataset.channels, dataset.image_size)"
            )
        if int(split.labels.max()) >= classes:
            raise ExperimentError(
                f"dataset {config.name} has label {int(split.labels.max())}, but "
                f"dataset.num_classes={classes}"
            )
    names = list(config.classes) if config.classes is not None else [str(k) for k in range(classes)]
    return ImageData(config.name, train, test, names, list(config.mean), list(config.std))


def preload(data: ImageData, placement: Placement) -> ImageData:
    """The dataset with both splits' uint8 tensors on the device, copied there once."""

    def moved(split: Split) -> Split:
        return Split(placement.tensor(split.images), placement.tensor(split.labels))

    return ImageData(
        data.name, moved(data.train), moved(data.test), data.classes, data.mean, data.std
    )


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


# --- Sources: each returns (train, test) splits. ------------------------------------------------


def cifar10_sample() -> tuple[Split, Split]:
    """The 4,000 train + 1,000 test CIFAR-10 images shipped in the repo (see its PROVENANCE.md).

    Each PNG holds 1,000 images, one per row: 1024 RGB pixels, a 32x32 image in row-major order.
    """
    root = SAMPLE_DATA / "cifar10"
    text = (root / "cifar10_labels.js").read_text()
    labels = torch.tensor(json.loads(text[text.index("[") : text.rindex("]") + 1]))

    def batch(number: int) -> tuple[torch.Tensor, torch.Tensor]:
        with Image.open(root / f"cifar10_batch_{number}.png") as strip:
            pixels = torch.from_numpy(np.array(strip))  # (1000, 1024, 3): one image per row
        images = pixels.reshape(1000, 32, 32, 3).permute(0, 3, 1, 2).contiguous()
        return images, labels[1000 * number : 1000 * (number + 1)]

    train = [batch(number) for number in range(4)]
    test_images, test_labels = batch(50)
    return (
        Split(torch.cat([images for images, _ in train]), torch.cat([lab for _, lab in train])),
        Split(test_images, test_labels),
    )


def mnist_sample(test_every: int) -> tuple[Split, Split]:
    """The 10,000-image MNIST test set shipped in the repo, every `test_every`-th image held out.

    Taking every k-th image (rather than the first or last part) keeps both halves of the set,
    written by different groups of people, in both splits.
    """
    root = SAMPLE_DATA / "mnist"
    images = torch.from_numpy(read_idx(root / "t10k-images-idx3-ubyte.gz")).unsqueeze(1)
    labels = torch.from_numpy(read_idx(root / "t10k-labels-idx1-ubyte.gz")).long()
    held_out = torch.arange(len(labels)) % test_every == test_every - 1
    return Split(images[~held_out], labels[~held_out]), Split(images[held_out], labels[held_out])


def read_idx(path: Path) -> np.ndarray:
    """Read an idx file (big-endian: magic, one uint32 per dimension, then uint8 data)."""
    raw = gzip.decompress(path.read_bytes())
    dims = raw[3]
    shape = np.frombuffer(raw, dtype=">u4", count=dims, offset=4)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape).copy()


def torchvision_splits(dataset_class: str, root: str, download: bool) -> tuple[Split, Split]:
    """Both splits of a torchvision dataset (CIFAR10, MNIST, FashionMNIST) as whole tensors."""
    cls = get_class(dataset_class)
    root = str(Path(root).expanduser().resolve())
    try:
        train, test = (cls(root, train=flag, download=download) for flag in (True, False))
    except Exception as error:  # torchvision raises RuntimeError, or URLError/OSError offline
        raise ExperimentError(_missing_files(cls, root, download, error)) from error
    return _from_torchvision(train), _from_torchvision(test)


def _from_torchvision(dataset: torch.utils.data.Dataset) -> Split:
    # CIFAR10 keeps a numpy (N, H, W, C) array; MNIST and FashionMNIST a (N, H, W) tensor.
    images = torch.as_tensor(np.asarray(dataset.data))
    images = images.unsqueeze(1) if images.ndim == 3 else images.permute(0, 3, 1, 2)
    return Split(images.contiguous(), torch.as_tensor(dataset.targets, dtype=torch.int64))


def _missing_files(cls: type, root: str, download: bool, error: Exception) -> str:
    """One line: which files the torchvision class needs, and where to put them."""
    name = cls.__name__
    if hasattr(cls, "resources"):  # MNIST and FashionMNIST: idx files in <root>/<name>/raw
        files = ", ".join(Path(url).name for url, _ in cls.resources)
        where = f"{root}/{name}/raw"
    else:  # CIFAR10: the python archive, extracted into <root>/<base_folder>
        files = f"{cls.filename} (from {cls.url})"
        where = root
    if download:
        return (
            f"{name} could not be downloaded into {root} ({one_line(error)}); offline, put "
            f"{files} in {where} and keep dataset.download=true to unpack them"
        )
    return (
        f"{name} files not found in {root}; put {files} in {where} and run with "
        "dataset.download=true (it unpacks them there; online, it downloads them)"
    )


def synthetic_splits(
    channels: int, image_size: int, num_classes: int, train_size: int, test_size: int, seed: int
) -> tuple[Split, Split]:
    """Generated images: a fixed random pattern per class, blended with per-image noise."""
    generator = torch.Generator().manual_seed(seed)
    patterns = torch.rand(num_classes, channels, image_size, image_size, generator=generator)

    def split(size: int) -> Split:
        labels = torch.randint(num_classes, (size,), generator=generator)
        noise = torch.rand(size, channels, image_size, image_size, generator=generator)
        images = (0.6 * patterns[labels] + 0.4 * noise) * 255
        return Split(images.to(torch.uint8), labels)

    return split(train_size), split(test_size)
