"""The parts of a training run, in the order the trainer builds them, each recording its setup."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from experiments.config.build import as_written, plain
from experiments.config.choices import AUTO_BATCH, Interval
from experiments.core.errors import ExperimentError
from experiments.data import fingerprint, subset
from experiments.data.augment import Augment
from experiments.data.batches import Batches
from experiments.data.epoch_length import optimizer_steps
from experiments.data.types import ImageData, Split, Streamed
from experiments.devices import memory, precision, wrapping
from experiments.devices.description import device_record
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.process_group import ProcessGroup
from experiments.devices.runtime import Runtime
from experiments.devices.wrapping import unwrap
from experiments.records import checkpoints, environment
from experiments.records.recorded import SetupRecord
from experiments.records.results import Results
from experiments.records.resume import TrainingState
from experiments.run import job, setup
from experiments.training import (
    batch_search,
    loop,
    model_size,
    models,
    optimizers,
    schedules,
    seeding,
)
from experiments.training.batch_choice import Rule
from experiments.training.ema import ModelAverage
from experiments.training.selection import Monitor, require_validation
from experiments.training.tasks import Classification, Task
from experiments.training.weights import load_weights

log = logging.getLogger("experiments")


def device(
    cfg: DictConfig, group: ProcessGroup, free_gpus: FreeGpus | None, results: Results, new: bool
) -> Runtime:
    """The process's settings and the device; the environment recorded for a `new` run."""
    trainer = cfg.trainer
    runtime = setup.prepare_runtime(
        cfg.device,
        cfg.placement,
        group,
        free_gpus,
        settings=setup.ProcessSettings(
            trainer.threads, trainer.deterministic, trainer.cudnn_benchmark
        ),
        precision_name=trainer.precision,
        channels_last=trainer.channels_last,
    )
    results.add(SetupRecord, deterministic=torch.are_deterministic_algorithms_enabled())
    if group.is_main and new:
        environment.write(results.path.parent)
    if trainer.keep_freed_memory:
        results.add(SetupRecord, keep_freed_memory=memory.keep_freed_memory())
    results.add(SetupRecord, device=device_record(cfg.device, runtime.plan))
    if trainer.deterministic:
        runtime.backend.refuse_nondeterministic()
    if note := precision.emulated_bf16(trainer.precision, runtime.plan):
        log.warning(note)
        results.add(SetupRecord, precision_note=note)
    results.add(SetupRecord, channels_last=runtime.channels_last)
    setup.check_compiling("trainer.", trainer, cfg.device, runtime)
    if trainer.compile_mode is not None:
        results.add(SetupRecord, compile_mode=trainer.compile_mode)
    return runtime


@dataclass(frozen=True)
class Prepared:
    """The run so far; `cfg` with what the data told of itself and the batch a search found."""

    cfg: DictConfig
    runtime: Runtime
    results: Results
    data: ImageData
    task: Task
    monitor: Monitor | None


def data_and_task(cfg: DictConfig, runtime: Runtime, results: Results) -> Prepared:
    """The splits, their task, and with a validation split what selects epochs on it."""
    data = setup.load_data(cfg.dataset, runtime)
    cfg = setup.with_data_facts(cfg, data)
    job.refuse_targets_not_typed(cfg)  # (an interpolation may read the data's fields)
    results.add(SetupRecord, data=data.data_record())
    task = setup.build_task(cfg.task, data)
    require_validation(cfg, has_validation=data.val is not None)
    monitor = Monitor.from_config(cfg) if data.val is not None else None
    return Prepared(cfg, runtime, results, data, task, monitor)


def model(prepared: Prepared, new: bool) -> tuple[nn.Module, model_size.ModelSize]:
    """The model as built, `model.weights` loaded into a `new` run's, measured, on the device."""
    cfg, task, data, results = prepared.cfg, prepared.task, prepared.data, prepared.results
    trainer = cfg.trainer
    seeding.seed_everything(trainer.seed)
    built = setup.build_model(cfg.model, cfg.task.name, task, data, from_checkpoint=not new)
    if cfg.model.get("weights") and new:
        partial = bool(cfg.model.get("weights_partial"))
        left = load_weights(built, cfg.model.weights, partial)
        if partial:  # (without it, every tensor was loaded)
            results.add(SetupRecord, weights_left_as_built=left)
            if left:
                log.info(
                    f"model.weights={cfg.model.weights} loaded but for {len(left)} tensor(s), "
                    f"left as built: {', '.join(left)}"
                )
    size = model_size.measure(built, data.shape, models.HOST)
    results.add(SetupRecord, **size.record())
    placed = setup.place_model(
        built, prepared.runtime, trainer.compile, trainer.sync_batchnorm, trainer.compile_mode
    )
    if note := wrapping.sync_batchnorm_waits(placed):
        log.info(note)
    return placed, size


