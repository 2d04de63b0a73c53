"""The story of one evaluation: a checkpoint's model on a test split, on a device."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from experiments.config import trust
from experiments.config.build import plain
from experiments.config.metric_names import TEST, TEST_LOSS, TaskMetrics, metric_key
from experiments.config.schemas import is_image_folder, is_users_data
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.core.text import Unit, display_path, part_of_split
from experiments.data import subset
from experiments.data.batches import Batches
from experiments.data.types import ImageData
from experiments.devices import memory
from experiments.devices.description import device_record
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.measuring import host_load
from experiments.devices.placement import audit
from experiments.devices.plan import DevicePlan, request_text
from experiments.devices.process_group import ONE_PROCESS
from experiments.devices.runtime import Runtime
from experiments.records import checkpoints, hparams, tracker
from experiments.records.hparams import Value
from experiments.records.metrics import MetricsWriter
from experiments.records.recorded import EvaluationRecord, ServingRecord, evaluation_record
from experiments.records.results import Results, per_class_text
from experiments.records.tracker import TrackedRun
from experiments.run import inference_benchmark, job, setup
from experiments.training import loop
from experiments.training.selection import Monitor
from experiments.training.tasks import Classification

log = logging.getLogger("experiments")


def evaluate_checkpoint(cfg: DictConfig, run_dir: Path, free_gpus: FreeGpus | None = None) -> float:
    """Evaluate the checkpoint `cfg.ckpt` names; returns its headline metric on the test split."""
    fields = {"kind": "evaluation", "device": {"requested": request_text(cfg.device)}}
    # Other work from here to the benchmark tells whether `threads` leaves it the cores it asks.
    started = host_load.snapshot(host_load.run_root(), host_load.cores())
    with (
        Results(run_dir, fields) as results,
        memory.out_of_memory_said("batch_size", cfg.batch_size),
    ):
        validate(cfg, backends=setup.compile_backends)
        path = checkpoints.find(cfg.ckpt)  # a run folder's, or a file
        results.add(EvaluationRecord, checkpoint=str(path.resolve()))
        # On the host, where the model takes them: onto a GPU, they would go there and back again.
        state = checkpoints.load(path)
        runtime = _prepare_runtime(cfg, free_gpus)
        results.add(EvaluationRecord, device=device_record(cfg.device, runtime.plan))
        trained = _to_build(state["config"], cfg, path)
        log.info("evaluating %s: %s", display_path(path), _which_epoch(path, state, trained))
        data = _data_to_evaluate(cfg.dataset, trained.dataset, runtime)
        results.add(EvaluationRecord, data=data.data_record())
        task = setup.build_task(trained.task, data)
        model = setup.build_model(
            trained.model, trained.task.name, task, data, from_checkpoint=True
        )
        weights, state_dict = checkpoints.evaluated_weights(state)
        model.load_state_dict(state_dict)
        model = setup.place_model(model, runtime, cfg.compile, compile_mode=cfg.compile_mode)
        cuda_graphs = setup.uses_cuda_graphs(cfg.compile, cfg.compile_mode)
        test_batches = Batches(
            data.test,
            batch_size=cfg.batch_size,
            mean=data.mean,
            std=data.std,
            runtime=runtime,
            subset=evaluated_test_rows(cfg, trained, len(data.test), data.unit),
        )
        task = runtime.placement.module(task)
        audit(model, task, next(iter(test_batches)), runtime.plan)
        evaluation = loop.evaluate(model, test_batches, runtime, task, cuda_graphs)
        served = _benchmarked(cfg, trained, model, data, runtime, started)
        outcome = results.finish(
            "completed",
            None,
            evaluation_record(task.metrics),
            model=trained.model.name,
            trained_on=trained.dataset.name,
            trained_epochs=state["epoch"],
            evaluated_weights=weights,
            dataset=data.name,
            test_images=test_batches.count_images(),
            test_split_images=len(data.test),
            **_measured(evaluation, data.classes),
            **served,
        )
    _log_outcome(outcome, runtime.plan, run_dir, task.metrics, data.unit)
    _track(cfg, run_dir, outcome, _described(cfg, outcome, runtime))
    return outcome[task.metrics.headline.key(TEST)]


def _benchmarked(
    cfg: DictConfig,
    trained: DictConfig,
    model: nn.Module,
    data: ImageData,
    runtime: Runtime,
    since: host_load.Snapshot | None,
) -> dict[str, ServingRecord]:
    """results.json's `serving` with benchmark=true (`since`: when the evaluation began)."""
    if not cfg.benchmark:
        return {}
    batch = trained.trainer.batch_size if "trainer" in trained else cfg.batch_size
    return {"serving": inference_benchmark.benchmark(cfg, model, data, runtime, batch, since)}


