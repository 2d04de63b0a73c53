"""Datasets as whole uint8 tensors, cut into normalized batches on the training device.

Each split is loaded once into one uint8 tensor (N, C, H, W) and int64 labels: from the files
shipped in `sample_data/`, from torchvision's dataset classes, or generated. Batches are cut by a
seeded permutation, moved to the device as uint8 (a quarter of the float32 traffic) and converted
and normalized there. No per-image Python work, unlike a DataLoader over PIL images.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from hydra.utils import get_class
from PIL import Image
from torch import nn

from experiments.config import DatasetConfig, build
from experiments.distributed import ONE_PROCESS, Processes
from experiments.errors import ExperimentError, one_line
from experiments.measure import DeviceTimer
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
    for field in ("mean", "std"):
        values = list(config[field])
        if len(values) not in (1, channels):
            raise ExperimentError(
                f"dataset.{field}={values} needs 1 or {channels} values (one per channel)"
            )
    if config.classes is not None and len(config.classes) != classes:
        raise ExperimentError(
            f"dataset.classes names {len(config.classes)} classes, "
            f"but dataset.num_classes={classes}"
        )
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


def check_options(config: DatasetConfig) -> None:
    """Refuse a preload place or augmentation that cannot be."""
    if config.preload not in ("host", "device"):
        raise ExperimentError(
            f"dataset.preload={config.preload} is not a place; valid: host, device"
        )
    if config.augment.crop_padding < 0:
        raise ExperimentError(
            f"dataset.augment.crop_padding={config.augment.crop_padding} must be >= 0"
        )


def preload(data: ImageData, placement: Placement) -> ImageData:
    """The dataset with both splits' uint8 tensors on the device, copied there once."""

    def moved(split: Split) -> Split:
        return Split(placement.tensor(split.images), placement.tensor(split.labels))

    return ImageData(
        data.name, moved(data.train), moved(data.test), data.classes, data.mean, data.std
    )


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


class Augment:
    """Batch-wise augmentation on the device: random crops of the zero-padded images, and
    horizontal flips of half of them. The random draws come from the shuffle generator, for the
    whole batch, so every process and every placement sees the same, and a resume repeats them."""

    def __init__(self, crop_padding: int, flip: bool, generator: torch.Generator) -> None:
        self.padding = crop_padding
        self.flip = flip
        self.generator = generator

    def __bool__(self) -> bool:
        return bool(self.padding or self.flip)

    def __call__(self, images: torch.Tensor, batch_size: int, share: slice) -> torch.Tensor:
        """Augment `images`, which are the `share` of a batch of `batch_size`."""
        count, _, height, width = images.shape
        device = images.device
        if self.padding:
            offsets = torch.randint(
                0, 2 * self.padding + 1, (2, batch_size), generator=self.generator
            )
            top, left = offsets[:, share].to(device)
            padded = nn.functional.pad(images, [self.padding] * 4)
            rows = (top[:, None] + torch.arange(height, device=device))[:, :, None]
            columns = (left[:, None] + torch.arange(width, device=device))[:, None, :]
            pixels = padded[torch.arange(count, device=device)[:, None, None], :, rows, columns]
            images = pixels.permute(0, 3, 1, 2)  # indexing put the channels last
        if self.flip:
            flips = (torch.rand(batch_size, generator=self.generator) < 0.5)[share].to(device)
            images = torch.where(flips[:, None, None, None], images.flip(3), images)
        return images


