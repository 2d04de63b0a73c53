"""Setting the run up: channels-last puts the model in that memory format."""

from __future__ import annotations

import torch

from experiments.run import setup
from experiments.training.models import Tudui
from helpers import on


def test_channels_last_puts_the_model_in_that_format() -> None:
    def conv_weight(channels_last: bool) -> torch.Tensor:
        model = setup.place_model(Tudui(3, 32, 10), on("cpu", channels_last=channels_last))
        return model.features[0].weight

    assert conv_weight(True).is_contiguous(memory_format=torch.channels_last)
    assert not conv_weight(False).is_contiguous(memory_format=torch.channels_last)