def _prepare_runtime(cfg: DictConfig, free_gpus: FreeGpus | None) -> Runtime:
    runtime = setup.prepare_runtime(
        cfg.device,
        cfg.placement,
        ONE_PROCESS,
        free_gpus,
        settings=setup.ProcessSettings(threads=cfg.threads),
        precision_name=cfg.precision,
        channels_last=cfg.channels_last,
        settings_prefix="",
    )
    setup.check_compiling("", cfg, cfg.device, runtime)
    return runtime


def _described(cfg: DictConfig, outcome: dict[str, Any], runtime: Runtime) -> dict[str, Value]:
    """The trackers' columns: what was evaluated, where and how, and the keys the command set."""
    described: dict[str, Value] = {
        "model": outcome["model"],
        "dataset": outcome["dataset"],
        "device": str(runtime.plan),
        "placement": cfg.placement.name,
        "precision": str(cfg.precision),
        "seed": cfg.seed,
    }
    for override in job.overrides():
        key = override.partition("=")[0].lstrip("+~")
        typed = override.partition("=")[2]
        # (A key a model of one's own interpolates from the dataset eval.py may not have: typed.)
        value = OmegaConf.select(cfg, key, default=typed, throw_on_resolution_failure=False)
        value = typed if value is None else value
        if key not in described and key != "ckpt" and not isinstance(value, DictConfig):
            described[key] = value if isinstance(value, bool | int | float | str) else str(value)
    return described


def _track(
    cfg: DictConfig, run_dir: Path, outcome: dict[str, Any], described: dict[str, Value]
) -> None:
    """The test metrics (`test/accuracy`), the benchmark's and the HParams row to the trackers."""
    if not (chosen := tracker.trackers(cfg.tracker, run_dir)):
        return
    numbers = tracker.epoch_scalars(outcome)
    if "serving" in outcome:
        numbers |= inference_benchmark.tracked_numbers(outcome["serving"])
    found = {tag: value for tag, value in numbers.items() if isinstance(value, int | float)}
    sweep = job.sweep_folder()
    tags = {key: str(described[key]) for key in tracker.TAGS}
    run = TrackedRun(
        name=run_dir.name,
        group=sweep,
        # Unresolved: a model of one's own may interpolate the dataset eval.py does not have.
        parameters=tracker.flattened(OmegaConf.to_container(cfg, resolve=False)),  # type: ignore[arg-type]
        tags=tags | ({"sweep": sweep} if sweep else {}),
    )
    with MetricsWriter(run_dir, True, chosen) as metrics_writer:
        metrics_writer.begin(run, {})
        for each in metrics_writer.trackers:
            each.scalars(found, 0)
        final = {tag.replace("/", "_"): value for tag, value in found.items()}
        metrics_writer.hyperparameters(described, final, 0, hparams.swept_columns(job.swept_keys()))


def _data_to_evaluate(asked: DictConfig | None, trained: DictConfig, runtime: Runtime) -> ImageData:
    """The test split asked for, refused unless it has the model's classes, in their order."""
    dataset = dataset_to_evaluate(asked, trained)
    data = setup.load_data(dataset, runtime, training=False)
    _check_classes(data.classes, trained, dataset)
    return data


def _measured(evaluation: loop.EvaluationResult, classes: list[str]) -> dict[str, Any]:
    measured: dict[str, Any] = {TEST_LOSS: evaluation.loss}
    measured |= {metric_key(TEST, name): value for name, value in evaluation.metrics.items()}
    if evaluation.class_accuracy is not None:
        measured["class_accuracy"] = dict(zip(classes, evaluation.class_accuracy, strict=True))
    return measured | {"seconds": evaluation.seconds}


def _to_build(config: dict[str, Any], cfg: DictConfig, path: Path) -> DictConfig:
    """The checkpoint's config, refused if it would build a target neither shipped nor typed now."""
    trained = OmegaConf.create(config)
    if "task" not in trained:  # a run before the task group: a classifier's
        classifier = f"{Classification.__module__}.{Classification.__name__}"
        trained.task = {"name": "classification", "_target_": classifier}
    typed = trust.NOTHING_TYPED
    for key in ("model", "task"):
        if cfg.get(key) is not None and cfg[key].get("_target_"):
            # Unresolved: a model=custom's shape fields point into a dataset eval.py may not have.
            typed |= trust.Built.in_config(OmegaConf.to_container(cfg[key]), key)
            trained[key]._target_ = cfg[key]._target_
    built = {"model": plain(trained.model), "task": plain(trained.task)}
    if cfg.dataset is None:
        built["dataset"] = plain(trained.dataset)
    where = f"checkpoint {display_path(path)}"
    trust.refuse_untrusted(trust.Built.in_config(built), typed, where, _typed_for_eval)
    return trained


