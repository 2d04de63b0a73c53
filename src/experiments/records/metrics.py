"""A run's numbers as it trains, for people and for the trackers.

    metrics.jsonl   one JSON object per logged step and per epoch
    trackers        the `tracker` group's (`records.tracker`): TensorBoard's event files by
                    default, a CSV file, ...: each step's train/loss and lr, each epoch's
                    numbers by their tags (`records.tracker.epoch_scalars`), the run's
                    hyperparameters and final numbers, the confusion matrix

Of several processes, only the main one writes. A resumed run first drops what the epoch cut
short had logged (metrics.jsonl's rows; each tracker its own), then carries on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, Any

from experiments.config.metric_names import LOSS, TEST, TRAIN_LOSS, VAL, metric_key
from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.core.files import (
    open_to_append,
    read_json_lines,
    write_text_atomically,
    writing,
)
from experiments.devices.host_load import HostLoad
from experiments.records import confusion
from experiments.records.speed import host_record, warm_up_record
from experiments.records.tracker import (
    TrackedRun,
    Tracker,
    epoch_scalars,
    sent_scalars,
    step_scalars,
)
from experiments.training.history import EpochRow, History
from experiments.training.loop import EvaluationResult, TrainingResult

log = logging.getLogger("experiments")


class RunRecorder:
    """What records a run's numbers as it trains: metrics.jsonl and the trackers
    (`records.tracker`) of one run folder; a context manager that closes them."""

    def __init__(
        self, run_dir: Path, writes: bool, trackers: Mapping[str, Tracker] | None = None
    ) -> None:
        self.dir = run_dir
        self.writes = writes
        self.named_trackers = dict(trackers or {}) if writes else {}
        self.trackers = list(self.named_trackers.values())
        self._jsonl: IO[str] | None = None
        # The records of a run's end each tracker holds already (`end_records`).
        self._held: list[set[str]] = [set() for _ in self.trackers]

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, tb: object) -> None:
        try:
            with contextlib.ExitStack() as closing:  # each, even after another failed
                for tracker in self.trackers:
                    closing.callback(tracker.close, _status(kind))
                if self._jsonl is not None:
                    closing.callback(self._jsonl.close)
        except ExperimentError:
            if kind is None:
                raise  # else the run's own failure is what to say, not a repeat of it

    def begin(self, run: TrackedRun, resumed_ids: Mapping[str, str]) -> dict[str, str]:
        """Tell each tracker of the run (one a resume continues: the ids `begin` returned before,
        by tracker); returns the ids each gave it, by tracker, for results.json."""
        ids = {}
        for key, tracker in self.named_trackers.items():
            given = tracker.begin(dataclasses.replace(run, resumed_id=resumed_ids.get(key)))
            if given is not None:
                ids[key] = given
        return ids

    def resume_after(self, epoch: int, steps_per_epoch: int, history: History) -> None:
        """Continue after `epoch`: what was logged after it is about to be done again. An epoch of
        `history` (the checkpoint's rows, up to `epoch`) that metrics.jsonl or a tracker lacks,
        its file deleted, is written into it again from its row there (the steps logged in it
        went with the file)."""
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
        sent = sent_scalars(kept)
        for tracker in self.trackers:
            lost = tracker.resume_after(epoch * steps_per_epoch + 1, history, sent)
            if lost:
                _say_written_again(tracker.record, lost)

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
        """Log an epoch's numbers, with the other work on the host while it trained (`host`;
        None: not known), its training's MFU and energy (joules by counter; None: not read);
        returns them as its row of the run's history."""
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
            # Its first steps, timed apart when they warmed up (`records.speed`).
            "warm_up": warm_up_record(training.warm_up),
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
        """The run's hyperparameters and final `numbers` (TensorBoard's HParams tab), the columns
        its sweep varies (`swept`) first, for each tracker that lacks them."""
        for tracker, held in zip(self.trackers, self._held, strict=True):
            if "hparams" not in held:
                tracker.hyperparameters(hyperparameters, numbers, global_step, swept)

    def end_records(self) -> set[str]:
        """Which of the records written at a run's end ("hparams", "confusion_matrix") every
        tracker holds already: those of a run killed after writing them, before it recorded its
        end, which the resume that finishes it must not write a second time (nor to a tracker
        that holds them)."""
        self._held = [tracker.end_records() for tracker in self.trackers]
        everywhere = set.intersection({"hparams", confusion.TAG}, *self._held)
        written = {"confusion_matrix" if name == confusion.TAG else name for name in everywhere}
        if not (self.dir / confusion.PICTURE).is_file():
            written.discard("confusion_matrix")  # drawn again, for its picture
        return written

    def confusion_matrix(
        self, counts: list[list[int]], classes: list[str], title: str, global_step: int
    ) -> None:
        """A confusion matrix as confusion_matrix.png and a picture for each tracker that lacks
        it (up to `confusion.MOST_DRAWN_CLASSES` classes: beyond, its cells would be too small to
        see)."""
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
            png, size = confusion.save(counts, classes, title, path)
        for tracker, held in zip(self.trackers, self._held, strict=True):
            if confusion.TAG not in held:
                tracker.picture(confusion.TAG, png, size, global_step)

    def _write(self, **row: Any) -> None:
        if not self.writes:
            return
        path = self.dir / "metrics.jsonl"
        with writing(path):
            if self._jsonl is None:
                self._jsonl = open_to_append(path)
            self._jsonl.write(json.dumps({**row, "time": time.time()}) + "\n")
            self._jsonl.flush()


def _measured(split: str, result: EvaluationResult) -> dict[str, float]:
    """An evaluation's numbers on `split`, by their keys in the epoch's row: its loss first."""
    return {
        LOSS.key(split): result.loss,
        **{metric_key(split, name): value for name, value in result.metrics.items()},
    }


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


def _status(kind: type[BaseException] | None) -> str:
    """How a run ended, as results.json says it, from what ended the block that wrote it."""
    if kind is None:
        return "completed"
    return "interrupted" if issubclass(kind, KeyboardInterrupt) else "failed"
