"""A dataset's splits as its source (`source._target_`) makes them: whole tensors (`Split`), or
torch Datasets (`own_data`) decoded through the cache or streamed; checked against the config."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import torch

from experiments.config.build import build, check_importable, plain
from experiments.config.choices import Loader
from experiments.config.schemas import DatasetConfig, is_image_folder
from experiments.core.errors import ExperimentError
from experiments.core.text import IMAGES, ROWS, shape_text
from experiments.data import fingerprint, own_data
from experiments.data.own_data import CheckedDataset
from experiments.data.types import ImageData, Split, Streamed
from experiments.data.validation import refuse_a_second
from experiments.devices.placement import Placement

log = logging.getLogger("experiments")


def load(config: DatasetConfig, *, processes_here: int = 1, training: bool = True) -> ImageData:
    """The splits the dataset config says (only the test split when not `training`), checked."""
    check_importable("dataset.source._target_", config.source._target_)
    # An evaluation reads only an image folder's test/ (it needs no train/ folder).
    evaluating = not training and is_image_folder(config)
    made = build(config.source, **({"evaluating": True} if evaluating else {}))
    if isinstance(made, (tuple, list)) and all(isinstance(split, Split) for split in made):
        return _whole_tensors(config, made)
    return _datasets(config, made, processes_here, training)


def _whole_tensors(config: DatasetConfig, made: Any) -> ImageData:
    train, test = made
    # What the config leaves null, the training split tells (a CSV file's features).
    channels = config.channels if config.channels is not None else train.images.shape[1]
    size = config.image_size if config.image_size is not None else train.images.shape[2]
    values = train.labels.is_floating_point()  # targets to regress, not classes
    unit = ROWS if train.images.is_floating_point() else IMAGES
    targets = "values" if values else "masks" if train.labels.dim() == 3 else "classes"
    classes = train.labels.shape[1] if config.num_classes is None and values else config.num_classes
    for split_name, split in (("train", train), ("test", test)):
        if len(split) == 0:
            raise ExperimentError(f"dataset {config.name} has no {split_name} {unit.many}")
        found = tuple(split.images.shape[1:])
        if found != (channels, size, size):
            raise ExperimentError(
                f"dataset {config.name} has {shape_text(found)} {split_name} {unit.many}, but its "
                f"config says {shape_text((channels, size, size))} (dataset.channels, "
                "dataset.image_size)"
            )
        if not values and int(split.labels.max()) >= classes:
            raise ExperimentError(
                f"dataset {config.name} has label {int(split.labels.max())}, but "
                f"dataset.num_classes={classes}"
            )
    names = list(config.classes) if config.classes is not None else [str(k) for k in range(classes)]
    record: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    mean, std = config.mean, config.std
    if mean is None or std is None:
        found_mean, found_std = _value_statistics(train.images)
        mean, std = mean or found_mean, std or found_std
        record["statistics"] = f"computed from the {len(train)} training {unit.many}"
    if values:
        facts["target_mean"], facts["target_std"] = _value_statistics(train.labels)
        record["target_statistics"] = f"computed from the {len(train)} training {unit.many}"
    return ImageData(
        config.name,
        train,
        test,
        names,
        list(mean),
        list(std),
        (channels, size, size),
        record=record,
        facts=facts,
        targets=targets,
        unit=unit,
    )


def _value_statistics(values: torch.Tensor) -> tuple[list[float], list[float]]:
    """Each column's mean and std (1 where the column is constant, so it standardizes to 0)."""
    flat = values.double().transpose(0, 1).reshape(values.shape[1], -1)
    mean, std = flat.mean(1), flat.std(1)
    return mean.tolist(), torch.where(std > 0, std, 1.0).tolist()


def _source(config: Any) -> str:
    made_by = plain(config.source)
    if "root" in made_by:  # the same folder, however it is written
        made_by["root"] = str(Path(made_by["root"]).expanduser().resolve())
    return json.dumps(made_by, sort_keys=True)


def _datasets(config: Any, made: Any, processes_here: int, training: bool) -> ImageData:
    began = time.perf_counter()
    # What messages call the data: the folder, or the user's function.
    target = f"dataset.root={config.root}" if is_image_folder(config) else config.source._target_
    found = own_data.splits(made, target)
    if "val" in found:
        refuse_a_second(config, config.val_fraction)
    shape = own_data.shape_of(config, found["train"], target)
    classes = own_data.class_names(config, found["train"], target)
    wanted = [name for name in found if training or name == "test"]
    source = _source(config)
    items = {
        name: CheckedDataset(found[name], f"{target}'s {name}", shape, len(classes), source)
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
    files = {name: fingerprint.files_digest(split.samples) for name, split in items.items()}
    loaded: dict[str, Split | Streamed] = {}
    for name, split in items.items():
        if loader == Loader.memory:
            images, labels, cached = own_data.in_memory(split, config, name, workers)
            loaded[name] = Split(images, labels)
            record.setdefault("cache", {})[name] = cached
        else:
            loaded[name] = Streamed(split, workers)
    mean, std = config.mean, config.std
    if mean is None or std is None:
        if "train" not in loaded:
            raise ExperimentError("dataset.mean and dataset.std are needed to evaluate")
        found_mean, found_std, origin = own_data.normalization(
            loaded["train"], items["train"], config
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
        files={name: digest for name, digest in files.items() if digest is not None},
    )


def preload(data: ImageData, placement: Placement, *, channels_last: bool = False) -> ImageData:
    """The dataset with its in-memory splits copied to the device once, laid out as the batches."""

    def moved(split: Any) -> Any:
        if not isinstance(split, Split):
            return split
        images = split.images
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return Split(placement.tensor(images), placement.tensor(split.labels))

    return dataclasses.replace(
        data, train=moved(data.train), test=moved(data.test), val=moved(data.val)
    )
