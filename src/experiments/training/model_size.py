"""A model's size: its parameters, and the floating-point operations of its forward pass on one
image as `torch.utils.flop_counter.FlopCounterMode` counts them (a multiply-add is two; matrix
products and convolutions only, so normalization, activations and pooling add nothing)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from experiments.core.text import short_count


@dataclass(frozen=True)
class ModelSize:
    parameters: int
    flops_per_image: int

    def record(self) -> dict[str, int]:
        """The fields of results.json, the report and the HParams dashboard."""
        return {"model_parameters": self.parameters, "model_flops_per_image": self.flops_per_image}

    def __str__(self) -> str:
        return (
            f"{short_count(self.parameters)} parameters, "
            f"{short_count(self.flops_per_image)} FLOPs per image"
        )


def measure(model: nn.Module, image_shape: tuple[int, int, int]) -> ModelSize:
    """The size of `model` (on the host, or any device) for images of `image_shape`, found by one
    forward pass in evaluation mode, which changes none of its state (batch-norm statistics)."""
    parameters = sum(parameter.numel() for parameter in model.parameters())
    device = next(model.parameters()).device if parameters else torch.device("cpu")
    training = model.training
    model.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, *image_shape, device=device))
    model.train(training)
    return ModelSize(parameters, counter.get_total_flops())
