"""The story of one run: check the config, set up the process and the device, load the data,
build, train and evaluate epoch by epoch, record.

`experiments.cli` calls `train` with the config Hydra composed and the run folder it made.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from experiments import (
    checkpoints,
    environment,
    job,
    loop,
    measure,
    models,
    process,
    seeding,
    speed,
)
from experiments.batches import Augment, Batches
from experiments.config import build, plain, validate
from experiments.devices import DevicePlan
from experiments.distributed import ProcessGroup, teardown, unwrap
from experiments.metrics import Metrics
from experiments.placement import audit
from experiments.results import (
    Results,
    display_path,
    per_class_text,
    training_fields,
    training_summary,
)
from experiments.sweep import FreeGpus

log = logging.getLogger("experiments")


def train(cfg: DictConfig, run_dir: Path, free_gpus: FreeGpus | None = None) -> float:
    """Train as `cfg` says, recording everything in `run_dir`; returns the best test accuracy
    (what a hyperparameter search maximizes).

    `free_gpus` hands out GPUs when sweep jobs run side by side. Under torchrun, every process
    runs this; process 0 writes the records.
    """
    trainer = cfg.trainer
    group = ProcessGroup.from_env()
    resumed = checkpoints.to_resume(cfg.resume, trainer.epochs) if cfg.resume else None
    # The process group, if any, is left last, after the records are written.
    with (
        teardown(),
        Results(run_dir, training_fields(cfg, group, resumed), group) as results,
        Metrics(run_dir, writes=group.is_main) as metrics,
    ):
        validate(cfg, group.world_size)
        process.apply(cfg.device.visible, trainer.threads, trainer.deterministic)
        results.add(deterministic=torch.are_deterministic_algorithms_enabled())
        if group.is_main:
            environment.write(run_dir)
        if trainer.keep_freed_memory:
            results.add(keep_freed_memory=speed.keep_freed_memory())
        plan = job.prepare_device(cfg.device, group, free_gpus)
        device = plan.device
        results.add(device=environment.device_record(cfg.device, plan))
        autocast_dtype, scaler = speed.precision(trainer.precision, device)
        if note := speed.emulated_bf16(trainer.precision, plan):
            log.warning(note)
            results.add(precision_note=note)
        channels_last = speed.channels_last(trainer.channels_last, device)
        results.add(channels_last=channels_last)
        placement = build(cfg.placement, device=device)
        data = job.load_data(cfg.dataset, placement, processes_here=group.local_world_size)
        results.add(data={**data.record, **data.derived()})

        seeding.seed_everything(trainer.seed)  # the same weights on every device and placement
        model = models.build_for(cfg.model, data.shape, len(data.classes), data.name)
        model = job.place_model(
            model,
            placement,
            plan,
            channels_last=channels_last,
            autocast_dtype=autocast_dtype,
            compile_backend=trainer.compile,
        )
        loss_fn = placement.module(nn.CrossEntropyLoss())
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
        audit(model, loss_fn, next(iter(test_batches)), plan)

        history: list[dict[str, Any]] = []
        if resumed is not None:
            checkpoints.restore(resumed, cfg.resume, unwrap(model), optimizer, scaler)
            seeding.restore(resumed["rng"], shuffle, plan.gpus)
            history = list(resumed["history"])
            metrics.resume_after(resumed["epoch"], len(train_batches))
            log.info("resuming %s after epoch %d", display_path(Path(cfg.resume)), resumed["epoch"])
        _log_start(cfg, data.shape, train_batches, test_batches, plan, group)

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
            )
            evaluation = loop.evaluate(
                model=model,
                loss_fn=loss_fn,
                autocast_dtype=autocast_dtype,
                batches=test_batches,
                device=device,
                group=group,
                num_classes=len(data.classes),
            )
            steps = steps_before + len(train_batches)
            history.append(metrics.epoch(epoch, steps, training, evaluation, data.classes))
            results.add(epochs_completed=epoch)
            if group.is_main and (epoch % trainer.checkpoint_every == 0 or epoch == trainer.epochs):
                checkpoints.save(
                    run_dir / checkpoints.LAST,
                    model=unwrap(model),
                    optimizer=optimizer,
                    scaler=scaler,
                    epoch=epoch,
                    config=plain(cfg),
                    history=history,
                    rng=seeding.capture(shuffle, plan.gpus),
                )
            _log_epoch(epoch, trainer.epochs, training, evaluation)
        summary = results.finish(
            "completed", None, **training_summary(history), **measure.peak_memory_mb(device)
        )
        group.wait_for_all()

    _log_summary(summary, plan, run_dir)
    return summary["best_test_accuracy"]


def _log_start(
    cfg: DictConfig,
    shape: tuple[int, int, int],
    train_batches: Batches,
    test_batches: Batches,
    plan: DevicePlan,
    group: ProcessGroup,
) -> None:
    shared = f" over {group.world_size} processes ({plan.backend})" if plan.backend else ""
    log.info(
        "training %s on %s (%d train / %d test images, %s) with %s placement, %s, batch %d%s",
        cfg.model.name,
        cfg.dataset.name,
        train_batches.count_images(),
        test_batches.count_images(),
        "x".join(map(str, shape)),
        cfg.placement.name,
        cfg.optimizer.name,
        cfg.trainer.batch_size,
        shared,
    )


def _log_epoch(
    epoch: int, epochs: int, training: loop.TrainingResult, evaluation: loop.EvaluationResult
) -> None:
    log.info(
        "epoch %d/%d: train loss %.4f, test loss %.4f, test accuracy %.1f%%, %s img/s, %.1f s",
        epoch,
        epochs,
        training.loss,
        evaluation.loss,
        100 * evaluation.accuracy,
        f"{training.images_per_second:,.0f}",
        training.seconds + evaluation.seconds,
    )


def _log_summary(summary: dict[str, Any], plan: DevicePlan, run_dir: Path) -> None:
    log.info("test accuracy per class: %s", per_class_text(summary["class_accuracy"]))
    log.info(
        "completed: test accuracy %.1f%% (best %.1f%% at epoch %d), %s img/s on %s, "
        "%d epoch(s) in %.1f s -> %s",
        100 * summary["final_test_accuracy"],
        100 * summary["best_test_accuracy"],
        summary["best_epoch"],
        f"{summary['train_images_per_second']:,.0f}",
        plan,
        summary["epochs"],
        summary["total_seconds"],
        display_path(run_dir),
    )
