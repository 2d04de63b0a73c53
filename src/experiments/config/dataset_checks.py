"""What a dataset's config holds that its fields' own rules cannot tell (composed or saved)."""

from __future__ import annotations

import functools

from omegaconf import DictConfig, OmegaConf

from experiments.config.checks import Check
from experiments.config.schemas import is_table


def image_channels(cfg: DictConfig) -> str | None:
    """An image is grey or RGB; a CSV file's rows have as many "channels" as features."""
    dataset = cfg.get("dataset")
    if dataset is None or is_table(dataset) or dataset.get("channels") in (None, 1, 3):
        return None
    return f"dataset.channels={dataset.channels} must be 1 (grey) or 3 (RGB)"


def image_folder_without_root(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg.dataset, "root"):
        return None
    return (
        f"dataset={cfg.dataset.name} needs dataset.root=<folder>, holding train/<class>/* and "
        "test/<class>/* (docs/own-data.md)"
    )


def source_without_target(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg.dataset.source, "_target_"):
        return None
    return (
        f"dataset={cfg.dataset.name} needs dataset.source._target_=<module>.<function>, a "
        "function returning (train, test) torch Datasets (docs/own-data.md)"
    )


def statistic_not_per_channel(cfg: DictConfig, key: str) -> str | None:
    given, channels = cfg.dataset.get(key), cfg.dataset.get("channels")
    if given is None or len(given) in (1, channels or len(given)):
        return None
    return f"dataset.{key}={list(given)} needs 1 or {channels} values (one per channel)"


def classes_miscounted(cfg: DictConfig) -> str | None:
    classes, num_classes = cfg.dataset.get("classes"), cfg.dataset.get("num_classes")
    if classes is None or num_classes is None or len(classes) == num_classes:
        return None
    return f"dataset.classes names {len(classes)} classes, but dataset.num_classes={num_classes}"


def padding_of_an_images_size(cfg: DictConfig) -> str | None:
    """(The padded batch also takes memory by the square of the padding.)"""
    padding = OmegaConf.select(cfg, "dataset.augment.crop_padding", default=0)
    size = cfg.dataset.get("image_size")
    if size is None or padding < size:
        return None
    return (
        f"dataset.augment.crop_padding={padding} must be less than dataset.image_size={size}: a "
        "crop of images padded by their size or more may hold none of the image (e.g. 4 for 32x32)"
    )


# After the dataset's fields, whose rules these take as kept.
ACROSS_FIELDS: tuple[Check, ...] = (
    image_folder_without_root,
    source_without_target,
    image_channels,
    functools.partial(statistic_not_per_channel, key="mean"),
    functools.partial(statistic_not_per_channel, key="std"),
    classes_miscounted,
    padding_of_an_images_size,
)
