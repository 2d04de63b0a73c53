"""`tracker=tensorboard`, the default. Ctrl-C and SIGTERM wait until a write is done: cut short, it
would leave the writer's queue waiting for ever."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import metadata
from torch.utils.tensorboard import SummaryWriter

from experiments.config.metric_names import TEST_LOSS, TRAIN_LOSS
from experiments.core import interrupts
from experiments.core.files import writing
from experiments.records import hparams
from experiments.records.hparams import Hyperparameters, Numbers
from experiments.records.tracker import ROW_TAGS, Logged, TrackedRun

# TensorBoard's file, as a failed write names it (its writer picks the rest of the name).
EVENTS = "events.out.tfevents.*"
# The tags a logged step's and an epoch's rows had in older run folders' events.
OLD_ROW_TAGS = (TRAIN_LOSS, TEST_LOSS)


class TensorBoard:
    """The event files of one run folder (a `records.tracker.ReadBack`)."""

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

    def logged(self, through: int) -> Logged:
        """Its events after `through` are hidden from here on (its writer's purge step)."""
        self._purge_step = through + 1
        events = _read(self.dir, size_guidance={"scalars": 0})  # (0: all)
        tags = events.Tags()
        steps, epochs = (
            {e.step for tag in found if tag in tags["scalars"] for e in events.Scalars(tag)}
            for found in zip(ROW_TAGS, OLD_ROW_TAGS, strict=True)
        )
        # HParams: the last of its summaries, so all of them.
        hparams_written = metadata.SESSION_END_INFO_TAG in tags["tensors"]
        ends = {*tags["images"], *(["hparams"] if hparams_written else [])}
        return Logged({s for s in steps if s <= through}, {s for s in epochs if s <= through}, ends)

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        with writing(self.dir / EVENTS), interrupts.held_back():
            writer = self._opened()
            for tag, value in values.items():
                writer.add_scalar(tag, value, step)
            writer.flush()

    def hyperparameters(
        self, hyperparameters: Hyperparameters, numbers: Numbers, step: int, swept: Collection[str]
    ) -> None:
        with writing(self.dir / EVENTS), interrupts.held_back():
            hparams.write(self._opened(), dict(hyperparameters), dict(numbers), step, swept)

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        height, width, channels = size
        image = Summary.Image(height=height, width=width, colorspace=channels)
        image.encoded_image_string = png
        with writing(self.dir / EVENTS), interrupts.held_back():
            writer = self._opened()
            # (`add_image` would convert the pixels and encode them again.)
            summary = Summary(value=[Summary.Value(tag=tag, image=image)])
            writer._get_file_writer().add_summary(summary, step)
            writer.flush()

    def close(self, status: str) -> None:
        try:
            if self._writer is not None:
                with interrupts.held_back(), writing(self.dir / EVENTS):
                    self._writer.close()
        finally:
            threading.excepthook = self._excepthook

    def _opened(self) -> SummaryWriter:
        if self._writer is None:
            self._writer = SummaryWriter(self.dir, purge_step=self._purge_step)
        return self._writer


def _read(run_dir: Path, **guidance: dict[str, int]) -> EventAccumulator:
    """The run folder's events, TensorBoard's logger quiet but for errors (it warns of purges)."""
    logger = logging.getLogger("tensorboard")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return EventAccumulator(str(run_dir), **guidance).Reload()
    finally:
        logger.setLevel(level)


def _quiet_tensorboard_thread(
    previous: Callable[[threading.ExceptHookArgs], object],
) -> Callable[[threading.ExceptHookArgs], object]:
    """Silence TensorBoard's writer thread's traceback: the next write raises its error again."""

    def hook(args: threading.ExceptHookArgs) -> object:
        return None if type(args.thread).__module__.startswith("tensorboard.") else previous(args)

    return hook
