"""The validation split, which picks a run's epoch so the test split only measures: the dataset's
own, or `dataset.val_fraction` of every class of train, drawn by `dataset.val_seed`."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import torch
from torch.utils.data import Subset

from experiments.config.schemas import DatasetConfig, is_image_folder
from experiments.core.errors import ExperimentError
from experiments.data.types import ImageData, Split, Streamed


def with_validation(data: ImageData, config: DatasetConfig) -> ImageData:
    """`data` with its validation split (if any) in `data.val` and `data.record["validation"]`."""
    fraction = config.val_fraction
    if data.val is not None:
        refuse_a_second(config, fraction)
        described = _described(data.val, data.classes, "the dataset's own")
        return dataclasses.replace(data, record={**data.record, "validation": described})
    if data.train is None:  # an evaluation
        return data
    if not fraction:
        return dataclasses.replace(data, record={**data.record, "validation": None})
    labels = labels_of(data.train)
    if labels is None:
        raise ExperimentError(
            f"dataset.val_fraction={fraction} needs the training labels without decoding every "
            f"image: give the train Dataset of {data.name} a `targets` list (as torchvision's "
            "have), or return a validation split of its own"
        )
    by_class = not labels.is_floating_point() and labels.dim() == 1
    # Values to regress, or masks: the rows are one stratum.
    strata = labels if by_class else torch.zeros(len(labels), dtype=torch.int64)
    classes = data.classes if by_class else None
    train_rows, val_rows = held_out_rows(strata, fraction, config.val_seed, classes)
    if len(val_rows) == 0:
        largest = f"row (of its {len(labels)} training rows)"
        if by_class:
            largest = f"image (the largest class has {int(torch.bincount(labels).max())})"
        raise ExperimentError(
            f"dataset.val_fraction={fraction} holds out no {largest}; raise it, or leave it at 0 "
            "for no validation split"
        )
    train, val = _rows(data.train, train_rows), _rows(data.train, val_rows)
    origin = f"held out of train: val_fraction={fraction}, val_seed={config.val_seed}"
    described = {**_described(val, data.classes, origin), "rows": _digest(val_rows)}
    return dataclasses.replace(
        data, train=train, val=val, record={**data.record, "validation": described}
    )


def refuse_a_second(config: DatasetConfig, fraction: float) -> None:
    """Refuse `val_fraction` for a dataset with a validation split of its own."""
    if fraction:
        own = "its val/ folder" if is_image_folder(config) else "the val split its source returns"
        raise ExperimentError(
            f"dataset.val_fraction={fraction}: dataset {config.name} has a validation split of "
            f"its own ({own}), which the run validates on; leave dataset.val_fraction at 0"
        )


def held_out_rows(
    labels: torch.Tensor, fraction: float, seed: int, classes: list[str] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows kept and held out, ascending: `fraction` of each class's, drawn by `seed`."""
    generator = torch.Generator().manual_seed(seed)
    held_out = []
    for label, name in enumerate(classes or [None]):
        rows = (labels == label).nonzero().flatten()
        count = int(fraction * len(rows) + 0.5)
        if count and count >= len(rows):
            left, more = (
                (f"class {name} no training image (it has {len(rows)})", "the class more images")
                if name
                else (f"no training row (of the {len(rows)})", "the data more rows")
            )
            raise ExperimentError(
                f"dataset.val_fraction={fraction} would leave {left}; lower "
                f"dataset.val_fraction, or give {more}"
            )
        held_out.append(rows[torch.randperm(len(rows), generator=generator)[:count]])
    val_rows = torch.cat(held_out).sort().values
    kept = torch.ones(len(labels), dtype=torch.bool)
    kept[val_rows] = False
    return kept.nonzero().flatten(), val_rows


def labels_of(split: Split | Streamed) -> torch.Tensor | None:
    """A split's labels without decoding its images (None: the Dataset does not list them)."""
    return split.labels.cpu() if isinstance(split, Split) else _targets(split.dataset)


def _targets(dataset: Any) -> torch.Tensor | None:
    if isinstance(dataset, Subset):
        within = _targets(dataset.dataset)
        return None if within is None else within[list(dataset.indices)]
    if hasattr(dataset, "targets"):
        return torch.as_tensor(dataset.targets, dtype=torch.int64)
    # Through the checks (CheckedDataset) to the user's Dataset.
    return _targets(dataset.dataset) if hasattr(dataset, "dataset") else None


def _rows(split: Split | Streamed, rows: torch.Tensor) -> Split | Streamed:
    if isinstance(split, Split):
        return Split(split.images[rows], split.labels[rows])
    return Streamed(Subset(split.dataset, rows.tolist()), split.workers)


def _described(split: Split | Streamed, classes: list[str], origin: str) -> dict[str, Any]:
    """Where the validation split came from, and its images per class."""
    labels = labels_of(split)
    if labels is None or labels.is_floating_point() or labels.dim() > 1:  # (values, masks)
        return {"origin": origin, "images": len(split), "per_class": None}
    counts = torch.bincount(labels, minlength=len(classes)).tolist()
    per_class = dict(zip(classes, counts, strict=True))
    return {"origin": origin, "images": len(split), "per_class": per_class}


def _digest(rows: torch.Tensor) -> str:
    return hashlib.sha256(rows.numpy().tobytes()).hexdigest()[:16]
