"""The story of one run: check the config, set up the process and the device, load the data,
build, train and evaluate epoch by epoch (selecting on the validation split, stopping early if
asked), record.

`experiments.cli` calls `train` with the config Hydra composed and the run folder it made.
"""

from __future__ import annotations

import copy
import logging
from functools import partial
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from torch import nn

from experiments.config import overrides
from experiments.config.build import build, plain
from experiments.config.choices import Interval
from experiments.config.validate import validate
from experiments.core.text import display_path
from experiments.data.batches import Augment, Batches
from experiments.devices import memory, precision, process_settings
from experiments.devices.description import device_record
from experiments.devices.distributed import teardown, wait_for_all
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.placement import audit
from experiments.devices.plan import DevicePlan
from experiments.devices.process_group import ProcessGroup
from experiments.devices.wrapping import unwrap
from experiments.records import checkpoints, environment, hparams
from experiments.records.metrics import Metrics
from experiments.records.results import (
    Results,
    per_class_text,
    training_fields,
    training_summary,
)
from experiments.run import setup
from experiments.training import loop, models, schedules, seeding, selection
from experiments.training.selection import Monitor

log = logging.getLogger("experiments")

# The numbers of a finished run that TensorBoard's HParams tab compares runs by.
HPARAMS_METRICS = (
    "val_accuracy",
    "test_accuracy",
    "final_test_accuracy",
    "train_images_per_second",
)


