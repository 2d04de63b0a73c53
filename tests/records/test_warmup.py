"""Train images/s as a measurement: warm-up left out, the median and range of the epochs measured,
the host's load beside it; on epoch rows passed in, and on one real run beside busy work."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from experiments.devices import process_settings
from experiments.records.speed import compile_seconds, host_summary, speed_summary
from experiments.report.run_records import read_run
from experiments.report.summary import COLUMNS, summary_row
from experiments.run.train import train
from experiments.training import time_to_accuracy
from helpers import compose_config, metrics, results


def row(epoch: int, images: int, seconds: float, warm_up: dict[str, Any] | None = None) -> dict:
    return {
        "epoch": epoch,
        "train_images": images,
        "train_seconds": seconds,
        "warm_up": warm_up,
        "test_accuracy": 0.1 * epoch,
    }


def test_the_first_epoch_is_left_out_and_the_others_give_median_and_range() -> None:
    history = [
        row(1, 1000, 90.0, {"steps": 1, "images": 64, "seconds": 88.0}),  # compiled: "11 img/s"
        row(2, 1000, 1.0),
        row(3, 1000, 0.5),
        row(4, 1000, 2.0),
    ]
    assert speed_summary(history) == {
        "train_images_per_second": 1000.0,
        "train_images_per_second_range": [500.0, 2000.0],
        "train_speed_epochs": [2, 3, 4],
        "warm_up": {"epochs": [1], "steps": None, "seconds": 90.0, "left_out": True},
    }


def test_one_epoch_is_measured_after_its_warm_up_steps() -> None:
    history = [row(1, 1000, 12.0, {"steps": 5, "images": 200, "seconds": 10.0})]
    assert speed_summary(history) == {
        "train_images_per_second": 400.0,  # 800 images in the 2 s after step 5
        "train_images_per_second_range": [400.0, 400.0],
        "train_speed_epochs": [1],
        "warm_up": {"epochs": [1], "steps": [5], "seconds": 10.0, "left_out": True},
    }


def test_an_epoch_of_warm_up_steps_only_is_measured_whole_and_says_so() -> None:
    history = [row(1, 64, 2.0, {"steps": 1, "images": 64, "seconds": 2.0})]
    summary = speed_summary(history)
    assert summary["train_images_per_second"] == 32.0
    assert summary["warm_up"] == {"epochs": [1], "steps": [1], "seconds": 2.0, "left_out": False}


def test_each_process_s_first_epoch_of_a_resumed_run_is_left_out() -> None:
    warm = {"steps": 1, "images": 64, "seconds": 3.0}
    history = [row(1, 100, 4.0, warm), row(2, 100, 1.0), row(3, 100, 4.0, warm), row(4, 100, 0.5)]
    summary = speed_summary(history)
    assert summary["train_speed_epochs"] == [2, 4]
    assert summary["train_images_per_second"] == 150.0  # the median of 100 and 200
    assert summary["warm_up"]["epochs"] == [1, 3]


def test_rows_of_earlier_versions_are_measured_as_they_are() -> None:
    history = [row(1, 100, 1.0), row(2, 100, 2.0)]
    for old in history:
        del old["warm_up"]
    assert speed_summary(history)["train_images_per_second"] == 75.0
    assert speed_summary(history)["warm_up"] is None


def test_the_host_is_busy_where_any_epoch_was_and_its_share_weighs_by_time() -> None:
    history = [
        {**row(1, 100, 3.0), "host_other_cpu_share": 0.02, "host_busy": False},
        {**row(2, 100, 1.0), "host_other_cpu_share": 0.5, "host_busy": True},
    ]
    assert host_summary(history) == {"host_other_cpu_share": 0.14, "host_busy": True}
    quiet = [{**row(1, 100, 1.0), "host_other_cpu_share": 0.01, "host_busy": False}]
    assert host_summary(quiet)["host_busy"] is False
    unknown = [{**row(1, 100, 1.0), "host_other_cpu_share": None, "host_busy": None}]
    assert host_summary(unknown) == {"host_other_cpu_share": None, "host_busy": None}


def test_compile_seconds_are_the_first_step_s_beyond_a_steady_step() -> None:
    assert compile_seconds((64, 88.0), images_per_second=64.0) == 87.0
    assert compile_seconds((64, 0.5), images_per_second=64.0) == 0.0  # never below nothing


def test_time_to_accuracy_says_whether_it_includes_compilation() -> None:
    history = [row(1, 100, 90.0), row(2, 100, 1.0)]
    compiled = time_to_accuracy.reached(history, 0.2, "test", compiled=True)
    assert compiled["includes_compile_seconds"] is True and compiled["seconds"] == 91.0
    assert time_to_accuracy.text(compiled) == (
        "20% test accuracy after 91.0 s of training, compilation included (epoch 2)"
    )
    eager = time_to_accuracy.reached(history, 0.2, "test")
    assert eager["includes_compile_seconds"] is False
    assert time_to_accuracy.text(eager) == "20% test accuracy after 91.0 s of training (epoch 2)"


@pytest.fixture
def busy_host() -> Iterator[None]:
    """Two busy loops (this machine has two cores), started outside this process's tree (their
    shell exits at once): other work, not the run's own. (They hold none of its pipes, which
    would keep it waiting.)"""
    started = subprocess.run(
        ["sh", "-c", "for _ in 1 2; do yes > /dev/null 2>&1 < /dev/null & echo $!; done"],
        capture_output=True,
        text=True,
        check=True,
    )
    pids = [int(pid) for pid in started.stdout.split()]
    yield
    for pid in pids:
        subprocess.run(["kill", str(pid)], check=True)


@pytest.mark.slow
def test_a_one_epoch_run_beside_busy_work_is_marked_and_measured_after_its_first_step(
    busy_host: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Tudui's 8 steps: long enough for /proc's clock (host_load.FEWEST_TICKS).
    cfg = compose_config(
        "device=cpu",
        "trainer.epochs=1",
        "trainer.limit_train_batches=8",
        "trainer.limit_eval_images=64",
    )
    with caplog.at_level(logging.INFO, logger="experiments"), process_settings.restored():
        # trainer.threads unset: torch's default outside this suite, a thread per core.
        torch.set_num_threads(os.cpu_count() or 1)
        train(cfg, tmp_path)
    result = results(tmp_path)
    (epoch,) = metrics(tmp_path, "epoch")
    # More threads than the busy loops left cores for: said at the start, with what to set.
    assert f"trainer.threads is unset, so torch computes in {os.cpu_count()} threads, more " in (
        caplog.text
    )
    assert "use trainer.threads=1 or fewer, or a quieter machine" in caplog.text

    # The first step, timed apart, is left out: the speed is that of the 7 after it.
    assert epoch["warm_up"]["steps"] == 1 and epoch["warm_up"]["images"] == 64
    assert result["warm_up"] == {
        "epochs": [1],
        "steps": [1],
        "seconds": epoch["warm_up"]["seconds"],
        "left_out": True,
    }
    after = (8 * 64 - 64) / (epoch["train_seconds"] - epoch["warm_up"]["seconds"])
    assert result["train_images_per_second"] == pytest.approx(after)
    assert result["train_speed_epochs"] == [1] and result["compile_seconds"] is None

    # The busy loops are named: in the epoch's row and line, results.json and before the end.
    assert epoch["host_busy"] is True and result["host_busy"] is True
    assert result["host_other_cpu_share"] >= 0.25
    assert "img/s (host busy: other processes used " in caplog.text
    warning = "of the cores this run could use while it trained, so its speed reads low"
    assert caplog.text.index(warning) < caplog.text.index("completed:")
    # And the report's row.
    (tmp_path / ".hydra").mkdir()
    OmegaConf.save(cfg, tmp_path / ".hydra" / "config.yaml")  # as Hydra would have
    (host,) = [column for column in COLUMNS if column.key == "host_busy"]
    assert host.cell(summary_row(tmp_path, tmp_path.parent, read_run(tmp_path))) == "busy"


def test_a_compiled_one_epoch_run_leaves_out_its_last_smaller_step_too() -> None:
    # Its last step compiled the smaller batch anew: 40 images in 3 s, left out with the first.
    timed = {"steps": 1, "images": 64, "seconds": 5.0}
    last = {"last_step_images": 40, "last_step_seconds": 3.0}
    history = [row(1, 1000, 10.0, timed | last)]
    assert speed_summary(history)["train_images_per_second"] == (1000 - 64 - 40) / 2.0
    # An epoch of those steps only is measured whole.
    only = [row(1, 104, 8.0, timed | last)]
    assert speed_summary(only)["train_images_per_second"] == 104 / 8.0
