"""What a training run says on the console (and in train.log): its start and each epoch (the
`Console` callback), and its outcome (`log_summary`), whose last line names the run folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.callbacks.base import Callback, EpochEnd, Fields, TrainingRun
from experiments.config.metric_names import LOSS, TEST, VAL, TaskMetrics
from experiments.core.text import ROWS, Unit, display_path, part_of_split, shape_text
from experiments.data.batches import Batches
from experiments.devices.measuring import host_load
from experiments.devices.plan import DevicePlan
from experiments.devices.runtime import Runtime
from experiments.records.results import per_class_text
from experiments.training import loop, model_size, time_to_accuracy

log = logging.getLogger("experiments")


class Console(Callback):
    def on_setup_end(self, run: TrainingRun) -> Fields:
        log_start(
            run.cfg,
            run.data.shape,
            run.data.unit,
            run.model_size,
            run.train_batches,
            run.test_batches,
            run.val_batches,
            run.runtime,
        )
        return None

    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        log_epoch(
            end.epoch,
            run.cfg.trainer.epochs,
            end.training,
            end.test,
            end.val,
            run.learner.task.metrics,
            run.cfg.scheduler.name,
            end.measured.get("host"),
            run.data.unit,
        )
        return None


def log_start(
    cfg: DictConfig,
    shape: tuple[int, int, int],
    unit: Unit,
    size: model_size.ModelSize,
    train_batches: Batches,
    test_batches: Batches,
    val_batches: Batches | None,
    runtime: Runtime,
) -> None:
    """The run's first line: the model, the data (its samples counted in their `unit`), the
    device and the training's settings."""
    plan = runtime.plan
    shared = f" over {runtime.group.world_size} processes ({plan.backend})" if plan.backend else ""
    val = f"{val_batches.count_images()} val / " if val_batches else ""
    trainer = cfg.trainer
    accumulated = trainer.accumulate_batches
    step = accumulated * trainer.batch_size
    steps = f" ({accumulated} to a step of {step})" if accumulated > 1 else ""
    log.info(
        "training %s (%s) on %s (%d train / %s%d test %s, %s) with %s placement, %s, batch %d%s%s",
        cfg.model.name,
        size.text(unit),
        cfg.dataset.name,
        train_batches.count_images(),
        val,
        test_batches.count_images(),
        unit.many,
        # A CSV file's rows are vectors of features, seen as 1x1 images of a channel each.
        f"{shape[0]} features" if unit == ROWS else shape_text(shape),
        cfg.placement.name,
        cfg.optimizer.name,
        trainer.batch_size,
        steps,
        shared,
    )


def log_epoch(
    epoch: int,
    epochs: int,
    training: loop.TrainingResult,
    test: loop.EvaluationResult,
    val: loop.EvaluationResult | None,
    measures: TaskMetrics,
    scheduler: str,
    host: host_load.HostLoad | None,
    unit: Unit,
) -> None:
    """An epoch's line: the losses and the task's metrics (`measures`) on each split, speed (in
    the data's `unit` per second)."""
    validation = f"{_measured_text(VAL, val, measures)}, " if val else ""
    lr = f"lr {training.lr:.3g}, " if scheduler != "none" else ""
    busy = f" ({host.text()})" if host is not None and host.busy else ""
    log.info(
        "epoch %d/%d: train loss %.4f, %s%s, %s%s %s%s, %.1f s",
        epoch,
        epochs,
        training.loss,
        validation,
        _measured_text(TEST, test, measures),
        lr,
        f"{training.images_per_second:,.0f}",
        unit.rate,
        busy,
        training.seconds + test.seconds + (val.seconds if val else 0.0),
    )


def _measured_text(split: str, result: loop.EvaluationResult, measures: TaskMetrics) -> str:
    """ "test loss 2.3031, test accuracy 11.6%": the loss, then the task's other metrics."""
    numbers = {LOSS.name: result.loss, **result.metrics}
    shown = sorted(measures.evaluated, key=lambda metric: metric != LOSS)
    return ", ".join(
        f"{split} {metric.name} {metric.text(numbers[metric.name])}" for metric in shown
    )


