"""A run's numbers as it trains: metrics.jsonl (a row per logged step and epoch), the trackers."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from experiments.config.metric_names import LOSS, TEST, TRAIN_LOSS, VAL, metric_key
from experiments.core import files, interrupts
from experiments.core.errors import ExperimentError
from experiments.devices.measuring.host_load import HostLoad
from experiments.records import confusion, running
from experiments.records.speed import host_record, warm_up_record
from experiments.records.tracker import (
    EPOCH_ROW_TAG,
    TRACKED_IN,
    Logged,
    ReadBack,
    Sent,
    TrackedRun,
    Tracker,
    epoch_scalars,
    resumed_ids,
    sent_scalars,
    step_scalars,
)
from experiments.training.history import EpochRow, History
from experiments.training.loop import EvaluationResult, TrainingResult

log = logging.getLogger("experiments")


class MetricsWriter:
    """metrics.jsonl and the trackers of one run folder, as a context manager that closes them."""

    def __init__(
        self, run_dir: Path, writes: bool, trackers: Mapping[str, Tracker] | None = None
    ) -> None:
        self.dir = run_dir
        self.writes = writes
        self.named_trackers = dict(trackers or {}) if writes else {}
        self.trackers = [Feed(tracker) for tracker in self.named_trackers.values()]
        self._jsonl: IO[str] | None = None
        self._resumed_after: int | None = None

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, tb: object) -> None:
        try:
            with contextlib.ExitStack() as closing:  # each, even after another failed
                for feed in self.trackers:
                    closing.callback(feed.tracker.close, _status(kind))
                if self._jsonl is not None:
                    closing.callback(self._jsonl.close)
        except ExperimentError:
            if kind is None:
                raise  # else the run's own failure is what to say, not a repeat of it

    def begin(self, run: TrackedRun, resumed_ids: Mapping[str, str]) -> dict[str, str]:
        """Tell each tracker of the run; returns the ids they gave, by tracker, for results.json."""
        given = {
            key: tracker.begin(dataclasses.replace(run, resumed_id=resumed_ids.get(key)))
            for key, tracker in self.named_trackers.items()
        }
        return {key: id_ for key, id_ in given.items() if id_ is not None}

    def begin_in_folder(self, run: TrackedRun, resuming: bool) -> dict[str, Any]:
        """`begin`, a resume carrying on the tracker runs its results.json names."""
        found = running.read_results(self.dir) if resuming else {}
        ids = self.begin(run, resumed_ids(found, self.dir, self.named_trackers))
        return {"trackers": ids, TRACKED_IN: str(self.dir.resolve())} if ids else {}

    def resume_after(self, epoch: int, steps_per_epoch: int, history: History) -> None:
        """Continue after `epoch`: metrics.jsonl cut back to it, each tracker sent what it lacks."""
        if not self.writes:
            return
        path = self.dir / "metrics.jsonl"
        rows = files.read_data(path, files.LOG, files.as_json_lines) if path.is_file() else []
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
            files.write_text_atomically(path, "".join(f"{json.dumps(row)}\n" for row in kept))
        self._resumed_after = epoch * steps_per_epoch
        sent, gone = sent_scalars(kept), {row["epoch"] for row in lost}  # (their steps too)
        for feed in self.trackers:
            lacked = feed.resume(self._resumed_after, history, sent)
            _say_written_again(feed.record, [row for row in lacked if row["epoch"] in gone])
            with_steps = [row for row in lacked if row["epoch"] not in gone]
            _say_written_again(feed.record, with_steps, "metrics.jsonl")

    def step(
        self, epoch: int, steps_before: int, step: int, loss: float, speed: float, lr: float
    ) -> None:
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
        for tracker in self.trackers:
            tracker.scalars(step_scalars(loss, lr), global_step)

    def epoch(
        self,
        epoch: int,
        global_step: int,
        training: TrainingResult,
        test: EvaluationResult,
        val: EvaluationResult | None,
        classes: list[str],
        host: HostLoad | None = None,
        mfu: float | None = None,
        energy: dict[str, float] | None = None,
    ) -> EpochRow:
        """Log an epoch's numbers (None: not known); returns them as its row of the history."""
        row: EpochRow = {
            "epoch": epoch,
            "global_step": global_step,
            TRAIN_LOSS: training.loss,
            "lr": training.lr,
            **(_measured(VAL, val) if val is not None else {}),
            **_measured(TEST, test),
            **(
                {"class_accuracy": dict(zip(classes, test.class_accuracy, strict=True))}
                if test.class_accuracy is not None
                else {}
            ),
            "images_per_second": training.images_per_second,
            "train_images": training.images,
            "train_seconds": training.seconds,
            "wait_seconds": training.wait_seconds,
            "copy_seconds": training.copy_seconds,
            "compute_seconds": training.compute_seconds,
            "eval_seconds": test.seconds + (val.seconds if val else 0.0),
            "epoch_seconds": training.seconds + test.seconds + (val.seconds if val else 0.0),
            "warm_up": warm_up_record(training.warm_up, training.last_step),
            **host_record(host),
            "mfu": mfu,
            "train_energy": energy,
        }
        self._write(kind="epoch", **row)
        for tracker in self.trackers:
            tracker.scalars(epoch_scalars(row), global_step)
        return row

    def hyperparameters(
        self,
        hyperparameters: dict[str, bool | int | float | str],
        numbers: dict[str, float | None],
        global_step: int,
        swept: Collection[str] = (),
    ) -> None:
        for tracker in self._lacking("hparams", global_step):
            tracker.hyperparameters(hyperparameters, numbers, global_step, swept)

    def _lacking(self, record: str, global_step: int) -> list[Tracker]:
        """The trackers to send `record` of the run's end: all but those holding it, at its end."""
        ended = global_step == self._resumed_after
        return [feed.tracker for feed in self.trackers if not (ended and record in feed.held.ends)]

    def confusion_matrix(
        self, counts: list[list[int]], classes: list[str], title: str, global_step: int
    ) -> None:
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
        lacking = self._lacking(confusion.TAG, global_step)
        if not lacking and global_step == self._resumed_after and path.is_file():
            return  # drawn, and held by each tracker, before a kill
        with files.writing(path), interrupts.held_back():
            png, size = confusion.save(counts, classes, title, path)
        for tracker in lacking:
            tracker.picture(confusion.TAG, png, size, global_step)

    def _write(self, **row: Any) -> None:
        if not self.writes:
            return
        path = self.dir / "metrics.jsonl"
        with files.writing(path):
            if self._jsonl is None:
                self._jsonl = files.open_to_append(path)
            self._jsonl.write(json.dumps({**row, "time": time.time()}) + "\n")
            self._jsonl.flush()


