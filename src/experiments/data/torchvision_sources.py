"""torchvision's CIFAR10, MNIST and FashionMNIST as whole uint8 splits, or where their files go."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torchvision.datasets import CIFAR10, MNIST, FashionMNIST

from experiments.core.errors import ExperimentError, one_line
from experiments.data.types import Split

# The classes `dataset_class` may name: looked up, never imported (an import runs the module).
DATASET_CLASSES = {
    f"torchvision.datasets.{cls.__name__}": cls for cls in (CIFAR10, MNIST, FashionMNIST)
}


def torchvision_splits(dataset_class: str, root: str, download: bool) -> tuple[Split, Split]:
    cls = DATASET_CLASSES.get(dataset_class)
    if cls is None:
        raise ExperimentError(
            f"dataset.source.dataset_class={dataset_class} is not one of torchvision's datasets "
            f"this source takes: {', '.join(DATASET_CLASSES)}"
        )
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