def _typed_for_eval(found: trust.Target) -> str:
    if found.key == "model._target_":
        return f"add model=custom model._target_={found.target} if you trust it"
    if found.key == "task._target_":
        return f"add +task._target_={found.target} if you trust it"
    if found.key.startswith("dataset."):
        return (
            f"evaluate on data you name: dataset=custom dataset.source._target_={found.target} "
            "with its +dataset.source.<argument>= values, if you trust it"
        )
    return (
        f"add model=custom model._target_=<its class> +{found.key}={found.target} if you trust it"
    )


def _which_epoch(path: Path, state: dict[str, Any], trained: DictConfig) -> str:
    averaged = " (the moving average of its weights)" if state.get("ema") is not None else ""
    if path.name == checkpoints.BEST.name:
        return f"epoch {state['epoch']}{averaged}, selected by {Monitor.from_config(trained)}"
    if path.name == checkpoints.LAST.name:
        return f"epoch {state['epoch']}{averaged}, the last its run saved"
    return f"epoch {state['epoch']}{averaged}"


def evaluated_test_rows(
    cfg: DictConfig, trained: DictConfig, in_split: int, unit: Unit
) -> torch.Tensor | None:
    """The test rows limit_*= take, else those the run tested on, on its data; None: all."""
    if cfg.limit_images is not None or cfg.limit_fraction is not None:
        return subset.evaluated_rows(in_split, cfg.limit_images, cfg.limit_fraction)
    if cfg.dataset is not None:
        return None
    run = trained.trainer
    if run.get("limit_eval_batches"):  # a run of a version that tested on its first batches
        count = run.limit_eval_batches * run.batch_size
        rows = torch.arange(count) if count < in_split else None
    else:
        limits = (run.get("limit_eval_images"), run.get("limit_eval_fraction"))
        rows = subset.evaluated_rows(in_split, *limits)
    if rows is not None:
        log.info(
            f"testing on the {len(rows):,} test {unit.many} its run was tested on "
            f"(limit_fraction=1 tests on all {in_split:,})"
        )
    return rows


def dataset_to_evaluate(asked: DictConfig | None, trained: DictConfig) -> DictConfig:
    """The dataset asked for (None: the one trained on), with the model's normalization and size."""
    if asked is None:
        return trained
    filled = {key: trained[key] for key in ("mean", "std") if asked[key] is None}
    if is_users_data(asked):
        filled |= {"channels": trained.channels, "image_size": trained.image_size}
    return OmegaConf.merge(asked, filled)


def _check_classes(classes: list[str], trained: DictConfig, dataset: DictConfig) -> None:
    known = list(trained.classes or [str(label) for label in range(trained.num_classes)])
    if classes == known:
        return
    missing, extra = sorted(set(known) - set(classes)), sorted(set(classes) - set(known))
    where = (
        f"dataset.root={dataset.root}" if is_image_folder(dataset) else f"dataset {dataset.name}"
    )
    if not missing and not extra:
        raise ExperimentError(
            f"{where} has the classes the model was trained on in another order "
            f"({', '.join(classes)}; trained: {', '.join(known)})"
        )
    parts = [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"not trained on {', '.join(extra)}"] if extra else []
    raise ExperimentError(
        f"{where} has other classes than those the model was trained on "
        f"({trained.name}): {'; '.join(parts)}"
    )


def _log_outcome(
    outcome: dict[str, Any], plan: DevicePlan, run_dir: Path, measures: TaskMetrics, unit: Unit
) -> None:
    if "class_accuracy" in outcome:
        per_class = per_class_text(outcome["class_accuracy"])
        log.info("test %s per class: %s", measures.per_class, per_class)
    if "serving" in outcome:
        served = inference_benchmark.serving_line(outcome["serving"], unit)
        log.info("served on %s: %s", plan, served)
        if interference := outcome["serving"]["host_interference"]:
            log.warning(interference)
    part = part_of_split(outcome["test_images"], outcome["test_split_images"])
    tested = f"{part} test {unit.many}" if part else f"{outcome['test_images']} {unit.many}"
    headline = measures.headline
    log.info(
        f"evaluated {outcome['model']} ({outcome['trained_epochs']} epochs on "
        f"{outcome['trained_on']}) on {outcome['dataset']}: test {headline.name} "
        f"{headline.text(outcome[headline.key(TEST)])}, test loss {outcome[TEST_LOSS]:.4f}, "
        f"{tested} on {plan} -> {display_path(run_dir)}"
    )
