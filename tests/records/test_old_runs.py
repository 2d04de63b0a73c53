"""Runs made by earlier versions still evaluate, resume and replay.

Runs made before the packages were layered:

tests/fixtures/flat_layout_run.tar.gz is a run folder made by main at commit 32c61cd (the flat
layout: `_target_`s such as experiments.models.LeNet and experiments.datasets.cifar10_sample in
its checkpoints and config snapshot), with

    python train.py model=lenet trainer.epochs=1 trainer.limit_train_batches=3 \\
        trainer.limit_eval_batches=2 dataset.val_fraction=0.05 trainer.confusion_matrix=false

(its TensorBoard events file left out). Its one epoch: val accuracy 12.5%, test accuracy 14.8%
(19 of the first 128 test images: that version limited evaluation in batches, taken in order).

tests/fixtures/own_task_run.tar.gz is a run of a task of one's own made by main at e9e07fe, when a
task's class declared its metrics and the run recorded them in results.json (`task_metrics`), not
in its config snapshot:

    python train.py task=custom task._target_=my_tasks.Huber dataset=csv model=mlp \\
        optimizer=adam trainer.epochs=1 dataset.val_fraction=0.2 hydra.run.dir=own_task_run

with its my_tasks.py beside it. Its one epoch: val mae 73.3618, test mae 64.0675.

tests/fixtures/last_release_run.tar.gz is a run of the last release before the trainer took
callbacks, tasks their metrics and each kind of device a backend (main at 709fc22):

    python train.py device=cpu model=lenet trainer.epochs=1 trainer.limit_train_batches=2 \\
        trainer.limit_eval_images=64 dataset.val_fraction=0.1 hydra.run.dir=outputs/last_release_run

Its one epoch: val accuracy 9.375%, test accuracy 10.9375% (7 of its 64 test images), train
loss 2.3127.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from experiments.report.run_records import read_run
from experiments.report.summary import write_report
from helpers import SMALL, csv_numbers, eval_cli, metrics, results, train_cli, trained_run


def test_an_old_checkpoint_evaluates_to_its_recorded_numbers(old_run: Path) -> None:
    recorded = json.loads((old_run / "results.json").read_text())
    # On the images its run was tested on, its first 2 batches of 64, whatever eval.py's batch.
    done = eval_cli(old_run.parent, f"ckpt={old_run}", "device=cpu", "batch_size=100")
    assert done.returncode == 0, done.stderr
    assert "testing on the 128 test images its run was tested on" in done.stderr
    assert "best.pt: epoch 1, selected by val_accuracy (max)" in done.stderr
    (evaluation,) = (path for path in done.run_dirs if path != old_run)
    outcome = results(evaluation)
    assert outcome["status"] == "completed"
    assert (outcome["model"], outcome["trained_epochs"]) == ("lenet", 1)
    assert outcome["test_accuracy"] == recorded["test_accuracy"] == 19 / 128


def test_an_old_run_resumes_in_its_folder(old_run: Path) -> None:
    before = metrics(old_run, "epoch")
    done = train_cli(old_run.parent, f"resume={old_run}", "trainer.epochs=2", "device=cpu")
    assert done.returncode == 0, done.stderr
    resumed = results(old_run)
    assert resumed["status"] == "completed"
    assert resumed["resumed_after_epochs"] == [1]
    assert resumed["epochs_completed"] == 2
    epochs = metrics(old_run, "epoch")
    assert [row["epoch"] for row in epochs] == [1, 2]
    assert epochs[0] == before[0]  # the old epoch is kept as it was


@pytest.mark.slow
def test_an_old_run_replays_in_a_new_folder(old_run: Path) -> None:
    (before,) = metrics(old_run, "epoch")
    done = train_cli(old_run.parent, f"replay={old_run}", "device=cpu")
    assert done.returncode == 0, done.stderr
    (replay,) = (path for path in done.run_dirs if path != old_run)
    assert results(replay)["replay_of"] == str(old_run.resolve())
    (again,) = metrics(replay, "epoch")
    # The same training again; another CPU may round the last digits differently.
    assert again["train_loss"] == pytest.approx(before["train_loss"], rel=1e-4)
    # Its trainer.limit_eval_batches=2 is 128 images now, drawn as every run's are, not the first.
    assert results(replay)["test_images"] == 128


@pytest.mark.slow
def test_a_run_from_before_configs_declared_metrics_reports_resumes_and_replays(
    tmp_path: Path,
) -> None:
    with tarfile.open(Path(__file__).parents[1] / "fixtures" / "own_task_run.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    run = tmp_path / "own_task_run"
    (row,) = write_report(run)
    assert (row["val_mae"], row["test_mae"]) == pytest.approx((73.3618, 64.0675), abs=1e-4)
    typed = "task._target_=my_tasks.Huber"  # (built only when typed, as ever)
    done = train_cli(tmp_path, f"resume={run}", "trainer.epochs=2", typed)
    assert done.returncode == 0, done.stderr
    assert [row["epoch"] for row in metrics(run, "epoch")] == [1, 2]
    assert results(run)["selected_by"] == "val_mae (min)"
    replayed = train_cli(tmp_path, f"replay={run}", typed)
    assert replayed.returncode == 0, replayed.stderr
    (again,) = (path for path in replayed.run_dirs if path != run)
    assert results(again)["test_mae"] == pytest.approx(results(run)["test_mae"], rel=1e-4)


def as_the_last_release_wrote_it(run_dir: Path) -> None:
    """`run_dir`'s .hydra/ as the last release wrote it: its tracker group was `logger`."""
    for name in ("overrides.yaml", "config.yaml", "hydra.yaml"):
        path = run_dir / ".hydra" / name
        path.write_text(re.sub(r"\btracker(?=[=:])", "logger", path.read_text()))
    assert "- logger=csv" in (run_dir / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.slow
def test_a_run_of_the_last_release_is_reported_replayed_and_resumed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run_dir = trained_run(tmp_path, *SMALL, "tracker=csv")
    as_the_last_release_wrote_it(run_dir)

    reported = read_run(run_dir)  # (what the report reads of each run, under its own keys)
    assert (reported.given["logger"], reported.choices["logger"]) == ("csv", "csv")

    replayed = train_cli(tmp_path, f"replay={run_dir}")
    assert replayed.returncode == 0, replayed.stderr
    (replay,) = (path for path in replayed.run_dirs if path != run_dir)
    assert results(replay)["status"] == "completed"
    assert not (replay / "metrics.csv").exists()  # its trackers are typed again, or left out
    said = f"replay={run_dir}: left out tracker=csv, which its run had"
    assert [message for message in caplog.messages if message.startswith(said)]

    # Typed in the last release's words too.
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=2", "logger=csv")
    assert resumed.returncode == 0, resumed.stderr
    assert results(run_dir)["epochs_completed"] == 2
    assert {row["step"] for row in csv_numbers(run_dir) if row["test/loss"]} == {"2", "4"}


@pytest.mark.slow
def test_the_last_releases_run_reports_evaluates_resumes_and_replays(tmp_path: Path) -> None:
    with tarfile.open(
        Path(__file__).parents[1] / "fixtures" / "last_release_run.tar.gz"
    ) as archive:
        archive.extractall(tmp_path, filter="data")
    run = tmp_path / "last_release_run"
    (before,) = metrics(run, "epoch")
    (row,) = write_report(run)
    assert (row["val_accuracy"], row["test_accuracy"]) == (6 / 64, 7 / 64)
    done = eval_cli(tmp_path, f"ckpt={run}", "device=cpu")
    assert done.returncode == 0, done.stderr
    (evaluation,) = (path for path in done.run_dirs if path != run)
    assert results(evaluation)["test_accuracy"] == 7 / 64
    resumed = train_cli(tmp_path, f"resume={run}", "trainer.epochs=2")
    assert resumed.returncode == 0, resumed.stderr
    assert results(run)["resumed_after_epochs"] == [1]
    assert [row["epoch"] for row in metrics(run, "epoch")] == [1, 2]
    assert metrics(run, "epoch")[0] == before  # the old epoch kept as it was
    (tmp_path / "replays").mkdir()
    replayed = train_cli(tmp_path / "replays", f"replay={run}")
    assert replayed.returncode == 0, replayed.stderr
    (again,) = replayed.run_dirs
    first = metrics(again, "epoch")[0]  # (of the two epochs its resume made it)
    # The same training again; another CPU may round the last digits differently.
    assert first["train_loss"] == pytest.approx(before["train_loss"], rel=1e-4)
