"""results.json: a job's status and numbers, rewritten as it goes by the main process only. A number
that is not finite is written as null: results.json is strict JSON, which every reader reads."""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import time
import traceback
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.config.choices import AUTO_BATCH
from experiments.config.metric_names import TEST, TRAIN_LOSS, VAL, TaskMetrics
from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.core.files import write_text_atomically
from experiments.core.typed import mismatch
from experiments.devices.distributed import announced_failure, first_failure, says_the_failure
from experiments.devices.plan import request_text
from experiments.devices.process_group import ONE_PROCESS, ProcessGroup
from experiments.records import checkpoints
from experiments.records.environment import versions
from experiments.records.log_file import HeldLog
from experiments.records.recorded import StartRecord
from experiments.records.speed import host_summary, speed_summary
from experiments.training.history import History
from experiments.training.selection import Monitor, selected_epoch
from experiments.training.tasks import Classification


class Results:
    """results.json through a job's life; a resume's writes are held back until `accept`."""

    def __init__(
        self,
        run_dir: Path,
        fields: dict[str, Any],
        group: ProcessGroup = ONE_PROCESS,
        *,
        held: HeldLog | None = None,
    ) -> None:
        self.path = run_dir / "results.json"
        self.group = group
        self._writes = group.is_main
        self._held = held
        self._in_phase = False
        self.started = time.time()
        self._fields: dict[str, Any] = {
            "status": "running",
            "reason": None,
            "run_dir": str(run_dir),
            **fields,
            "started_at": _timestamp(self.started),
            "process": {"host": socket.gethostname(), "pid": os.getpid()},
            "environment": versions(),
        }

    def __enter__(self) -> Results:
        try:
            self._write()
        except BaseException as error:
            # A signal while "running" syncs its folder: the with-statement would call no __exit__.
            self.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if error is None or self._held:
            return
        # A folder deleted, or a disk still full: the failure is said on the console all the same.
        with interrupts.held_back(), contextlib.suppress(ExperimentError):
            if isinstance(error, KeyboardInterrupt):  # Ctrl-C, or SIGTERM
                announced = announced_failure(self.group, error)
                if announced is None:
                    self.finish("interrupted", interrupts.reason(error))
                    return
                error = ExperimentError(announced)
            if not isinstance(error, ExperimentError):  # a bug or a crash: keep where it was
                self._fields["traceback"] = "".join(traceback.format_exception(error))
            # When another process failed first, its failure is why this one stopped.
            reason = first_failure(self.group, error)
            self._writes = says_the_failure(self.group, reason)  # the main one may be dead
            self.finish("failed", reason)

    def accept(self) -> None:
        if self._held is not None:
            self._held.release()
        self._held = None
        self._write()

    def add(self, record: Any, **fields: Any) -> None:
        """Add fields of the typed `record`: written at once, or at the end of the `phase`."""
        self._fields.update(_typed(record, fields))
        if not self._in_phase:
            self._write()

    @contextlib.contextmanager
    def phase(self) -> Iterator[None]:
        """A part of the job (its setup) whose `add`s are written once, at its end."""
        self._in_phase = True
        try:
            yield
        finally:
            self._in_phase = False
        self._write()

    def get(self, key: str) -> Any:
        return self._fields.get(key)

    def finish(
        self, status: str, reason: str | None, record: Any = None, **numbers: Any
    ) -> dict[str, Any]:
        """The job's end: its `status`, the `reason` it failed or stopped, and its `numbers`."""
        finished = time.time()
        self._fields.update(
            _typed(record, numbers) if numbers else {},
            status=status,
            reason=reason,
            finished_at=_timestamp(finished),
            total_seconds=finished - self.started,
        )
        self._write()
        return dict(self._fields)

    def _write(self) -> None:
        if self._writes and not self._held:
            text = json.dumps(_finite_or_null(self._fields), indent=2, allow_nan=False)
            write_text_atomically(self.path, text + "\n")


