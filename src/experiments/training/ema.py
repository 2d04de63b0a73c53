"""trainer.ema: a moving average of a model's weights and buffers, as timm's ModelEmaV3 keeps one,
updated by one `_foreach_lerp_` (torch's `AveragedModel` reads its count on the host each step)."""

from __future__ import annotations

import copy
import itertools
from typing import Any, TypedDict

import torch
from torch import nn


class AverageState(TypedDict):
    """A checkpoint's "ema": the average's state_dict, and the optimizer steps it has followed."""

    weights: dict[str, torch.Tensor]
    steps: int


class ModelAverage:
    """The moving average of `model`, unwrapped (its wrappers share its tensors)."""

    def __init__(self, model: nn.Module, decay: float, every: int = 1, warmup_steps: int = 0):
        self.decay, self.every, self.warmup_steps = decay, every, warmup_steps
        self.average = copy.deepcopy(model).requires_grad_(False)
        self.steps = 0  # optimizer steps followed
        pairs = list(zip(_tensors(self.average), _tensors(model), strict=True))
        self._averaged = [mine for mine, _ in pairs if mine.is_floating_point()]
        self._followed = [theirs for mine, theirs in pairs if mine.is_floating_point()]
        self._copied = [(mine, theirs) for mine, theirs in pairs if not mine.is_floating_point()]

    def decay_at(self, step: int) -> float:
        """The share kept at optimizer `step` (from 1), less over `warmup_steps`."""
        if step >= self.warmup_steps:
            return self.decay
        return self.decay * step / self.warmup_steps

    @torch.no_grad()
    def step(self) -> None:
        """After every `every`-th optimizer step t: average = d * average + (1 - d) * model, with
        d = decay_at(t) ** every, so `decay` is the share kept per step; integers are copied."""
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
        """In place: the tensors the updates pair stay."""
        self.average.load_state_dict(state["weights"])
        self.steps = state["steps"]


def _tensors(model: nn.Module) -> list[torch.Tensor]:
    return [tensor.detach() for tensor in itertools.chain(model.parameters(), model.buffers())]
