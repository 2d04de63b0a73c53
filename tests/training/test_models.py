"""The models have the tutorials' layers, sized from the dataset; shapes they can't take fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.training.models import MLP, LeNet, Network, ShapeError, Tudui, build_for
from helpers import compose_config


def layers(model: nn.Module) -> list[tuple[str, ...]]:
    """Each conv and linear layer as (kind, in, out[, kernel, padding])."""
    found = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            found.append(
                (
                    "conv",
                    module.in_channels,
                    module.out_channels,
                    *module.kernel_size[:1],
                    *module.padding[:1],
                )
            )
        elif isinstance(module, nn.Linear):
            found.append(("linear", module.in_features, module.out_features))
    return found


def test_tudui_on_cifar10_is_the_tutorials_network() -> None:
    model = Tudui(in_channels=3, image_size=32, num_classes=10)
    assert layers(model) == [
        ("conv", 3, 32, 5, 2),
        ("conv", 32, 32, 5, 2),
        ("conv", 32, 64, 5, 2),
        ("linear", 1024, 64),
        ("linear", 64, 10),
    ]
    assert sum(isinstance(m, nn.MaxPool2d) for m in model.modules()) == 3
    assert not any(isinstance(m, nn.ReLU) for m in model.modules())


def test_lenet_on_cifar10_is_the_pytorch_tutorials_net() -> None:
    model = LeNet(in_channels=3, image_size=32, num_classes=10)
    assert layers(model) == [
        ("conv", 3, 6, 5, 0),
        ("conv", 6, 16, 5, 0),
        ("linear", 400, 120),
        ("linear", 120, 84),
        ("linear", 84, 10),
    ]
    assert sum(isinstance(m, nn.ReLU) for m in model.modules()) == 4


def test_network_on_mnist_is_the_mnist_tutorials_network() -> None:
    model = Network(in_channels=1, image_size=28, num_classes=10)
    assert layers(model) == [
        ("conv", 1, 6, 5, 0),
        ("conv", 6, 12, 5, 0),
        ("linear", 192, 120),
        ("linear", 120, 60),
        ("linear", 60, 10),
    ]


def test_mlp_takes_its_hidden_sizes_from_the_config() -> None:
    model = MLP(in_channels=3, image_size=64, num_classes=6, hidden_sizes=[25, 16])
    assert layers(model) == [("linear", 12288, 25), ("linear", 25, 16), ("linear", 16, 6)]
    assert sum(isinstance(m, nn.ReLU) for m in model.modules()) == 2


@pytest.mark.parametrize("model", [Tudui, LeNet, Network])
@pytest.mark.parametrize(("channels", "size"), [(3, 32), (1, 28), (3, 64)])
def test_conv_models_size_their_classifier_from_the_image(
    model: type[nn.Module], channels: int, size: int
) -> None:
    outputs = model(in_channels=channels, image_size=size, num_classes=7)(
        torch.zeros(2, channels, size, size)
    )
    assert outputs.shape == (2, 7)


def test_an_image_too_small_for_the_layers_is_refused() -> None:
    with pytest.raises(ShapeError, match="shrink 8x8 images to nothing"):
        LeNet(in_channels=3, image_size=8, num_classes=10)


def test_build_names_model_and_dataset_when_they_do_not_fit() -> None:
    cfg = compose_config("model=lenet", "dataset=synthetic", "dataset.image_size=8")
    with pytest.raises(ExperimentError) as error:
        build_for(cfg.model, (3, 8, 8), 10, "synthetic")
    assert str(error.value) == (
        "model lenet cannot take dataset synthetic (3x8x8 images): "
        "its layers shrink 8x8 images to nothing"
    )


def test_build_catches_a_channel_count_overridden_away_from_the_dataset() -> None:
    cfg = compose_config("model=tudui", "model.in_channels=1")
    with pytest.raises(ExperimentError, match="model tudui cannot take dataset cifar10_sample"):
        build_for(cfg.model, (3, 32, 32), 10, "cifar10_sample")


def test_build_catches_a_class_count_overridden_away_from_the_dataset() -> None:
    cfg = compose_config("model=mlp", "model.num_classes=5")
    with pytest.raises(ExperimentError, match="it gives 5 outputs per image for 10 classes"):
        build_for(cfg.model, (3, 32, 32), 10, "cifar10_sample")


def test_a_model_whose_module_cannot_be_imported_is_told_about_pythonpath() -> None:
    cfg = compose_config("model=custom", "model._target_=my_models.TinyCNN")
    with pytest.raises(ExperimentError) as error:
        build_for(cfg.model, (3, 32, 32), 10, "cifar10_sample")
    assert str(error.value) == (
        "model._target_=my_models.TinyCNN cannot be imported (No module named 'my_models'); put "
        "its module in the folder you run in, or its folder on PYTHONPATH"
    )


OWN_MODEL = """
from torch import nn


class Net(nn.Sequential):
    def __init__(self, in_channels, num_classes, width):  # no image_size: it pools to 1x1
        super().__init__(
            nn.Conv2d(in_channels, width, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(width, num_classes),
        )
        self.width = width
"""


def test_a_model_of_ones_own_gets_only_the_shape_arguments_its_constructor_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "own_models_for_build.py").write_text(OWN_MODEL)
    monkeypatch.syspath_prepend(tmp_path)
    cfg = compose_config(
        "model=custom",
        "model._target_=own_models_for_build.Net",
        "+model.width=16",
        "dataset=mnist_sample",
    )
    model = build_for(cfg.model, (1, 28, 28), 10, "mnist_sample")
    assert model.width == 16
    assert model[0].in_channels == 1
    assert cfg.model.name == "own_models_for_build.Net"
