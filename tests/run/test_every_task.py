"""Regression and segmentation take the trainer's options as classification does: the `.cpu()`
placement, bf16, gradient accumulation, channels-last, early stopping; eval.py measures the last
checkpoint as the run did (in fp32, to bf16's precision) and times its answers as a classifier's,
and a replay trains to the same numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import BRIEF_BENCHMARK, eval_cli, metrics, numbers, results, train_cli

TASKS = {
    "regression": (
        ("task=regression", "dataset=csv", "model=mlp"),
        ("rmse", "mae", "r2"),
    ),
    "segmentation": (
        (
            "task=segmentation",
            "dataset=shapes",
            "dataset.train_size=160",
            "dataset.test_size=64",
            "model=unet",
            "model.base_channels=8",
            "trainer.channels_last=true",
        ),
        ("miou", "pixel_accuracy"),
    ),
}
OPTIONS = (
    "device=cpu",
    "placement=cuda_call",
    "trainer.precision=bf16",
    "trainer.accumulate_batches=2",
    "trainer.batch_size=16",
    "optimizer=adam",
    "optimizer.lr=0.003",
    "dataset.val_fraction=0.2",
    "trainer.epochs=4",
    # No epoch betters the first by this much: it stops after the second.
    "trainer.early_stopping.patience=1",
    "trainer.early_stopping.min_delta=1000",
)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_a_task_takes_the_trainers_options_evaluates_and_replays(tmp_path: Path, task: str) -> None:
    chosen, measured = TASKS[task]
    done = train_cli(tmp_path, *OPTIONS, *chosen)
    assert done.returncode == 0, done.stderr
    run_dir = done.run_dir
    result = results(run_dir)
    assert result["stopped_early"]["epoch"] == 2
    assert (result["placement"], result["precision"]) == ("cuda_call", "bf16")

    # Timed as a classifier is: its answers at batch 1 and at its run's batch.
    evaluated = eval_cli(tmp_path, f"ckpt={run_dir}", "benchmark=true", *BRIEF_BENCHMARK)
    assert evaluated.returncode == 0, evaluated.stderr
    evaluation = results(evaluated.run_dirs[-1])
    last_epoch = metrics(run_dir, "epoch")[-1]
    for metric in measured:  # (eval.py measures in fp32, the run measured in bf16)
        expected = last_epoch[f"test_{metric}"]
        assert evaluation[f"test_{metric}"] == pytest.approx(expected, rel=0.01)
    served = evaluation["serving"]
    assert served["batch_size"] == 16
    assert 0 < served["latency_p50_ms"] <= served["latency_p99_ms"]
    assert served["images_per_second"] > 0

    replayed = train_cli(tmp_path, f"replay={run_dir}")
    assert replayed.returncode == 0, replayed.stderr
    assert numbers(replayed.run_dirs[-1]) == numbers(run_dir)
