"""task=segmentation end to end: generated shapes and their masks (seeded), a small U-Net, mean
IoU and pixel accuracy per epoch, selection on validation; a model whose output does not fit the
task is refused before training."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from experiments.data.builtin import SHAPES, shapes_splits
from experiments.devices import process_settings
from experiments.run.train import train
from experiments.training.models import UNet
from helpers import (
    compose_config,
    killed_in_epoch_2,
    metrics,
    numbers,
    read_events,
    results,
    torchrun_cli,
    train_cli,
)

SEGMENTATION = (
    "device=cpu",
    "task=segmentation",
    "dataset=shapes",
    "dataset.train_size=160",
    "dataset.test_size=64",
    "optimizer=adam",
    "optimizer.lr=0.003",
)
SMALL_UNET = ("model=unet", "model.base_channels=8")
VAL = ("dataset.val_fraction=0.2",)


def test_the_shapes_repeat_and_their_masks_mark_their_pixels() -> None:
    train, _ = shapes_splits(32, 64, 16, seed=0)
    again, _ = shapes_splits(32, 64, 16, seed=0)  # (the test split: drawn after the train)
    assert torch.equal(train.images, again.images) and torch.equal(train.labels, again.labels)
    assert (train.images.shape, train.labels.shape, train.labels.dtype) == (
        (64, 3, 32, 32),
        (64, 32, 32),
        torch.int64,
    )
    assert not torch.equal(train.images, shapes_splits(32, 64, 16, seed=1)[0].images)
    # A shape's pixels are bright in every channel, the background's dark.
    channels_low = train.images.min(1).values
    channels_high = train.images.max(1).values
    assert channels_low[train.labels > 0].min() >= 120
    assert channels_high[train.labels == 0].max() <= 100
    assert set(train.labels.unique().tolist()) == set(range(len(SHAPES)))


def test_a_unet_gives_a_logit_per_class_and_pixel() -> None:
    model = UNet(3, 32, 4, base_channels=8, depth=3)
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 4, 32, 32)


@pytest.mark.slow
def test_shapes_train_a_unet_selected_on_validation_mean_iou(tmp_path: Path) -> None:
    run = ("trainer.epochs=3", "dataset.val_fraction=0.2")
    done = train_cli(tmp_path, *SEGMENTATION, *SMALL_UNET, *run)
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["selected_by"] == "val_miou (max)"
    epochs = metrics(done.run_dir, "epoch")
    assert all(0 <= row["test_miou"] <= row["test_pixel_accuracy"] <= 1 for row in epochs)
    assert result["test_miou"] == max(epochs, key=lambda row: row["val_miou"])["test_miou"]
    # Per-class pixel accuracy, and the confusion matrix of pixels, drawn.
    assert list(result["class_accuracy"]) == SHAPES
    assert (done.run_dir / "confusion_matrix.png").is_file()
    assert result["data"]["validation"]["per_class"] is None  # (images, not classes, held out)
    events = read_events(done.run_dir)
    assert [event.value for event in events.Scalars("val/miou")] == pytest.approx(
        [row["val_miou"] for row in epochs]
    )
    assert "test miou" in done.stderr and "val_miou (max)" in done.last_line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ("model=lenet",),
            "model lenet cannot take dataset shapes (3x32x32 images): it gives 4 outputs per "
            "image, but task=segmentation needs 4x32x32",
        ),
        (
            ("model=unet", "task=classification"),
            "task=classification learns classes, but dataset shapes holds masks to predict; "
            "use task=segmentation, or a dataset of classes",
        ),
        (
            ("model=unet", "dataset.augment.flip=true"),
            "dataset.augment.flip=true: it changes an image's pixels but not its mask's; "
            "task=segmentation trains without it (dataset.augment.flip=false)",
        ),
        (
            ("model=unet", "dataset.augment.policy=trivialaugment", "dataset.augment.erasing=0.5"),
            "dataset.augment.policy=trivialaugment dataset.augment.erasing=0.5: each changes an "
            "image's pixels but not its mask's; task=segmentation trains without them "
            "(dataset.augment.policy=null dataset.augment.erasing=0)",
        ),
        (
            ("model=unet", "model.depth=6"),
            "model unet cannot take dataset shapes (3x32x32 images): its 6 halvings need a size "
            "that divides by 64",
        ),
    ],
)
def test_what_does_not_fit_the_task_is_refused_before_training(
    tmp_path: Path, overrides: tuple[str, ...], said: str
) -> None:
    done = train_cli(tmp_path, *SEGMENTATION, *overrides)
    assert done.returncode == 1
    assert done.last_line.endswith(f"Error: {said}")
    assert results(done.run_dir)["status"] == "failed"


@pytest.mark.slow
def test_a_segmenter_under_classification_is_refused(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "device=cpu", "model=unet")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: model unet cannot take dataset cifar10_sample (3x32x32 images): it gives "
        "10x32x32 outputs per image, but task=classification needs 10"
    )


@pytest.mark.slow
def test_a_segmentation_killed_mid_epoch_resumes_to_an_uninterrupted_runs_numbers(
    tmp_path: Path,
) -> None:
    run = (
        *SEGMENTATION,
        *SMALL_UNET,
        "trainer.epochs=2",
        "dataset.val_fraction=0.2",
        "dataset.train_size=640",
        "trainer.log_interval=1",
    )
    reference = train_cli(tmp_path / "reference", *run)
    assert reference.returncode == 0, reference.stderr
    (tmp_path / "killed").mkdir()
    run_dir = killed_in_epoch_2(tmp_path / "killed", *run)
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1]

    done = train_cli(tmp_path / "killed", f"resume={run_dir}")
    assert done.returncode == 0, done.stderr
    assert numbers(run_dir) == numbers(reference.run_dir)
    for key in ("val_miou", "test_miou", "test_pixel_accuracy", "class_accuracy"):
        assert results(run_dir)[key] == results(reference.run_dir)[key]


@pytest.mark.slow
def test_two_processes_measure_what_one_process_does(tmp_path: Path) -> None:
    """Under DDP each process counts the pixels of its share of every batch in its confusion
    matrix; summed over the processes, they give one process's mean IoU and pixel accuracy."""
    run = (*SEGMENTATION[1:], *SMALL_UNET, "trainer.epochs=2", "trainer.batch_size=32")
    trackers = "tracker=[tensorboard,csv]"
    ddp = torchrun_cli(tmp_path / "ddp", 2, "device=ddp", *run, *VAL, trackers)
    assert ddp.returncode == 0, ddp.stderr
    with process_settings.restored():  # one process: this one
        train(compose_config("device=cpu", *run, *VAL), tmp_path / "single")
    ours, theirs = metrics(ddp.run_dir, "epoch"), metrics(tmp_path / "single", "epoch")
    assert len(ours) == len(theirs) == 2
    for mine, one in zip(ours, theirs, strict=True):
        for key in ("train_loss", "val_miou", "test_miou", "test_pixel_accuracy"):
            assert mine[key] == pytest.approx(one[key], rel=1e-4), key
    # The trackers are process 0's alone (every tracker is built by `records.tracker.trackers`
    # in process 0 only): each epoch once in each record.
    mious = [row["test_miou"] for row in ours]
    events = read_events(ddp.run_dir).Scalars("test/miou")
    assert [event.value for event in events] == pytest.approx(mious)  # (float32 there)
    with (ddp.run_dir / "metrics.csv").open() as file:
        rows = [float(row["test/miou"]) for row in csv.DictReader(file) if row["test/miou"]]
    assert rows == pytest.approx(mious)
    per_class = results(ddp.run_dir)["class_accuracy"]  # from the matrix of pixels
    assert per_class == pytest.approx(results(tmp_path / "single")["class_accuracy"], rel=1e-4)
