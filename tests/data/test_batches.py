"""Batches: normalized, shuffled, cut short, shared among processes, channels-last, augmented."""

from __future__ import annotations

import pytest
import torch

from experiments.data import loading
from experiments.data.augment import Augment
from experiments.data.batches import Batches
from experiments.data.types import ImageData, Split
from experiments.devices.placement import ToDevice
from experiments.devices.process_group import TORCHRUN, ProcessGroup
from helpers import compose_config, on


def in_fours(split: Split, **kwargs: object) -> Batches:
    return Batches(split, batch_size=4, mean=[0.5], std=[0.25], runtime=on("cpu"), **kwargs)


def test_batches_are_normalized_floats_in_order_without_shuffle() -> None:
    images = torch.randint(0, 256, (10, 3, 2, 2), dtype=torch.uint8)
    split = Split(images, torch.arange(10) % 2)
    cut = list(in_fours(split))
    assert [len(labels) for _, labels in cut] == [4, 4, 2]
    expected = (images.float() / 255 - 0.5) / 0.25
    assert torch.allclose(torch.cat([x for x, _ in cut]), expected, atol=1e-6)
    assert torch.equal(torch.cat([y for _, y in cut]), split.labels)


def test_shuffled_batches_cover_the_split_once_in_a_new_order_each_pass() -> None:
    split = Split(torch.zeros(10, 1, 1, 1, dtype=torch.uint8), torch.arange(10))
    passes = in_fours(split, shuffle=torch.Generator().manual_seed(0))
    first = torch.cat([y for _, y in passes])
    second = torch.cat([y for _, y in passes])
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(10))
    assert not torch.equal(first, second)


def test_limit_cuts_a_pass_short() -> None:
    split = Split(torch.zeros(10, 1, 1, 1, dtype=torch.uint8), torch.arange(10))
    limited = in_fours(split, limit=2)
    assert len(limited) == 2 and limited.count_images() == 8
    assert len(list(limited)) == 2


def shared_among(split: Split, group: ProcessGroup, **options: object) -> Batches:
    return Batches(
        split, batch_size=4, mean=[0.5], std=[0.5], runtime=on("cpu", group=group), **options
    )


def test_the_processes_share_every_batch_without_overlap() -> None:
    split = Split(torch.zeros(10, 1, 1, 1, dtype=torch.uint8), torch.arange(10))

    def labels(group: ProcessGroup) -> list[list[int]]:
        shuffle = torch.Generator().manual_seed(3)
        return [batch.tolist() for _, batch in shared_among(split, group, shuffle=shuffle)]

    whole = labels(ProcessGroup())
    halves = [labels(ProcessGroup(rank, 2, rank, 2, launcher=TORCHRUN)) for rank in (0, 1)]
    assert [first + second for first, second in zip(*halves, strict=True)] == whole
    assert [len(batch) for batch in halves[0]] == [2, 2, 1]


def test_a_last_batch_too_small_to_share_is_left_out() -> None:
    split = Split(torch.zeros(9, 1, 1, 1, dtype=torch.uint8), torch.arange(9))
    assert shared_among(split, ProcessGroup(0, 3, 0, 3, launcher=TORCHRUN)).sizes == [4, 4]
    assert shared_among(split, ProcessGroup()).sizes == [4, 4, 1]


@pytest.fixture(scope="module")
def sample() -> ImageData:
    return loading.load(compose_config().dataset)


