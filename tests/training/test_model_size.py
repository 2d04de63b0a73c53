"""A model's size: its parameters, and the FLOPs of its forward pass and of a training step on
one image."""

from __future__ import annotations

import pytest
import torch

from experiments.core.text import IMAGES, ROWS, Unit
from experiments.training.model_size import ModelSize, measure
from experiments.training.models import HOST, MLP, LeNet


def test_lenets_size_is_what_its_layers_add_up_to() -> None:
    model = LeNet(in_channels=3, image_size=32, num_classes=10)
    size = measure(model, (3, 32, 32), HOST)
    # Weights and biases: conv 3->6 (5x5), conv 6->16 (5x5), linear 400->120->84->10.
    parameters = (3 * 25 * 6 + 6) + (6 * 25 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84)
    parameters += 84 * 10 + 10
    assert size.parameters == parameters == 62006
    # Multiply-adds, counted as two FLOPs each: 6x28x28 outputs of 75 inputs, 16x10x10 of 150,
    # and the three linear layers.
    multiply_adds = 6 * 28 * 28 * 75 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert size.flops_per_image == 2 * multiply_adds
    # Training: the forward, then each layer's weight gradient (as much again) and its input
    # gradient (as much again), but for the first layer, whose input (the images) needs none.
    first_layer = 6 * 28 * 28 * 75
    assert size.training_flops_per_image == 2 * (3 * multiply_adds - first_layer)
    # Its convolutions' share: the forward's, and the backward's but for the first's input.
    linear = 400 * 120 + 120 * 84 + 84 * 10
    convolutions = 3 * (multiply_adds - linear) - first_layer
    assert size.convolution_share == pytest.approx(convolutions / (3 * multiply_adds - first_layer))
    assert size.convolutions_lead


def test_an_mlp_is_led_by_matrix_products() -> None:
    model = MLP(in_channels=10, image_size=1, num_classes=1, hidden_sizes=[25, 16])
    size = measure(model, (10, 1, 1), HOST)  # the diabetes table's ten features
    assert size.convolution_share == 0.0 and not size.convolutions_lead


def test_measuring_changes_nothing_in_the_model() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    measure(model, (3, 8, 8), HOST)
    assert model.training
    assert all(parameter.grad is None for parameter in model.parameters())
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


@pytest.mark.parametrize(
    ("parameters", "flops", "unit", "text"),
    [
        (62006, 1303440, IMAGES, "62.0k parameters, 1.30M FLOPs per image"),
        (11_181_642, 1_111_000_000, IMAGES, "11.2M parameters, 1.11G FLOPs per image"),
        (708, 1330, ROWS, "708 parameters, 1.33k FLOPs per row"),  # a table's model
    ],
)
def test_the_size_reads_in_thousands_millions_and_billions_per_sample(
    parameters: int, flops: int, unit: Unit, text: str
) -> None:
    assert ModelSize(parameters, flops, 3 * flops).text(unit) == text


class CountsThreads(torch.nn.Module):
    """A model that notes how many threads torch ran it on, and fails if asked to."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 2)
        self.fail = fail
        self.threads: list[int] = []

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.threads.append(torch.get_num_threads())
        if self.fail:
            raise RuntimeError("no forward")
        return self.layer(images.flatten(1))


@pytest.mark.parametrize("fail", [False, True])
def test_one_image_is_measured_on_one_thread_and_the_threads_are_put_back(fail: bool) -> None:
    """One image is too little work to share out among threads (each operation would wait for
    all of them); the run's thread count is back after, even when the model fails."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = CountsThreads(fail)
        if fail:
            with pytest.raises(RuntimeError, match="no forward"):
                measure(model, (1, 2, 2), HOST)
        else:
            measure(model, (1, 2, 2), HOST)
        assert model.threads and set(model.threads) == {1}
        assert torch.get_num_threads() == 2
        assert model.training
    finally:
        torch.set_num_threads(threads)


class Attention(torch.nn.Module):
    """Attention of an image's rows to one another: by torch's kernel, or written out."""

    def __init__(self, fused: bool) -> None:
        super().__init__()
        self.fused = fused
        self.project = torch.nn.Linear(32, 32)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        rows = self.project(images.flatten(0, 1))  # (batch x channels, 32 rows, 32)
        if self.fused:
            attended = torch.nn.functional.scaled_dot_product_attention(rows, rows, rows)
        else:
            weights = (rows @ rows.transpose(-2, -1) / 32**0.5).softmax(-1)
            attended = weights @ rows
        return attended.flatten(1)


def test_attention_by_torchs_kernel_counts_as_its_products_written_out() -> None:
    # On the CPU the kernel is a fused one, which the counter alone would count as nothing.
    fused, written_out = (measure(Attention(fused), (3, 32, 32), HOST) for fused in (True, False))
    assert fused.flops_per_image == written_out.flops_per_image
    assert fused.training_flops_per_image == written_out.training_flops_per_image
    assert fused.flops_per_image > 3 * 2 * 32**3  # the projection, then two products per channel
