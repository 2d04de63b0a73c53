"""A BatchNorm model never trains on one image (a process's share of a small last batch): such a
last batch is left out, said once in the log; under DDP on GPUs, `trainer.sync_batchnorm=true`
pools the processes' images instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.core.text import ROWS
from experiments.data.batches import Batches
from experiments.data.types import Split
from experiments.devices.plan import DevicePlan
from experiments.devices.process_group import TORCHRUN, ProcessGroup
from experiments.devices.wrapping import parallelize, sync_batchnorm_waits
from experiments.training.loop import (
    fewest_images_per_batch,
    left_out_note,
    refuse_a_split_too_small,
)
from experiments.training.models import LeNet
from helpers import metrics, on, results, torchrun_cli, train_cli

# Two torchrun processes, each asking for its share of every batch.
RANK_0_OF_2 = ProcessGroup(0, 2, 0, 2, launcher=TORCHRUN)
# 7 images in batches of 4: the last batch, 3 images, gives the processes 1 and 2.
SEVEN_IMAGES = Split(torch.zeros(7, 3, 8, 8, dtype=torch.uint8), torch.zeros(7, dtype=torch.long))


def with_batch_norm() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())


@pytest.mark.parametrize(
    ("model", "processes", "fewest"),
    [
        (LeNet(3, 32, 10), 1, 1),
        (LeNet(3, 32, 10), 2, 2),
        (with_batch_norm(), 1, 2),
        (with_batch_norm(), 2, 4),
        # Synchronized, the layers normalize by the whole batch: one image per process will do.
        (nn.SyncBatchNorm.convert_sync_batchnorm(with_batch_norm()), 2, 2),
    ],
)
def test_a_batch_norm_model_needs_two_images_in_each_process(
    model: nn.Module, processes: int, fewest: int
) -> None:
    assert fewest_images_per_batch(model, batch_size=64, processes=processes) == fewest


def test_a_batch_size_that_gives_a_batch_norm_model_one_image_is_refused() -> None:
    with pytest.raises(ExperimentError) as error:
        fewest_images_per_batch(with_batch_norm(), batch_size=2, processes=2)
    assert str(error.value) == (
        "trainer.batch_size=2 gives each of the 2 processes 1 image, on which the model's "
        "BatchNorm layers cannot train; use trainer.batch_size=4 or more"
    )


def test_a_last_batch_too_small_for_batch_norm_is_left_out_and_said() -> None:
    runtime = on("cpu", group=RANK_0_OF_2)
    kept = Batches(SEVEN_IMAGES, batch_size=4, mean=[0.5], std=[0.5], runtime=runtime, fewest=2)
    assert (kept.sizes, kept.left_out, left_out_note(kept, 2)) == ([4, 3], 0, None)
    left = Batches(SEVEN_IMAGES, batch_size=4, mean=[0.5], std=[0.5], runtime=runtime, fewest=4)
    assert (left.sizes, left.left_out, [len(labels) for _, labels in left]) == ([4], 3, [2])
    assert left_out_note(left, 2) == (
        "the last batch, of 3 images, is left out of every epoch: a process's share of it would "
        "be 1 image, on which the model's BatchNorm layers cannot train "
        "(trainer.sync_batchnorm=true pools the processes' images)"
    )
    # A limit that stops before the last batch leaves nothing out.
    limited = Batches(
        SEVEN_IMAGES, batch_size=4, mean=[0.5], std=[0.5], runtime=runtime, fewest=4, limit=1
    )
    assert (limited.sizes, limited.left_out) == ([4], 0)


@pytest.mark.parametrize(
    ("plan", "named"),
    [
        (
            DevicePlan("cpu", backend="gloo"),
            "cpu (ddp, gloo), where torch's SyncBatchNorm does not run",
        ),
        (DevicePlan("cpu"), "cpu, where torch's SyncBatchNorm does not run"),
        (DevicePlan("cuda", 0, (0, 1)), "dp over cuda:0, cuda:1"),
    ],
)
def test_sync_batchnorm_is_refused_where_it_cannot_run(plan: DevicePlan, named: str) -> None:
    with pytest.raises(ExperimentError) as error:
        parallelize(with_batch_norm(), plan, None, sync_batchnorm=True)
    assert str(error.value) == (
        "trainer.sync_batchnorm=true pools BatchNorm's statistics over device=ddp's processes on "
        f"GPUs, but this run is on {named}; set it false"
    )


RESNET_ON_SEVEN_IMAGES = (
    "device=ddp",
    "model=torchvision",
    "model.arch=resnet18",  # its last BatchNorm layers see 1x1 features of 32x32 images
    "dataset=synthetic",
    "dataset.train_size=7",
    "dataset.test_size=4",
    "trainer.batch_size=4",
    "trainer.epochs=1",
    "trainer.confusion_matrix=false",
)


@pytest.mark.slow
def test_resnet_under_two_processes_trains_without_a_one_image_share(tmp_path: Path) -> None:
    done = torchrun_cli(tmp_path, 2, *RESNET_ON_SEVEN_IMAGES)
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["status"] == "completed"
    assert metrics(done.run_dir, "epoch")[0]["train_images"] == 4
    log = (done.run_dir / "train.log").read_text()
    assert log.count("the last batch, of 3 images, is left out of every epoch") == 1


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", ["auto", "2"])
def test_a_one_image_training_split_is_refused_for_batch_norm_not_for_memory(
    tmp_path: Path, batch_size: str
) -> None:
    # Searched, no batch of 2 fits in one image (once said to be above the memory budget); given,
    # the only batch is a last batch of 1, left out (once an epoch of no steps, and a crash).
    done = train_cli(
        tmp_path,
        *RESNET_ON_SEVEN_IMAGES[1:],
        "device=cpu",
        "dataset.train_size=1",
        f"trainer.batch_size={batch_size}",
    )
    line = (
        f"trainer.batch_size={batch_size}: the training split holds 1 image, on which the "
        "model's BatchNorm layers cannot train (a batch needs 2 images); give it 2 images or "
        "more (fewer held out by dataset.val_fraction), or train a model without BatchNorm layers"
    )
    assert (done.returncode, done.last_line.partition("Error: ")[2]) == (1, line)
    assert (results(done.run_dir)["status"], results(done.run_dir)["reason"]) == ("failed", line)


@pytest.mark.parametrize(
    ("model", "images", "why"),
    [
        (LeNet(3, 32, 10), 1, "too few to give each of the 2 processes one"),
        (
            with_batch_norm(),
            3,
            "too few to give each of the 2 processes the 2 rows the model's BatchNorm layers "
            "need to train",
        ),
    ],
)
def test_a_training_split_too_small_for_every_process_is_refused(
    model: nn.Module, images: int, why: str
) -> None:
    fewest = fewest_images_per_batch(model, batch_size=4, processes=2)
    with pytest.raises(ExperimentError) as error:
        refuse_a_split_too_small(4, images, fewest, 2, ROWS)
    held = f"{images} row{'s' if images > 1 else ''}"
    assert str(error.value) == (
        f"trainer.batch_size=4: the training split holds {held}, {why}; give it {fewest} rows or "
        "more (fewer held out by dataset.val_fraction), or train a model without BatchNorm layers"
    )
    refuse_a_split_too_small(4, fewest, fewest, 2, ROWS)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_sync_batchnorm_trains_on_every_image_with_nccl(tmp_path: Path) -> None:
    done = torchrun_cli(tmp_path, 2, *RESNET_ON_SEVEN_IMAGES, "trainer.sync_batchnorm=true")
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["device"]["backend"] == "nccl"
    assert metrics(done.run_dir, "epoch")[0]["train_images"] == 7
    log = (done.run_dir / "train.log").read_text()
    assert "left out" not in log
    assert "BatchNorm layers makes the host wait for the GPU once a step" in log


def test_synchronized_batchnorm_is_said_to_make_the_host_wait_at_each_layer() -> None:
    model = nn.Sequential(with_batch_norm(), nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4))
    assert sync_batchnorm_waits(model) is None
    note = sync_batchnorm_waits(nn.SyncBatchNorm.convert_sync_batchnorm(model))
    assert note == (
        "trainer.sync_batchnorm=true: each of the model's 2 BatchNorm layers makes the host wait "
        "for the GPU once a step, so the host cannot queue steps ahead of it"
    )
