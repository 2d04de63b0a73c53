"""A run's numbers as it trains, for people and for TensorBoard.

    metrics.jsonl          one JSON object per logged step and per epoch
    events.out.tfevents.*  TensorBoard, grouped by split: per logged step train/loss and lr;
                           per epoch test/loss, test/accuracy (val/loss, val/accuracy with a
                           validation split) and perf/images_per_second (training); at the
                           end, the run's HParams (its final numbers tagged whole_run/...)
                           and test/confusion_matrix

(Runs of versions before these groups tagged them train_loss, lr, test_loss, test_accuracy,
val_loss, val_accuracy and confusion_matrix, with no speed; their files keep those tags.)

Of several processes, only the main one writes. A resumed run first drops what the epoch cut
short had logged (metrics.jsonl's rows; TensorBoard hides its events), then carries on.
Ctrl-C and SIGTERM wait until a write to TensorBoard is done: cut short, it would leave the
writer's queue, which its thread and `close` wait on, waiting for ever.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO, Any

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata
from torch.utils.tensorboard import SummaryWriter

from experiments.config.metric_names import (
    ACCURACY,
    CLASSIFICATION,
    LOSS,
    TEST,
    TEST_ACCURACY,
    TRAIN,
    TRAIN_LOSS,
    VAL,
)
from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.core.files import (
    open_to_append,
    read_json_lines,
    write_text_atomically,
    writing,
)
from experiments.devices.host_load import HostLoad
from experiments.records import confusion, hparams
from experiments.records.speed import host_record, warm_up_record
from experiments.training.history import EpochRow, History
from experiments.training.loop import EvaluationResult, TrainingResult

log = logging.getLogger("experiments")

# TensorBoard's file, as a failed write names it (its writer picks the rest of the name).
EVENTS = "events.out.tfevents.*"

# An epoch row's numbers in TensorBoard, by their tags: a group per split, and one for speed.
EPOCH_TAGS = {
    **{
        key: metric.tag(split)
        for split in (VAL, TEST)
        for key, metric in CLASSIFICATION.on(split).items()
    },
    "images_per_second": "perf/images_per_second",
}
# The tag an epoch's row is found by in the events: today's, and older versions'.
TEST_ACCURACY_TAGS = (EPOCH_TAGS[TEST_ACCURACY], TEST_ACCURACY)

# The records of a run's end, by the kind and tag that show one was written.
END_RECORDS = {
    "hparams": ("tensors", metadata.SESSION_END_INFO_TAG),
    "confusion_matrix": ("images", confusion.TAG),
}


class Metrics:
    """metrics.jsonl and the TensorBoard events of one run folder; a context manager that closes
    them."""

    def __init__(self, run_dir: Path, writes: bool) -> None:
        self.dir = run_dir
        self.writes = writes
        self._jsonl: IO[str] | None = None
        self._tensorboard: SummaryWriter | None = None
        # TensorBoard hides events from this step on: those of an epoch cut short before a resume.
        self._purge_step: int | None = None

    def __enter__(self) -> Metrics:
        self._excepthook = threading.excepthook
        threading.excepthook = _quiet_tensorboard_thread(self._excepthook)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, tb: object) -> None:
        try:
            with interrupts.held(), writing(self.dir / EVENTS):
                if self._jsonl is not None:
                    self._jsonl.close()
                if self._tensorboard is not None:
                    self._tensorboard.close()
        except ExperimentError:
            if kind is None:
                raise  # else the run's own failure is what to say, not a repeat of it
        finally:
            threading.excepthook = self._excepthook

    def resume_after(self, epoch: int, steps_per_epoch: int, history: History) -> None:
        """Continue after `epoch`: what was logged after it is about to be done again. An epoch of
        `history` (the checkpoint's rows, up to `epoch`) that metrics.jsonl or the TensorBoard
        events lack, their file deleted, is written into them again from its row there (the
        steps logged in it went with the file)."""
        self._purge_step = epoch * steps_per_epoch + 1
        if not self.writes:
            return
        path = self.dir / "metrics.jsonl"
        rows = read_json_lines(path) if path.is_file() else []
        kept = [row for row in rows if row["epoch"] <= epoch]
        logged = {row["epoch"] for row in kept if row["kind"] == "epoch"}
        lost = [row for row in history if row["epoch"] not in logged]
        if lost:
            _say_written_again(path.name, lost)
            # In the file's order: an epoch's steps, then the epoch.
            kept = sorted(
                kept + [{"kind": "epoch", **row} for row in lost],
                key=lambda row: (row["epoch"], row["kind"] == "epoch"),
            )
        if path.is_file() or lost:
            write_text_atomically(path, "".join(f"{json.dumps(row)}\n" for row in kept))
        self._write_lost_epoch_events(history)

    def _write_lost_epoch_events(self, history: History) -> None:
        """The epoch scalars of the rows of `history` that no event file holds (deleted)."""
        events = EventAccumulator(str(self.dir), size_guidance={"scalars": 0})  # (0: all)
        events.Reload()
        tags = set(events.Tags()["scalars"]) & set(TEST_ACCURACY_TAGS)
        logged = {event.step for tag in tags for event in events.Scalars(tag)}
        lost = [row for row in history if row["global_step"] not in logged]
        if lost:
            _say_written_again("the TensorBoard events", lost)
        for row in lost:
            for key, tag in EPOCH_TAGS.items():
                if key in row:
                    self._scalar(tag, row[key], row["global_step"])

    def step(
        self, epoch: int, steps_before: int, step: int, loss: float, speed: float, lr: float
    ) -> None:
        """A training loss, logged at `step` of `epoch`, after `steps_before` steps in all."""
        global_step = steps_before + step
        self._write(
            kind="step",
            epoch=epoch,
            step=step,
            global_step=global_step,
            train_loss=loss,
            lr=lr,
            images_per_second=speed,
        )
        self._scalar(LOSS.tag(TRAIN), loss, global_step)
        self._scalar("lr", lr, global_step)

    def epoch(
        self,
        epoch: int,
        global_step: int,
        training: TrainingResult,
        test: EvaluationResult,
        val: EvaluationResult | None,
        classes: list[str],
        host: HostLoad | None = None,
    ) -> EpochRow:
        """Log an epoch's numbers, with the other work on the host while it trained (`host`;
        None: not known); returns them as its row of the run's history."""
        row: EpochRow = {
            "epoch": epoch,
            "global_step": global_step,
            TRAIN_LOSS: training.loss,
            "lr": training.lr,
            **(_measured(VAL, val) if val is not None else {}),
            **_measured(TEST, test),
            "class_accuracy": dict(zip(classes, test.class_accuracy, strict=True)),
            "images_per_second": training.images_per_second,
            "train_images": training.images,
            "train_seconds": training.seconds,
            "wait_seconds": training.wait_seconds,
            "copy_seconds": training.copy_seconds,
            "compute_seconds": training.compute_seconds,
            "eval_seconds": test.seconds + (val.seconds if val else 0.0),
            "epoch_seconds": training.seconds + test.seconds + (val.seconds if val else 0.0),
            # Its first steps, timed apart when they warmed up (`records.speed`).
            "warm_up": warm_up_record(training.warm_up),
            **host_record(host),
        }
        self._write(kind="epoch", **row)
        for key, tag in EPOCH_TAGS.items():
            if key in row:
                self._scalar(tag, row[key], global_step)
        return row

    def hyperparameters(
        self,
        hyperparameters: dict[str, bool | int | float | str],
        numbers: dict[str, float | None],
        global_step: int,
        swept: Collection[str] = (),
    ) -> None:
        """The run's hyperparameters and final `numbers`, for TensorBoard's HParams tab, the
        columns its sweep varies (`swept`) first."""
        if self.writes:
            with writing(self.dir / EVENTS), interrupts.held():
                hparams.write(self._writer(), hyperparameters, numbers, global_step, swept)

    def end_records(self) -> set[str]:
        """Which of the records written at a run's end ("hparams", "confusion_matrix") its event
        files hold already: those of a run killed after writing them, before it recorded its
        end, which the resume that finishes it must not write a second time."""
        events = EventAccumulator(str(self.dir))
        events.Reload()
        tags = events.Tags()
        # HParams: the last of its summaries, so all of them.
        written = {name for name, (kind, tag) in END_RECORDS.items() if tag in tags[kind]}
        if not (self.dir / confusion.PICTURE).is_file():
            written.discard("confusion_matrix")  # drawn again, for its picture
        return written

    def confusion_matrix(
        self, counts: list[list[int]], classes: list[str], title: str, global_step: int
    ) -> None:
        """A confusion matrix as an image in TensorBoard and as confusion_matrix.png (up to
        `confusion.MOST_DRAWN_CLASSES` classes: beyond, its cells would be too small to see)."""
        if not self.writes:
            return
        if len(classes) > confusion.MOST_DRAWN_CLASSES:
            log.info(
                "confusion matrix not drawn: %d classes (it is drawn for up to %d)",
                len(classes),
                confusion.MOST_DRAWN_CLASSES,
            )
            return
        path = self.dir / confusion.PICTURE
        with writing(path), interrupts.held():
            confusion.save(counts, classes, title, path, self._writer(), global_step)

    def _write(self, **row: Any) -> None:
        if not self.writes:
            return
        path = self.dir / "metrics.jsonl"
        with writing(path):
            if self._jsonl is None:
                self._jsonl = open_to_append(path)
            self._jsonl.write(json.dumps({**row, "time": time.time()}) + "\n")
            self._jsonl.flush()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        if not self.writes:
            return
        with writing(self.dir / EVENTS), interrupts.held():
            writer = self._writer()
            writer.add_scalar(tag, value, step)
            writer.flush()

    def _writer(self) -> SummaryWriter:
        if self._tensorboard is None:
            self._tensorboard = SummaryWriter(self.dir, purge_step=self._purge_step)
        return self._tensorboard


def _measured(split: str, result: EvaluationResult) -> dict[str, float]:
    """An evaluation's numbers on `split`, by their keys in the epoch's row: its loss first."""
    return {LOSS.key(split): result.loss, ACCURACY.key(split): result.accuracy}


def _say_written_again(record: str, rows: History) -> None:
    epochs = ", ".join(str(row["epoch"]) for row in rows)
    log.warning(
        "%s had no record of epoch%s %s (deleted?): written again from the checkpoint's "
        "history, without the steps logged in %s",
        record,
        "s" * (len(rows) > 1),
        epochs,
        "them" if len(rows) > 1 else "it",
    )


def _quiet_tensorboard_thread(
    previous: Callable[[threading.ExceptHookArgs], object],
) -> Callable[[threading.ExceptHookArgs], object]:
    """TensorBoard writes its events in a thread, which keeps a failed write's error for the next
    write to raise (and `writing` to say in one line): the thread's own traceback would only say
    it first, in many lines."""

    def hook(args: threading.ExceptHookArgs) -> object:
        if type(args.thread).__module__.startswith("tensorboard."):
            return None
        return previous(args)

    return hook