class Batches:
    """One pass over a split in batches of normalized float images and labels, on the device.

    With a `shuffle` generator, every pass draws a new permutation from it; without, the order is
    the split's. The last batch may be smaller. Of several `processes`, each takes its contiguous
    share of every batch (so together they see the batch one process would); a last batch too
    small to give every process an image is left out.

    The split may wait on the host (copied per batch; from pinned memory for a GPU) or already on
    the device (`dataset.preload=device`). Per pass, `times()` tells how long the loop waited for
    batches (host clock) and how long copying them to the device took.
    """

    def __init__(
        self,
        split: Split,
        batch_size: int,
        data: ImageData,
        placement: Placement,
        processes: Processes = ONE_PROCESS,
        shuffle: torch.Generator | None = None,
        limit: int | None = None,
        augment: Augment | None = None,
        channels_last: bool = False,
    ) -> None:
        self.split = split
        self.placement = placement
        self.processes = processes
        self.shuffle = shuffle
        self.augment = augment
        self.channels_last = channels_last
        # For channels-last batches, a copy stored as (N, H, W, C): a batch of its rows, seen as
        # (N, C, H, W), is channels-last already (converting every batch costs more).
        self.images = (
            split.images.permute(0, 2, 3, 1).contiguous() if channels_last else split.images
        )
        full, rest = divmod(len(split), batch_size)
        sizes = [batch_size] * full + ([rest] if rest >= processes.world_size else [])
        self.sizes = sizes[:limit]  # of each batch, over all processes
        # (pixel / 255 - mean) / std as a multiply and an add: pixel * scale + shift; with
        # numbers when every channel has the same mean and std (much faster on channels-last
        # batches than broadcasting a per-channel tensor), else with per-channel tensors.
        channels = data.shape[0]
        mean = torch.tensor(data.mean, dtype=torch.float64).expand(channels)
        std = torch.tensor(data.std, dtype=torch.float64).expand(channels)
        scale, shift = 1 / (255 * std), -mean / std
        if len(set(data.mean)) == 1 and len(set(data.std)) == 1:
            self.scale: float | torch.Tensor = scale[0].item()
            self.shift: float | torch.Tensor = shift[0].item()
        else:
            self.scale = placement.tensor(scale.float().reshape(1, channels, 1, 1))
            self.shift = placement.tensor(shift.float().reshape(1, channels, 1, 1))
        # Pinned host memory lets copies to a GPU run without holding up the host.
        self.pin = placement.device.type == "cuda" and self.images.device.type == "cpu"
        self.copy_timer = DeviceTimer(placement.device)
        self.wait_seconds = 0.0

    def __len__(self) -> int:
        return len(self.sizes)

    def count_images(self) -> int:
        """How many images one pass yields, over all processes."""
        return sum(self.sizes)

    def times(self) -> tuple[float, float]:
        """Seconds the loop waited for batches, and of those copying them to the device, since
        the last call."""
        waited, self.wait_seconds = self.wait_seconds, 0.0
        return waited, self.copy_timer.take()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = None
        if self.shuffle is not None:
            order = torch.randperm(len(self.split), generator=self.shuffle)
            order = order.to(self.images.device)
        rank, world = self.processes.rank, self.processes.world_size
        start = 0
        for size in self.sizes:
            resumed = time.perf_counter()
            share = slice(size * rank // world, size * (rank + 1) // world)
            low, high = start + share.start, start + share.stop
            if order is None:
                images, labels = self.images[low:high], self.split.labels[low:high]
            else:  # index_select: a tenth of the time of indexing with a tensor on the CPU
                rows = order[low:high]
                images = self.images.index_select(0, rows)
                labels = self.split.labels.index_select(0, rows)
            if self.pin:
                images, labels = images.pin_memory(), labels.pin_memory()
            span = self.copy_timer.start()
            images, labels = self.placement.tensor(images), self.placement.tensor(labels)
            self.copy_timer.stop(span)
            if self.channels_last:
                images = images.permute(0, 3, 1, 2)
            if self.augment:
                memory_format = (
                    torch.channels_last if self.channels_last else torch.contiguous_format
                )
                images = self.augment(images, size, share).contiguous(memory_format=memory_format)
            # In place on the new float copy, which keeps the memory format.
            images = images.float().mul_(self.scale).add_(self.shift)
            start += size
            self.wait_seconds += time.perf_counter() - resumed
            yield images, labels


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