def train(cfg: DictConfig, run_dir: Path, free_gpus: FreeGpus | None = None) -> float | None:
    """Train as `cfg` says, recording everything in `run_dir`; returns `cfg.optimized_metric`
    (what a hyperparameter search optimizes), if one is named.

    `free_gpus` hands out GPUs when sweep jobs run side by side. Under torchrun, every process
    runs this; process 0 writes the records.
    """
    trainer = cfg.trainer
    group = ProcessGroup.from_env()
    resumed = _to_resume(cfg)
    snapshot = copy.deepcopy(cfg) if resumed else None  # as composed (the data fills in some)
    # The process group, if any, is left last, after the records are written.
    with (
        teardown(),
        Results(run_dir, training_fields(cfg, group, resumed), group) as results,
        Metrics(run_dir, writes=group.is_main) as metrics,
    ):
        validate(cfg, group.world_size)
        process_settings.apply(cfg.device.visible, trainer.threads, trainer.deterministic)
        results.add(deterministic=torch.are_deterministic_algorithms_enabled())
        if group.is_main:
            environment.write(run_dir)
        if trainer.keep_freed_memory:
            results.add(keep_freed_memory=memory.keep_freed_memory())
        plan = setup.prepare_device(cfg.device, group, free_gpus)
        device = plan.device
        results.add(device=device_record(cfg.device, plan))
        autocast_dtype, scaler = precision.autocast_and_scaler(trainer.precision, device)
        if note := precision.emulated_bf16(trainer.precision, plan):
            log.warning(note)
            results.add(precision_note=note)
        channels_last = memory.channels_last(trainer.channels_last, device)
        results.add(channels_last=channels_last)
        placement = build(cfg.placement, device=device)
        data = setup.load_data(cfg.dataset, placement, processes_here=group.local_world_size)
        results.add(data={**data.record, **data.derived()})
        # Epochs are selected (and runs stopped early) on the validation split, never on test.
        selection.require_validation(cfg, has_validation=data.val is not None)
        monitor = Monitor.of(trainer) if data.val is not None else None

        seeding.seed_everything(trainer.seed)  # the same weights on every device and placement
        model = models.build_for(cfg.model, data.shape, len(data.classes), data.name)
        model = setup.place_model(
            model,
            placement,
            plan,
            channels_last=channels_last,
            autocast_dtype=autocast_dtype,
            compile_backend=trainer.compile,
        )
        loss_fn = placement.module(nn.CrossEntropyLoss(label_smoothing=trainer.label_smoothing))
        optimizer = build(cfg.optimizer)(model.parameters())

        # The same shuffle (and augmentation) in every process; each takes its share of a batch.
        shuffle = torch.Generator().manual_seed(trainer.seed)
        batches = partial(
            Batches,
            batch_size=trainer.batch_size,
            mean=data.mean,
            std=data.std,
            placement=placement,
            group=group,
            channels_last=channels_last,
        )
        augment = Augment(**cfg.dataset.augment, generator=shuffle)
        assert data.train is not None
        train_batches = batches(
            data.train, shuffle=shuffle, limit=trainer.limit_train_batches, augment=augment
        )
        test_batches = batches(data.test, limit=trainer.limit_eval_batches)
        val_batches = batches(data.val, limit=trainer.limit_eval_batches) if data.val else None
        scheduler, interval = schedules.for_run(
            cfg.scheduler, optimizer, epochs=trainer.epochs, steps_per_epoch=len(train_batches)
        )
        audit(model, loss_fn, next(iter(test_batches)), plan)
        evaluate = partial(
            loop.evaluate,
            model=model,
            loss_fn=placement.module(nn.CrossEntropyLoss()),  # unsmoothed: comparable losses
            autocast_dtype=autocast_dtype,
            device=device,
            group=group,
            num_classes=len(data.classes),
        )

        history: list[dict[str, Any]] = []
        selected_confusion: list[list[int]] = []  # the test split's, at the selected epoch
        if resumed is not None:
            checkpoints.restore(resumed, cfg.resume, unwrap(model), optimizer, scheduler, scaler)
            if group.is_main and snapshot is not None:  # accepted: the run now has this config
                overrides.save_snapshot(snapshot, run_dir)
            seeding.restore(resumed["rng"], shuffle, plan.gpus)
            history = list(resumed["history"])
            selected_confusion = resumed.get("selected_confusion", [])
            metrics.resume_after(resumed["epoch"], len(train_batches))
            log.info("resuming %s after epoch %d", display_path(Path(cfg.resume)), resumed["epoch"])
        _log_start(cfg, data.shape, train_batches, test_batches, val_batches, plan, group)

        for epoch in range(len(history) + 1, trainer.epochs + 1):
            steps_before = (epoch - 1) * len(train_batches)
            training = loop.train_epoch(
                model=model,
                loss_fn=loss_fn,
                optimizer=optimizer,
                scaler=scaler,
                autocast_dtype=autocast_dtype,
                batches=train_batches,
                device=device,
                group=group,
                log_interval=trainer.log_interval,
                log_step=partial(metrics.step, epoch, steps_before),
                description=f"epoch {epoch}/{trainer.epochs}",
                gradient_clip=trainer.gradient_clip,
                scheduler=scheduler if interval == Interval.step else None,
            )
            if interval == Interval.epoch:
                scheduler.step()
            val = evaluate(batches=val_batches) if val_batches else None
            test = evaluate(batches=test_batches)
            steps = steps_before + len(train_batches)
            history.append(metrics.epoch(epoch, steps, training, test, val, data.classes))
            selected = monitor is None or monitor.selected(history) is history[-1]
            if selected:
                selected_confusion = test.confusion
            stop = (
                selection.early_stop(history, monitor, trainer.early_stopping) if monitor else None
            )
            results.add(epochs_completed=epoch)
            last = epoch == trainer.epochs or stop is not None
            due = epoch % trainer.checkpoint_every == 0 or last
            best = monitor is not None and selected
            if group.is_main and (due or best):
                checkpoint = checkpoints.state(
                    model=unwrap(model),
                    optimizer=optimizer,
                    scheduler=scheduler,
                    scaler=scaler,
                    epoch=epoch,
                    config=plain(cfg),
                    history=history,
                    rng=seeding.capture(shuffle, plan.gpus),
                    selected_confusion=selected_confusion,
                )
                if due:
                    checkpoints.save(run_dir / checkpoints.LAST, checkpoint)
                if best:
                    checkpoints.save(run_dir / checkpoints.BEST, checkpoint)
            _log_epoch(epoch, trainer.epochs, training, test, val, cfg.scheduler.name)
            if stop:
                log.info("stopping early after epoch %d: %s", epoch, stop)
                results.add(stopped_early={"epoch": epoch, "reason": stop})
                break

        summary = training_summary(history, monitor)
        last_step = history[-1]["global_step"]
        metrics.hyperparameters(
            hparams.hyperparameters(cfg, results.get("device")["used"], _overrides()),
            {key: summary[key] for key in HPARAMS_METRICS},
            last_step,
        )
        if trainer.confusion_matrix:
            title = (
                f"{cfg.model.name} on {cfg.dataset.name}: test, epoch {summary['selected_epoch']}"
            )
            metrics.confusion_matrix(selected_confusion, data.classes, title, last_step)
        summary = results.finish("completed", None, **summary, **memory.peak_memory_mb(device))
        wait_for_all(group)

    _log_summary(summary, plan, run_dir)
    return summary[cfg.optimized_metric] if cfg.optimized_metric else None