def batch_size(
    prepared: Prepared, placed: nn.Module, resumed: dict[str, Any] | None
) -> tuple[Prepared, dict[str, Any] | None]:
    """With trainer.batch_size=auto, the run with the batch a search found, and the search."""
    cfg, data, runtime, results = prepared.cfg, prepared.data, prepared.runtime, prepared.results
    trainer = cfg.trainer
    if trainer.batch_size != AUTO_BATCH:
        return prepared, None
    if resumed is not None:
        search = resumed[checkpoints.BATCH_SEARCH]
        batch = search["trained"]
        log.info("trainer.batch_size=auto: %d, as its search found before the resume", batch)
    else:
        assert data.train is not None
        task, budget = runtime.placement.module(prepared.task), trainer.memory_budget_gb
        trial = batch_search.Trial(unwrap(placed), task, cfg.optimizer, data, runtime, budget)
        fewest = loop.fewest_images(placed, processes=1)
        rule = Rule(trainer.auto_batch, trainer.auto_batch_min_steps, trainer.auto_batch_halvings)
        found = batch_search.search(trial, fewest, rule, trainer.accumulate_batches)
        line = batch_search.search_line(found, cfg.optimizer.lr, str(runtime.plan), data.unit.rate)
        log.log(logging.WARNING if batch_search.too_few_steps(found) else logging.INFO, line)
        search, batch = found.record(), found.batch
    results.add(SetupRecord, batch_search=search, batch_size=batch, per_process_batch_size=batch)
    merged = OmegaConf.merge(cfg, {"trainer": {"batch_size": batch}})
    return dataclasses.replace(prepared, cfg=merged), search


@dataclass(frozen=True)
class Optimization:
    """How the run learns, over the splits' batches, and the `state` its checkpoints save."""

    learner: loop.Learner
    scheduler: LRScheduler
    train_batches: Batches
    test_batches: Batches
    val_batches: Batches | None
    steps_per_epoch: int
    state: TrainingState


def optimization(
    prepared: Prepared, placed: nn.Module, search: dict[str, Any] | None
) -> Optimization:
    """The optimizer and schedule over the splits' batches, and the state checkpoints save."""
    cfg, data, runtime, results = prepared.cfg, prepared.data, prepared.runtime, prepared.results
    trainer = cfg.trainer
    placed_task = runtime.placement.module(prepared.task)
    optimizer, fused = optimizers.build_optimizer(cfg.optimizer, placed, runtime.type)
    cudnn_benchmark = trainer.cudnn_benchmark and runtime.backend.uses_cudnn
    results.add(SetupRecord, optimizer_fused=fused, cudnn_benchmark=cudnn_benchmark)
    if note := optimizers.host_waits_at_every_step(optimizer, runtime.scaler, runtime.type):
        log.info(note)
    # The same shuffle (and augmentation) in every process; each takes its share of a batch.
    shuffle = torch.Generator().manual_seed(trainer.seed)
    splits = _batches(prepared, placed, shuffle)
    steps = optimizer_steps(len(splits[0]), trainer.accumulate_batches)
    scheduler, interval = schedules.for_run(
        cfg.scheduler, optimizer, epochs=trainer.epochs, steps_per_epoch=steps
    )
    learner = loop.Learner(
        placed,
        placed_task,
        optimizer,
        scheduler if interval == Interval.step else None,
        trainer.gradient_clip,
        trainer.stop_on_divergence,
        trainer.accumulate_batches,
        cuda_graphs=setup.uses_cuda_graphs(trainer.compile, trainer.compile_mode),
        ema=_moving_average(cfg, placed, steps, results),
    )
    state = TrainingState(
        model=unwrap(placed),
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=runtime.scaler,
        shuffle=shuffle,
        gpus=runtime.plan.gpus,
        config=plain(as_written(cfg)),
        data=fingerprint.data_fingerprint(data, cfg.dataset),  # what a resume must find again
        steps_per_epoch=steps,
        ema=learner.ema,
        batch_search=search,
    )
    return Optimization(learner, scheduler, *splits, steps, state)


