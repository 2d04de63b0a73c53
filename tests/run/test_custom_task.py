"""task=custom: a task of one's own, its loss and metrics plain torch functions in a module of the
folder the run starts in, trains, selects and times itself on its own metrics; eval.py builds it
only when typed; a class that lacks what a task gives is refused in one line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from helpers import eval_cli, metrics, read_events, results, train_cli

MY_TASKS = '''
import torch


class Huber:
    """Regression with the Huber loss; the mean absolute error, and the share within 25."""

    targets = "values"

    def loss(self, outputs, targets):
        return torch.nn.functional.huber_loss(outputs, (targets - 152) / 77)

    def mae(self, outputs, targets):
        return (outputs * 77 + 152 - targets).abs().mean(1)

    def within_25(self, outputs, targets):
        return ((outputs * 77 + 152 - targets).abs() <= 25).float().mean(1)


class BatchMean(Huber):
    """Its metric the batch's mean: summed per batch, a split's would be a fraction of it."""

    def mae(self, outputs, targets):
        return (outputs * 77 + 152 - targets).abs().mean()


class Unfinished:
    targets = "pixels"

    def loss(self, outputs, targets):
        return outputs.mean()
'''
OWN = ("device=cpu", "task=custom", "dataset=csv", "model=mlp", "optimizer=adam")
HUBER = ("task._target_=my_tasks.Huber", "task.metrics={mae:min,within_25:max}")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "my_tasks.py").write_text(MY_TASKS)
    return tmp_path


@pytest.mark.slow
def test_a_task_of_ones_own_trains_selects_and_times_on_its_metrics(folder: Path) -> None:
    done = train_cli(
        folder,
        *OWN,
        *HUBER,
        "trainer.epochs=3",
        "dataset.val_fraction=0.2",
        "trainer.target_metric=within_25",
        "trainer.target_value=0.01",
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["selected_by"] == "val_mae (min)"
    epochs = metrics(done.run_dir, "epoch")
    rows = [(row["val_mae"], row["test_within_25"]) for row in epochs]
    assert all(mae > 0 and 0 <= share <= 1 for mae, share in rows)
    assert result["test_mae"] == min(epochs, key=lambda row: row["val_mae"])["test_mae"]
    reached = result["time_to_accuracy"]
    assert (reached["metric"], reached["better"], reached["epoch"]) == ("within_25", "max", 1)
    events = read_events(done.run_dir)
    assert [event.value for event in events.Scalars("test/within_25")] == pytest.approx(
        [row["test_within_25"] for row in epochs]
    )
    assert "val mae" in done.stderr and "val_mae (min)" in done.last_line

    # eval.py builds the class a checkpoint names only when it is typed.
    run_dir = done.run_dir
    refused = eval_cli(folder, f"ckpt={run_dir}")
    assert refused.returncode == 1
    assert refused.last_line.endswith("add +task._target_=my_tasks.Huber if you trust it")
    evaluated = eval_cli(folder, f"ckpt={run_dir}", "+task._target_=my_tasks.Huber")
    assert evaluated.returncode == 0, evaluated.stderr
    evaluation = evaluated.run_dirs[-1]  # (the refused one has a folder too, saying why)
    assert results(evaluation)["test_mae"] == pytest.approx(result["final_test_mae"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            (),
            "task=custom needs task._target_=<module>.<name>, the class of your task, e.g. "
            "task._target_=my_tasks.Task (docs/tasks.md)",
        ),
        (
            ("task._target_=my_tasks.Unfinished", "task.metrics={mae:min}"),
            "task._target_=my_tasks.Unfinished: no method mae; targets = 'pixels' (classes, "
            "values or masks) (docs/tasks.md)",
        ),
        (
            ("task._target_=my_tasks.BatchMean", "task.metrics={mae:min,within_25:max}"),
            "task._target_=my_tasks.BatchMean: mae returned shape (), for a batch of 64 it must "
            "return a value per example, shape (64,)",
        ),
        (
            (*HUBER, "trainer.monitor=val_rmse"),
            "trainer.monitor=val_rmse is not a metric task=custom can monitor; choose val_mae "
            "or val_within_25 or val_loss",
        ),
    ],
)
def test_a_task_that_lacks_what_a_task_gives_is_refused_in_one_line(
    folder: Path, overrides: tuple[str, ...], said: str
) -> None:
    done = train_cli(folder, *OWN, *overrides)
    assert done.returncode == 1
    assert done.last_line.endswith(f"Error: {said}")


@pytest.mark.slow
def test_a_sweeps_report_leads_with_the_tasks_own_first_metric(folder: Path) -> None:
    sweep = (*HUBER, "trainer.epochs=2", "optimizer.lr=0.001,0.01")
    done = train_cli(folder, "-m", *OWN, *sweep)
    assert done.returncode == 0, done.stderr
    (report,) = {run_dir.parent for run_dir in done.run_dirs}
    with (report / "summary.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert [float(row["test_mae"]) for row in rows] == [
        results(run_dir)["test_mae"] for run_dir in done.run_dirs
    ]
    assert "test_accuracy" not in rows[0]
    with (report / "configurations.csv").open(newline="") as file:
        assert "test_mae_mean" in next(csv.reader(file))
