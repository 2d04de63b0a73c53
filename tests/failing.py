"""A model that fails on purpose, for the tests of failure handling (loaded by `model._target_`)."""

from __future__ import annotations

import os

import torch

from experiments.models import LeNet


class FailsInProcess1(LeNet):
    """LeNet that raises at its third training step in torchrun's process 1."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__(in_channels, image_size, num_classes)
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and os.environ.get("RANK") == "1":
            self.steps += 1
            if self.steps == 3:
                raise RuntimeError("deliberate failure in process 1")
        return super().forward(x)