def _moving_average(
    cfg: DictConfig, placed: nn.Module, steps_per_epoch: int, results: Results
) -> ModelAverage | None:
    """The moving average of the weights the run evaluates in their stead (trainer.ema.decay)."""
    ema, epochs = cfg.trainer.ema, cfg.trainer.epochs
    results.add(SetupRecord, evaluated_weights="model" if ema.decay is None else "ema")
    if ema.decay is None:
        return None
    steps = epochs * steps_per_epoch
    if ema.every > steps:
        raise ExperimentError(
            f"trainer.ema.every={ema.every} updates the average of the weights every "
            f"{ema.every} optimizer steps, and the run takes {steps} ({epochs} "
            f"epoch{'s' * (epochs != 1)} of {steps_per_epoch}): it would evaluate the "
            f"weights as built; use trainer.ema.every={steps} or fewer"
        )
    log.info(
        "validation and test evaluate the moving average of the model's weights "
        f"(trainer.ema.decay={ema.decay}), not the model's own"
    )
    return ModelAverage(unwrap(placed), ema.decay, ema.every, ema.warmup_steps)


def _batches(
    prepared: Prepared, placed: nn.Module, shuffle: torch.Generator
) -> tuple[Batches, Batches, Batches | None]:
    """Train, test and val batches, the training split's shuffled (and augmented) by `shuffle`."""
    cfg, data, runtime, task = prepared.cfg, prepared.data, prepared.runtime, prepared.task
    trainer = cfg.trainer
    augment = Augment(**cfg.dataset.augment, generator=shuffle, num_classes=cfg.dataset.num_classes)
    # Not `config.validate`'s: a task of one's own says what its targets are once it is built.
    probabilities = isinstance(task, Classification)
    if refusal := augment.refusal(cfg.task.name, task.targets, takes_probabilities=probabilities):
        raise ExperimentError(refusal)
    world_size = runtime.group.world_size
    assert data.train is not None
    fewest = loop.fewest_images_per_batch(placed, trainer.batch_size, world_size)
    batch, images = trainer.batch_size, len(data.train)
    loop.refuse_a_split_too_small(batch, images, fewest, world_size, data.unit)
    train = _split_batches(cfg, data, data.train, runtime, shuffle, augment, fewest)
    if note := loop.left_out_note(train, world_size):
        log.info(note)
    test = _split_batches(cfg, data, data.test, runtime)
    val = _split_batches(cfg, data, data.val, runtime) if data.val is not None else None
    prepared.results.add(
        SetupRecord, test_images=test.count_images(), test_split_images=len(data.test)
    )
    return train, test, val


def _split_batches(
    cfg: DictConfig,
    data: ImageData,
    split: Split | Streamed,
    runtime: Runtime,
    shuffle: torch.Generator | None = None,
    augment: Augment | None = None,
    fewest: int = 1,
) -> Batches:
    """One split's batches: training's (`shuffle` given) limited in steps, evaluation's in rows."""
    trainer = cfg.trainer
    training = shuffle is not None
    limit_eval = (trainer.limit_eval_images, trainer.limit_eval_fraction)
    rows = None if training else subset.evaluated_rows(len(split), *limit_eval)
    if training and trainer.overfit_batches:
        # The same rows in the same order every epoch: no shuffle (augmentation still draws).
        count = min(len(split), trainer.overfit_batches * trainer.batch_size)
        rows, shuffle = subset.overfit_rows(len(split), count, trainer.seed), None
    return Batches(
        split,
        batch_size=trainer.batch_size,
        mean=data.mean,
        std=data.std,
        runtime=runtime,
        shuffle=shuffle,
        limit=trainer.limit_train_batches if training else None,
        subset=rows,
        augment=augment,
        fewest=fewest,
    )
