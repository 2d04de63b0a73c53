"""eval.py tests a run's checkpoint on the images its run was tested on, whatever either's batch
size, unless told otherwise (limit_images=, limit_fraction=; limit_fraction=1: the whole split).
(That batches of 64 and of 128 take the same images: tests/config/test_limit_eval.py.)"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from experiments.core.text import IMAGES
from experiments.data.subset import evaluated_rows
from experiments.devices import process_settings
from experiments.records import checkpoints
from experiments.run.evaluate import evaluate_checkpoint, evaluated_test_rows
from experiments.run.train import train
from helpers import SMALL, compose_config, results

TESTED = "trainer.limit_eval_images=100"  # of the shipped sample's 1,000 test images


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-epoch LeNet run tested on 100 images, in batches of 64."""
    folder = tmp_path_factory.mktemp("run")
    with process_settings.restored():
        train(compose_config(*SMALL, TESTED), folder)
    return folder


def test_eval_tests_on_its_runs_images_by_default(
    run_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = compose_config(f"ckpt={run_dir}", "device=cpu", config_name="eval")  # batches of 256
    with caplog.at_level(logging.INFO, logger="experiments"), process_settings.restored():
        accuracy = evaluate_checkpoint(cfg, tmp_path)
    assert "testing on the 100 test images its run was tested on" in caplog.text
    evaluation = results(tmp_path)
    assert (evaluation["test_images"], evaluation["test_split_images"]) == (100, 1000)
    # The same model on the same images.
    assert accuracy == results(run_dir)["test_accuracy"]


@pytest.fixture(scope="module")
def trained(run_dir: Path) -> DictConfig:
    """The run's config, as its checkpoint holds it."""
    return OmegaConf.create(checkpoints.load(run_dir / checkpoints.LAST)["config"])


def rows_for(trained: DictConfig, *overrides: str) -> list[int] | None:
    cfg = compose_config("ckpt=run", "device=cpu", *overrides, config_name="eval")
    rows = evaluated_test_rows(cfg, trained, 1000, IMAGES)
    return None if rows is None else rows.tolist()


def test_eval_tests_on_what_it_is_told_or_on_the_whole_split_of_other_data(
    trained: DictConfig,
) -> None:
    assert rows_for(trained) == evaluated_rows(1000, 100, None).tolist()
    assert rows_for(trained, "limit_images=300") == evaluated_rows(1000, 300, None).tolist()
    assert rows_for(trained, "limit_fraction=0.5") == evaluated_rows(1000, None, 0.5).tolist()
    assert rows_for(trained, "limit_fraction=1") is None  # the whole split
    # Other data than its run's: the run's images are not among them.
    assert rows_for(trained, "dataset=cifar10_sample") is None


def test_a_run_that_limited_batches_is_evaluated_on_its_first_batches(trained: DictConfig) -> None:
    # What a version that counted batches left in its checkpoint's config.
    old = copy.deepcopy(trained)
    del old.trainer["limit_eval_images"]
    old.trainer.limit_eval_batches = 2
    assert rows_for(old) == list(range(2 * 64))
