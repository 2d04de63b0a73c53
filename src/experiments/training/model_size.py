"""A model's size: its parameters, and the FLOPs of a forward pass on one image and of a training
step, as `FlopCounterMode` counts them (a multiply-add is two). Attention is counted in its math
form: the counter has no formula for the fused kernels and would count them as nothing."""

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
    # The share of a training step's FLOPs in convolutions (`measuring.peak`'s precision).
    convolution_share: float = 0.0

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
    total = step.get_total_flops()
    convolutions = sum(
        count
        for operator, count in step.get_flop_counts().get("Global", {}).items()
        if "convolution" in str(operator)
    )
    return ModelSize(
        parameters, forward.get_total_flops(), total, convolutions / total if total else 0.0
    )
