"""A dataset's splits (`Split` tensors, `Streamed` Datasets) and the dataset (`ImageData`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import Dataset

from experiments.core.text import IMAGES, Unit


@dataclass
class Split:
    images: torch.Tensor  # uint8 (N, C, H, W); float32 (N, F, 1, 1) for a CSV file's rows
    labels: torch.Tensor  # int64 (N,); float32 (N, T) values; int64 (N, H, W) masks

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
    record: dict[str, Any] = field(default_factory=dict)  # how it was loaded, for results
    files: dict[str, str] = field(default_factory=dict)  # by split: `fingerprint.files_digest`
    facts: dict[str, Any] = field(default_factory=dict)  # a CSV file's target_mean and target_std
    targets: str = "classes"  # or "values" (a float vector: a CSV file's), "masks" (per pixel)
    unit: Unit = IMAGES  # what its samples are called in messages: a CSV file's are rows

    def data_record(self) -> dict[str, Any]:
        """results.json's `data`: how it was loaded, the config fields it filled in, its unit."""
        return {**self.record, **self.derived(), "unit": self.unit.many}

    def derived(self) -> dict[str, Any]:
        """The dataset config's fields as this data filled them in."""
        channels, size, _ = self.shape
        sizes = {"channels": channels, "image_size": size, "num_classes": len(self.classes)}
        return {**sizes, "classes": self.classes, "mean": self.mean, "std": self.std, **self.facts}


@dataclass
class Streamed:
    """A split that DataLoader workers decode batch by batch (`dataset.loader=stream`)."""

    dataset: Dataset  # of (uint8 (C, H, W) tensor, int)
    workers: int

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]
