"""trainer.profile=true: torch.profiler over the first epoch's first steps, in the main process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from experiments.callbacks.base import Callback, EpochEnd, Fields, TrainingRun
from experiments.core.errors import ExperimentError
from experiments.training import profiling


class Profiler(Callback):
    slowed_steps = profiling.STEPS

    step: Callable[[], None] | None = None  # the profiler's, while it is on

    def on_setup_end(self, run: TrainingRun) -> Fields:
        steps = run.steps_per_epoch
        if steps < profiling.STEPS:
            raise ExperimentError(
                f"trainer.profile=true records optimizer steps {profiling.FIRST} to "
                f"{profiling.STEPS} of the first epoch, which has {steps}; give it "
                f"{profiling.STEPS} or more (trainer.limit_train_batches, "
                "trainer.accumulate_batches)"
            )
        return None

    @contextmanager
    def training(self, run: TrainingRun, epoch: int) -> Iterator[None]:
        if epoch != run.first_epoch or not run.is_main:
            yield
            return
        with profiling.profiled(run.run_dir, run.runtime.type) as step:
            self.step = step
            try:
                yield
            finally:
                self.step = None

    def on_train_step_end(self, run: TrainingRun, epoch: int, step: int) -> None:
        if self.step is not None:
            self.step()

    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        if end.epoch != run.first_epoch:
            return None
        # The profiler was on from its start to this step's end.
        return {"profiled_steps": {"epoch": end.epoch, "first": 1, "last": profiling.STEPS}}
