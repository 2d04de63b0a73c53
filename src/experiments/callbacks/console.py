"""What a training run says on the console (and in train.log): its start, epochs and outcome."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from experiments.callbacks.base import Callback, EpochEnd, Fields, TrainingRun
from experiments.config.metric_names import LOSS, TEST, VAL, TaskMetrics
from experiments.core.text import ROWS, Unit, display_path, part_of_split, shape_text
from experiments.devices.measuring.datasheet import DatasheetPeak
from experiments.devices.plan import DevicePlan
from experiments.records.results import per_class_text
from experiments.training import loop, time_to_accuracy

log = logging.getLogger("experiments")


class Console(Callback):
    def on_setup_end(self, run: TrainingRun) -> Fields:
        """The run's first line: the model, the data, the device and the training's settings."""
        cfg, plan, unit, shape = run.cfg, run.runtime.plan, run.data.unit, run.data.shape
        processes = run.runtime.group.world_size
        shared = f" over {processes} processes ({plan.backend})" if plan.backend else ""
        val = f"{run.val_batches.count_images()} val / " if run.val_batches else ""
        accumulated, batch = cfg.trainer.accumulate_batches, cfg.trainer.batch_size
        steps = f" ({accumulated} to a step of {accumulated * batch})" if accumulated > 1 else ""
        # A CSV file's rows are vectors of features, seen as 1x1 images of a channel each.
        seen = f"{shape[0]} features" if unit == ROWS else shape_text(shape)
        train, test = run.train_batches.count_images(), run.test_batches.count_images()
        log.info(
            f"training {cfg.model.name} ({run.model_size.text(unit)}) on {cfg.dataset.name} "
            f"({train} train / {val}{test} test {unit.many}, {seen}) with {cfg.placement.name} "
            f"placement, {cfg.optimizer.name}, batch {batch}{steps}{shared}"
        )
        return None

    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        """The epoch's losses and metrics on each split, and its speed."""
        training, test, val, measures = end.training, end.test, end.val, run.learner.task.metrics
        validation = f"{_measured_text(VAL, val, measures)}, " if val else ""
        lr = f"lr {training.lr:.3g}, " if run.cfg.scheduler.name != "none" else ""
        host = end.measured.get("host")
        busy = f" ({host.text()})" if host is not None and host.busy else ""
        seconds = training.seconds + test.seconds + (val.seconds if val else 0.0)
        log.info(
            f"epoch {end.epoch}/{run.cfg.trainer.epochs}: train loss {training.loss:.4f}, "
            f"{validation}{_measured_text(TEST, test, measures)}, {lr}"
            f"{training.images_per_second:,.0f} {run.data.unit.rate}{busy}, {seconds:.1f} s"
        )
        return None


def _measured_text(split: str, result: loop.EvaluationResult, measures: TaskMetrics) -> str:
    """ "test loss 2.3031, test accuracy 11.6%": the loss, then the task's other metrics."""
    numbers = {LOSS.name: result.loss, **result.metrics}
    shown = sorted(measures.evaluated, key=lambda metric: metric != LOSS)
    return ", ".join(f"{split} {each.name} {each.text(numbers[each.name])}" for each in shown)


def log_summary(
    summary: dict[str, Any], plan: DevicePlan, run_dir: Path, measures: TaskMetrics, unit: Unit
) -> None:
    """The outcome: the selected epoch's metric, the speed, and the run folder, last."""
    epoch, headline = summary["selected_epoch"], measures.headline
    if "class_accuracy" in summary:
        per_class = per_class_text(summary["class_accuracy"])
        log.info("test %s per class (epoch %d): %s", measures.per_class, epoch, per_class)
    part = part_of_split(summary["test_images"], summary["test_split_images"])
    on_part = f" on {part} test {unit.many}" if part else ""
    tested = f"test {headline.name} {headline.text(summary[headline.key(TEST)])}{on_part}"
    if summary[headline.key(VAL)] is None:
        selected = f"{tested} at the final epoch (no validation split to select one)"
    else:
        selected = (
            f"epoch {epoch} selected by {summary['selected_by']}: val {headline.name} "
            f"{headline.text(summary[headline.key(VAL)])}, val loss {summary[LOSS.key(VAL)]:.4f}, "
            f"{tested} (final epoch: {headline.text(summary[measures.final_key(TEST)])})"
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
    speed = f"{summary['train_images_per_second']:,.0f} {unit.rate}"
    log.info(
        f"completed: {selected}, {speed} on {plan}{_utilization_text(summary)}, "
        f"{_epochs_text(summary)} -> {display_path(run_dir)}"
    )


def _utilization_text(summary: dict[str, Any]) -> str:
    """ " (MFU 3.1% of its fp32 peak, 0.8% of the H100 SXM datasheet's tf32 peak, 0.21 J/image at
    183 W)", of what the run has."""
    parts = []
    if summary.get("mfu") is not None:
        parts.append(f"MFU {summary['mfu']:.1%} of its {summary['device_peak_precision']} peak")
    if summary.get("mfu_datasheet") is not None:
        stated = DatasheetPeak(
            summary["datasheet_peak_flops"],
            summary["datasheet_peak_source"],
            summary["datasheet_peak_of"],
        )
        named = stated.named(summary["device_peak_precision"])
        parts.append(f"{'' if parts else 'MFU '}{summary['mfu_datasheet']:.1%} of {named}")
    if summary.get("train_joules_per_image") is not None:
        parts.append(energy_text(summary["train_joules_per_image"], summary["average_watts"]))
    return f" ({', '.join(parts)})" if parts else ""


def energy_text(joules_per_image: float, watts: float) -> str:
    """ "0.21 J/image at 183 W": a training run's, or a benchmark's, energy."""
    return f"{joules_per_image:.3g} J/image at {watts:,.0f} W"


def _epochs_text(summary: dict[str, Any]) -> str:
    """ "3 epoch(s) in 8.7 s", or "5 epoch(s): 3 before resuming (27.4 s of epochs), 2 in ..."."""
    epoch_seconds = summary["epoch_seconds"]
    here = f"in {summary['total_seconds']:.1f} s"
    if "resumed_after_epochs" not in summary:
        return f"{len(epoch_seconds)} epoch(s) {here}"
    (before,) = summary["resumed_after_epochs"]
    epochs, earlier = len(epoch_seconds), sum(epoch_seconds[:before])
    return (
        f"{epochs} epoch(s): {before} before resuming ({earlier:.1f} s of epochs), "
        f"{epochs - before} in this process {here}"
    )