class Feed:
    """A tracker, sent after a resume the rows its store lacks (all, where it is no `ReadBack`)."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.record = getattr(tracker, "record", type(tracker).__name__)
        self.held = Logged()  # what its store held as the run resumed

    def resume(self, through: int, history: History, sent: Sequence[Sent]) -> History:
        """Carry on after step `through`, sent what the store lacks; returns the rows it lacked."""
        logged = self.tracker.logged(through) if isinstance(self.tracker, ReadBack) else None
        self.held = logged or Logged()
        for step, values in sent:
            self.scalars(values, step)
        return [row for row in history if logged and row["global_step"] not in logged.epochs]

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        held = self.held.epochs if EPOCH_ROW_TAG in values else self.held.steps
        if step not in held:
            self.tracker.scalars(values, step)


def _measured(split: str, result: EvaluationResult) -> dict[str, float]:
    return {
        LOSS.key(split): result.loss,
        **{metric_key(split, name): value for name, value in result.metrics.items()},
    }


def _say_written_again(record: str, rows: History, source: str | None = None) -> None:
    if not rows:
        return
    several = len(rows) > 1
    history = f"the checkpoint's history, without the steps logged in {'them' if several else 'it'}"
    log.warning(
        "%s had no record of epoch%s %s (deleted?): written again from %s",
        record,
        "s" * several,
        ", ".join(str(row["epoch"]) for row in rows),
        source or history,
    )


def _status(kind: type[BaseException] | None) -> str:
    if kind is None:
        return "completed"
    return "interrupted" if issubclass(kind, KeyboardInterrupt) else "failed"
