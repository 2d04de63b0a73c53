"""A resume whose records lost a file, that would change the batch size, the moving average of the
weights or the augmentation, or whose checkpoint is not where it belongs: the records rebuilt from
the checkpoint's history, or a refusal that names what is wrong."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.devices import process_settings
from experiments.records import checkpoints, resume_checks
from experiments.records.tensorboard import EVENTS
from experiments.run.train import train
from helpers import compose_config, metrics, read_events, results

# An epoch of two steps of LeNet on 16 synthetic images, two batches of 8.
RUN = (
    "model=lenet",
    "device=cpu",
    "dataset=synthetic",
    "dataset.train_size=16",
    "dataset.test_size=8",
    "trainer.batch_size=8",
    "trainer.log_interval=1",
    "trainer.confusion_matrix=false",
)


def _trained_one_epoch(tmp_path_factory: pytest.TempPathFactory, *overrides: str) -> Path:
    """A completed run of one epoch of RUN with `overrides`, trained in this process."""
    run_dir = tmp_path_factory.mktemp("one_epoch") / "run"
    with process_settings.restored():
        train(compose_config(*RUN, *overrides, "trainer.epochs=1"), run_dir)
    return run_dir


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed run of one epoch; copy it before resuming it."""
    return _trained_one_epoch(tmp_path_factory)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def _resume(run_dir: Path, *overrides: str) -> None:
    with process_settings.restored():
        train(compose_config(*RUN, f"resume={run_dir}", *overrides), run_dir)


def test_records_deleted_before_a_resume_get_their_epochs_back_from_the_history(
    one_epoch: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run_dir = _copy(one_epoch, tmp_path)
    for path in [run_dir / "metrics.jsonl", *run_dir.glob(EVENTS)]:
        path.unlink()
    with caplog.at_level(logging.WARNING, logger="experiments"):
        _resume(run_dir, "trainer.epochs=2")
    assert results(run_dir)["status"] == "completed"
    history = checkpoints.load(run_dir / checkpoints.LAST)["history"]
    assert [row["epoch"] for row in history] == [1, 2]
    # Both epochs in metrics.jsonl, as the checkpoint's history has them.
    rows = [{k: v for k, v in row.items() if k != "time"} for row in metrics(run_dir, "epoch")]
    assert rows == [{"kind": "epoch", **row} for row in history]
    # And in TensorBoard, as its reader reads them: each epoch once, at its step.
    events = read_events(run_dir)
    for tag, key in (("test/accuracy", "test_accuracy"), ("test/loss", "test_loss")):
        scalars = [(event.step, event.value) for event in events.Scalars(tag)]
        assert scalars == [(row["global_step"], pytest.approx(row[key])) for row in history]
    # The steps logged in epoch 1 went with the files; epoch 2's are there.
    assert [row["epoch"] for row in metrics(run_dir, "step")] == [2, 2]
    assert [event.step for event in events.Scalars("train/loss")] == [3, 4]
    assert [message for message in caplog.messages if "no record" in message] == [
        f"{record} had no record of epoch 1 (deleted?): written again from the checkpoint's "
        "history, without the steps logged in it"
        for record in ("metrics.jsonl", "the TensorBoard events")
    ]


def test_a_resume_with_another_batch_size_is_refused_even_at_the_same_steps_per_epoch(
    one_epoch: Path, tmp_path: Path
) -> None:
    run_dir = _copy(one_epoch, tmp_path)
    records = [run_dir / "results.json", run_dir / "metrics.jsonl", run_dir / "environment.json"]
    before = [path.read_bytes() for path in records]
    # Half the batch, and as many batches as before: two steps an epoch, as the run had.
    with pytest.raises(ExperimentError) as error:
        _resume(
            run_dir, "trainer.epochs=2", "trainer.batch_size=4", "trainer.limit_train_batches=2"
        )
    assert str(error.value) == (
        f"resume={run_dir}: it was trained with trainer.batch_size=8, not 4; a run keeps its "
        "batch size throughout: resume with trainer.batch_size=8, or start a new run with "
        f"replay={run_dir} trainer.batch_size=4"
    )
    assert [path.read_bytes() for path in records] == before


def _last_pt_moved_to_best(run_dir: Path) -> None:
    (run_dir / checkpoints.LAST).rename(run_dir / checkpoints.BEST)


def _checkpoints_a_file(run_dir: Path) -> None:
    shutil.rmtree(run_dir / "checkpoints")
    (run_dir / "checkpoints").write_text("")


def _last_pt_a_folder(run_dir: Path) -> None:
    (run_dir / checkpoints.LAST).unlink()
    (run_dir / checkpoints.LAST).mkdir()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            _last_pt_moved_to_best,
            "checkpoints/last.pt is missing, though checkpoints/best.pt is there: last.pt was "
            "deleted or moved); put it back (a resume goes on from the last epoch), or start it "
            "afresh with replay={run}",
        ),
        (
            _checkpoints_a_file,
            "its checkpoints is a file, not the folder of its checkpoints); put the folder back "
            "from a copy, or start it afresh with replay={run}",
        ),
        (
            _last_pt_a_folder,
            "its checkpoints/last.pt is not a file); put the file back from a copy, or start it "
            "afresh with replay={run}",
        ),
    ],
)
def test_a_checkpoint_not_where_it_belongs_is_named(
    one_epoch: Path, tmp_path: Path, damage: Callable[[Path], None], said: str
) -> None:
    run_dir = _copy(one_epoch, tmp_path)
    damage(run_dir)
    run = str(run_dir)
    with pytest.raises(ExperimentError) as error:
        checkpoints.to_resume(run, 2, "none")
    assert str(error.value) == (
        f"resume={run} has no checkpoint to resume from ({said.format(run=run)}"
    )


