"""Every option of every config group composes, and the schemas refuse wrong types and keys."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from experiments.cli import CONF_DIR
from experiments.config import CUDA_OPTIONS
from helpers import compose_config

GROUPS = ["model", "dataset", "device", "placement", "optimizer", "trainer", "experiment"]


def options(group: str) -> list[str]:
    found = sorted(path.stem for path in (CONF_DIR / group).glob("*.yaml"))
    if group == "device":
        found += [f"cuda:{index}" for index in range(CUDA_OPTIONS)]
    return found


@pytest.mark.parametrize(
    "override", [f"{group}={option}" for group in GROUPS for option in options(group)]
)
def test_every_option_composes_and_resolves(override: str) -> None:
    cfg = compose_config(override)
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert set(resolved) == {
        "model",
        "dataset",
        "device",
        "placement",
        "optimizer",
        "trainer",
        "resume",
        "replay",
    }
    group, _, option = override.partition("=")
    if group in ("model", "dataset", "placement", "optimizer"):
        assert resolved[group]["name"] == option


def test_the_groups_have_the_options_the_readme_promises() -> None:
    assert options("model") == ["lenet", "mlp", "network", "tudui"]
    assert options("dataset") == [
        "cifar10",
        "cifar10_sample",
        "fashion_mnist",
        "mnist",
        "mnist_sample",
        "synthetic",
    ]
    assert {"cpu", "cuda", "auto", "dp", "cuda:0", "cuda:15"} <= set(options("device"))
    assert options("placement") == ["cuda_call", "to_device"]
    assert options("optimizer") == ["adam", "sgd", "sgd_momentum"]
    assert options("experiment") == ["lenet_cifar10", "tudui_cifar10"]


def test_defaults_are_tudui_on_the_shipped_cifar10_sample_on_the_best_device() -> None:
    cfg = compose_config()
    assert (cfg.model.name, cfg.dataset.name, cfg.device.name) == (
        "tudui",
        "cifar10_sample",
        "auto",
    )
    assert (cfg.placement.name, cfg.optimizer.name, cfg.optimizer.lr) == ("to_device", "sgd", 0.01)


def test_models_take_their_shape_from_the_dataset() -> None:
    cfg = compose_config("model=lenet", "dataset=mnist_sample")
    assert (cfg.model.in_channels, cfg.model.image_size, cfg.model.num_classes) == (1, 28, 10)
    cfg = compose_config("dataset=synthetic", "dataset.image_size=64", "dataset.num_classes=6")
    assert (cfg.model.image_size, cfg.model.num_classes) == (64, 6)


def test_cuda_n_is_the_cuda_option_with_that_index() -> None:
    cfg = compose_config("device=cuda:7")
    assert (cfg.device.name, cfg.device.index) == ("cuda", 7)


def test_dp_takes_its_gpu_ids_from_the_command_line() -> None:
    assert compose_config("device=dp", "device.ids=[0,1,2]").device.ids == [0, 1, 2]


def test_experiment_tudui_cifar10_pins_the_tudui_tutorial() -> None:
    cfg = compose_config("experiment=tudui_cifar10")
    assert (cfg.model.name, cfg.dataset.name) == ("tudui", "cifar10")
    assert (cfg.trainer.batch_size, cfg.trainer.epochs) == (64, 10)
    assert (cfg.optimizer.name, cfg.optimizer.lr, cfg.optimizer.momentum) == ("sgd", 0.01, 0.0)


def test_experiment_lenet_cifar10_pins_the_pytorch_tutorial() -> None:
    cfg = compose_config("experiment=lenet_cifar10")
    assert (cfg.model.name, cfg.dataset.name) == ("lenet", "cifar10")
    assert (cfg.trainer.batch_size, cfg.trainer.epochs) == (4, 2)
    assert (cfg.optimizer.lr, cfg.optimizer.momentum) == (0.001, 0.9)


def test_an_experiment_can_still_be_overridden() -> None:
    cfg = compose_config("experiment=lenet_cifar10", "trainer.epochs=5", "dataset=cifar10_sample")
    assert (cfg.trainer.epochs, cfg.dataset.name) == (5, "cifar10_sample")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.epochs=many", "could not be converted to Integer"),
        ("optimizer.lr=fast", "could not be converted to Float"),
        ("trainer.epochs_count=3", "Key 'epochs_count' not in 'TrainerConfig'"),
        ("model.dropout=0.5", "Key 'dropout' not in 'ModelConfig'"),
        ("device.ids=[a]", "could not be converted to Integer"),
    ],
)
def test_schemas_refuse_wrong_types_and_unknown_keys(override: str, message: str) -> None:
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(override)
    assert message in str(error.value) + str(error.value.__cause__)
