"""The torch Datasets an image folder or the user's code returns, held to one contract
(docs/own-data.md), then decoded into memory (through the cache) or streamed."""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from experiments.config.choices import Loader
from experiments.config.schemas import UserDatasetConfig
from experiments.core.errors import ExperimentError
from experiments.core.files import (
    IMAGE,
    RECORD,
    as_json,
    read_data,
    refuse_special_file,
    write_text_atomically,
)
from experiments.core.text import shape_text
from experiments.data import cache
from experiments.data.streaming import decode_all
from experiments.data.types import Split, Streamed

log = logging.getLogger("experiments")

CONTRACT = "(train, test) or (train, test, val) torch Datasets of (image tensor, int label)"
# Mean and std are computed from at most this many training images, in memory or streamed.
STATISTICS_SAMPLE = 10_000


@dataclass(eq=False, repr=False)
class CheckedDataset(Dataset):
    """A user's Dataset whose items are checked and converted to (uint8 (C, S, S), int)."""

    dataset: Dataset
    name: str  # "<source>'s train"
    shape: tuple[int, int, int]
    num_classes: int
    source: str  # what made the Dataset: its function and arguments

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    @property
    def samples(self) -> Any:
        return getattr(self.dataset, "samples", None)

    @functools.cached_property
    def key(self) -> str | None:
        """The cache key of the decoded images (None: they cannot be cached)."""
        return cache.fingerprint(self, self.shape, self.source)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        where = f"{self.name}[{index}]"
        image, label = _image_and_label(self.dataset[index], where)
        if tuple(image.shape) != self.shape:
            raise ExperimentError(
                f"{where} is a {shape_text(tuple(image.shape))} image; the split's images are "
                f"{shape_text(self.shape)} (dataset.channels, dataset.image_size)"
            )
        if isinstance(label, torch.Tensor) and label.numel() == 1:
            label = label.item()
        if not isinstance(label, (int, np.integer)) or not 0 <= label < self.num_classes:
            raise ExperimentError(
                f"{where} has label {label!r}; labels are ints from 0 to {self.num_classes - 1}"
            )
        return image, int(label)


def _image_and_label(item: Any, where: str) -> tuple[torch.Tensor, Any]:
    if not (isinstance(item, (tuple, list)) and len(item) == 2):
        raise ExperimentError(f"{where} is {_describe(item)}, not (image tensor, int label)")
    return as_uint8(item[0], where), item[1]


def as_uint8(image: Any, where: str) -> torch.Tensor:
    """A (C, H, W) image tensor as uint8: as it is, or from floats in [0, 1]."""
    if not isinstance(image, torch.Tensor):
        raise ExperimentError(
            f"{where} holds {_describe(image)}, not an image tensor; return a uint8 (C, H, W) "
            "tensor (torchvision's PILToTensor) or a float one in [0, 1] (ToTensor)"
        )
    if image.ndim != 3:
        raise ExperimentError(
            f"{where} holds a {shape_text(tuple(image.shape))} tensor, not (C, H, W)"
        )
    if image.dtype == torch.uint8:
        return image
    if not image.is_floating_point():
        raise ExperimentError(f"{where} holds a {image.dtype} image; use uint8 or float in [0, 1]")
    low, high = image.min().item(), image.max().item()
    if low < 0 or high > 1:
        raise ExperimentError(
            f"{where} holds values from {low:.3g} to {high:.3g}; return images before "
            "normalizing (floats in [0, 1] or uint8): dataset.mean and dataset.std normalize them"
        )
    return image.mul(255).round_().to(torch.uint8)


def splits(made: Any, target: str) -> dict[str, Dataset]:
    if not isinstance(made, (tuple, list)) or len(made) not in (2, 3):
        raise ExperimentError(f"{target} returned {_describe(made)}; it must return {CONTRACT}")
    for name, dataset in zip(("train", "test", "val"), made, strict=False):
        if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise ExperimentError(
                f"{target} returned {_describe(dataset)} as its {name} split; it must return "
                f"{CONTRACT}"
            )
        if len(dataset) == 0:
            raise ExperimentError(f"{target} returned an empty {name} split")
        for path in _files_named(dataset):
            refuse_special_file(path, f"{target}'s {name} split names it as an image file", IMAGE)
    return dict(zip(("train", "test", "val"), made, strict=False))


def _files_named(dataset: Dataset) -> list[str | Path]:
    """The files in a Dataset's `samples`, a list of (path, label), as ImageFolder's."""
    samples = getattr(dataset, "samples", None)
    if not isinstance(samples, list):
        return []
    named = [sample for sample in samples if isinstance(sample, (tuple, list)) and sample]
    return [sample[0] for sample in named if isinstance(sample[0], (str, Path))]


def shape_of(config: UserDatasetConfig, train: Dataset, target: str) -> tuple[int, int, int]:
    """The images' shape: the config's, where it gives one, else the first training image's."""
    where = f"{target}'s train[0]"
    image, _ = _image_and_label(train[0], where)
    channels, height, width = image.shape
    if height != width and config.image_size is None:
        raise ExperimentError(
            f"{target}'s train[0] is a {shape_text(tuple(image.shape))} image; the models take "
            "square images: crop them in the Dataset"
        )
    size = config.image_size or height
    return config.channels or channels, size, size


