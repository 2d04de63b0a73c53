"""The story of one run: check the request, load the data, build, train, evaluate, record.

`experiments.cli` calls `train` with the config Hydra composed and the run folder it made.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import nn

from experiments import data as datasets
from experiments import devices, distributed, loop, measure, models
from experiments.config import build, check_trainer
from experiments.records import RunRecord

log = logging.getLogger("experiments")


def train(cfg: DictConfig, run_dir: Path, job_slot: int | None = None) -> float:
    """Train as `cfg` says, recording everything in `run_dir`; returns the best test accuracy.

    `job_slot` is the job's number when sweep jobs run side by side; it spreads them over the GPUs.
    Under torchrun, every process runs this; process 0 writes the records.
    """
    trainer = cfg.trainer
    processes = distributed.Processes.from_env()
    # The process group (if any) is left last, after the records are written.
    with distributed.teardown(), RunRecord(run_dir, cfg, processes) as record:
        check_trainer(trainer, processes.world_size)
        if trainer.threads is not None:
            torch.set_num_threads(trainer.threads)
        devices.set_visible(cfg.device.visible)
        plan = devices.resolve(cfg.device, devices.Machine.detect(), job_slot, processes)
        devices.select(plan)
        if plan.backend:
            distributed.start(processes, plan.backend, plan.device, cfg.device.timeout)
        record.device(devices.describe(plan))
        chosen = (
            f", chosen by device={cfg.device.name} because {plan.reason}" if plan.reason else ""
        )
        log.info("device: %s%s", plan, chosen)
        measure.reset_peak_memory(plan.device)

        data = datasets.load(cfg.dataset)
        torch.manual_seed(trainer.seed)  # the same initial weights on every device and placement
        model = models.build_for(cfg.model, data.shape, len(data.classes), data.name)
        placement = build(cfg.placement, device=plan.device)
        model = devices.parallelize(placement.module(model), plan)
        loss_fn = placement.module(nn.CrossEntropyLoss())
        optimizer = build(cfg.optimizer)(model.parameters())

        # The same shuffle in every process; each takes its share of every batch.
        shuffle = torch.Generator().manual_seed(trainer.seed)
        train_batches = datasets.Batches(
            data.train,
            trainer.batch_size,
            data,
            placement,
            processes,
            shuffle,
            trainer.limit_train_batches,
        )
        test_batches = datasets.Batches(
            data.test,
            trainer.batch_size,
            data,
            placement,
            processes,
            limit=trainer.limit_eval_batches,
        )
        devices.audit(model, loss_fn, next(iter(test_batches)), plan)
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
            trainer.batch_size,
            shared,
        )

        for epoch in range(1, trainer.epochs + 1):
            steps_before = (epoch - 1) * len(train_batches)
            training = loop.train_epoch(
                model,
                loss_fn,
                optimizer,
                train_batches,
                trainer.log_interval,
                partial(record.step, epoch, steps_before),
                f"epoch {epoch}/{trainer.epochs}",
            )
            evaluation = loop.evaluate(model, loss_fn, test_batches, len(data.classes))
            record.epoch(epoch, training, evaluation, data.classes)
            record.checkpoint(devices.unwrap(model), optimizer, epoch)
            log.info(
                "epoch %d/%d: train loss %.4f, test loss %.4f, test accuracy %.1f%%, "
                "%s img/s, %.1f s",
                epoch,
                trainer.epochs,
                training.loss,
                evaluation.loss,
                100 * evaluation.accuracy,
                f"{training.images_per_second:,.0f}",
                training.seconds + evaluation.seconds,
            )
        results = record.complete(measure.peak_memory_mb(plan.device))

    per_class = ", ".join(
        f"{name} {'-' if accuracy is None else f'{100 * accuracy:.0f}%'}"
        for name, accuracy in results["class_accuracy"].items()
    )
    log.info("test accuracy per class: %s", per_class)
    log.info(
        "completed: test accuracy %.1f%% (best %.1f%% at epoch %d), %s img/s on %s, "
        "%d epoch(s) in %.1f s -> %s",
        100 * results["final_test_accuracy"],
        100 * results["best_test_accuracy"],
        results["best_epoch"],
        f"{results['train_images_per_second']:,.0f}",
        plan,
        trainer.epochs,
        results["total_seconds"],
        _shown(run_dir),
    )
    return results["best_test_accuracy"]


def _shown(path: Path) -> str:
    """The path relative to the working directory when it lies below it, as a user would type it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
