"""The epoch selected on the validation split (checkpoints/best.pt, which eval evaluates), early
stopping, and the run in TensorBoard's HParams tab."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from experiments.config.choices import Mode
from experiments.core.errors import ExperimentError
from experiments.devices import process_settings
from experiments.records import checkpoints
from experiments.run.evaluate import evaluate_checkpoint
from experiments.run.train import train
from experiments.training import selection
from experiments.training.selection import Monitor
from helpers import compose_config, metrics, results, train_cli, trained_run

# LeNet for three short epochs with a validation split. Selecting the epoch of the *lowest*
# validation accuracy picks an early one of a run that learns, so best.pt is not last.pt.
LEARNING = (
    "model=lenet",
    "device=cpu",
    "dataset.val_fraction=0.1",
    "trainer.epochs=3",
    "trainer.limit_train_batches=15",
    "trainer.monitor_mode=min",
    "optimizer.lr=0.05",
)


@pytest.fixture(scope="module")
def learning(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("learning"), *LEARNING)


@pytest.mark.slow
def test_best_pt_holds_the_selected_epoch_and_results_report_it(learning: Path) -> None:
    result, epochs = results(learning), metrics(learning, "epoch")
    selected = min(epochs, key=lambda row: row["val_accuracy"])
    assert result["selected_epoch"] == selected["epoch"] < 3
    assert result["selected_by"] == "val_accuracy (min)"
    assert result["val_accuracy"] == selected["val_accuracy"]
    assert result["test_accuracy"] == selected["test_accuracy"]  # at that epoch, not the best
    assert result["class_accuracy"] == selected["class_accuracy"]
    assert result["final_test_accuracy"] == epochs[-1]["test_accuracy"]
    assert result["best_checkpoint"] == "checkpoints/best.pt"
    assert all({"val_loss", "val_accuracy", "lr"} <= set(row) for row in epochs)

    best = checkpoints.load(learning / checkpoints.BEST)
    last = checkpoints.load(learning / checkpoints.LAST)
    assert (best["epoch"], last["epoch"]) == (selected["epoch"], 3)
    assert any(not torch.equal(best["model"][k], last["model"][k]) for k in best["model"])
    # The confusion matrix of the selected epoch: all 1,000 test images, its accuracy on the
    # diagonal.
    matrix = last["selected_confusion"]
    assert sum(map(sum, matrix)) == 1000
    assert sum(matrix[k][k] for k in range(10)) / 1000 == result["test_accuracy"]


def test_eval_evaluates_best_pt_and_says_so(
    learning: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = compose_config(f"ckpt={learning}", "device=cpu", "batch_size=64", config_name="eval")
    with caplog.at_level(logging.INFO, logger="experiments"), process_settings.restored():
        accuracy = evaluate_checkpoint(cfg, tmp_path)
    epoch = results(learning)["selected_epoch"]
    assert (
        f"evaluating {learning / checkpoints.BEST}: epoch {epoch}, selected by val_accuracy (min)"
        in caplog.text
    )
    assert accuracy == results(tmp_path)["test_accuracy"] == results(learning)["test_accuracy"]


def test_tensorboard_holds_the_runs_hparams_and_confusion_matrix(learning: Path) -> None:
    # No sub-run folder for the hyperparameters: they are in the run's own event file.
    folders = sorted(path.name for path in learning.iterdir() if path.is_dir())
    assert folders == [".hydra", "checkpoints"]
    events = EventAccumulator(str(learning), size_guidance={"images": 0})
    events.Reload()
    content = events.PluginTagToContent(metadata.PLUGIN_NAME)
    start = HParamsPluginData.FromString(content[metadata.SESSION_START_INFO_TAG])
    hparams = {
        name: getattr(value, value.WhichOneof("kind"))
        for name, value in start.session_start_info.hparams.items()
    }
    assert hparams == {
        "model": "lenet",
        "dataset": "cifar10_sample",
        "device": "cpu",
        "placement": "to_device",
        "optimizer": "sgd",
        "lr": 0.05,
        "batch_size": "64",  # whole numbers as text: the dashboard shows numbers as 64.000
        "precision": "fp32",
        "scheduler": "none",
        "seed": "0",
        # LeNet's size on 3x32x32 images (tests/training/test_model_size.py).
        "model_parameters": 62006.0,
        "model_flops_per_image": 1303440.0,
        "model_training_flops_per_image": 3204720.0,
        # The keys set on the command line (what a sweep varies).
        "dataset.val_fraction": 0.1,
        "trainer.epochs": "3",
        "trainer.limit_train_batches": "15",
        "trainer.monitor_mode": "min",
    }
    result = results(learning)
    last_step = metrics(learning, "epoch")[-1]["global_step"]
    for name in ("val_accuracy", "test_accuracy", "final_test_accuracy", "train_images_per_second"):
        (scalar,) = events.Scalars(f"whole_run/{name}")
        assert scalar.step == last_step
        assert math.isclose(scalar.value, result[name], rel_tol=1e-6)
    assert {"val/loss", "val/accuracy", "lr"} <= set(events.Tags()["scalars"])
    (image,) = events.Images("test/confusion_matrix")
    assert image.step == last_step and image.width > 400
    with Image.open(learning / "confusion_matrix.png") as png:
        assert (png.width, png.height) == (image.width, image.height)


# LeNet that cannot learn (lr 0): its validation accuracy never improves on epoch 1's.
PLATEAU = (
    "model=lenet",
    "device=cpu",
    "optimizer.lr=0",
    "dataset.val_fraction=0.1",
    "trainer.early_stopping.patience=2",
    "trainer.epochs=10",
    "trainer.limit_train_batches=2",
    "trainer.limit_eval_images=128",
)


@pytest.mark.slow
def test_early_stopping_stops_a_plateau_and_resume_respects_it(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *PLATEAU)
    assert done.returncode == 0, done.stderr
    run_dir = done.run_dir
    result = results(run_dir)
    accuracy = metrics(run_dir, "epoch")[0]["val_accuracy"]
    reason = (
        "val_accuracy has not improved by more than 0.0 for 2 epochs "
        f"(trainer.early_stopping.patience=2; best {accuracy:.4f} at epoch 1)"
    )
    assert result["stopped_early"] == {"epoch": 3, "reason": reason}
    assert (result["status"], result["epochs_completed"], result["selected_epoch"]) == (
        "completed",
        3,
        1,
    )
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1, 2, 3]
    assert checkpoints.load(run_dir / checkpoints.LAST)["epoch"] == 3
    assert f"stopping early after epoch 3: {reason}" in done.stderr

    # Resumed as it is, it stays stopped (refused before its records are touched); with more
    # patience, it goes on until that runs out.
    checkpoint = checkpoints.load(run_dir / checkpoints.LAST)
    config = compose_config(*PLATEAU)
    with pytest.raises(ExperimentError) as error:
        selection.refuse_stopped(checkpoint["history"], config, str(run_dir))
    assert str(error.value) == (
        f"resume={run_dir}: {reason}, so early stopping ends it after epoch 3, where it is; "
        "raise trainer.early_stopping.patience (or set it to null) to train on"
    )
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.early_stopping.patience=4")
    assert resumed.returncode == 0, resumed.stderr
    assert results(run_dir)["stopped_early"]["epoch"] == 5
    killed_stop = results(run_dir)["stopped_early"]
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1, 2, 3, 4, 5]

    # Killed after stopping early, before its records' end: a resume as it is finishes them.
    # (No process of its own: its run was this test's process, which is not the killed one.)
    gone = {"host": "", "pid": 0}
    killed = results(run_dir) | {"status": "running", "stopped_early": None, "process": gone}
    (run_dir / "results.json").write_text(json.dumps(killed))
    (run_dir / "confusion_matrix.png").unlink()
    with process_settings.restored():
        train(
            compose_config(*PLATEAU, "trainer.early_stopping.patience=4", f"resume={run_dir}"),
            run_dir,
        )
    result = results(run_dir)
    assert (result["status"], result["epochs_completed"]) == ("completed", 5)
    assert result["stopped_early"] == killed_stop
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1, 2, 3, 4, 5]
    assert (run_dir / "confusion_matrix.png").is_file()


def test_an_epoch_whose_value_is_not_finite_is_never_selected() -> None:
    monitor = Monitor("val_accuracy", Mode.max)
    history = [
        {"epoch": 1, "val_accuracy": 0.3},
        {"epoch": 2, "val_accuracy": float("nan")},
        {"epoch": 3, "val_accuracy": 0.2},
    ]
    assert monitor.selected(history)["epoch"] == 1
    assert monitor.selected([{**history[1], "epoch": 1}, history[2]])["epoch"] == 3
    assert (
        Monitor("val_loss", Mode.min).selected(
            [{"epoch": 1, "val_loss": float("inf")}, {"epoch": 2, "val_loss": float("nan")}]
        )["epoch"]
        == 2
    )  # none finite: the last