def _to_resume(cfg: DictConfig) -> dict[str, Any] | None:
    """The checkpoint `resume=` continues from, if the run can go on as configured now."""
    if not cfg.resume:
        return None
    resumed = checkpoints.to_resume(cfg.resume, cfg.trainer.epochs, cfg.scheduler.name)
    selection.refuse_stopped(resumed["history"], cfg.trainer, cfg.resume)
    return resumed


def _overrides() -> list[str]:
    """The command line's overrides of this job (in a sweep, with its swept values)."""
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _log_start(
    cfg: DictConfig,
    shape: tuple[int, int, int],
    train_batches: Batches,
    test_batches: Batches,
    val_batches: Batches | None,
    plan: DevicePlan,
    group: ProcessGroup,
) -> None:
    shared = f" over {group.world_size} processes ({plan.backend})" if plan.backend else ""
    val = f"{val_batches.count_images()} val / " if val_batches else ""
    log.info(
        "training %s on %s (%d train / %s%d test images, %s) with %s placement, %s, batch %d%s",
        cfg.model.name,
        cfg.dataset.name,
        train_batches.count_images(),
        val,
        test_batches.count_images(),
        "x".join(map(str, shape)),
        cfg.placement.name,
        cfg.optimizer.name,
        cfg.trainer.batch_size,
        shared,
    )


def _log_epoch(
    epoch: int,
    epochs: int,
    training: loop.TrainingResult,
    test: loop.EvaluationResult,
    val: loop.EvaluationResult | None,
    scheduler: str,
) -> None:
    validation = f"val loss {val.loss:.4f}, val accuracy {100 * val.accuracy:.1f}%, " if val else ""
    lr = f"lr {training.lr:.3g}, " if scheduler != "none" else ""
    log.info(
        "epoch %d/%d: train loss %.4f, %stest loss %.4f, test accuracy %.1f%%, %s%s img/s, %.1f s",
        epoch,
        epochs,
        training.loss,
        validation,
        test.loss,
        100 * test.accuracy,
        lr,
        f"{training.images_per_second:,.0f}",
        training.seconds + test.seconds + (val.seconds if val else 0.0),
    )


def _log_summary(summary: dict[str, Any], plan: DevicePlan, run_dir: Path) -> None:
    epoch = summary["selected_epoch"]
    log.info(
        "test accuracy per class (epoch %d): %s", epoch, per_class_text(summary["class_accuracy"])
    )
    if summary["val_accuracy"] is None:
        selected = (
            f"test accuracy {100 * summary['test_accuracy']:.1f}% at the final epoch (no "
            "validation split to select one)"
        )
    else:
        selected = (
            f"epoch {epoch} selected by {summary['selected_by']}: val accuracy "
            f"{100 * summary['val_accuracy']:.1f}%, val loss {summary['val_loss']:.4f}, test "
            f"accuracy {100 * summary['test_accuracy']:.1f}% (final epoch: "
            f"{100 * summary['final_test_accuracy']:.1f}%)"
        )
    log.info(
        "completed: %s, %s img/s on %s, %d epoch(s) in %.1f s -> %s",
        selected,
        f"{summary['train_images_per_second']:,.0f}",
        plan,
        len(summary["epoch_seconds"]),
        summary["total_seconds"],
        display_path(run_dir),
    )
