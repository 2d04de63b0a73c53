"""The HParams dashboard's data and the confusion matrix, read back as TensorBoard reads them."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import api_pb2, metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard import SummaryWriter

from experiments.records import confusion, hparams
from experiments.training.loop import confusion_counts
from helpers import compose_config


def read_events(folder: Path) -> EventAccumulator:
    """The events of one run folder, everything kept (TensorBoard's own reader)."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def plugin_data(events: EventAccumulator, tag: str) -> HParamsPluginData:
    return HParamsPluginData.FromString(events.PluginTagToContent(metadata.PLUGIN_NAME)[tag])


def test_hparams_are_written_into_the_run_folder_itself(tmp_path: Path) -> None:
    chosen = {"model": "lenet", "lr": 0.05, "batch_size": 32, "deterministic": True}
    final = {"val_accuracy": None, "test_accuracy": 0.625, "train_images_per_second": 1500.0}
    writer = SummaryWriter(tmp_path)
    hparams.write(writer, chosen, final, step=40)
    writer.close()

    assert all(path.name.startswith("events.out.tfevents.") for path in tmp_path.iterdir())
    events = read_events(tmp_path)
    start = plugin_data(events, metadata.SESSION_START_INFO_TAG).session_start_info
    kinds = {name: value.WhichOneof("kind") for name, value in start.hparams.items()}
    assert kinds == {
        "model": "string_value",
        "lr": "number_value",
        "batch_size": "number_value",
        "deterministic": "bool_value",
    }
    assert start.hparams["model"].string_value == "lenet"
    assert start.hparams["lr"].number_value == 0.05
    assert start.hparams["batch_size"].number_value == 32
    assert start.hparams["deterministic"].bool_value is True

    experiment = plugin_data(events, metadata.EXPERIMENT_TAG).experiment
    types = {info.name: api_pb2.DataType.Name(info.type) for info in experiment.hparam_infos}
    assert types == {
        "model": "DATA_TYPE_STRING",
        "lr": "DATA_TYPE_FLOAT64",
        "batch_size": "DATA_TYPE_FLOAT64",
        "deterministic": "DATA_TYPE_BOOL",
    }
    # Every metric is a column, so whichever run's columns TensorBoard takes for a sweep holds
    # them all; a run without a value (no validation split) leaves its cell empty.
    columns = [f"hparams/{name}" for name in final]
    assert [info.name.tag for info in experiment.metric_infos] == columns
    end = plugin_data(events, metadata.SESSION_END_INFO_TAG).session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS

    assert sorted(events.Tags()["scalars"]) == columns[1:]
    (accuracy,) = events.Scalars("hparams/test_accuracy")
    assert (accuracy.step, accuracy.value) == (40, 0.625)
    (speed,) = events.Scalars("hparams/train_images_per_second")
    assert (speed.step, speed.value) == (40, 1500.0)


def test_hyperparameters_of_a_composed_config_with_its_swept_keys() -> None:
    overrides = [
        "model=lenet",
        "optimizer.lr=0.05",
        "trainer.batch_size=32",
        "trainer.deterministic=true",
        "trainer.precision=bf16",
        "trainer=default",
        "device=cuda:1",
        "device.visible=[1,2]",
    ]
    cfg = compose_config(*overrides)
    command_line = [
        *overrides,
        "resume=outputs/a_run",
        "hparams_search=optuna",
        "hydra.verbose=true",
        "+note=hi",
        "~x",
    ]

    chosen = hparams.hyperparameters(cfg, "cuda:1", command_line)

    assert chosen == {
        "model": "lenet",
        "dataset": "cifar10_sample",
        "device": "cuda:1",
        "placement": "to_device",
        "optimizer": "sgd",
        "lr": 0.05,
        "batch_size": 32,
        "precision": "bf16",
        "scheduler": "none",
        "seed": 0,
        # Overrides of the columns above are those columns; the others are columns of their own.
        "trainer.deterministic": True,
        "trainer": "default",  # a group without a name: the option as given
        "device.visible": "[1, 2]",  # a list: the override's text
        "note": "hi",
        "x": "None",  # deleted
    }
    types = {name: type(value) for name, value in chosen.items()}
    assert types["lr"] is float
    assert types["batch_size"] is int
    assert types["trainer.deterministic"] is bool
    assert types["precision"] is str  # not the Precision Enum


def test_confusion_matrix_counts_pairs_of_true_and_predicted_class() -> None:
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    predictions = torch.tensor([0, 1, 1, 1, 2, 0, 2])

    counts = confusion_counts(labels, predictions, num_classes=3)

    assert counts.dtype == torch.int64
    assert counts.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 2]]
    accuracy = (labels == predictions).float().mean().item()
    assert counts.diagonal().sum().item() / counts.sum().item() == pytest.approx(accuracy)


@pytest.mark.gpu
def test_confusion_matrix_counts_on_the_gpu() -> None:
    labels = torch.randint(0, 10, (1000,))
    predictions = torch.randint(0, 10, (1000,))
    expected = confusion_counts(labels, predictions, 10)

    counts = confusion_counts(labels.cuda(), predictions.cuda(), 10)

    assert counts.device.type == "cuda"
    assert torch.equal(counts.cpu(), expected)


def test_confusion_matrix_is_saved_as_png_and_tensorboard_image(tmp_path: Path) -> None:
    counts = [[5, 1, 0], [2, 7, 1], [0, 0, 9]]
    path = tmp_path / "confusion_matrix.png"
    writer = SummaryWriter(tmp_path / "run")

    confusion.save(counts, ["cat", "dog", "bird"], "test, epoch 3", path, writer, step=30)
    writer.close()

    assert plt.get_fignums() == []  # closed
    with Image.open(path) as png:
        assert png.format == "PNG"
        width, height = png.size
    assert 400 < width < 1200 and 400 < height < 1200
    (image,) = read_events(tmp_path / "run").Images("confusion_matrix")
    assert image.step == 30
    assert image.width > 300 and image.height > 300


def test_a_class_without_images_is_a_row_of_zeros(tmp_path: Path) -> None:
    counts = confusion_counts(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]), num_classes=3)
    assert counts[2].tolist() == [0, 0, 0]

    fig = confusion.figure(counts.tolist(), ["a", "b", "never seen"], "test")
    try:
        shares = fig.axes[0].images[0].get_array()
        assert shares.tolist() == [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
        assert [text.get_text() for text in fig.axes[0].texts][6:] == ["0", "0", "0"]
        fig.canvas.draw()
    finally:
        plt.close(fig)
    confusion.save(counts.tolist(), ["a", "b", "never seen"], "test", tmp_path / "c.png", None, 0)
    assert (tmp_path / "c.png").stat().st_size > 0
    assert plt.get_fignums() == []


def test_many_classes_are_drawn_without_counts_in_the_cells() -> None:
    size = 40
    fig = confusion.figure([[1] * size] * size, [f"class {i}" for i in range(size)], "test")
    try:
        assert len(fig.axes[0].texts) == 0
        assert fig.get_figheight() > 10  # inches: larger with more classes
    finally:
        plt.close(fig)
