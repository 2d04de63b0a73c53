"""torchvision's classification architectures by name (`model=torchvision model.arch=resnet18`)."""

from __future__ import annotations

from typing import Any

import torchvision
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.core.hints import did_you_mean


def architectures() -> list[str]:
    """The names of torchvision's classification architectures (not those of its submodules)."""
    return torchvision.models.list_models(module=torchvision.models)


def build(arch: str, in_channels: int, image_size: int, num_classes: int) -> nn.Module:
    known = architectures()
    if arch not in known:
        meant = did_you_mean(arch, known)
        hint = f" ({meant})" if meant else ""
        raise ExperimentError(
            f"model.arch={arch} is not one of torchvision's {len(known)} classification "
            f"architectures{hint}; choose one of: {', '.join(known)}"
        )
    model = torchvision.models.get_model(
        arch, weights=None, num_classes=num_classes, **_fitted_to(arch, image_size)
    )
    _take_channels(model, in_channels)
    return model


def _fitted_to(arch: str, image_size: int) -> dict[str, Any]:
    if arch.startswith("vit_"):
        return {"image_size": image_size}
    if arch in ("googlenet", "inception_v3"):
        # PyTorch's own initialization, as every other architecture's (None warns of a change).
        return {"aux_logits": False, "init_weights": False}
    return {}


def _take_channels(model: nn.Module, in_channels: int) -> None:
    """Replace the model's first convolution by a fresh one, alike but for taking `in_channels`."""
    name, first = next(
        (name, module) for name, module in model.named_modules() if isinstance(module, nn.Conv2d)
    )
    if first.in_channels == in_channels:
        return
    parent_name, _, attribute = name.rpartition(".")
    replacement = nn.Conv2d(
        in_channels,
        first.out_channels,
        first.kernel_size,
        first.stride,
        first.padding,
        first.dilation,
        first.groups,
        bias=first.bias is not None,
        padding_mode=first.padding_mode,
    )
    setattr(model.get_submodule(parent_name), attribute, replacement)
