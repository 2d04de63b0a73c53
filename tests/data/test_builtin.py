"""The shipped CIFAR-10 sample, decoded strip by strip side by side: each strip in its place,
decoded once a process, and each caller's copy its own."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from experiments.data.builtin import SAMPLE_DATA, _decoded_cifar10_sample, cifar10_sample


def strip(number: int) -> torch.Tensor:
    """One PNG strip's 1,000 images, decoded alone."""
    with Image.open(SAMPLE_DATA / "cifar10" / f"cifar10_batch_{number}.png") as image:
        pixels = torch.from_numpy(np.array(image))
    return pixels.reshape(1000, 32, 32, 3).permute(0, 3, 1, 2)


def test_the_train_split_is_strips_0_to_3_in_order_and_the_test_split_strip_50() -> None:
    train, test = cifar10_sample()
    assert train.images.shape == (4000, 3, 32, 32) and train.images.is_contiguous()
    for number in range(4):
        assert torch.equal(train.images[1000 * number : 1000 * (number + 1)], strip(number))
    assert torch.equal(test.images, strip(50))
    assert len(train.labels) == 4000 and len(test.labels) == 1000


def test_each_call_gets_its_own_copy_of_the_sample_decoded_once() -> None:
    first, _ = cifar10_sample()
    first.images.zero_()
    first.labels.fill_(-1)
    second, _ = cifar10_sample()
    assert torch.equal(second.images[:1000], strip(0))
    assert (second.labels >= 0).all()
    assert _decoded_cifar10_sample.cache_info().misses == 1
