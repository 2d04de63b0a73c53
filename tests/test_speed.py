"""The fast paths do what they claim to, checked so that a broken one fails: batches in
channels-last hold the same numbers, augmentation is exactly a crop and a flip, bf16 changes the
numbers a little and no more, compilation changes nothing. (Speed itself is measured in bench/,
not here; the GPU side of these claims is in test_gpu.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.config.choices import Precision
from experiments.core.errors import ExperimentError
from experiments.data import loading
from experiments.data.batches import Augment, Batches
from experiments.data.types import ImageData
from experiments.devices import precision
from experiments.devices.placement import ToDevice
from experiments.run import setup
from experiments.run.train import train
from experiments.training.models import Tudui
from helpers import QUICK, ROOT, compose_config, metrics, on, results


def test_showing_the_config_does_not_import_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "train.py"), "--cfg", "job"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "experiments.config" in imported
    assert "torch" not in imported
    assert "model:" in done.stdout


@pytest.fixture(scope="module")
def sample() -> ImageData:
    return loading.load(compose_config().dataset)


def batches(
    sample: ImageData, seed: int = 0, channels_last: bool = False
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    shuffle = torch.Generator().manual_seed(seed)
    passes = Batches(
        sample.train,
        batch_size=64,
        mean=[0.5],
        std=[0.5],
        device=on("cpu", channels_last=channels_last),
        shuffle=shuffle,
        limit=5,
    )
    return list(passes)


def test_channels_last_batches_hold_the_same_numbers(sample: ImageData) -> None:
    plain, last = batches(sample), batches(sample, channels_last=True)
    for (images, labels), (images_cl, labels_cl) in zip(plain, last, strict=True):
        assert images_cl.is_contiguous(memory_format=torch.channels_last)
        assert not images.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(images, images_cl) and torch.equal(labels, labels_cl)


def test_channels_last_puts_the_model_in_that_format() -> None:
    def conv_weight(channels_last: bool) -> torch.Tensor:
        model = setup.place_model(Tudui(3, 32, 10), on("cpu", channels_last=channels_last))
        return model.features[0].weight

    assert conv_weight(True).is_contiguous(memory_format=torch.channels_last)
    assert not conv_weight(False).is_contiguous(memory_format=torch.channels_last)


def test_a_dataset_preloaded_on_the_cpu_gives_the_same_batches(
    sample: ImageData,
) -> None:
    # A smoke test only: on the CPU preloading moves nothing (test_gpu.py has the real claim).
    preloaded = loading.preload(sample, ToDevice(torch.device("cpu")))
    for ours, theirs in zip(batches(sample), batches(preloaded), strict=True):
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
    shuffle = augment.generator
    augmented = Batches(
        sample.train,
        batch_size=64,
        mean=[0.5],
        std=[0.5],
        device=on("cpu", channels_last=channels_last),
        shuffle=shuffle,
        limit=3,
        augment=augment,
    )
    got = [images for images, _ in augmented]
    for ours, theirs in zip(got, expected_augmented(sample, 7, 4, 3), strict=True):
        assert torch.allclose(ours, theirs, atol=1e-6)
    # And it did change the images: a batch unlike the plain one of the same order.
    plain = batches(sample, seed=7, channels_last=channels_last)
    assert not torch.allclose(got[0], plain[0][0])


def test_flips_mirror_some_images_and_leave_the_others(sample: ImageData) -> None:
    flip = Augment(crop_padding=0, flip=True, generator=torch.Generator().manual_seed(1))
    images = sample.train.images[:64]
    flipped = flip(images, 64, slice(0, 64))
    same = [torch.equal(a, b) for a, b in zip(flipped, images, strict=True)]
    mirrored = [torch.equal(a, b.flip(2)) for a, b in zip(flipped, images, strict=True)]
    assert all(s or m for s, m in zip(same, mirrored, strict=True))
    assert 10 < sum(mirrored) < 54


def test_augmentation_draws_for_the_whole_batch_so_shares_add_up(
    sample: ImageData,
) -> None:
    def augment(seed: int, share: slice) -> torch.Tensor:
        augment = Augment(4, True, torch.Generator().manual_seed(seed))
        return augment(sample.train.images[share], 10, share)

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
            device=on("cpu", channels_last=channels_last),
            limit=1,
        )
        images, _ = next(iter(cut))
        raw = sample.test.images[:100].float() / 255
        expected = (raw - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
        assert torch.allclose(images, expected, atol=1e-5)


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plain")
    train(compose_config(*QUICK), folder)
    return folder


def losses(run_dir: Path) -> list[float]:
    return [row["train_loss"] for row in metrics(run_dir, "step")]


def test_bf16_changes_the_numbers_a_little_and_no_more(tmp_path: Path, plain_run: Path) -> None:
    train(compose_config(*QUICK, "trainer.precision=bf16"), tmp_path)
    assert results(tmp_path)["precision"] == "bf16"
    ours, plain = losses(tmp_path), losses(plain_run)
    differences = [abs(a - b) for a, b in zip(ours, plain, strict=True)]
    # bfloat16 keeps 8 bits of mantissa: the losses move, but by hundredths at most here.
    assert all(0 < difference < 0.02 for difference in differences), differences


def test_compiling_changes_no_number(tmp_path: Path, plain_run: Path) -> None:
    train(compose_config(*QUICK, "trainer.compile=aot_eager"), tmp_path)
    assert losses(tmp_path) == losses(plain_run)


def test_channels_last_is_on_by_default_on_the_cpu(plain_run: Path) -> None:
    result = results(plain_run)
    assert result["channels_last"] is True
    assert result["keep_freed_memory"] is (sys.platform == "linux")


def test_each_epoch_says_where_its_time_went(plain_run: Path) -> None:
    for row in metrics(plain_run, "epoch"):
        assert 0 < row["wait_seconds"] < row["train_seconds"]
        assert 0 <= row["copy_seconds"] <= row["wait_seconds"]
        assert 0 < row["compute_seconds"] < row["train_seconds"]
    result = results(plain_run)
    assert 0 < result["wait_share"] + result["compute_share"] <= 1.01


def test_fp16_needs_a_gpu() -> None:
    with pytest.raises(ExperimentError) as error:
        precision.autocast_and_scaler(Precision.fp16, torch.device("cpu"))
    assert str(error.value) == (
        "trainer.precision=fp16 needs a CUDA device (its gradient scaling runs there); "
        "on cpu use bf16 or fp32"
    )


@pytest.mark.parametrize(
    ("name", "dtype", "scaled"),
    [(Precision.fp32, None, False), (Precision.bf16, torch.bfloat16, False)],
)
def test_precision_is_an_autocast_dtype_and_a_scaler(
    name: Precision, dtype: torch.dtype | None, scaled: bool
) -> None:
    autocast_dtype, scaler = precision.autocast_and_scaler(name, torch.device("cpu"))
    assert autocast_dtype == dtype and scaler.is_enabled() is scaled
