"""A dataset's splits, ready to be cut into batches by `experiments.batches`.

A source, named by the dataset config's `source._target_`, returns the splits in one of two forms:

- whole uint8 tensors (`Split`: (N, C, H, W) images and int64 labels): the files shipped in
  `sample_data/`, torchvision's dataset classes, generated images. Loaded once, batches cut from
  them.
- torch Datasets of (image, label): an image folder, or a function of the user's own
  (`experiments.own_data`), decoded into such tensors through the cache, or streamed by
  DataLoader workers (`Streamed`).

`load` checks what a source returns against the shape the config declares or derives.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.utils import get_class
from PIL import Image

from experiments import own_data
from experiments.config import DatasetConfig, Loader, build, plain
from experiments.errors import ExperimentError, one_line
from experiments.own_data import Items, Streamed
from experiments.placement import Placement

log = logging.getLogger("experiments")

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
    train: Split | Streamed | None  # None: not loaded (an evaluation)
    test: Split | Streamed
    classes: list[str]
    mean: list[float]
    std: list[float]
    shape: tuple[int, int, int]  # (channels, height, width) of every image
    val: Split | Streamed | None = None  # an image folder's val/, if it has one
    # How the data was loaded (the loader and why, the cache, derived statistics), for results.
    record: dict[str, Any] = field(default_factory=dict)

    def derived(self) -> dict[str, Any]:
        """The dataset config's fields as this data filled them in."""
        channels, size, _ = self.shape
        return {
            "channels": channels,
            "image_size": size,
            "num_classes": len(self.classes),
            "classes": self.classes,
            "mean": self.mean,
            "std": self.std,
        }


def load(config: DatasetConfig, *, processes_here: int = 1, training: bool = True) -> ImageData:
    """Load the splits as the dataset config says (for an evaluation, `training=False`, only the
    test split), and check them against its declared shape."""
    # An evaluation reads only an image folder's test/ (it needs no train/ folder).
    made = _made_by_source(config, evaluating=not training and is_image_folder(config))
    if isinstance(made, (tuple, list)) and all(isinstance(split, Split) for split in made):
        return _whole_tensors(config, made)
    return _datasets(config, made, processes_here, training)


def is_image_folder(config: DatasetConfig) -> bool:
    return "root" in config and "loader" in config  # dataset=image_folder, or a variant of it


def _made_by_source(config: DatasetConfig, evaluating: bool) -> Any:
    target = config.source._target_
    module_name, _, attribute = target.rpartition(".")
    try:  # before Hydra does, to say plainly what is missing
        if not module_name:
            raise ImportError("give it as <module>.<function>")
        getattr(importlib.import_module(module_name), attribute)
    except AttributeError as error:
        raise ExperimentError(f"dataset.source._target_={target}: {error}") from None
    except (ImportError, ValueError) as error:
        raise ExperimentError(
            f"dataset.source._target_={target} cannot be imported ({error}); its module must be "
            "on PYTHONPATH"
        ) from None
    return build(config.source, **({"evaluating": True} if evaluating else {}))


def _whole_tensors(config: DatasetConfig, made: Any) -> ImageData:
    channels, size, classes = config.channels, config.image_size, config.num_classes
    train, test = made
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
    return ImageData(
        config.name,
        train,
        test,
        names,
        list(config.mean),
        list(config.std),
        (channels, size, size),
    )


def _datasets(config: Any, made: Any, processes_here: int, training: bool) -> ImageData:
    """Torch Datasets from an image folder or the user's code: decoded into memory or streamed."""
    began = time.perf_counter()
    # What messages call the data: the folder, or the user's function.
    target = f"dataset.root={config.root}" if is_image_folder(config) else config.source._target_
    found = own_data.splits(made, target)
    if "val" in found:
        from experiments.validation import refuse_a_second  # (it imports this module)

        refuse_a_second(config, config.val_fraction)
    shape = own_data.shape_of(config, found["train"], target)
    classes = own_data.class_names(config, found["train"], target)
    wanted = [name for name in found if training or name == "test"]
    made_by = plain(config.source)
    if "root" in made_by:  # the same folder, however it is written
        made_by["root"] = str(Path(made_by["root"]).expanduser().resolve())
    source = json.dumps(made_by, sort_keys=True)
    items = {
        name: Items(found[name], f"{target}'s {name}", shape, len(classes), source)
        for name in wanted
    }
    decoded_bytes = sum(len(split) for split in items.values()) * math.prod(shape)
    loader, reason = own_data.choose_loader(config.loader, decoded_bytes, config.cache_max_gb)
    workers = (
        config.workers if config.workers is not None else own_data.default_workers(processes_here)
    )
    log.info("dataset %s: loader=%s (%s)", config.name, loader, reason)
    record: dict[str, Any] = {
        "loader": str(loader),
        "loader_reason": reason,
        "workers": workers,
        "images": {name: len(split) for name, split in items.items()},
    }
    loaded: dict[str, Split | Streamed] = {}
    for name, split in items.items():
        if loader == Loader.memory:
            images, labels, cached = own_data.in_memory(split, config, config.name, name, workers)
            loaded[name] = Split(images, labels)
            record.setdefault("cache", {})[name] = cached
        else:
            loaded[name] = Streamed(split, workers)
    mean, std = config.mean, config.std
    if mean is None or std is None:
        if "train" not in loaded:
            raise ExperimentError("dataset.mean and dataset.std are needed to evaluate")
        train = loaded["train"]
        found_mean, found_std, origin = own_data.normalization(
            train.images if isinstance(train, Split) else train, items["train"], config, config.name
        )
        mean, std = mean or found_mean, std or found_std
        record["statistics"] = origin
        log.info("dataset %s: mean %s, std %s (%s)", config.name, mean, std, origin)
    record["seconds"] = round(time.perf_counter() - began, 2)
    return ImageData(
        config.name,
        loaded.get("train"),
        loaded["test"],
        classes,
        list(mean),
        list(std),
        shape,
        val=loaded.get("val"),
        record=record,
    )


def preload(data: ImageData, placement: Placement) -> ImageData:
    """The dataset with its in-memory splits' uint8 tensors on the device, copied there once
    (streamed splits stay streamed)."""

    def moved(split: Any) -> Any:
        if not isinstance(split, Split):
            return split
        return Split(placement.tensor(split.images), placement.tensor(split.labels))

    return dataclasses.replace(
        data, train=moved(data.train), test=moved(data.test), val=moved(data.val)
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
