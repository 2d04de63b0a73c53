"""`python train.py` end to end: every model x placement trains and leaves complete records."""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

from experiments.core.errors import ExperimentError
from experiments.data import loading, subset
from experiments.data.batches import Batches
from experiments.devices import process_settings
from experiments.devices.measuring.energy import EnergyMeter
from experiments.devices.measuring.peak_cache import PeakCache
from experiments.records import checkpoints
from experiments.report.run_records import read_run
from experiments.report.summary import COLUMNS, summary_row, write_report
from experiments.run.train import train
from experiments.training import loop
from experiments.training.model_size import measure
from experiments.training.models import HOST, LeNet, build_for
from experiments.training.optimizers import build_optimizer
from experiments.training.tasks import Classification
from helpers import (
    CIFAR10_CLASSES,
    QUICK,
    ROOT,
    compose_config,
    metrics,
    on,
    plugin_data,
    read_events,
    results,
    train_cli,
    trained_run,
)

COLUMNS_BY_KEY = {column.key: column for column in COLUMNS}

MODELS = ["tudui", "lenet", "network", "mlp"]
PLACEMENTS = ["to_device", "cuda_call"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """One multirun over every model x placement, started as a user would; folders by choice."""
    cwd = tmp_path_factory.mktemp("sweep")
    done = train_cli(
        cwd, "-m", f"model={','.join(MODELS)}", f"placement={','.join(PLACEMENTS)}", *QUICK
    )
    assert done.returncode == 0, done.stderr
    folders = {}
    for run_dir in done.run_dirs:
        config = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
        folders[config.model.name, config.placement.name] = run_dir
    assert len(folders) == len(MODELS) * len(PLACEMENTS)
    return folders


@pytest.mark.slow
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("model", MODELS)
def test_every_model_and_placement_leaves_complete_records(
    sweep: dict[tuple[str, str], Path], model: str, placement: str
) -> None:
    run_dir = sweep[model, placement]
    hydra_dir = run_dir / ".hydra"
    assert f"model={model}" in (hydra_dir / "overrides.yaml").read_text()
    assert OmegaConf.load(hydra_dir / "config.yaml").placement.name == placement
    assert (hydra_dir / "hydra.yaml").is_file()
    # trainer.limit_eval_images=128 evaluates 128 of the 1,000 test images, and says so.
    assert re.search(
        r"completed: test accuracy \d+\.\d% on 128 of 1,000 test images at the final epoch",
        (run_dir / "train.log").read_text(),
    )

    # metrics.jsonl: a row per logged step (steps 2 and 3 of 3, log_interval 2) and per epoch.
    steps, epochs = metrics(run_dir, "step"), metrics(run_dir, "epoch")
    assert [(row["epoch"], row["step"], row["global_step"]) for row in steps] == [
        (1, 2, 2),
        (1, 3, 3),
        (2, 2, 5),
        (2, 3, 6),
    ]
    assert [row["epoch"] for row in epochs] == [1, 2]
    for row in epochs:
        assert 0 < row["train_loss"] < 10 and 0 < row["test_loss"] < 10
        assert 0 <= row["test_accuracy"] <= 1
        assert row["images_per_second"] > 0 and row["epoch_seconds"] > 0
        assert row["train_images"] == 3 * 64
    assert all(math.isfinite(row["train_loss"]) for row in steps)
    # Energy where this machine's counters can be read; else none, and why.
    meter = EnergyMeter.for_devices([torch.device("cpu")])
    result = results(run_dir)
    if meter.unavailable is None:
        assert all(sum(row["train_energy"].values()) > 0 for row in epochs)
        assert result["train_joules_per_image"] > 0 and result["average_watts"] > 0
    else:
        assert [row["train_energy"] for row in epochs] == [None, None]
        assert (result["energy"], result["energy_note"]) == (None, meter.unavailable)

    # TensorBoard, read back with TensorBoard's own reader.
    events = EventAccumulator(str(run_dir))
    events.Reload()
    # Grouped by split, with the speed; HParams' metrics only those a run without a
    # validation split has.
    assert set(events.Tags()["scalars"]) == {
        "train/loss",
        "lr",
        "test/loss",
        "test/accuracy",
        "test/top5_accuracy",
        "perf/images_per_second",
        "perf/mfu",
        "whole_run/test_accuracy",
        "whole_run/final_test_accuracy",
        "whole_run/train_images_per_second",
        "whole_run/mfu",
    }
    assert events.Tags()["images"] == ["test/confusion_matrix"]
    assert [e.value for e in events.Scalars("lr")] == pytest.approx([0.01] * 4)  # no schedule
    assert [e.step for e in events.Scalars("train/loss")] == [2, 3, 5, 6]
    assert [e.value for e in events.Scalars("test/accuracy")] == pytest.approx(
        [row["test_accuracy"] for row in epochs]
    )
    assert [e.value for e in events.Scalars("train/loss")] == pytest.approx(
        [row["train_loss"] for row in steps]
    )
    assert [e.value for e in events.Scalars("perf/images_per_second")] == pytest.approx(
        [row["images_per_second"] for row in epochs]
    )
    assert [e.value for e in events.Scalars("perf/mfu")] == pytest.approx(
        [row["mfu"] for row in epochs]
    )

    # The checkpoint: plain state_dicts and data, loadable with weights_only=True.
    checkpoint = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert set(checkpoint) == {
        "model",
        "optimizer",
        "scheduler",
        "scaler",
        "epoch",
        "config",
        "history",
        "rng",
        "selected_confusion",
        "data",
        "steps_per_epoch",
        "ema",
        "batch_search",
        "checksum",
    }
    assert checkpoint["ema"] is None  # no moving average of the weights asked for
    assert checkpoint["batch_search"] is None  # a batch given, not searched
    assert not (run_dir / checkpoints.BEST).exists()  # nothing to select without validation
    assert "cuda" not in checkpoint["rng"]  # a CPU run draws from no GPU's generator
    assert checkpoint["epoch"] == 2
    assert checkpoint["config"]["model"]["name"] == model
    assert not list(run_dir.glob("checkpoints/.*"))  # no temporary file left behind

    # results.json
    result = results(run_dir)
    assert (result["status"], result["reason"]) == ("completed", None)
    assert (result["model"], result["placement"], result["dataset"]) == (
        model,
        placement,
        "cifar10_sample",
    )
    # Without a validation split, the final epoch's numbers: nothing is picked on test.
    assert result["selected_epoch"] == 2
    assert result["selected_by"] == "final epoch (no validation split)"
    assert result["test_accuracy"] == result["final_test_accuracy"] == epochs[-1]["test_accuracy"]
    assert result["val_accuracy"] is None and result["best_checkpoint"] is None
    assert sum(map(sum, checkpoint["selected_confusion"])) == 2 * 64  # the test images seen
    assert result["train_loss"] == epochs[-1]["train_loss"]
    assert result["test_loss"] == epochs[-1]["test_loss"]
    assert list(result["class_accuracy"]) == CIFAR10_CLASSES
    assert result["device"]["requested"] == "cpu"
    assert result["device"]["type"] == "cpu" and result["device"]["name"]
    assert result["seed"] == 0 and result["epochs_completed"] == 2
    assert (result["test_images"], result["test_split_images"]) == (128, 1000)
    assert len(result["epoch_seconds"]) == 2 and result["total_seconds"] > 0
    assert result["train_images_per_second"] > 0
    # Its MFU: the training FLOP/s it achieved over its CPU's peak in fp32, a share of 1.
    achieved = result["model_training_flops_per_image"] * result["train_images_per_second"]
    assert result["mfu"] == pytest.approx(achieved / result["device_peak_flops"])
    assert 0 < result["mfu"] <= 1 and "mfu_note" not in result
    assert (result["device_peak_precision"], result["peak_devices"]) == ("fp32", 1)
    environment = result["environment"]
    assert environment["torch"] == torch.__version__
    assert {"python", "torchvision", "hydra-core", "omegaconf", "git"} <= set(environment)


@pytest.mark.slow
def test_a_sweeps_runs_read_the_peak_this_machine_measured(
    sweep: dict[tuple[str, str], Path],
) -> None:
    # The MLP's peak is of matrix products alone; the others' of convolutions too (one CPU).
    for (model, _), run_dir in sweep.items():
        result = results(run_dir)
        kept = PeakCache().peak(torch.device("cpu"), None, convolutions_lead=model != "mlp")
        assert not kept.measured  # (as the fixture kept it)
        assert result["device_peak_flops"] == kept.peak.flops_per_second
        assert not result["device_peak_measured"]


@pytest.mark.parametrize("model", MODELS)
def test_both_placements_give_identical_numbers(
    sweep: dict[tuple[str, str], Path], model: str
) -> None:
    # A smoke test: on the CPU, .to(cpu) and .cpu() move nothing, so this shows only that both
    # methods run the same path; test_gpu.py checks the claim where they do move tensors.
    def numbers(run_dir: Path) -> list[list[float]]:
        keys = ("train_loss", "test_loss", "test_accuracy", "class_accuracy")
        rows = metrics(run_dir, "step") + metrics(run_dir, "epoch")
        return [[row.get(key) for key in keys] for row in rows]

    assert numbers(sweep[model, "to_device"]) == numbers(sweep[model, "cuda_call"])


def test_the_checkpoint_restores_the_models_outputs(sweep: dict[tuple[str, str], Path]) -> None:
    run_dir = sweep["lenet", "to_device"]
    checkpoint = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    config = OmegaConf.create(checkpoint["config"])
    dataset = loading.load(config.dataset)
    model = build_for(config.model, dataset.shape, len(dataset.classes), dataset.name)
    model.load_state_dict(checkpoint["model"])
    optimizer, _ = build_optimizer(config.optimizer, model, "cpu")
    optimizer.load_state_dict(checkpoint["optimizer"])

    test_batches = Batches(
        dataset.test,
        batch_size=config.trainer.batch_size,
        mean=dataset.mean,
        std=dataset.std,
        runtime=on("cpu"),
        subset=subset.evaluated_rows(
            len(dataset.test), config.trainer.limit_eval_images, config.trainer.limit_eval_fraction
        ),
    )
    evaluation = loop.evaluate(model, test_batches, on("cpu"), Classification())
    last = metrics(run_dir, "epoch")[-1]
    assert evaluation.metrics == {
        "accuracy": last["test_accuracy"],
        "top5_accuracy": last["test_top5_accuracy"],
    }
    assert evaluation.loss == pytest.approx(last["test_loss"], rel=1e-6)


@pytest.mark.slow
def test_the_default_run_learns_and_names_its_folder(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "trainer.epochs=2")
    assert done.returncode == 0, done.stderr
    relative = done.run_dir.relative_to(tmp_path)
    assert re.fullmatch(r"outputs/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d_[0-9a-f]{8}", str(relative))
    result = results(done.run_dir)
    assert result["model"] == "tudui" and result["dataset"] == "cifar10_sample"
    assert result["final_test_accuracy"] > 0.2  # twice chance (23.1% after two epochs here)
    assert result["test_images"] == result["test_split_images"] == 1000  # the whole split
    assert re.search(
        rf"completed: test accuracy \d+\.\d% at the final epoch \(no validation split to select "
        rf"one\), [\d,]+ img/s on cpu \(MFU \d+\.\d% of its fp32 peak\), "
        rf"2 epoch\(s\) in [\d.]+ s -> {re.escape(str(relative))}$",
        done.last_line,
    )
    assert "device: cpu, chosen by device=auto because this machine has no CUDA GPU" in done.stderr


@pytest.mark.slow
def test_the_lenet_tutorial_setup_trains_as_the_tutorial_does(tmp_path: Path) -> None:
    """experiment=lenet_cifar10 on the shipped sample: batches of 4, SGD with momentum 0.9 at
    lr 0.001, as the PyTorch tutorial trains, read back from what the run did."""
    done = train_cli(
        tmp_path,
        "experiment=lenet_cifar10",
        "dataset=cifar10_sample",
        "device=cpu",
        "trainer.epochs=1",
        "trainer.limit_train_batches=50",
        "trainer.limit_eval_images=20",
    )
    assert done.returncode == 0, done.stderr
    (epoch,) = metrics(done.run_dir, "epoch")
    assert epoch["train_images"] == 50 * 4
    checkpoint = torch.load(done.run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert len(checkpoint["model"]) == 10  # LeNet: 2 conv and 3 linear layers
    (group,) = checkpoint["optimizer"]["param_groups"]
    assert (group["lr"], group["momentum"]) == (0.001, 0.9)
    assert all("momentum_buffer" in state for state in checkpoint["optimizer"]["state"].values())


@pytest.mark.slow
def test_runs_started_together_never_share_a_folder(tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "train.py"), *QUICK, "trainer.epochs=1", "model=lenet"]
    processes = [
        subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    for process in processes:
        process.communicate(timeout=300)
        assert process.returncode == 0
    folders = [path.parent for path in (tmp_path / "outputs").rglob("results.json")]
    assert len(set(folders)) == 2


# LeNet's lr multiplied by 1e8 half-way: epoch 1 trains, epoch 2 diverges at its third step.
DIVERGES_IN_EPOCH_2 = (
    *QUICK[1:],
    "model=lenet",
    "scheduler=step",
    "scheduler.milestones=[0.5]",
    "scheduler.gamma=1e8",
)


def test_a_run_that_diverges_fails_and_keeps_its_last_good_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError) as error:
        train(compose_config(*DIVERGES_IN_EPOCH_2), tmp_path)
    assert str(error.value).startswith("diverged: train loss nan at epoch 2/2, step 3;")
    assert (results(tmp_path)["status"], results(tmp_path)["reason"]) == (
        "failed",
        str(error.value),
    )
    assert [row["epoch"] for row in metrics(tmp_path, "epoch")] == [1]
    assert checkpoints.load(tmp_path / checkpoints.LAST)["epoch"] == 1


def test_without_the_divergence_check_a_diverged_run_completes(tmp_path: Path) -> None:
    cfg = compose_config(*DIVERGES_IN_EPOCH_2, "trainer.stop_on_divergence=false")
    train(cfg, tmp_path)
    result = results(tmp_path)
    assert result["status"] == "completed"
    assert result["train_loss"] is None  # results.json is strict JSON: null, never NaN
    assert math.isnan(metrics(tmp_path, "epoch")[-1]["train_loss"])


def test_time_to_accuracy_and_a_profile_on_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = compose_config(
        "device=cpu",
        "model=lenet",
        "trainer.epochs=2",
        "trainer.limit_train_batches=5",
        "trainer.limit_eval_images=64",
        "trainer.log_interval=5",
        "trainer.batch_size=16",
        "trainer.profile=true",
        # One image right of the 16 reaches it: the first epoch, on the test split (no val).
        "trainer.target_accuracy=0.01",
    )
    with caplog.at_level(logging.INFO, logger="experiments"), process_settings.restored():
        train(cfg, tmp_path / "run")
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir()
    epochs = metrics(run_dir, "epoch")
    assert epochs[0]["test_accuracy"] >= 0.01

    # Time to accuracy: results.json, the log, HParams and the report's row.
    reached = results(run_dir)["time_to_accuracy"]
    assert reached == {
        "target": 0.01,
        "split": "test",
        "epoch": 1,
        "seconds": epochs[0]["train_seconds"],  # training only, not the evaluation
        "includes_compile_seconds": False,  # (no trainer.compile)
        "metric": "accuracy",
        "better": "max",
    }
    said = f"1% test accuracy after {reached['seconds']:.1f} s of training (epoch 1)"
    assert f"epoch 1: {said}" in caplog.text
    assert re.search(rf"completed: .*, {re.escape(said)}, ", caplog.text)
    (seconds,) = read_events(run_dir).Scalars("whole_run/time_to_accuracy")
    assert seconds.value == pytest.approx(reached["seconds"])
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as Hydra would have
    row = summary_row(run_dir, tmp_path, read_run(run_dir))
    assert row["time_to_accuracy"] == reached["seconds"]  # summary.csv's, a number
    assert COLUMNS_BY_KEY["time_to_accuracy"].cell(row) == f"{reached['seconds']:.1f}"

    # The profile: steps 3 to 5 of the first epoch, as a Chrome trace, and the top operators.
    trace = json.loads((run_dir / "profile" / "training.pt.trace.json").read_text())
    recorded = {event.get("name") for event in trace["traceEvents"]}
    steps = {name for name in recorded if name and name.startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}  # torch counts from 0
    assert {"aten::convolution_backward", "Optimizer.step#SGD.step"} <= recorded
    top = r"\n +[\d.]+ ms +\d+%  \S"  # the first of the operators that took most time
    said = r"profile of training steps 3 to 5: .*training\.pt\.trace\.json; "
    assert re.search(rf"{said}.*{top}", caplog.text)
    assert "ProfilerStep" not in caplog.text  # the steps' spans are no operators
    # Its epoch, slowed by the profiler, is left out of the speed.
    result = results(run_dir)
    assert result["profiled_steps"] == {"epoch": 1, "first": 1, "last": 5}
    assert epochs[0]["warm_up"]["steps"] == 5 and result["train_speed_epochs"] == [2]


# Item 19.1-3: any torchvision architecture, or a model of one's own, and its size everywhere.
SMALL = (
    "device=cpu",
    "trainer.epochs=1",
    "trainer.limit_train_batches=2",
    "trainer.limit_eval_images=64",
    "trainer.batch_size=16",
)


def test_a_torchvision_architecture_trains_on_grey_images_and_records_its_size(
    tmp_path: Path,
) -> None:
    cfg = compose_config(
        "model=torchvision",
        "model.arch=squeezenet1_1",
        "dataset=synthetic",
        "dataset.channels=1",
        "dataset.num_classes=4",
        "dataset.train_size=64",
        "dataset.test_size=16",
        *SMALL,
    )
    train(cfg, tmp_path)
    result = results(tmp_path)
    assert (result["status"], result["model"]) == ("completed", "squeezenet1_1")
    model = build_for(cfg.model, (1, 32, 32), 4, "synthetic")
    size = measure(model, (1, 32, 32), HOST)
    assert (
        result["model_parameters"] == size.parameters == sum(p.numel() for p in model.parameters())
    )
    assert result["model_flops_per_image"] == size.flops_per_image > 0
    start = plugin_data(read_events(tmp_path), metadata.SESSION_START_INFO_TAG)
    hyperparameters = start.session_start_info.hparams
    assert hyperparameters["model_parameters"].number_value == size.parameters
    assert hyperparameters["model_flops_per_image"].number_value == size.flops_per_image


OWN_MODEL = """
from torch import nn


class Net(nn.Sequential):
    def __init__(self, in_channels, num_classes, width):
        super().__init__(
            nn.Conv2d(in_channels, width, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(width, num_classes),
        )
"""


@pytest.mark.slow
def test_a_model_of_ones_own_in_the_folder_one_runs_in_trains_without_a_config_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_models.py").write_text(OWN_MODEL)
    done = train_cli(
        tmp_path, "model=custom", "model._target_=my_models.Net", "+model.width=8", *SMALL
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["status"], result["model"]) == ("completed", "my_models.Net")
    # conv 3->8 (3x3) and linear 8->10; one image: 8x30x30 outputs of 27 inputs, then 8->10.
    parameters = 3 * 9 * 8 + 8 + 8 * 10 + 10
    flops = 2 * (8 * 30 * 30 * 27 + 8 * 10)
    assert (result["model_parameters"], result["model_flops_per_image"]) == (parameters, flops)
    log = (done.run_dir / "train.log").read_text()
    assert f"training my_models.Net ({parameters} parameters, 389k FLOPs per image) on " in log
    (row,) = write_report(done.run_dir)
    assert (row["model_parameters"], row["model_flops_per_image"]) == (parameters, flops)
    with open(done.run_dir / "summary.csv", newline="") as file:
        (csv_row,) = csv.DictReader(file)
    assert (csv_row["model_parameters"], csv_row["model_flops_per_image"]) == (
        str(parameters),
        str(flops),
    )


def test_partial_weights_start_a_run_and_its_record_names_what_was_left_as_built(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A LeNet trained for 7 classes, fine-tuned on CIFAR-10's 10: a new last layer.
    torch.save(LeNet(3, 32, 7).state_dict(), tmp_path / "w.pt")
    cfg = compose_config(
        *QUICK,
        "model=lenet",
        f"model.weights={tmp_path / 'w.pt'}",
        "model.weights_partial=true",
        "trainer.epochs=1",
    )
    with caplog.at_level(logging.INFO, logger="experiments"):
        train(cfg, tmp_path / "run")
    assert results(tmp_path / "run")["weights_left_as_built"] == [
        "classifier.4.weight",
        "classifier.4.bias",
    ]
    assert (
        f"model.weights={tmp_path / 'w.pt'} loaded but for 2 tensor(s), left as built: "
        "classifier.4.weight, classifier.4.bias" in caplog.messages
    )


@pytest.mark.gpu
def test_a_gpu_run_records_its_training_energy_where_nvml_reads_it(tmp_path: Path) -> None:
    meter = EnergyMeter.for_devices([torch.device("cuda", 0)])
    # Batches of 8: each epoch of 500 steps lasts about a second even on the fastest GPU, so
    # NVML's counter (updated every 100 ms or so on some GPUs) moves in each.
    run_dir = trained_run(tmp_path, "device=cuda:0", "trainer.epochs=2", "trainer.batch_size=8")
    result = results(run_dir)
    if meter.unavailable is not None:
        assert result["energy_note"] == meter.unavailable
        return
    assert result["energy"]["source"] == "nvml" and result["energy"]["epochs"] == [1, 2]
    assert result["train_joules_per_image"] > 0
    assert 5 < result["average_watts"] < 2000
    assert "J/image at" in (run_dir / "train.log").read_text()
