"""The fast paths give the same batches and numbers as the plain ones (speed itself is measured
in bench/, not here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments import checkpoints, data
from experiments.errors import ExperimentError
from experiments.placement import ToDevice
from experiments.train import train
from experiments.tuning import Precision
from helpers import QUICK, ROOT, compose_config, metrics, results

CPU = ToDevice(torch.device("cpu"))


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
def sample() -> data.ImageData:
    return data.load(compose_config().dataset)


def batches(sample: data.ImageData, **options: object) -> list[tuple[torch.Tensor, torch.Tensor]]:
    shuffle = torch.Generator().manual_seed(0)
    return list(data.Batches(sample.train, 64, sample, CPU, shuffle=shuffle, limit=5, **options))


def test_channels_last_batches_hold_the_same_numbers(sample: data.ImageData) -> None:
    plain, last = batches(sample), batches(sample, channels_last=True)
    for (images, labels), (images_cl, labels_cl) in zip(plain, last, strict=True):
        assert images_cl.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(images, images_cl) and torch.equal(labels, labels_cl)


def test_a_dataset_preloaded_on_the_device_gives_the_same_batches(sample: data.ImageData) -> None:
    preloaded = data.preload(sample, CPU)
    for ours, theirs in zip(batches(sample), batches(preloaded), strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_flips_mirror_some_images_and_leave_the_others(sample: data.ImageData) -> None:
    flip = data.Augment(crop_padding=0, flip=True, generator=torch.Generator().manual_seed(1))
    images = sample.train.images[:64]
    flipped = flip(images, 64, slice(0, 64))
    same = [torch.equal(a, b) for a, b in zip(flipped, images, strict=True)]
    mirrored = [torch.equal(a, b.flip(2)) for a, b in zip(flipped, images, strict=True)]
    assert all(s or m for s, m in zip(same, mirrored, strict=True))
    assert 10 < sum(mirrored) < 54


def test_crops_are_windows_of_the_padded_image(sample: data.ImageData) -> None:
    crop = data.Augment(crop_padding=4, flip=False, generator=torch.Generator().manual_seed(2))
    images = sample.train.images[:8]
    cropped = crop(images, 8, slice(0, 8))
    assert cropped.shape == images.shape and cropped.dtype == torch.uint8
    padded = torch.nn.functional.pad(images, [4] * 4)
    for original, window in zip(padded, cropped, strict=True):
        assert any(
            torch.equal(original[:, top : top + 32, left : left + 32], window)
            for top in range(9)
            for left in range(9)
        )
    assert not torch.equal(cropped, images)


def test_augmentation_draws_for_the_whole_batch_so_shares_add_up(sample: data.ImageData) -> None:
    def augment(seed: int, share: slice) -> torch.Tensor:
        augment = data.Augment(4, True, torch.Generator().manual_seed(seed))
        return augment(sample.train.images[share], 10, share)

    whole = augment(3, slice(0, 10))
    halves = torch.cat([augment(3, slice(0, 5)), augment(3, slice(5, 10))])
    assert torch.equal(whole, halves)


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plain")
    train(compose_config(*QUICK), folder)
    return folder


def losses(run_dir: Path) -> list[float]:
    return [row["train_loss"] for row in metrics(run_dir, "step")]


@pytest.mark.parametrize(
    ("overrides", "same_numbers"),
    [
        # bf16 and channels-last round differently, augmentation changes the images: close.
        (["trainer.precision=bf16"], False),
        (["trainer.channels_last=false"], False),
        (["trainer.compile=aot_eager"], True),
        (["dataset.preload=device"], True),
        (["dataset.augment.flip=true", "dataset.augment.crop_padding=4"], False),
    ],
)
def test_every_speed_option_trains_to_the_plain_runs_numbers(
    tmp_path: Path, plain_run: Path, overrides: list[str], same_numbers: bool
) -> None:
    train(compose_config(*QUICK, *overrides), tmp_path)
    assert results(tmp_path)["status"] == "completed"
    ours, plain = losses(tmp_path), losses(plain_run)
    if same_numbers:
        assert ours == plain
    else:
        assert ours == pytest.approx(plain, rel=0.05)
    state = checkpoints.load(tmp_path / checkpoints.LAST)
    assert set(state["model"]) == set(checkpoints.load(plain_run / checkpoints.LAST)["model"])


def test_channels_last_is_on_by_default_on_the_cpu(tmp_path: Path) -> None:
    train(compose_config(*QUICK), tmp_path)
    result = results(tmp_path)
    assert result["channels_last"] is True
    assert result["keep_freed_memory"] is (sys.platform == "linux")


def test_each_epoch_says_where_its_time_went(tmp_path: Path) -> None:
    train(compose_config(*QUICK), tmp_path)
    for row in metrics(tmp_path, "epoch"):
        assert 0 < row["wait_seconds"] < row["train_seconds"]
        assert 0 <= row["copy_seconds"] <= row["wait_seconds"]
        assert 0 < row["compute_seconds"] < row["train_seconds"]
    result = results(tmp_path)
    assert 0 < result["wait_share"] + result["compute_share"] <= 1.01


def test_fp16_needs_a_gpu_and_unknown_precisions_are_named() -> None:
    with pytest.raises(ExperimentError) as error:
        Precision("fp16", torch.device("cpu"))
    assert str(error.value) == (
        "trainer.precision=fp16 needs a CUDA device (its gradient scaling runs there); "
        "on cpu use bf16 or 32"
    )
    with pytest.raises(
        ExperimentError, match=r"trainer\.precision=16 is not a precision; valid: 32"
    ):
        Precision("16", torch.device("cpu"))


def test_bad_data_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match=r"dataset\.preload=gpu is not a place; valid: host"):
        train(compose_config(*QUICK, "dataset.preload=gpu"), tmp_path)
    assert results(tmp_path)["status"] == "failed"
