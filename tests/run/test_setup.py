"""Setting a run or an evaluation up: the process settings before the device; channels-last puts
the model and a preloaded split in that format; a task only for data of its kind."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches, TensorRows
from experiments.data.types import ImageData, Split
from experiments.devices import process_settings
from experiments.devices.process_group import ONE_PROCESS
from experiments.run import setup
from experiments.run.evaluate import dataset_to_evaluate
from experiments.training.models import Tudui
from helpers import compose_config, on


def test_channels_last_puts_the_model_in_that_format() -> None:
    def conv_weight(channels_last: bool) -> torch.Tensor:
        model = setup.place_model(Tudui(3, 32, 10), on("cpu", channels_last=channels_last))
        return model.features[0].weight

    assert conv_weight(True).is_contiguous(memory_format=torch.channels_last)
    assert not conv_weight(False).is_contiguous(memory_format=torch.channels_last)


def test_channels_last_batches_of_a_preloaded_split_keep_one_copy_of_it() -> None:
    # dataset.preload=device: the split goes to the device once, already laid out channels-last,
    # and the batches take their rows from that one copy (a second would double it on a GPU).
    config = compose_config(
        "dataset=synthetic",
        "dataset.train_size=8",
        "dataset.test_size=4",
        "dataset.preload=device",
    ).dataset
    runtime = on("cpu", channels_last=True)
    data = setup.load_data(config, runtime)
    assert isinstance(data.train, Split)
    preloaded = data.train.images

    batches = Batches(data.train, batch_size=4, mean=[0.5], std=[0.5], runtime=runtime)

    assert isinstance(batches.rows, TensorRows)
    assert batches.rows.images.untyped_storage().data_ptr() == (
        preloaded.untyped_storage().data_ptr()
    )
    (images, _), _ = batches
    assert images.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(images, preloaded[:4].float() / 127.5 - 1)


def test_loading_the_data_leaves_the_config_as_composed() -> None:
    # What the data tells of itself goes into a copy of the run's config, where the run takes it.
    cfg = compose_config("dataset=synthetic", "dataset.train_size=8", "dataset.test_size=4")
    composed = OmegaConf.to_container(cfg)
    data = setup.load_data(cfg.dataset, on("cpu"))
    told = setup.with_data_facts(cfg, data)
    assert OmegaConf.to_container(cfg) == composed
    assert (told.dataset.channels, told.dataset.num_classes) == (data.shape[0], len(data.classes))
    assert told.dataset.mean == data.mean and told.model.in_channels == data.shape[0]


def test_an_evaluation_fills_in_a_copy_of_the_dataset_it_was_asked_for() -> None:
    trained = compose_config("dataset=image_folder", "dataset.root=/photos").dataset
    trained.mean, trained.std, trained.channels, trained.image_size = [0.4], [0.2], 1, 28
    asked = compose_config("dataset=image_folder", "dataset.root=/other").dataset
    composed = OmegaConf.to_container(asked)
    evaluated = dataset_to_evaluate(asked, trained)
    assert OmegaConf.to_container(asked) == composed
    assert (evaluated.mean, evaluated.std, evaluated.channels, evaluated.image_size) == (
        [0.4],
        [0.2],
        1,
        28,
    )
    assert evaluated.root == "/other"


def test_the_device_is_decided_once_the_jobs_process_settings_are_applied() -> None:
    # Training and evaluation set the process up in the one call that decides the device.
    cfg = compose_config("device=cpu")
    settings = setup.ProcessSettings(threads=1, deterministic=True)
    with process_settings.restored():
        runtime = setup.prepare_runtime(cfg.device, cfg.placement, ONE_PROCESS, settings=settings)
        assert torch.get_num_threads() == 1
        assert torch.are_deterministic_algorithms_enabled()
    assert runtime.device == torch.device("cpu")


def test_a_task_is_built_only_for_data_of_the_kind_it_learns() -> None:
    classes = ImageData(
        "cifar10_sample",
        None,
        Split(torch.zeros(1, 3, 2, 2, dtype=torch.uint8), torch.zeros(1, dtype=torch.long)),
        ["cat", "dog"],
        [0.5],
        [0.5],
        (3, 2, 2),
    )
    assert (
        setup.build_task(compose_config("task=classification").task, classes).targets == "classes"
    )
    with pytest.raises(ExperimentError) as refused:
        setup.build_task(compose_config("task=regression").task, classes)
    assert str(refused.value) == (
        "task=regression learns values, but dataset cifar10_sample holds classes to predict; use "
        "task=classification, or a dataset of values"
    )
