"""The story of one evaluation: a checkpoint's model on a test split, on a device.

`experiments.cli` calls `evaluate` with the config Hydra composed (conf/eval.yaml) and the folder
it made for this evaluation; results.json there holds overall and per-class accuracy and loss.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import nn

from experiments import checkpoints, devices, loop, models, tuning
from experiments import data as datasets
from experiments.config import build
from experiments.errors import ExperimentError
from experiments.records import Results, per_class_text, shown

log = logging.getLogger("experiments")


def evaluate(cfg: DictConfig, run_dir: Path) -> float:
    """Evaluate the checkpoint `cfg.ckpt` names; returns its test accuracy."""
    if OmegaConf.is_missing(cfg, "ckpt"):
        raise ExperimentError("ckpt is required: python eval.py ckpt=<run folder or checkpoint>")
    path = checkpoints.find(cfg.ckpt)
    fields = {"kind": "evaluation", "checkpoint": str(path.resolve())}
    with Results(run_dir, fields) as results:
        if cfg.batch_size < 1:
            raise ExperimentError(f"batch_size={cfg.batch_size} must be a whole number >= 1")
        if cfg.limit_batches is not None and cfg.limit_batches < 1:
            raise ExperimentError(f"limit_batches={cfg.limit_batches} must be >= 1, or null")
        plan = devices.resolve(cfg.device, devices.Machine.detect())
        devices.select(plan)
        results.fields["device"] = {"requested": devices.requested(cfg.device)}
        results.fields["device"].update(devices.describe(plan))
        state = checkpoints.load(path, map_location=plan.device)
        trained = OmegaConf.create(state["config"])
        data = datasets.load(cfg.dataset if cfg.dataset is not None else trained.dataset)

        model = models.build_for(trained.model, data.shape, len(data.classes), data.name)
        model.load_state_dict(state["model"])
        placement = build(cfg.placement, device=plan.device)
        model = placement.module(model)
        loss_fn = placement.module(nn.CrossEntropyLoss())
        test_batches = datasets.Batches(
            data.test, cfg.batch_size, data, placement, limit=cfg.limit_batches
        )
        devices.audit(model, loss_fn, next(iter(test_batches)), plan)
        precision = tuning.Precision("32", plan.device)
        evaluation = loop.evaluate(model, loss_fn, precision, test_batches, len(data.classes))
        outcome = results.finish(
            "completed",
            None,
            model=trained.model.name,
            trained_on=trained.dataset.name,
            trained_epochs=state["epoch"],
            dataset=data.name,
            test_images=test_batches.count_images(),
            test_accuracy=evaluation.accuracy,
            test_loss=evaluation.loss,
            class_accuracy=dict(zip(data.classes, evaluation.class_accuracy, strict=True)),
            seconds=evaluation.seconds,
        )
    _log_outcome(outcome, plan, run_dir)
    return evaluation.accuracy


def _log_outcome(outcome: dict[str, Any], plan: devices.DevicePlan, run_dir: Path) -> None:
    log.info("test accuracy per class: %s", per_class_text(outcome["class_accuracy"]))
    log.info(
        "evaluated %s (%d epochs on %s) on %s: test accuracy %.1f%%, test loss %.4f, "
        "%d images on %s -> %s",
        outcome["model"],
        outcome["trained_epochs"],
        outcome["trained_on"],
        outcome["dataset"],
        100 * outcome["test_accuracy"],
        outcome["test_loss"],
        outcome["test_images"],
        plan,
        shown(run_dir),
    )