def training_fields(
    cfg: DictConfig, group: ProcessGroup, resumed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """results.json's fields for a training run before it starts (or resumes from `resumed`)."""
    done = 0 if resumed is None else resumed["epoch"]

    def field(key: str) -> Any:
        # None for a section taken away (~dataset), refused once results.json is written.
        section = key.partition(".")[0]
        return None if OmegaConf.is_missing(cfg, section) else OmegaConf.select(cfg, key)

    batch_size = field("trainer.batch_size")
    if batch_size == AUTO_BATCH:  # what its search finds, or found before a resume
        batch_size = None if resumed is None else resumed["config"]["trainer"]["batch_size"]
    elif isinstance(batch_size, bool) or not isinstance(batch_size, int):
        batch_size = None  # refused after results.json is written (true would pass as an int)
    fields = {
        "model": field("model.name"),
        "dataset": field("dataset.name"),
        "placement": field("placement.name"),
        "optimizer": field("optimizer.name"),
        "scheduler": field("scheduler.name"),
        # Completed with what was used once the request is resolved.
        "device": {"requested": None if field("device") is None else request_text(cfg.device)},
        "seed": field("trainer.seed"),
        "precision": str(field("trainer.precision")),
        "epochs": field("trainer.epochs"),
        "batch_size": batch_size,
        "world_size": group.world_size,
        "per_process_batch_size": None if batch_size is None else batch_size // group.world_size,
        "accumulate_batches": field("trainer.accumulate_batches"),
        "epochs_completed": done,
        "stopped_early": None,
        **({"resumed_after_epochs": [done]} if resumed is not None else {}),
        "replay_of": cfg.replay,
    }
    return _typed(StartRecord, fields)


def training_summary(
    history: History, monitor: Monitor | None, measures: TaskMetrics = Classification.measured
) -> dict[str, Any]:
    """A finished run's numbers, from its epochs' rows: those of the epoch `monitor` selects."""
    last = history[-1]
    selected = selected_epoch(history, monitor)
    train_seconds = sum(row["train_seconds"] for row in history)
    return {
        "selected_epoch": selected["epoch"],
        "selected_by": str(monitor) if monitor else "final epoch (no validation split)",
        **{key: selected.get(key) for key in measures.metrics_on(VAL)},
        **{key: selected[key] for key in measures.metrics_on(TEST)},
        **({"class_accuracy": selected["class_accuracy"]} if "class_accuracy" in selected else {}),
        **{
            measures.final_key(split): last.get(measures.headline.key(split))
            for split in (VAL, TEST)
        },
        TRAIN_LOSS: last[TRAIN_LOSS],
        **speed_summary(history),
        **host_summary(history),
        "epoch_seconds": [row["epoch_seconds"] for row in history],
        # Copying overlaps the wait on a GPU, but not the compute (one CUDA stream).
        **{
            f"{part}_share": sum(row[f"{part}_seconds"] for row in history) / train_seconds
            for part in ("wait", "copy", "compute")
        },
        "checkpoint": str(checkpoints.LAST),
        "best_checkpoint": str(checkpoints.BEST) if monitor else None,
    }


def _typed(record: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields`, checked against the TypedDict `record`: a mistyped one is this code's bug."""
    unknown = fields.keys() - record.__required_keys__ - record.__optional_keys__
    problem = mismatch(_finite_or_null(fields), record, record.__name__, partial=True)
    if unknown or problem:
        raise TypeError(problem or f"{record.__name__} has no {', '.join(sorted(unknown))}")
    return fields


def per_class_text(class_accuracy: dict[str, float | None]) -> str:
    """ "airplane 38%, automobile 45%, ..." ("-" for a class without test images)."""
    return ", ".join(
        f"{name} {'-' if accuracy is None else f'{100 * accuracy:.0f}%'}"
        for name, accuracy in class_accuracy.items()
    )


def _finite_or_null(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(item) for item in value]
    return value


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
