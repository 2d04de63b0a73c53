"""`dataset=image_folder`: DIR/train/<class>/*, DIR/test/<class>/* and optionally DIR/val/<class>/*,
each image resized, center-cropped and returned as a uint8 (C, H, W) tensor."""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import unicodedata
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision.transforms.functional as F
from omegaconf import OmegaConf
from PIL import Image, UnidentifiedImageError
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from experiments.config.build import build
from experiments.config.store import CONFIG_PACKAGE
from experiments.core.errors import ExperimentError
from experiments.core.files import IMAGE, opened, refuse_special_file

log = logging.getLogger("experiments")

UNIDENTIFIED = "it is in no image format Pillow reads"
# PIL's modes of a 16-bit grey image: I;16 and its byte orders (PNG, TIFF), and I (PGM).
SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
LAYOUT = "an image folder holds train/<class>/*, test/<class>/* and optionally val/<class>/*"
IMAGENET = (
    "dataset.root=%s has train/ and val/ but no test/ (ImageNet's layout): val/ is the test split"
)
RESIZED = (
    "dataset.root=%s: its images are resized (shorter side) and center-cropped from %dx%d (%s, the "
    "first) to %dx%d, the size the model is built for (dataset.image_size=%d)"
)


class ImageFolderSplit(ImageFolder):
    """torchvision's ImageFolder with uint8 items of one size, in file name order (then class), so
    numbered files keep their order."""

    def __init__(self, root: Path, image_size: int, channels: int) -> None:
        self.image_size = image_size
        self.channels = channels
        valid = functools.partial(_image_file, root)
        super().__init__(str(root), is_valid_file=valid, allow_empty=True)
        self.samples.sort(key=lambda sample: (Path(sample[0]).name, sample[1]))  # (imgs: the same)
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
    """The train and test splits (and val, if any) of the folder at `root`; of train/ and val/
    alone (ImageNet's layout), val/ is the test split. `evaluating`: `(test, test)` only."""
    folder = Path(root).expanduser()
    if not folder.is_dir():
        raise ExperimentError(f"dataset.root={root}: no such folder; {LAYOUT}")
    present = {split: split for split in ("train", "test", "val") if (folder / split).is_dir()}
    if "test" not in present and "val" in present:
        present["test"] = present.pop("val")
        log.info(IMAGENET, root)
    if evaluating:
        present = {"test": present["test"]} if "test" in present else {}
    for split in ("test",) if evaluating else ("train", "test"):
        if split not in present:
            found = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_dir())) or "none"
            raise ExperimentError(
                f"dataset.root={root} has no {split}/ folder (its folders: {found}); {LAYOUT}"
            )
    names = list(present.values())
    classes = {name: _class_folders(folder / name) for name in names}
    for name in names[1:]:
        _same_classes(root, classes[names[0]], name, classes[name])
    splits = tuple(ImageFolderSplit(folder / name, image_size, channels) for name in names)
    for name, dataset in zip(names, splits, strict=True):
        counts = np.bincount(dataset.targets, minlength=len(dataset.classes))
        for class_name, count in zip(dataset.classes, counts, strict=True):
            if count == 0:
                raise ExperimentError(
                    f"dataset.root={root}: class folder {name}/{class_name} has no images "
                    f"({', '.join(IMG_EXTENSIONS)})"
                )
    _say_if_resized(root, Path(splits[0].samples[0][0]), image_size)
    return (splits[0], *splits) if evaluating else splits


def _say_if_resized(root: str, first: Path, image_size: int) -> None:
    try:
        with opened(first, IMAGE) as file, Image.open(file) as image:
            width, height = image.size
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError, ExperimentError):
        return  # decoding it names the file, and what is wrong with it
    if (width, height) != (image_size, image_size):
        log.info(RESIZED, root, width, height, first, image_size, image_size, image_size)


