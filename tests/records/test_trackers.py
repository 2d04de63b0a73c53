"""The `tracker` group: TensorBoard's events, CSV files, both or neither, each read back by its own
reader (TensorBoard's, the csv module), and a tracker of one's own; which tracker runs a resume
carries on, and what it sends them again."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import pytest

from experiments.records.csv_file import CsvFile
from experiments.records.metrics import MetricsWriter
from experiments.records.tensorboard import EVENTS
from experiments.records.tracker import TRACKED_IN, resumed_ids
from helpers import (
    QUICK,
    csv_numbers,
    env_with_tests_on_path,
    metrics,
    read_events,
    results,
    train_cli,
    trained_run,
)
from own_tracker import SaidAccuracy

EPOCH_1 = {"epoch": 1, "global_step": 4, "test_accuracy": 0.5, "test_loss": 2.0}


def table(path: Path) -> list[list[str]]:
    with path.open(newline="") as file:
        return list(csv.reader(file))


@pytest.mark.slow
def test_csv_alone_holds_every_logged_number_and_the_final_ones(tmp_path: Path) -> None:
    run_dir = trained_run(tmp_path, *QUICK, "model=lenet", "tracker=csv")
    assert not list(run_dir.glob(EVENTS))
    steps, epochs = metrics(run_dir, "step"), metrics(run_dir, "epoch")
    rows = csv_numbers(run_dir)
    # A row per logged step and per epoch, in the order metrics.jsonl has them.
    assert [int(row["step"]) for row in rows] == sorted(
        row["global_step"] for row in [*steps, *epochs]
    )
    logged_losses = [float(row["train/loss"]) for row in rows if row["train/loss"]]
    assert logged_losses == [row["train_loss"] for row in steps]
    tested = [float(row["test/accuracy"]) for row in rows if row["test/accuracy"]]
    assert tested == [row["test_accuracy"] for row in epochs]
    named = dict(table(run_dir / "hparams.csv")[1:])
    assert (named["model"], named["seed"], named["trainer.epochs"]) == ("lenet", "0", "2")
    assert "tracker" not in named  # where the numbers go is no hyperparameter
    result = results(run_dir)
    assert float(named["whole_run/test_accuracy"]) == result["test_accuracy"]
    assert float(named["whole_run/train_images_per_second"]) == pytest.approx(
        result["train_images_per_second"]
    )


@pytest.mark.slow
def test_both_trackers_hold_the_same_numbers_and_none_writes_neither(tmp_path: Path) -> None:
    both = trained_run(tmp_path / "both", *QUICK, "model=lenet", "tracker=[tensorboard,csv]")
    events = read_events(both)
    for tag in ("train/loss", "test/accuracy"):
        from_events = [event.value for event in events.Scalars(tag)]
        from_csv = [float(row[tag]) for row in csv_numbers(both) if row[tag]]
        assert from_csv == pytest.approx(from_events)
    assert "test/confusion_matrix" in events.Tags()["images"]

    neither = trained_run(tmp_path / "neither", *QUICK, "model=lenet", "tracker=[]")
    assert not list(neither.glob(EVENTS)) and not list(neither.glob("*.csv"))
    assert (neither / "confusion_matrix.png").is_file()
    assert metrics(neither, "epoch") and results(neither)["status"] == "completed"


def test_a_row_cut_short_by_a_kill_is_dropped_on_resume(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path, writes=True, trackers={"csv": CsvFile(tmp_path)}) as written:
        written.step(epoch=1, steps_before=0, step=2, loss=2.25, speed=100.0, lr=0.1)
        written.step(epoch=1, steps_before=0, step=4, loss=2.0, speed=100.0, lr=0.1)
    path = tmp_path / "metrics.csv"
    path.write_text(path.read_text() + "6,1.7")  # SIGKILLed while writing step 6's row
    with MetricsWriter(tmp_path, writes=True, trackers={"csv": CsvFile(tmp_path)}) as resumed:
        resumed.resume_after(1, steps_per_epoch=4, history=[EPOCH_1])  # type: ignore[list-item]
    assert table(path) == [
        ["step", "train/loss", "lr", "test/accuracy", "test/loss"],
        ["2", "2.25", "0.1", "", ""],
        ["4", "2.0", "0.1", "", ""],
        ["4", "", "", "0.5", "2.0"],  # the epoch's row, written again from the checkpoint's
    ]


def test_a_new_tag_widens_the_header_and_keeps_the_earlier_rows(tmp_path: Path) -> None:
    csv_file = CsvFile(tmp_path)
    csv_file.scalars({"train/loss": 2.5}, step=1)
    csv_file.scalars({"train/loss": 2.25}, step=2)
    csv_file.scalars({"test/accuracy": 0.25}, step=2)
    csv_file.scalars({"train/loss": 2.0}, step=3)
    csv_file.close("completed")
    assert table(tmp_path / "metrics.csv") == [
        ["step", "train/loss", "test/accuracy"],
        ["1", "2.5", ""],
        ["2", "2.25", ""],
        ["2", "", "0.25"],
        ["3", "2.0", ""],
    ]


def test_the_csv_files_are_never_written_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text("theirs\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("metrics.csv", "hparams.csv"):
        (run_dir / name).symlink_to(outside)
    csv_file = CsvFile(run_dir)
    csv_file.scalars({"train/loss": 2.5}, step=1)
    csv_file.hyperparameters({"model": "lenet"}, {"test_accuracy": 0.5}, step=1, swept=())
    csv_file.close("completed")
    assert outside.read_text() == "theirs\n"
    assert not any((run_dir / name).is_symlink() for name in ("metrics.csv", "hparams.csv"))
    assert table(run_dir / "hparams.csv")[1:] == [
        ["model", "lenet"],
        ["whole_run/test_accuracy", "0.5"],
    ]


def test_a_resume_carries_on_only_the_tracker_runs_begun_in_its_own_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ids = {"mlflow": "0a1b", "wandb": "x7y8"}
    chosen = ("tensorboard", "mlflow", "wandb")
    here = tmp_path / "run"
    assert resumed_ids({"trackers": ids, TRACKED_IN: str(here.resolve())}, here, chosen) == ids
    # A copy (or the folder moved): its results.json names the runs of the folder it came from.
    elsewhere = str((tmp_path / "original").resolve())
    assert resumed_ids({"trackers": ids, TRACKED_IN: elsewhere}, here, chosen) == {}
    assert resumed_ids({"trackers": ids}, here, chosen) == ids  # recorded before folders were
    assert resumed_ids({}, here, chosen) == {}
    assert resumed_ids({"trackers": ["0a1b"]}, here, chosen) == {}  # (read as data)
    # What is said names the trackers begun anew, of those the resume has; none: nothing said.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="experiments"):
        assert resumed_ids({"trackers": ids, TRACKED_IN: elsewhere}, here, ["tensorboard"]) == {}
        assert resumed_ids({"trackers": ids, TRACKED_IN: elsewhere}, here, ["wandb"]) == {}
    assert caplog.messages == [
        f"resume: this run folder was begun as {elsewhere} (copied or moved since), so new "
        "tracker runs are begun for it (wandb) and sent all it holds"
    ]


@pytest.mark.slow
def test_a_tracker_of_ones_own_is_an_option_of_ones_own(tmp_path: Path) -> None:
    option = tmp_path / "my_conf" / "tracker" / "said.yaml"
    option.parent.mkdir(parents=True)
    option.write_text("said:\n  _target_: own_tracker.SaidAccuracy\n")  # as docs/trackers.md's
    done = train_cli(
        tmp_path,
        *QUICK,
        "model=lenet",
        "hydra.searchpath=[file://my_conf]",
        "tracker=said",
        env=env_with_tests_on_path(),
    )
    assert done.returncode == 0, done.stderr
    epochs, name = metrics(done.run_dir, "epoch"), done.run_dir.name
    messages = [line.partition("] ")[2] for line in done.stderr.splitlines()]
    said = [message for message in messages if message.startswith(("step ", f"{name},"))]
    assert said == [
        *(f"step {row['global_step']}: test accuracy {row['test_accuracy']:.4f}" for row in epochs),
        f"{name}, step {epochs[-1]['global_step']}: test accuracy "
        f"{results(done.run_dir)['test_accuracy']:.4f}",
    ]
    assert f"{name}: completed" in done.stderr


def test_a_tracker_that_says_nothing_of_its_record_is_sent_it_again_on_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    step = {"kind": "step", "epoch": 1, "step": 4, "global_step": 4, "train_loss": 2.0, "lr": 0.1}
    rows = [step, {"kind": "epoch", **EPOCH_1}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    mine = {"mine": SaidAccuracy(tmp_path)}
    with (
        caplog.at_level(logging.INFO, logger="experiments"),
        MetricsWriter(tmp_path, True, mine) as resumed,
    ):
        resumed.resume_after(1, steps_per_epoch=4, history=[EPOCH_1])  # type: ignore[list-item]
    assert caplog.messages == ["step 4: test accuracy 0.5000", f"{tmp_path.name}: completed"]
