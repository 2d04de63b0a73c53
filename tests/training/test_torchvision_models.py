"""torchvision's classification architectures by name, fitted to the data's channels and classes;
weights from a local state-dict file; names and files that do not fit, refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.training.weights import load_weights
from helpers import model_by_name


def torchvision_model(arch: str, shape: tuple[int, int, int], classes: int = 10) -> nn.Module:
    return model_by_name("torchvision", arch, shape, classes)


def refusal(arch: str, shape: tuple[int, int, int] = (3, 32, 32)) -> str:
    with pytest.raises(ExperimentError) as error:
        torchvision_model(arch, shape)
    return str(error.value)


def test_the_first_convolution_takes_grey_images_and_the_classifier_the_classes() -> None:
    model = torchvision_model("mobilenet_v3_small", (1, 32, 32), classes=7)
    first = model.features[0][0]
    assert isinstance(first, nn.Conv2d)
    assert (first.in_channels, first.out_channels) == (1, 16)
    assert (first.kernel_size, first.stride, first.padding) == ((3, 3), (2, 2), (1, 1))
    assert first.bias is None
    assert model.classifier[-1].out_features == 7
    assert model(torch.zeros(2, 1, 32, 32)).shape == (2, 7)


def test_colour_images_keep_the_architectures_own_first_convolution() -> None:
    model = torchvision_model("squeezenet1_1", (3, 32, 32))
    assert model.features[0].in_channels == 3
    assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 10)


def test_auxiliary_classifiers_are_left_out_so_training_gives_one_output() -> None:
    model = torchvision_model("googlenet", (3, 32, 32))
    model.train()
    assert isinstance(model(torch.zeros(2, 3, 32, 32)), torch.Tensor)


@pytest.mark.slow
def test_a_vision_transformer_is_built_for_the_image_size() -> None:
    model = torchvision_model("vit_b_32", (3, 32, 32))
    assert model.image_size == 32


def test_an_architecture_that_cannot_take_the_image_size_is_refused() -> None:
    assert refusal("alexnet").startswith(
        "model alexnet cannot take dataset synthetic (3x32x32 images): "
    )


@pytest.mark.parametrize("arch", ["resnet19", "fasterrcnn_resnet50_fpn"])
def test_a_name_that_is_no_classification_architecture_is_refused(arch: str) -> None:
    message = refusal(arch)
    assert message.startswith(f"model.arch={arch} is not one of torchvision's 80 classification")
    assert "resnet18" in message  # the closest names, or how to list them all
    assert "\n" not in message


def test_weights_from_a_state_dict_file_are_loaded(tmp_path: Path) -> None:
    trained = torchvision_model("squeezenet1_1", (1, 32, 32))
    torch.save(trained.state_dict(), tmp_path / "weights.pt")
    fresh = torchvision_model("squeezenet1_1", (1, 32, 32))
    load_weights(fresh, str(tmp_path / "weights.pt"))
    for name, tensor in trained.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name


def test_weights_for_other_classes_are_refused_naming_the_tensors(tmp_path: Path) -> None:
    saved = torchvision_model("squeezenet1_1", (3, 32, 32), 10).state_dict()
    torch.save(saved, tmp_path / "w.pt")
    model = torchvision_model("squeezenet1_1", (3, 32, 32), 7)
    with pytest.raises(ExperimentError) as error:
        load_weights(model, str(tmp_path / "w.pt"))
    assert str(error.value) == (
        f"model.weights={tmp_path / 'w.pt'} does not fit the model: classifier.1.weight is "
        "10x512x1x1 there and 7x512x1x1 here, classifier.1.bias is 10 there and 7 here (the "
        "model is built for the dataset's channels and classes before its weights are loaded); "
        "model.weights_partial=true loads the tensors that fit and leaves the others as built"
    )


def test_partial_weights_load_what_fits_and_leave_a_new_classifier(tmp_path: Path) -> None:
    saved = torchvision_model("squeezenet1_1", (3, 32, 32), 10).state_dict()
    torch.save(saved, tmp_path / "w.pt")
    model = torchvision_model("squeezenet1_1", (3, 32, 32), 7)
    built = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    left = load_weights(model, str(tmp_path / "w.pt"), partial=True)
    assert left == ["classifier.1.weight", "classifier.1.bias"]
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, built[name] if name in left else saved[name]), name
    # Weights of another model altogether: nothing to start from.
    torch.save(torchvision_model("resnet18", (3, 32, 32)).state_dict(), tmp_path / "r.pt")
    with pytest.raises(ExperimentError, match=r"; none of its tensors fits$"):
        load_weights(model, str(tmp_path / "r.pt"), partial=True)


def test_a_weights_file_that_is_missing_or_no_state_dict_is_refused(tmp_path: Path) -> None:
    model = torchvision_model("squeezenet1_1", (3, 32, 32))
    with pytest.raises(ExperimentError) as error:
        load_weights(model, "nowhere.pt")
    assert str(error.value) == "model.weights=nowhere.pt: no such file"
    # Text of any kind, which pickle reads as opcodes and fails on in ways of its own.
    for name, text in (("notes.pt", "not weights"), ("passwd", "root:x:0:0:root:/root:/bin/sh\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ExperimentError) as error:
            load_weights(model, str(tmp_path / name))
        assert str(error.value).startswith(
            f"model.weights={tmp_path / name} is no state dict torch.load can read"
        )
    torch.save({"epoch": 3}, tmp_path / "numbers.pt")
    with pytest.raises(ExperimentError) as error:
        load_weights(model, str(tmp_path / "numbers.pt"))
    assert str(error.value).startswith(
        f"model.weights={tmp_path / 'numbers.pt'} holds no state dict (names to tensors)"
    )
