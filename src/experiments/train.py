"""The story of one run: check the request, load the data, build, train, evaluate, record.

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

from experiments import checkpoints, devices, distributed, loop, measure, models, seeding, tuning
from experiments import data as datasets
from experiments.config import build, check_trainer
from experiments.errors import ExperimentError
from experiments.placement import Placement
from experiments.records import RunRecord, per_class_text, shown

log = logging.getLogger("experiments")


def train(cfg: DictConfig, run_dir: Path, job_slot: int | None = None) -> float:
    """Train as `cfg` says, recording everything in `run_dir`; returns the best test accuracy.

    `job_slot` is the job's number when sweep jobs run side by side; it spreads them over the GPUs.
    Under torchrun, every process runs this; process 0 writes the records.
    """
    trainer = cfg.trainer
    processes = distributed.Processes.from_env()
    resumed = _checkpoint_to_resume(cfg) if cfg.resume else None
    # The process group (if any) is left last, after the records are written.
    with distributed.teardown(), RunRecord(run_dir, cfg, processes) as record:
        check_trainer(trainer, processes.world_size)
        datasets.check_options(cfg.dataset)
        if trainer.keep_freed_memory:
            record.fields["keep_freed_memory"] = tuning.keep_freed_memory()
        plan = _prepare_device(cfg, processes, job_slot)
        record.device(devices.describe(plan))
        precision = tuning.Precision(trainer.precision, plan.device)
        channels_last = tuning.channels_last(trainer.channels_last, plan.device)
        record.fields["channels_last"] = channels_last
        placement = build(cfg.placement, device=plan.device)

        data = datasets.load(cfg.dataset)
        if cfg.dataset.preload == "device":
            data = datasets.preload(data, placement)
        seeding.seed_everything(trainer.seed)  # the same weights on every device and placement
        model = _build_model(cfg, data, placement, plan, channels_last)
        loss_fn = placement.module(nn.CrossEntropyLoss())
        optimizer = build(cfg.optimizer)(model.parameters())

        # The same shuffle (and augmentation) in every process; each takes its share of a batch.
        shuffle = torch.Generator().manual_seed(trainer.seed)
        augment = datasets.Augment(**cfg.dataset.augment, generator=shuffle)
        batches = partial(
            datasets.Batches,
            batch_size=trainer.batch_size,
            data=data,
            placement=placement,
            processes=processes,
            channels_last=channels_last,
        )
        train_batches = batches(
            data.train, shuffle=shuffle, limit=trainer.limit_train_batches, augment=augment
        )
        test_batches = batches(data.test, limit=trainer.limit_eval_batches)
        devices.audit(model, loss_fn, next(iter(test_batches)), plan)

        first_epoch = 1
        if resumed is not None:
            devices.unwrap(model).load_state_dict(resumed["model"])
            optimizer.load_state_dict(resumed["optimizer"])
            seeding.restore(resumed["rng"], shuffle)
            record.resume(resumed, len(train_batches))
            first_epoch = resumed["epoch"] + 1
            log.info("resuming %s after epoch %d", shown(Path(cfg.resume)), resumed["epoch"])
        _log_start(cfg, data, train_batches, test_batches, plan, processes)

        for epoch in range(first_epoch, trainer.epochs + 1):
            steps_before = (epoch - 1) * len(train_batches)
            training = loop.train_epoch(
                model,
                loss_fn,
                optimizer,
                precision,
                train_batches,
                trainer.log_interval,
                partial(record.step, epoch, steps_before),
                f"epoch {epoch}/{trainer.epochs}",
            )
            evaluation = loop.evaluate(model, loss_fn, precision, test_batches, len(data.classes))
            record.epoch(
                epoch, steps_before + len(train_batches), training, evaluation, data.classes
            )
            if epoch % trainer.checkpoint_every == 0 or epoch == trainer.epochs:
                record.checkpoint(devices.unwrap(model), optimizer, epoch, seeding.capture(shuffle))
            _log_epoch(epoch, trainer.epochs, training, evaluation)
        results = record.complete(measure.peak_memory_mb(plan.device))

    _log_summary(results, plan, run_dir)
    return results["best_test_accuracy"]


def _build_model(
    cfg: DictConfig,
    data: datasets.ImageData,
    placement: Placement,
    plan: devices.DevicePlan,
    channels_last: bool,
) -> nn.Module:
    """The model on its device, in its memory format, wrapped for several GPUs or processes,
    and compiled, as the config asks."""
    model = models.build_for(cfg.model, data.shape, len(data.classes), data.name)
    model = placement.module(model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = devices.parallelize(model, plan)
    if cfg.trainer.compile:
        model = torch.compile(model, backend=cfg.trainer.compile)
    return model


def _checkpoint_to_resume(cfg: DictConfig) -> dict[str, Any]:
    """The checkpoint `resume=` names, if it has epochs left to train (checked before the run's
    records are touched, so a refused resume leaves them as they were)."""
    checkpoint = checkpoints.load(checkpoints.find(cfg.resume))
    if checkpoint["epoch"] >= cfg.trainer.epochs:
        raise ExperimentError(
            f"resume={cfg.resume} has trained {checkpoint['epoch']} epochs of "
            f"trainer.epochs={cfg.trainer.epochs} already; ask for more with trainer.epochs=N"
        )
    return checkpoint


def _prepare_device(
    cfg: DictConfig, processes: distributed.Processes, job_slot: int | None
) -> devices.DevicePlan:
    """Threads, visible GPUs and deterministic algorithms first (before CUDA starts); then the
    device for this process, and the process group when there are several."""
    if cfg.trainer.threads is not None:
        torch.set_num_threads(cfg.trainer.threads)
    devices.set_visible(cfg.device.visible)
    if cfg.trainer.deterministic:
        seeding.make_deterministic()
    plan = devices.resolve(cfg.device, devices.Machine.detect(), job_slot, processes)
    devices.select(plan)
    if plan.backend:
        distributed.start(processes, plan.backend, plan.device, cfg.device.timeout)
    chosen = f", chosen by device={cfg.device.name} because {plan.reason}" if plan.reason else ""
    log.info("device: %s%s", plan, chosen)
    measure.reset_peak_memory(plan.device)
    return plan


def _log_start(
    cfg: DictConfig,
    data: datasets.ImageData,
    train_batches: datasets.Batches,
    test_batches: datasets.Batches,
    plan: devices.DevicePlan,
    processes: distributed.Processes,
) -> None:
    shared = f" over {processes.world_size} processes ({plan.backend})" if plan.backend else ""
    log.info(
        "training %s on %s (%d train / %d test images, %s) with %s placement, %s, batch %d%s",
        cfg.model.name,
        data.name,
        train_batches.count_images(),
        test_batches.count_images(),
        "x".join(map(str, data.shape)),
        cfg.placement.name,
        cfg.optimizer.name,
        cfg.trainer.batch_size,
        shared,
    )


def _log_epoch(
    epoch: int, epochs: int, training: loop.Training, evaluation: loop.Evaluation
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


def _log_summary(results: dict[str, Any], plan: devices.DevicePlan, run_dir: Path) -> None:
    log.info("test accuracy per class: %s", per_class_text(results["class_accuracy"]))
    log.info(
        "completed: test accuracy %.1f%% (best %.1f%% at epoch %d), %s img/s on %s, "
        "%d epoch(s) in %.1f s -> %s",
        100 * results["final_test_accuracy"],
        100 * results["best_test_accuracy"],
        results["best_epoch"],
        f"{results['train_images_per_second']:,.0f}",
        plan,
        results["epochs"],
        results["total_seconds"],
        shown(run_dir),
    )