def class_names(config: UserDatasetConfig, train: Dataset, target: str) -> list[str]:
    """The classes in label order: the config's, the train Dataset's `classes`, or numbers."""
    found = getattr(train, "classes", None)
    if isinstance(found, (list, tuple)) and found:
        names = [str(name) for name in found]
        given = list(config.classes) if config.classes is not None else names
        if given != names or config.num_classes not in (None, len(names)):
            raise ExperimentError(
                f"{target}: the train split has {len(names)} classes ({', '.join(names)}); leave "
                "dataset.classes and dataset.num_classes null to take them"
            )
        return names
    if config.classes is not None:
        return list(config.classes)
    if config.num_classes is None:
        raise ExperimentError(
            f"dataset.num_classes is needed: {target}'s train Dataset has no `classes` list"
        )
    return [str(label) for label in range(config.num_classes)]


def default_workers(processes_here: int = 1) -> int:
    """One DataLoader worker per core this process may use, shared among `processes_here`, at most
    8 (beyond that, decoding rarely limits a small model)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(8, (cores or 1) // processes_here))


def choose_loader(requested: Loader, decoded_bytes: int, max_gb: float) -> tuple[Loader, str]:
    """The path a dataset takes, and why, for the log and results.json."""
    if requested != Loader.auto:
        return requested, f"dataset.loader={requested}"
    size = f"{decoded_bytes / 1e6:,.1f} MB decoded"
    if decoded_bytes <= max_gb * 1e9:
        return Loader.memory, f"auto: {size} fits dataset.cache_max_gb={max_gb:g}"
    return Loader.stream, f"auto: {size} exceeds dataset.cache_max_gb={max_gb:g}"


def in_memory(
    items: CheckedDataset, config: UserDatasetConfig, split: str, workers: int
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """A split decoded into one uint8 tensor: memory-mapped from the cache where it can be."""
    if config.cache and items.key is not None:
        entry = cache.usable_folder(config.cache_dir) / f"{config.name}-{split}-{items.key}"
        return cache.decoded(items, entry, items.shape, workers, config.cache_timeout)
    why = "dataset.cache=false" if not config.cache else "the Dataset names no files to key it by"
    log.info("decoding %s %s images into memory (not cached: %s)", f"{len(items):,}", split, why)
    images, labels = decode_all(items, items.shape, workers)
    return torch.from_numpy(images), torch.from_numpy(labels), {"cached": False, "why": why}


def normalization(
    train: Split | Streamed, items: CheckedDataset, config: UserDatasetConfig
) -> tuple[list[float], list[float], str]:
    """Mean and std of the training images, and where they come from: kept beside the cache."""
    kept = None
    if config.cache and items.key is not None:
        name = f"{config.name}-train-{items.key}-statistics.json"
        kept = cache.usable_folder(config.cache_dir) / name
        found = _kept_statistics(kept)
        if found is not None:
            return found
    mean, std, count = statistics(train.images if isinstance(train, Split) else train, items.shape)
    if 0 in std:  # every pixel the same: normalizing would divide by zero
        raise ExperimentError(
            f"dataset {config.name}: channel {std.index(0)} of its {count:,} training images "
            "holds one value only (its std is 0), which cannot be normalized; set dataset.mean "
            "and dataset.std, or check the images"
        )
    source = f"computed from {count:,} training images"
    if count < len(train):
        source = f"computed from {count:,} of {len(train):,} training images, evenly spaced"
    if kept is not None:
        write_text_atomically(kept, json.dumps({"mean": mean, "std": std, "source": source}))
    return mean, std, source


def _kept_statistics(kept: Path) -> tuple[list[float], list[float], str] | None:
    if not kept.is_file():
        return None
    try:
        saved = read_data(kept, RECORD, as_json)
        mean, std, source = saved["mean"], saved["std"], saved["source"]
    except (KeyError, TypeError, ExperimentError) as error:
        log.warning("statistics %s cannot be read (%r): computing them again", kept, error)
        return None
    return mean, std, f"{source}, read from {kept.resolve()}"


def statistics(
    train: torch.Tensor | Streamed, shape: tuple[int, int, int]
) -> tuple[list[float], list[float], int]:
    """Per-channel mean and std of at most `STATISTICS_SAMPLE` evenly spaced training images, the
    same rows in memory as streamed so both paths normalize alike, and how many."""
    count = min(len(train), STATISTICS_SAMPLE)
    rows = np.linspace(0, len(train) - 1, count).round().astype(int)
    if isinstance(train, Streamed):
        sample = Subset(train.dataset, rows.tolist())
        images = torch.from_numpy(decode_all(sample, shape, train.workers)[0])
    else:
        images = train if count == len(train) else train[torch.from_numpy(rows)]
    channels = shape[0]
    sums, squares = torch.zeros(2, channels, dtype=torch.float64)
    for chunk in images.split(1024):
        pixels = chunk.to(torch.float64).div_(255).transpose(0, 1).reshape(channels, -1)
        sums += pixels.sum(1)
        squares += pixels.square().sum(1)
    pixels_per_channel = images.shape[0] * images.shape[2] * images.shape[3]
    mean = sums / pixels_per_channel
    std = (squares / pixels_per_channel - mean.square()).clamp_min(0).sqrt()
    return [round(v, 4) for v in mean.tolist()], [round(v, 4) for v in std.tolist()], count


def _describe(value: Any) -> str:
    """ "a tuple of 2 (Tensor, str)", "an int", "a my_data.Digits"."""
    if isinstance(value, (tuple, list)):
        kinds = ", ".join(type(item).__name__ for item in value[:4])
        what = f"{type(value).__name__} of {len(value)} ({kinds})"
    else:
        what = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    return f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