# RUN with a moving average of the weights, and augmentation.
AVERAGED_AND_AUGMENTED = (
    "trainer.ema.decay=0.9",
    "dataset.augment.flip=true",
    "dataset.augment.mixup_alpha=0.2",
    "dataset.augment.policy=randaugment",
)


@pytest.fixture(scope="module")
def averaged_and_augmented(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed run of one epoch with AVERAGED_AND_AUGMENTED; copy it before resuming it."""
    return _trained_one_epoch(tmp_path_factory, *AVERAGED_AND_AUGMENTED)


AVERAGE_KEPT = "a run keeps its moving average of the weights as it began"
AUGMENTATION_KEPT = "a run keeps its augmentation throughout"


@pytest.mark.parametrize(
    ("changed", "then", "why"),
    [
        ("trainer.ema.decay=0.99", "0.9", AVERAGE_KEPT),
        ("trainer.ema.every=2", "1", AVERAGE_KEPT),
        ("trainer.ema.warmup_steps=3", "0", AVERAGE_KEPT),
        ("dataset.augment.flip=false", "true", AUGMENTATION_KEPT),
        ("dataset.augment.mixup_alpha=0.5", "0.2", AUGMENTATION_KEPT),
        ("dataset.augment.policy=trivialaugment", "randaugment", AUGMENTATION_KEPT),
        ("dataset.augment.policy=null", "randaugment", AUGMENTATION_KEPT),
    ],
)
def test_a_resume_that_would_change_the_average_or_the_augmentation_is_refused(
    averaged_and_augmented: Path, tmp_path: Path, changed: str, then: str, why: str
) -> None:
    run_dir = _copy(averaged_and_augmented, tmp_path)
    records = [run_dir / "results.json", run_dir / "metrics.jsonl", run_dir / checkpoints.LAST]
    before = [path.read_bytes() for path in records]
    key, _, now = changed.partition("=")
    cfg = compose_config(
        *RUN, *AVERAGED_AND_AUGMENTED, "trainer.epochs=2", changed, f"resume={run_dir}"
    )
    with process_settings.restored(), pytest.raises(ExperimentError) as error:
        train(cfg, run_dir)
    assert str(error.value) == (
        f"resume={run_dir}: it was trained with {key}={then}, not {now}; {why}: resume with "
        f"{key}={then}, or start a new run with replay={run_dir} {changed}"
    )
    assert [path.read_bytes() for path in records] == before


def test_the_runs_own_average_and_augmentation_are_no_change(averaged_and_augmented: Path) -> None:
    checkpoint = checkpoints.load(averaged_and_augmented / checkpoints.LAST)
    cfg = compose_config(*RUN, *AVERAGED_AND_AUGMENTED, "trainer.epochs=2")  # (policy: an Enum)
    resume_checks.refuse_changed_settings(
        checkpoint, str(averaged_and_augmented), cfg, searched=False
    )
