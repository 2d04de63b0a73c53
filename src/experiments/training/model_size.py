"""A model's parameters, and FLOPs per image of a forward pass and a training step, attention in
its math form: `FlopCounterMode` has no formula for the fused kernels and would count nothing."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from experiments.core.text import IMAGES, Unit, short_count
from experiments.devices.process_settings import one_thread


@dataclass(frozen=True)
class ModelSize:
    parameters: int
    flops_per_image: int
    training_flops_per_image: int
    convolution_share: float = 0.0  # of a training step's FLOPs (`measuring.peak`'s precision)

    @property
    def convolutions_lead(self) -> bool:
        return self.convolution_share > 0.5

    def record(self) -> dict[str, int]:
        return {
            "model_parameters": self.parameters,
            "model_flops_per_image": self.flops_per_image,
            "model_training_flops_per_image": self.training_flops_per_image,
        }

    def text(self, unit: Unit = IMAGES) -> str:
        """ "62.0k parameters, 1.30M FLOPs per image" (of a sample, in the data's `unit`)."""
        return (
            f"{short_count(self.parameters)} parameters, "
            f"{short_count(self.flops_per_image)} FLOPs per {unit.one}"
        )


def measure(model: nn.Module, image_shape: tuple[int, int, int], device: torch.device) -> ModelSize:
    """The size of `model`, by passes in evaluation mode, which change none of its state."""
    parameters = sum(parameter.numel() for parameter in model.parameters())
    training = model.training
    model.eval()
    image = torch.zeros(1, *image_shape, device=device)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    try:
        with one_thread(), sdpa_kernel(SDPBackend.MATH):
            with torch.no_grad(), FlopCounterMode(display=False) as forward:
                model(image)
            with FlopCounterMode(display=False) as step:
                output = model(image)
                if trained:  # autograd.grad, not backward: the parameters' .grad stay as they were
                    torch.autograd.grad(output.sum(), trained)
    finally:
        model.train(training)
    total, counts = step.get_total_flops(), step.get_flop_counts().get("Global", {})
    convolutions = sum(
        count for operator, count in counts.items() if "convolution" in str(operator)
    )
    share = convolutions / total if total else 0.0
    return ModelSize(parameters, forward.get_total_flops(), total, share)
