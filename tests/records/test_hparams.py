"""The HParams dashboard's data, read back as TensorBoard reads it."""

from __future__ import annotations

from pathlib import Path

from tensorboard.plugins.hparams import api_pb2, metadata
from torch.utils.tensorboard import SummaryWriter

from experiments.devices.plan import DevicePlan
from experiments.records import hparams
from helpers import compose_config, plugin_data, read_events


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
        "batch_size": "string_value",  # shown as 32, not as the dashboard's 32.000
        "deterministic": "bool_value",
    }
    assert start.hparams["model"].string_value == "lenet"
    assert start.hparams["lr"].number_value == 0.05
    assert start.hparams["batch_size"].string_value == "32"
    assert start.hparams["deterministic"].bool_value is True

    experiment = plugin_data(events, metadata.EXPERIMENT_TAG).experiment
    types = {info.name: api_pb2.DataType.Name(info.type) for info in experiment.hparam_infos}
    assert types == {
        "model": "DATA_TYPE_STRING",
        "lr": "DATA_TYPE_FLOAT64",
        "batch_size": "DATA_TYPE_STRING",
        "deterministic": "DATA_TYPE_BOOL",
    }
    # Only the metrics the run has: no empty val_accuracy column without a validation split.
    columns = ["whole_run/test_accuracy", "whole_run/train_images_per_second"]
    assert [info.name.tag for info in experiment.metric_infos] == columns
    end = plugin_data(events, metadata.SESSION_END_INFO_TAG).session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS

    assert sorted(events.Tags()["scalars"]) == columns
    (accuracy,) = events.Scalars("whole_run/test_accuracy")
    assert (accuracy.step, accuracy.value) == (40, 0.625)
    (speed,) = events.Scalars("whole_run/train_images_per_second")
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

    chosen = hparams.hyperparameters(cfg, DevicePlan("cuda", 1), command_line)

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
