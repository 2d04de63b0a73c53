"""`experiment=resnet_recipe`: torchvision's reference recipe for ResNet, every option of it
trained together, shrunk to a few steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import compose_config, metrics, results, trained_run


def test_the_recipe_pins_the_reference_options() -> None:
    cfg = compose_config("experiment=resnet_recipe")
    assert (cfg.model.arch, cfg.optimizer.name, cfg.scheduler.name) == (
        "resnet18",
        "sgd_momentum",
        "cosine",
    )
    assert (cfg.optimizer.norm_weight_decay, cfg.trainer.label_smoothing) == (0.0, 0.1)
    assert cfg.trainer.ema.decay is not None and cfg.scheduler.warmup_epochs >= 1
    augment = cfg.dataset.augment
    assert (augment.policy, augment.mixup_alpha, augment.cutmix_alpha) == (
        "trivialaugment",
        0.2,
        1.0,
    )


def test_the_recipe_trains_with_every_option_on(tmp_path: Path) -> None:
    run = trained_run(
        tmp_path,
        "experiment=resnet_recipe",
        "device=cpu",
        "trainer.epochs=2",
        "trainer.batch_size=16",
        "trainer.limit_train_batches=2",
        "trainer.limit_eval_images=32",
    )
    record = results(run)
    assert record["status"] == "completed" and record["evaluated_weights"] == "ema"
    # Logged after each epoch's 2 steps: half-way up the warm-up's epoch from lr / 100, then
    # half-way down the cosine over the one epoch left.
    lrs = [row["lr"] for row in metrics(run, "step")]
    assert lrs == pytest.approx([0.0625 * (0.01 + 0.99 / 2), 0.0625 / 2])
