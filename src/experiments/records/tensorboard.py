"""TensorBoard's event files in the run folder: `tracker=tensorboard`, the default tracker.

    events.out.tfevents.*  grouped by split: per logged step train/loss and lr; per epoch
                           test/loss, test/accuracy (val/loss, val/accuracy with a validation
                           split) and perf/images_per_second (training); at the end, the run's
                           HParams (its final numbers tagged whole_run/...) and
                           test/confusion_matrix

(Runs of versions before these groups tagged them train_loss, lr, test_loss, test_accuracy,
val_loss, val_accuracy and confusion_matrix, with no speed; their files keep those tags.)

A resumed run's writer hides the events from the first step done again on. Ctrl-C and SIGTERM
wait until a write is done: cut short, it would leave the writer's queue, which its thread and
`close` wait on, waiting for ever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import metadata
from torch.utils.tensorboard import SummaryWriter

from experiments.config.metric_names import TEST_LOSS
from experiments.core import interrupts
from experiments.core.files import writing
from experiments.records import hparams
from experiments.records.tracker import EPOCH_ROW_TAG, Sent, TrackedRun, epoch_scalars
from experiments.training.history import History

# TensorBoard's file, as a failed write names it (its writer picks the rest of the name).
EVENTS = "events.out.tfevents.*"

# The tag an epoch's row is found by in the events: today's, and older versions'.
EPOCH_ROW_TAGS = (EPOCH_ROW_TAG, TEST_LOSS)


class TensorBoard:
    """The event files of one run folder (a `records.tracker.Tracker`)."""

    record = "the TensorBoard events"

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self._writer: SummaryWriter | None = None
        # Events from this step on are hidden: those of an epoch cut short before a resume.
        self._purge_step: int | None = None
        self._excepthook = threading.excepthook
        threading.excepthook = _quiet_tensorboard_thread(self._excepthook)

    def begin(self, run: TrackedRun) -> None:
        """Its hyperparameters are written at the run's end, with its final numbers."""

    def resume_after(self, purge_step: int, history: History, sent: Sequence[Sent]) -> History:
        self._purge_step = purge_step
        events = _read(self.dir, size_guidance={"scalars": 0})  # (0: all)
        tags = set(events.Tags()["scalars"]) & set(EPOCH_ROW_TAGS)
        logged = {event.step for tag in tags for event in events.Scalars(tag)}
        lost = [row for row in history if row["global_step"] not in logged]
        for row in lost:
            self.scalars(epoch_scalars(row), row["global_step"])
        return lost

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        with writing(self.dir / EVENTS), interrupts.held():
            writer = self._opened()
            for tag, value in values.items():
                writer.add_scalar(tag, value, step)
            writer.flush()

    def hyperparameters(
        self,
        hyperparameters: Mapping[str, hparams.Value],
        numbers: Mapping[str, float | None],
        step: int,
        swept: Collection[str],
    ) -> None:
        with writing(self.dir / EVENTS), interrupts.held():
            hparams.write(self._opened(), dict(hyperparameters), dict(numbers), step, swept)

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        height, width, channels = size
        image = Summary.Image(height=height, width=width, colorspace=channels)
        image.encoded_image_string = png
        with writing(self.dir / EVENTS), interrupts.held():
            writer = self._opened()
            # (`add_image` would convert the pixels and encode them again.)
            summary = Summary(value=[Summary.Value(tag=tag, image=image)])
            writer._get_file_writer().add_summary(summary, step)
            writer.flush()

    def end_records(self) -> set[str]:
        events = _read(self.dir)
        tags = events.Tags()
        # HParams: the last of its summaries, so all of them.
        hparams_written = metadata.SESSION_END_INFO_TAG in tags["tensors"]
        return {*tags["images"], *(["hparams"] if hparams_written else [])}

    def close(self, status: str) -> None:
        try:
            if self._writer is not None:
                with interrupts.held(), writing(self.dir / EVENTS):
                    self._writer.close()
        finally:
            threading.excepthook = self._excepthook

    def _opened(self) -> SummaryWriter:
        if self._writer is None:
            self._writer = SummaryWriter(self.dir, purge_step=self._purge_step)
        return self._writer


# TensorBoard's one logger, its event files' reader's too.
LOGGER = "tensorboard"


def _read(run_dir: Path, **guidance: dict[str, int]) -> EventAccumulator:
    """The run folder's events, as TensorBoard shows them, read with TensorBoard's logger let
    through errors only: its reader logs its walk through the files at INFO ("No path found after
    <the last file>", on every resume), and as a warning the purge of the events of an epoch a
    resume trains again, which the run does on purpose; neither is the run's to say."""
    logger = logging.getLogger(LOGGER)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        events = EventAccumulator(str(run_dir), **guidance)
        events.Reload()
    finally:
        logger.setLevel(level)
    return events


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
