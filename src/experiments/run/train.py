"""One training run: setup, fit and finish; every other concern is a callback (`callbacks`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import ExitStack, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch.optim.lr_scheduler import LRScheduler

from experiments.callbacks import Callback, EpochEnd, Fields, Progress, TrainingRun, callbacks_for
from experiments.callbacks.console import log_summary
from experiments.config.build import as_written
from experiments.config.validate import refuse_unchosen_groups, validate
from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.devices import memory
from experiments.devices.distributed import refuse_other_commands, teardown, wait_for_all
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.placement import audit
from experiments.devices.process_group import ProcessGroup
from experiments.devices.timing import wait_for
from experiments.records import checkpoints, hparams, own_folder, resume, running, tracker
from experiments.records.log_file import HeldLog
from experiments.records.metrics import MetricsWriter
from experiments.records.recorded import EpochRecord, SetupRecord, finish_record
from experiments.records.results import Results, training_fields, training_summary
from experiments.records.tracker import Tracker
from experiments.run import job, setup, training_parts
from experiments.training import loop, profiling

log = logging.getLogger("experiments")

# The folders a run writes in: Hydra's snapshot, checkpoints, a profile's trace, tracker=wandb's.
WRITTEN_FOLDERS = (Path(".hydra"), checkpoints.LAST.parent, profiling.TRACE.parent, Path("wandb"))


def train(cfg: DictConfig, run_dir: Path, free_gpus: FreeGpus | None = None) -> float | None:
    """Train as `cfg` says in `run_dir` (process 0's records); returns `cfg.optimized_metric`."""
    group = ProcessGroup.from_env()
    held = HeldLog(run_dir) if cfg.resume else None  # until the resume is accepted
    # Hydra has made it; a caller of train() may not have. Never made again once the run is on.
    run_dir.mkdir(parents=True, exist_ok=True)
    own_folder.refuse_linked_folders(run_dir, WRITTEN_FOLDERS, cfg.resume)
    with running.sole_writer(run_dir, cfg.resume) if group.is_main else nullcontext():
        resumed = resume.checkpoint_to_resume(cfg)
        fields = training_fields(as_written(cfg), group, resumed)
        # The process group, if any, is left last, after the records are written.
        with (
            teardown(group),
            Results(run_dir, fields, group, held=held) as results,
            MetricsWriter(run_dir, group.is_main, _trackers(cfg, run_dir, group)) as metrics_writer,
        ):
            refuse_other_commands(group, run_dir, lambda: OmegaConf.to_yaml(cfg))
            refuse_unchosen_groups(cfg)  # (~trainer) before the trainer's settings are read
            batch = (cfg.trainer.batch_size, cfg.trainer.accumulate_batches, group.world_size)
            with memory.out_of_memory_said("trainer.batch_size", *batch):
                trainer = Trainer(cfg, run_dir, results, metrics_writer)
                with results.phase():  # what setup learns, in one write of results.json
                    trainer.setup(group, free_gpus, resumed)
                trainer.fit()
                summary = trainer.finish()
                run = trainer.run
                plan, measures, unit = run.runtime.plan, run.learner.task.metrics, run.data.unit
                del trainer, run  # its DDP model holds the process group, which teardown ends
        log_summary(summary, plan, run_dir, measures, unit)
    return summary[cfg.optimized_metric] if cfg.optimized_metric else None


def _trackers(cfg: DictConfig, run_dir: Path, group: ProcessGroup) -> dict[str, Tracker]:
    return tracker.trackers(cfg.tracker, run_dir) if group.is_main else {}


class Trainer:
    def __init__(
        self, cfg: DictConfig, run_dir: Path, results: Results, metrics_writer: MetricsWriter
    ) -> None:
        self.cfg = cfg  # as composed, until setup has merged in what the data told of itself
        self.run_dir = run_dir
        self.results = results
        self.metrics_writer = metrics_writer
        self.callbacks: list[Callback] = []
        self.progress = Progress()  # what training has done
        self.run: TrainingRun  # what setup built, for the callbacks to read
        self.scheduler: LRScheduler  # stepped here once an epoch, with a schedule by epoch
        self.stopped_early = False  # a resumed run, killed after it stopped early

    def setup(
        self, group: ProcessGroup, free_gpus: FreeGpus | None, resumed: dict[str, Any] | None
    ) -> None:
        """Everything the first step needs, on the device; a resumed run's state put back."""
        composed = cfg = self.cfg  # a resumed run's config snapshot is this one
        built = job.refuse_targets_not_typed(cfg)
        if cfg.replay:
            job.say_what_a_replay_builds(cfg.replay, built)
        validate(cfg, group.world_size, setup.compile_backends)
        swept = hparams.swept_columns(job.swept_keys())
        self.callbacks = callbacks_for(cfg, self.metrics_writer, job.overrides(), swept)
        results, new = self.results, resumed is None
        runtime = training_parts.device(cfg, group, free_gpus, results, new)
        parts = training_parts.data_and_task(cfg, runtime, results)
        model, size = training_parts.model(parts, new)
        parts, search = training_parts.batch_size(parts, model, resumed)
        learning = training_parts.optimization(parts, model, search)
        self.cfg = cfg = parts.cfg
        self.scheduler = learning.scheduler
        self.run = TrainingRun(
            cfg=cfg,
            run_dir=self.run_dir,
            runtime=runtime,
            data=parts.data,
            model_size=size,
            learner=learning.learner,
            state=learning.state,
            train_batches=learning.train_batches,
            test_batches=learning.test_batches,
            val_batches=learning.val_batches,
            monitor=parts.monitor,
            steps_per_epoch=learning.steps_per_epoch,
            progress=self.progress,
        )
        self._begin_tracking()
        audit(model, learning.learner.task, next(iter(learning.test_batches)), runtime.plan)
        if resumed is not None:
            self._restore(resumed, composed)
        self._each(SetupRecord, "on_setup_end")

    def fit(self) -> None:
        """Train the epochs left, each evaluated and ended, until the last or a callback's stop."""
        if self.stopped_early:
            return
        self.progress.first_epoch = len(self.progress.history) + 1
        for epoch in range(self.run.first_epoch, self.cfg.trainer.epochs + 1):
            interrupts.raise_if_lost()
            with self.results.phase():  # the epoch's record, written once at its end
                end = self._epoch(epoch)
                self.results.add(EpochRecord, epochs_completed=epoch)
                self._each(EpochRecord, "on_epoch_end", end)
                if end.stop:
                    log.info("stopping early after epoch %d: %s", epoch, end.stop)
                    self.results.add(
                        EpochRecord, stopped_early={"epoch": epoch, "reason": end.stop}
                    )
            if end.stop:
                break

    def _epoch(self, epoch: int) -> EpochEnd:
        """One epoch's training, evaluation and row, with the callbacks' measures."""
        run, trainer = self.run, self.cfg.trainer
        first = epoch == run.first_epoch
        slowed = max((each.slowed_steps for each in self.callbacks), default=0)
        done = (epoch - 1) * run.steps_per_epoch  # the steps before this epoch's
        with ExitStack() as contexts:
            for each in self.callbacks:
                contexts.enter_context(each.training(run, epoch))
            training = loop.train_epoch(
                run.learner,
                run.train_batches,
                run.runtime,
                log_interval=trainer.log_interval,
                log_step=partial(self.metrics_writer.step, epoch, done),
                description=f"epoch {epoch}/{trainer.epochs}",
                after_step=partial(self._after_step, epoch),
                warm_up_steps=max(1, slowed) if first else 0,
                unit=run.data.unit,
                last_step_apart=first and trainer.compile is not None,
            )
            wait_for(run.runtime.device)  # the contexts end with the epoch's work done
        measured: dict[str, Any] = {}
        for each in self.callbacks:
            measured.update(_handed(each, "on_train_epoch_end", run, epoch, training))
        if run.learner.step_scheduler is None:
            self.scheduler.step()  # a schedule by epoch
        val = self._evaluate(run.val_batches) if run.val_batches else None
        test = self._evaluate(run.test_batches)
        steps, classes = epoch * run.steps_per_epoch, run.data.classes
        row = self.metrics_writer.epoch(epoch, steps, training, test, val, classes, **measured)
        progress = self.progress
        progress.history.append(row)
        selected = run.monitor is None or run.monitor.selected(progress.history) is row
        if selected and test.confusion is not None:
            progress.selected_confusion = test.confusion
        stop = next(filter(None, (each.should_stop(run) for each in self.callbacks)), None)
        last = epoch == trainer.epochs or stop is not None
        return EpochEnd(epoch, row, training, test, val, measured, selected, last, stop)

    def _after_step(self, epoch: int, step: int) -> None:
        for each in self.callbacks:
            each.on_train_step_end(self.run, epoch, step)

    def finish(self) -> dict[str, Any]:
        """The selected epoch's numbers and the callbacks' in results.json, once all got here."""
        run = self.run
        measures = run.learner.task.metrics
        summary = training_summary(self.progress.history, run.monitor, measures)
        for each in self.callbacks:
            summary.update(_handed(each, "on_fit_end", run, summary))
        peak = memory.peak_memory_mb(run.runtime.plan)
        summary = self.results.finish("completed", None, finish_record(measures), **summary, **peak)
        wait_for_all(run.runtime.group)
        return summary

    def _each(self, record: Any, hook: str, *args: Any) -> None:
        for each in self.callbacks:
            self.results.add(record, **_handed(each, hook, self.run, *args))

    def _evaluate(self, batches: Any) -> loop.EvaluationResult:
        """The model on `batches`, or its weights' moving average (kept uncompiled, unwrapped)."""
        learner, runtime = self.run.learner, self.run.runtime
        if learner.ema is not None:
            return loop.evaluate(learner.ema.average, batches, runtime, learner.task)
        return loop.evaluate(learner.model, batches, runtime, learner.task, learner.cuda_graphs)

    def _begin_tracking(self) -> None:
        plan, sweep = self.run.runtime.plan, job.sweep_folder()
        tracked = tracker.tracked_run(as_written(self.cfg), plan, self.run_dir, sweep)
        begun = self.metrics_writer.begin_in_folder(tracked, resuming=bool(self.cfg.resume))
        self.results.add(SetupRecord, **begun)

    def _restore(self, checkpoint: dict[str, Any], composed: DictConfig) -> None:
        run, records = self.run, (self.results, self.metrics_writer)
        resumed = resume.restore(
            checkpoint, self.cfg, composed, self.run_dir, run.state, records, run.monitor
        )
        self.progress.history = resumed.history
        self.progress.selected_confusion = resumed.selected_confusion
        self.stopped_early = resumed.stopped_early is not None


def _handed(callback: Callback, hook: str, *args: Any) -> Mapping[str, Any]:
    """The fields `callback`'s `hook` hands back; one of one's own hands back none."""
    fields: Fields = getattr(callback, hook)(*args)
    if fields and not type(callback).__module__.startswith("experiments."):
        raise ExperimentError(
            f"{type(callback).__name__}.{hook} returned {dict(fields)}: a callback of one's own "
            "returns None (it writes what it keeps in run.run_dir; docs/callbacks.md)"
        )
    return fields or {}
