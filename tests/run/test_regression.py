"""task=regression end to end: the shipped CSV sample and a CSV file of one's own train model=mlp,
selected on val_rmse, recorded with the task's metrics; bad files and columns are said in one
line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from experiments.devices import process_settings
from experiments.run.train import train
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

REGRESSION = ("device=cpu", "task=regression", "dataset=csv", "model=mlp", "optimizer=adam")


def write_table(path: Path, rows: int = 240) -> Path:
    """y = 3 a - 2 b + 0.5 c + noise, in a CSV file: what an MLP fits closely in a few epochs."""
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(rows, 3, generator=generator) * torch.tensor([1.0, 10.0, 100.0])
    target = features @ torch.tensor([3.0, -0.2, 0.005]) + 0.1 * torch.randn(
        rows, generator=generator
    )
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["a", "b", "c", "y"])
        writer.writerows(
            [*map(float, row), float(y)] for row, y in zip(features, target, strict=True)
        )
    return path


@pytest.mark.slow
def test_the_shipped_sample_trains_and_is_selected_on_validation_rmse(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        *REGRESSION,
        "optimizer.lr=0.003",
        "trainer.epochs=4",
        "dataset.val_fraction=0.2",
        "trainer.target_value=200",  # of the task's first metric, RMSE: reached at once
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["selected_by"] == "val_rmse (min)"
    reached = result["time_to_accuracy"]
    assert (reached["metric"], reached["split"], reached["epoch"]) == ("rmse", "val", 1)
    epochs = metrics(done.run_dir, "epoch")
    assert [set(row) >= {"val_rmse", "val_mae", "val_r2", "test_rmse", "test_r2"} for row in epochs]
    assert "class_accuracy" not in epochs[0] and "test_accuracy" not in result
    # The progression's RMSE (its spread is 77) falls as it learns.
    assert epochs[-1]["test_rmse"] < epochs[0]["test_rmse"] < 200
    assert result["test_rmse"] == min(epochs, key=lambda row: row["val_rmse"])["test_rmse"]
    assert result["final_test_rmse"] == epochs[-1]["test_rmse"]
    data = result["data"]
    assert (data["channels"], data["num_classes"], data["classes"]) == (10, 1, ["progression"])
    assert data["target_mean"][0] == pytest.approx(152, abs=10)
    assert data["statistics"] == "computed from the 354 training rows"
    # Said in rows, as the report reads them (`data.unit`): the speed, the model's FLOPs per row.
    assert data["unit"] == "rows"
    assert "FLOPs per row" in done.stderr and " rows/s on cpu" in done.last_line
    assert "img/s" not in done.stderr and "image" not in done.stderr
    assert not (done.run_dir / "confusion_matrix.png").exists()
    events = read_events(done.run_dir)
    assert [event.value for event in events.Scalars("test/rmse")] == pytest.approx(
        [row["test_rmse"] for row in epochs]
    )
    assert "test rmse" in done.stderr and "val_rmse (min)" in done.last_line


@pytest.mark.slow
def test_a_csv_file_of_ones_own_trains_on_the_column_it_names(tmp_path: Path) -> None:
    table = write_table(tmp_path / "table.csv")
    done = train_cli(
        tmp_path,
        *REGRESSION,
        f"dataset.path={table}",
        "dataset.target=y",
        "optimizer.lr=0.01",
        "trainer.epochs=15",
        "trainer.batch_size=16",
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["test_r2"] > 0.95
    # Standardized by the training rows' statistics: the features' spreads differ a hundredfold.
    assert result["data"]["std"] == pytest.approx([1.0, 10.0, 100.0], rel=0.2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "said"),
    [
        (
            "dataset.target=price",
            "dataset.target=price: {table} has no such column; its columns: a, b, c, y",
        ),
        ("dataset.test_fraction=0.001", "dataset.test_fraction=0.001 of {table}'s 240 rows leaves"),
    ],
)
def test_a_column_or_fraction_the_file_cannot_give_is_said_in_one_line(
    tmp_path: Path, override: str, said: str
) -> None:
    table = write_table(tmp_path / "table.csv")
    done = train_cli(tmp_path, *REGRESSION, f"dataset.path={table}", "dataset.target=y", override)
    assert done.returncode == 1
    assert f"] Error: {said.format(table=table)}" in done.last_line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ("trainer.target_accuracy=0.5",),
            "trainer.target_accuracy=0.5: task=regression measures no accuracy; use "
            "trainer.target_metric (one of rmse, mae, r2, loss) and trainer.target_value",
        ),
        (
            ("trainer.target_metric=acc", "trainer.target_value=1"),
            "trainer.target_metric=acc is not a metric task=regression measures; choose rmse "
            "or mae or r2 or loss",
        ),
        (
            ("trainer.monitor=val_accuracy",),
            "trainer.monitor=val_accuracy is not a metric task=regression can monitor; choose "
            "val_rmse or val_mae or val_r2 or val_loss",
        ),
    ],
)
def test_a_target_or_monitor_the_task_does_not_measure_is_refused(
    tmp_path: Path, overrides: tuple[str, ...], said: str
) -> None:
    done = train_cli(tmp_path, *REGRESSION, *overrides)
    assert done.returncode == 1
    assert done.last_line.endswith(f"Error: {said}")


def test_a_cell_that_is_no_number_is_named_by_line_and_column(tmp_path: Path) -> None:
    table = tmp_path / "table.csv"
    table.write_text("a,b,y\n1,2,3\n4,five,6\n")
    done = train_cli(tmp_path, *REGRESSION, f"dataset.path={table}", "dataset.target=y")
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: dataset.path={table}, line 3, column b: 'five' is not a number (every cell of a "
        "dataset=csv file must be one)"
    )


@pytest.mark.slow
def test_a_resume_on_a_csv_file_edited_since_is_refused(tmp_path: Path) -> None:
    table = write_table(tmp_path / "table.csv", rows=40)
    run = (*REGRESSION, f"dataset.path={table}", "dataset.target=y", "trainer.epochs=1")
    done = train_cli(tmp_path, *run)
    assert done.returncode == 0, done.stderr
    lines = table.read_text().splitlines(keepends=True)
    table.write_text("".join([*lines[:-1], "0,0,0,0\n"]))  # as many rows, one of other values

    resumed = train_cli(tmp_path, f"resume={done.run_dir}", "trainer.epochs=2")
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert resumed.last_line.endswith(
        f"Error: resume={done.run_dir}: its data differs from the data it was trained on: "
        "test split: its 8 rows hold other values than then (with the same settings: the "
        "data changed at its source); its epochs were trained and selected on that data: resume "
        "on it, or start a new run on this data"
    )


@pytest.mark.slow
def test_a_task_and_a_dataset_of_the_other_kind_are_refused(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "device=cpu", "dataset=csv", "model=mlp")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: task=classification learns classes, but dataset csv holds values to predict; "
        "use task=regression, or a dataset of classes"
    )
    assert results(done.run_dir)["status"] == "failed"


@pytest.mark.slow
def test_a_sweeps_report_leads_with_rmse(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "-m", *REGRESSION, "trainer.epochs=2", "optimizer.lr=0.001,0.01")
    assert done.returncode == 0, done.stderr
    (sweep,) = {run_dir.parent for run_dir in done.run_dirs}
    with (sweep / "summary.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert {"test_rmse", "final_test_rmse"} <= rows[0].keys()
    assert not {"test_accuracy", "val_rmse"} & rows[0].keys()  # no classifier, no validation
    assert [float(row["test_rmse"]) for row in rows] == [
        results(run_dir)["test_rmse"] for run_dir in done.run_dirs
    ]
    header = (sweep / "summary.md").read_text().splitlines()[0]
    assert "test rmse" in header
    # A table's samples are rows, in the report's words as in the run's.
    assert "train rows/s" in header and "FLOPs/row" in header
    assert not any(word in done.stderr for word in ("img/s", "images/s", "FLOPs/image"))


@pytest.mark.slow
def test_two_processes_measure_what_one_process_does(tmp_path: Path) -> None:
    """Under DDP each process tallies its share of every batch; summed over the processes, the
    sums of squared errors, of the targets and their squares give one process's RMSE and R²."""
    run = (*REGRESSION[1:], "trainer.epochs=2", "trainer.batch_size=32", "dataset.val_fraction=0.2")
    ddp = torchrun_cli(tmp_path / "ddp", 2, "device=ddp", *run)
    assert ddp.returncode == 0, ddp.stderr
    with process_settings.restored():  # one process: this one
        train(compose_config("device=cpu", *run), tmp_path / "single")
    ours, theirs = metrics(ddp.run_dir, "epoch"), metrics(tmp_path / "single", "epoch")
    assert len(ours) == len(theirs) == 2
    for mine, one in zip(ours, theirs, strict=True):
        for key in ("train_loss", "val_rmse", "val_r2", "test_rmse", "test_mae", "test_r2"):
            assert mine[key] == pytest.approx(one[key], rel=1e-4), key


