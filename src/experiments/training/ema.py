"""An exponential moving average of a model's weights (trainer.ema), as torchvision's reference
recipes (--model-ema) and timm (ModelEmaV3) keep one: on the device beside the model, updated
after optimizer steps; with it on, a run evaluates, selects and saves as its result the average.

The average starts as a copy of the model as placed (`model.weights` loaded), and after every
`every`-th optimizer step t moves toward the model's weights and buffers:

    average = d * average + (1 - d) * model,   d = decay_at(t) ** every

- Per step: `decay` is the share kept per optimizer step (as timm's), so the average spans about
  1 / (1 - decay) steps whatever `every` is. torchvision's reference also scales it by batch size
  and epochs (pycls's adjustment); that is not taken, so a decay means the same on any dataset.
- Warm-up: with `warmup_steps` W, the decay at step t is decay * min(1, t / W), so the average
  does not stay near the random initial weights for its first 1 / (1 - decay) steps.
- Buffers: BatchNorm's running statistics are averaged with the weights (torchvision's
  use_buffers=True); a whole-number buffer, the count of batches seen, is copied.

torch's `AveragedModel` with `get_ema_multi_avg_fn` computes the same average (the tests hold this
one to it) but reads its update count on the host every update, a wait for a GPU each step. Here
the steps are counted on the host and an update is one `torch._foreach_lerp_` on the device.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any, TypedDict

import torch
from torch import nn


class AverageState(TypedDict):
    """What a checkpoint holds of the average ("ema"): its weights and buffers, as the model's
    state_dict names them, and the optimizer steps it has followed."""

    weights: dict[str, torch.Tensor]
    steps: int


class ModelAverage:
    """The moving average of `model` (unwrapped: DDP, DataParallel and torch.compile share its
    tensors), as the module's docstring describes."""

    def __init__(self, model: nn.Module, decay: float, every: int = 1, warmup_steps: int = 0):
        self.decay, self.every, self.warmup_steps = decay, every, warmup_steps
        self.average = copy.deepcopy(model).requires_grad_(False)
        self.steps = 0  # optimizer steps followed
        pairs = list(zip(_tensors(self.average), _tensors(model), strict=True))
        self._averaged = [mine for mine, _ in pairs if mine.is_floating_point()]
        self._followed = [theirs for mine, theirs in pairs if mine.is_floating_point()]
        self._copied = [(mine, theirs) for mine, theirs in pairs if not mine.is_floating_point()]

    def decay_at(self, step: int) -> float:
        """The share of the average kept at optimizer `step` (from 1)."""
        if step >= self.warmup_steps:
            return self.decay
        return self.decay * step / self.warmup_steps

    @torch.no_grad()
    def step(self) -> None:
        """Follow an optimizer step: update the average if it is one of every `every`."""
        self.steps += 1
        if self.steps % self.every:
            return
        weight = 1 - self.decay_at(self.steps) ** self.every
        torch._foreach_lerp_(self._averaged, self._followed, weight)
        for mine, theirs in self._copied:
            mine.copy_(theirs)

    def state_dict(self) -> AverageState:
        return {"weights": self.average.state_dict(), "steps": self.steps}

    def load_state_dict(self, state: AverageState | dict[str, Any]) -> None:
        """Put back what `state_dict` saved (in place: the tensors the updates pair stay)."""
        self.average.load_state_dict(state["weights"])
        self.steps = state["steps"]


def _tensors(model: nn.Module) -> list[torch.Tensor]:
    """A model's parameters and buffers, detached (their storage shared), in one order."""
    return [tensor.detach() for tensor in itertools.chain(model.parameters(), model.buffers())]
