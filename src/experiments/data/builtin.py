"""The shipped samples (`experiments/sample_data/`) and generated images, as whole uint8 splits."""

from __future__ import annotations

import gzip
import json
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from experiments.data.types import Split

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"


def cifar10_sample() -> tuple[Split, Split]:
    """The 4,000 train + 1,000 test CIFAR-10 images shipped in the repo."""
    decoded = _decoded_cifar10_sample()
    train, test = (Split(split.images.clone(), split.labels.clone()) for split in decoded)
    return train, test


# Decoded once per process (a sweep's jobs may share one); each caller gets a copy to change.
@cache
def _decoded_cifar10_sample() -> tuple[Split, Split]:
    root = SAMPLE_DATA / "cifar10"
    text = (root / "cifar10_labels.js").read_text()
    labels = torch.tensor(json.loads(text[text.index("[") : text.rindex("]") + 1]))

    def batch(number: int) -> tuple[torch.Tensor, torch.Tensor]:
        with Image.open(root / f"cifar10_batch_{number}.png") as strip:
            pixels = torch.from_numpy(np.array(strip))  # (1000, 1024, 3): one image per row
        images = pixels.reshape(1000, 32, 32, 3).permute(0, 3, 1, 2).contiguous()
        return images, labels[1000 * number : 1000 * (number + 1)]

    # Side by side: Pillow lets go of the GIL while it inflates a strip.
    with ThreadPoolExecutor() as pool:
        *train, (test_images, test_labels) = pool.map(batch, [0, 1, 2, 3, 50])
    train_images, train_labels = (torch.cat(parts) for parts in zip(*train, strict=True))
    return Split(train_images, train_labels), Split(test_images, test_labels)


def mnist_sample(test_every: int) -> tuple[Split, Split]:
    """The 10,000-image MNIST test set shipped in the repo, every `test_every`-th image held out
    (so both halves of the set, written by different people, are in both splits)."""
    root = SAMPLE_DATA / "mnist"
    images = torch.from_numpy(read_idx(root / "t10k-images-idx3-ubyte.gz")).unsqueeze(1)
    labels = torch.from_numpy(read_idx(root / "t10k-labels-idx1-ubyte.gz")).long()
    held_out = torch.arange(len(labels)) % test_every == test_every - 1
    return Split(images[~held_out], labels[~held_out]), Split(images[held_out], labels[held_out])


def read_idx(path: Path) -> np.ndarray:
    """An idx file's array (big-endian: magic, one uint32 per dimension, then uint8 data)."""
    raw = gzip.decompress(path.read_bytes())
    dims = raw[3]
    shape = np.frombuffer(raw, dtype=">u4", count=dims, offset=4)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape).copy()


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


# dataset=shapes' classes: the mask's value of a pixel of each.
SHAPES = ["background", "circle", "square", "triangle"]


def shapes_splits(
    image_size: int, train_size: int, test_size: int, seed: int, shapes_per_image: int = 2
) -> tuple[Split, Split]:
    """Seeded images of bright shapes (`SHAPES`) on a dark noisy background, and their masks."""
    generator = torch.Generator().manual_seed(seed)
    rows, columns = torch.meshgrid(
        torch.arange(image_size), torch.arange(image_size), indexing="ij"
    )

    def split(size: int) -> Split:
        def uniform(low: float, high: float, *shape: int) -> torch.Tensor:
            return low + (high - low) * torch.rand(size, *shape, generator=generator)

        shade = uniform(0, 80, 1, 1, 1)
        images = shade + uniform(-20, 20, 3, image_size, image_size)
        masks = torch.zeros(size, image_size, image_size, dtype=torch.int64)
        for _ in range(shapes_per_image):
            kind = torch.randint(1, len(SHAPES), (size,), generator=generator)
            radius = uniform(image_size / 8, image_size / 4)[:, None, None]
            down = rows - uniform(0, image_size)[:, None, None]
            across = (columns - uniform(0, image_size)[:, None, None]).abs()
            inside = torch.stack(
                [
                    down**2 + across**2 <= radius**2,  # a circle
                    (down.abs() <= radius) & (across <= radius),  # a square
                    (down.abs() <= radius) & (across <= (down + radius) / 2),  # a triangle
                ]
            )[kind - 1, torch.arange(size)]
            colour = uniform(120, 255, 3, 1, 1)
            images = torch.where(inside[:, None], colour, images)
            masks = torch.where(inside, kind[:, None, None], masks)
        return Split(images.clamp(0, 255).to(torch.uint8), masks)

    return split(train_size), split(test_size)