def first_batches(
    sample: ImageData,
    seed: int = 0,
    channels_last: bool = False,
    *,
    limit: int = 5,
    augment: Augment | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first batches of 64 of a pass shuffled with `seed`, or by `augment`'s generator."""
    shuffle = augment.generator if augment else torch.Generator().manual_seed(seed)
    passes = Batches(
        sample.train,
        batch_size=64,
        mean=[0.5],
        std=[0.5],
        runtime=on("cpu", channels_last=channels_last),
        shuffle=shuffle,
        limit=limit,
        augment=augment,
    )
    return list(passes)


def test_channels_last_batches_hold_the_same_numbers(sample: ImageData) -> None:
    plain, last = first_batches(sample), first_batches(sample, channels_last=True)
    for (images, labels), (images_cl, labels_cl) in zip(plain, last, strict=True):
        assert images_cl.is_contiguous(memory_format=torch.channels_last)
        assert not images.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(images, images_cl) and torch.equal(labels, labels_cl)


def test_a_dataset_preloaded_on_the_cpu_gives_the_same_batches(
    sample: ImageData,
) -> None:
    # A smoke test only: on the CPU preloading moves nothing (test_gpu.py has the real claim).
    preloaded = loading.preload(sample, ToDevice(torch.device("cpu")))
    for ours, theirs in zip(first_batches(sample), first_batches(preloaded), strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def expected_augmented(
    sample: ImageData, seed: int, padding: int, count: int
) -> list[torch.Tensor]:
    """What crops and flips should make of the first `count` batches of 64, written image by image
    with plain slicing, drawing from the generator in the order the batches do: the pass's
    permutation, then per batch the crop offsets and the flips."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(sample.train), generator=generator)
    expected = []
    for number in range(count):
        rows = order[64 * number : 64 * (number + 1)]
        top, left = torch.randint(0, 2 * padding + 1, (2, 64), generator=generator)
        flips = torch.rand(64, generator=generator) < 0.5
        images = []
        for i, row in enumerate(rows.tolist()):
            padded = torch.nn.functional.pad(sample.train.images[row], [padding] * 4)
            image = padded[:, top[i] : top[i] + 32, left[i] : left[i] + 32]
            images.append(image.flip(2) if flips[i] else image)
        expected.append((torch.stack(images).float() / 255 - 0.5) / 0.5)
    return expected


@pytest.mark.parametrize("channels_last", [False, True])
def test_augmented_batches_are_exactly_crops_and_flips_of_the_plain_ones(
    sample: ImageData, channels_last: bool
) -> None:
    augment = Augment(4, True, torch.Generator().manual_seed(7))
    augmented = first_batches(sample, channels_last=channels_last, limit=3, augment=augment)
    got = [images for images, _ in augmented]
    for ours, theirs in zip(got, expected_augmented(sample, 7, 4, 3), strict=True):
        assert torch.allclose(ours, theirs, atol=1e-6)
    # And it did change the images: a batch unlike the plain one of the same order.
    plain = first_batches(sample, seed=7, channels_last=channels_last)
    assert not torch.allclose(got[0], plain[0][0])


def test_flips_mirror_some_images_and_leave_the_others(sample: ImageData) -> None:
    flip = Augment(crop_padding=0, flip=True, generator=torch.Generator().manual_seed(1))
    images = sample.train.images[:64]
    flipped = flip.pixels(images, 64, slice(0, 64))
    same = [torch.equal(a, b) for a, b in zip(flipped, images, strict=True)]
    mirrored = [torch.equal(a, b.flip(2)) for a, b in zip(flipped, images, strict=True)]
    assert all(s or m for s, m in zip(same, mirrored, strict=True))
    assert 10 < sum(mirrored) < 54


def test_augmentation_draws_for_the_whole_batch_so_shares_add_up(
    sample: ImageData,
) -> None:
    def augment(seed: int, share: slice) -> torch.Tensor:
        augment = Augment(4, True, torch.Generator().manual_seed(seed))
        return augment.pixels(sample.train.images[share], 10, share)

    whole = augment(3, slice(0, 10))
    halves = torch.cat([augment(3, slice(0, 5)), augment(3, slice(5, 10))])
    assert torch.equal(whole, halves)


def test_per_channel_statistics_normalize_each_channel(sample: ImageData) -> None:
    mean, std = [0.4914, 0.4822, 0.4465], [0.247, 0.243, 0.261]
    for channels_last in (False, True):
        cut = Batches(
            sample.test,
            batch_size=100,
            mean=mean,
            std=std,
            runtime=on("cpu", channels_last=channels_last),
            limit=1,
        )
        images, _ = next(iter(cut))
        raw = sample.test.images[:100].float() / 255
        expected = (raw - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
        assert torch.allclose(images, expected, atol=1e-5)
