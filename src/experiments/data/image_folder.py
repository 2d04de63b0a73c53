"""`dataset=image_folder`: a folder of the user's images in torchvision's ImageFolder layout.

    DIR/train/<class>/*.png|jpg|...   DIR/test/<class>/*   and optionally DIR/val/<class>/*

The classes are the folder names, sorted, and must be the same in every split. Each image is
decoded with PIL, converted to grey or RGB, resized (shorter side) and center-cropped to a square,
and returned as a uint8 (C, H, W) tensor: the same whether a DataLoader worker decodes it every
epoch or the cache decodes it once. The layout is checked before any image is read, so a wrong
folder fails in one line naming what is wrong.
"""

from __future__ import annotations

import argparse
import functools
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision.transforms.functional as F
from omegaconf import OmegaConf
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from experiments.config.build import build
from experiments.config.store import CONFIG_PACKAGE
from experiments.core.errors import ExperimentError

SPLITS = ("train", "test", "val")
LAYOUT = "an image folder holds train/<class>/*, test/<class>/* and optionally val/<class>/*"


class ImageFolderSplit(ImageFolder):
    """One split of an image folder: torchvision's ImageFolder, whose items are uint8 tensors of
    one size, and whose images are ordered by file name (then class), so numbered files keep
    their numbering, rather than class by class."""

    def __init__(self, root: Path, image_size: int, channels: int) -> None:
        self.image_size = image_size
        self.channels = channels
        valid = functools.partial(_image_file, root)
        super().__init__(str(root), is_valid_file=valid, allow_empty=True)
        self.samples.sort(key=lambda sample: (Path(sample[0]).name, sample[1]))
        self.imgs = self.samples
        self.targets = [label for _, label in self.samples]

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        classes = _class_folders(Path(directory))
        return classes, {name: label for label, name in enumerate(classes)}

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return decode(Path(path), self.image_size, self.channels), label


def image_folder(
    root: str, image_size: int, channels: int, evaluating: bool = False
) -> tuple[ImageFolderSplit, ...]:
    """The train and test splits (and val, if the folder has one) of the folder at `root`.

    `evaluating`: only test/ is needed, and read; it is returned in train's place too (what the
    images and classes look like), as `(test, test)`."""
    folder = Path(root).expanduser()
    if not folder.is_dir():
        raise ExperimentError(f"dataset.root={root}: no such folder; {LAYOUT}")
    required = ("test",) if evaluating else ("train", "test")
    for split in required:
        if not (folder / split).is_dir():
            found = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_dir())) or "none"
            raise ExperimentError(
                f"dataset.root={root} has no {split}/ folder (its folders: {found}); {LAYOUT}"
            )
    present = ["test"] if evaluating else [s for s in SPLITS if (folder / s).is_dir()]
    classes = {split: _class_folders(folder / split) for split in present}
    for split in present[1:]:
        _same_classes(root, classes["train"], split, classes[split])
    splits = tuple(ImageFolderSplit(folder / split, image_size, channels) for split in present)
    for split, dataset in zip(present, splits, strict=True):
        counts = np.bincount(dataset.targets, minlength=len(dataset.classes))
        for name, count in zip(dataset.classes, counts, strict=True):
            if count == 0:
                raise ExperimentError(
                    f"dataset.root={root}: class folder {split}/{name} has no images "
                    f"({', '.join(IMG_EXTENSIONS)})"
                )
    return (splits[0], *splits) if evaluating else splits


def export(
    splits: dict[str, Any],
    classes: list[str],
    root: Path,
    suffix: str = ".png",
    size: int | None = None,
) -> None:
    """Write uint8 splits (`experiments.data.types.Split`s, by split name) as an image folder under
    `root`, each image named by its index, so the folder keeps the splits' order (and resized to
    `size` x `size` if given): a shipped sample, say, to try `dataset=image_folder` on
    (`python -m experiments.data.image_folder DIR`)."""
    for split, data in splits.items():
        for name in classes:
            (root / split / name).mkdir(parents=True, exist_ok=True)
        digits = len(str(len(data) - 1))
        for index, (image, label) in enumerate(zip(data.images, data.labels.tolist(), strict=True)):
            picture = Image.fromarray(image.permute(1, 2, 0).squeeze(2).numpy())
            if size is not None:
                picture = picture.resize((size, size), Image.Resampling.BICUBIC)
            picture.save(root / split / classes[label] / f"{index:0{digits}d}{suffix}")


def decode(path: Path, image_size: int, channels: int) -> torch.Tensor:
    """The image at `path` as a uint8 (channels, image_size, image_size) tensor."""
    try:
        with Image.open(path) as opened:
            image = opened.convert("RGB" if channels == 3 else "L")
    except (OSError, SyntaxError, ValueError) as error:  # PIL's UnidentifiedImageError: OSError
        raise ExperimentError(f"{path} cannot be decoded as an image ({error})") from None
    if image.size != (image_size, image_size):
        image = F.center_crop(F.resize(image, image_size), [image_size, image_size])
    return F.pil_to_tensor(image)


def _image_file(split: Path, path: str) -> bool:
    """True for an image; False for what is hidden (.DS_Store, .ipynb_checkpoints/ and the like)
    below the split's folder; anything else in a class folder is a mistake worth naming."""
    name = Path(path).name
    if any(part.startswith(".") for part in Path(path).relative_to(split).parts):
        return False
    if not name.lower().endswith(IMG_EXTENSIONS):
        raise ExperimentError(
            f"{path} is not an image; class folders hold only images ({', '.join(IMG_EXTENSIONS)})"
        )
    return True


def _class_folders(split: Path) -> list[str]:
    """The class folders' names, sorted; hidden folders (.ipynb_checkpoints) are not classes."""
    names = sorted(
        entry.name for entry in split.iterdir() if entry.is_dir() and not entry.name.startswith(".")
    )
    if not names:
        raise ExperimentError(f"{split} has no class folders; {LAYOUT}")
    return names


def _same_classes(root: str, train: list[str], split: str, other: list[str]) -> None:
    if train == other:
        return
    only_train = sorted(set(train) - set(other))
    only_other = sorted(set(other) - set(train))
    parts = [f"only in train/: {', '.join(only_train)}"] if only_train else []
    parts += [f"only in {split}/: {', '.join(only_other)}"] if only_other else []
    raise ExperimentError(
        f"dataset.root={root}: train/ and {split}/ have different classes ({'; '.join(parts)})"
    )


def main() -> None:
    """python -m experiments.data.image_folder DIR [--dataset mnist_sample] [--suffix .jpg]"""
    parser = argparse.ArgumentParser(description="Write a shipped sample as an image folder.")
    parser.add_argument("root", type=Path)
    parser.add_argument("--dataset", choices=["cifar10_sample", "mnist_sample"])
    parser.add_argument("--suffix", default=".png", help=".png or .jpg")
    arguments = parser.parse_args()
    name = arguments.dataset or "cifar10_sample"
    config = OmegaConf.load(files(CONFIG_PACKAGE) / "dataset" / f"{name}.yaml")
    train, test = build(config.source)
    classes = list(config.classes)
    export({"train": train, "test": test}, classes, arguments.root, arguments.suffix)
    print(f"{len(train):,} train and {len(test):,} test images in {arguments.root}")


if __name__ == "__main__":
    main()