def log_summary(
    summary: dict[str, Any], plan: DevicePlan, run_dir: Path, measures: TaskMetrics, unit: Unit
) -> None:
    """The outcome: the selected epoch's headline metric (`measures`: the task's), per class
    where the task has classes; the speed (in the data's `unit` per second); the run folder,
    last."""
    epoch, headline = summary["selected_epoch"], measures.headline
    if "class_accuracy" in summary:
        log.info(
            "test %s per class (epoch %d): %s",
            measures.per_class,
            epoch,
            per_class_text(summary["class_accuracy"]),
        )
    part = part_of_split(summary["test_images"], summary["test_split_images"])
    tested = f"test {headline.name} {headline.text(summary[headline.key(TEST)])}" + (
        f" on {part} test {unit.many}" if part else ""
    )
    if summary[headline.key(VAL)] is None:
        selected = f"{tested} at the final epoch (no validation split to select one)"
    else:
        selected = (
            f"epoch {epoch} selected by {summary['selected_by']}: val {headline.name} "
            f"{headline.text(summary[headline.key(VAL)])}, val loss "
            f"{summary[LOSS.key(VAL)]:.4f}, {tested} (final epoch: "
            f"{headline.text(summary[measures.final_key(TEST)])})"
        )
    if "time_to_accuracy" in summary:
        selected += f", {time_to_accuracy.text(summary['time_to_accuracy'])}"
    # Before the final line, which names the run folder last.
    if summary["host_busy"]:
        log.warning(
            "host busy: other processes used %.0f%% of the cores this run could use while it "
            "trained, so its speed reads low; compare it only with runs on a quiet host",
            100 * summary["host_other_cpu_share"],
        )
    log.info(
        "completed: %s, %s %s on %s%s, %s -> %s",
        selected,
        f"{summary['train_images_per_second']:,.0f}",
        unit.rate,
        plan,
        _utilization_text(summary),
        _epochs_text(summary),
        display_path(run_dir),
    )


def _utilization_text(summary: dict[str, Any]) -> str:
    """ " (MFU 3.1% of its fp32 peak, 0.21 J/image at 183 W)": the MFU, where the run has one
    (not where it beat a wrong peak: its warning says so, nor of an earlier version), and the
    energy per training image, where a counter measured it."""
    parts = []
    if summary.get("mfu") is not None:
        parts.append(f"MFU {summary['mfu']:.1%} of its {summary['device_peak_precision']} peak")
    if summary.get("train_joules_per_image") is not None:
        parts.append(energy_text(summary["train_joules_per_image"], summary["average_watts"]))
    return f" ({', '.join(parts)})" if parts else ""


def energy_text(joules_per_image: float, watts: float) -> str:
    """ "0.21 J/image at 183 W": a training run's, or a benchmark's, energy."""
    return f"{joules_per_image:.3g} J/image at {watts:,.0f} W"


def _epochs_text(summary: dict[str, Any]) -> str:
    """ "3 epoch(s) in 8.7 s" (the process's time); a resumed run's in its two parts, the epochs
    before the resume timed by their rows (those processes' setup went unrecorded): "5 epoch(s):
    3 before resuming (27.4 s of epochs), 2 in this process in 8.7 s"."""
    epoch_seconds = summary["epoch_seconds"]
    here = f"in {summary['total_seconds']:.1f} s"
    if "resumed_after_epochs" not in summary:
        return f"{len(epoch_seconds)} epoch(s) {here}"
    (before,) = summary["resumed_after_epochs"]
    return (
        f"{len(epoch_seconds)} epoch(s): {before} before resuming "
        f"({sum(epoch_seconds[:before]):.1f} s of epochs), "
        f"{len(epoch_seconds) - before} in this process {here}"
    )