def export(
    splits: dict[str, Any],
    classes: list[str],
    root: Path,
    suffix: str = ".png",
    size: int | None = None,
) -> None:
    """Write uint8 `Split`s (by split name) as an image folder, each image named by its index so
    the folder keeps the splits' order, resized to `size` x `size` if given."""
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
        with opened(path, IMAGE) as file, Image.open(file) as read:
            image = _eight_bit(read) if read.mode in SIXTEEN_BIT else read
            image = image.convert("RGB" if channels == 3 else "L")
    except Image.DecompressionBombError:
        raise ExperimentError(_too_large(path)) from None
    except UnidentifiedImageError:  # (its own words name the open file, not the path)
        raise ExperimentError(f"{path} cannot be decoded as an image ({UNIDENTIFIED})") from None
    except (OSError, SyntaxError, ValueError) as error:
        raise ExperimentError(f"{path} cannot be decoded as an image ({error})") from None
    if image.size != (image_size, image_size):
        image = F.center_crop(F.resize(image, image_size), [image_size, image_size])
    return F.pil_to_tensor(image)


def _eight_bit(image: Image.Image) -> Image.Image:
    """A 16-bit grey image as an 8-bit one, scaled (PIL's own convert clips at 255: all white)."""
    values = np.asarray(image, dtype=np.float64) * (255 / 65535)
    return Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8), "L")


def _too_large(path: Path) -> str:
    """What to say of an image beyond the pixels PIL decodes (twice `MAX_IMAGE_PIXELS`)."""
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None  # PIL's only switch for the check; the header alone is read
    try:
        with opened(path, IMAGE) as file, Image.open(file) as image:
            width, height = image.size
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    return (
        f"{path} is {width}x{height} ({width * height:,} pixels): more than the {2 * limit:,} "
        "pixels Pillow decodes, a guard against decompression bombs; shrink it"
    )


def _image_file(split: Path, path: str) -> bool:
    """True for an image, False for what is hidden (.DS_Store); anything else is refused."""
    if any(part.startswith(".") for part in Path(path).relative_to(split).parts):
        return False
    if not Path(path).name.lower().endswith(IMG_EXTENSIONS):
        _refuse_a_loop(split, Path(path))
        raise ExperimentError(
            f"{path} is not an image; class folders hold only images ({', '.join(IMG_EXTENSIONS)})"
        )
    refuse_special_file(path, IMAGE.what_is_valid, IMAGE)
    return True


def _refuse_a_loop(split: Path, path: Path) -> None:
    """Name the symbolic link that makes `path` a loop (torchvision hands it over as a file)."""
    parts = path.relative_to(split).parts
    for link in (split.joinpath(*parts[:depth]) for depth in range(1, len(parts) + 1)):
        if not link.is_symlink():
            continue
        try:
            os.stat(link)
        except OSError as error:
            if error.errno == errno.ELOOP:  # links that lead to one another, never to a file
                raise ExperimentError(
                    f"{link} is a symbolic link loop: it leads back to itself; remove it"
                ) from None
            continue
        target, holder = Path(os.path.realpath(link)), Path(os.path.realpath(link.parent))
        if target == holder or target in holder.parents:
            raise ExperimentError(
                f"{link} is a symbolic link loop: it leads back to {target}, which holds it; "
                "remove it"
            )


def _class_folders(split: Path) -> list[str]:
    """The class folders' names, sorted; hidden folders (.ipynb_checkpoints) are not classes."""
    names = sorted(
        entry.name for entry in split.iterdir() if entry.is_dir() and not entry.name.startswith(".")
    )
    if not names:
        raise ExperimentError(f"{split} has no class folders; {LAYOUT}")
    for name in names:
        if any(unicodedata.category(character) == "Cc" for character in name):
            raise ExperimentError(
                f"class folder {str(split / name)!r} has a line break or another control "
                "character in its name, which names its class in the log's lines and in the "
                "records; rename the folder"
            )
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
    export({"train": train, "test": test}, list(config.classes), arguments.root, arguments.suffix)
    print(f"{len(train):,} train and {len(test):,} test images in {arguments.root}")


if __name__ == "__main__":
    main()