@pytest.mark.slow
def test_a_regression_killed_mid_epoch_and_resumed_for_more_gives_an_uninterrupted_runs_numbers(
    tmp_path: Path,
) -> None:
    """Killed in the second of two epochs, then resumed for four: the four of a run never
    stopped, to the bit (a pass of 480 steps is long enough to be killed in)."""
    table = write_table(tmp_path / "table.csv", rows=12_000)
    run = (
        *REGRESSION,
        f"dataset.path={table}",
        "dataset.target=y",
        "dataset.val_fraction=0.2",
        "trainer.batch_size=16",
        "trainer.log_interval=1",
    )
    reference = train_cli(tmp_path / "reference", *run, "trainer.epochs=4")
    assert reference.returncode == 0, reference.stderr
    (tmp_path / "killed").mkdir()
    run_dir = killed_in_epoch_2(tmp_path / "killed", *run, "trainer.epochs=2")
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1]

    resumed = train_cli(tmp_path / "killed", f"resume={run_dir}", "trainer.epochs=4")
    assert resumed.returncode == 0, resumed.stderr
    assert numbers(run_dir) == numbers(reference.run_dir)
    for key in ("val_rmse", "test_rmse", "test_r2", "selected_epoch"):
        assert results(run_dir)[key] == results(reference.run_dir)[key]
