"""The run's optimizer, its step fused where torch can (`optimizer.fused`): on a GPU, fp16's
GradScaler makes the host wait for an unfused step's overflow every step; a fused one does not."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from experiments.config.build import build
from experiments.core.errors import ExperimentError
from experiments.devices.backends.registry import backend_for

# torch's optimizers with a fused step, and its operator; whether this torch has it for a device
# is asked of torch (`has_fused_kernel`): Adagrad's, say, came to CUDA after the CPU.
FUSED_OPERATORS: dict[type, str] = {
    torch.optim.Adam: "aten::_fused_adam_",
    torch.optim.AdamW: "aten::_fused_adamw_",
    torch.optim.SGD: "aten::_fused_sgd_",
    torch.optim.Adagrad: "aten::_fused_adagrad_",
}


def has_fused_kernel(optimizer_class: object, device_type: str) -> bool:
    """Whether this torch fuses `optimizer_class`'s step on `device_type` (a subclass's: never)."""
    operator = FUSED_OPERATORS.get(optimizer_class) if isinstance(optimizer_class, type) else None
    return operator is not None and torch._C._dispatch_has_kernel_for_dispatch_key(
        operator, device_type.upper()
    )


def decide_fused(
    requested: bool | None, optimizer_class: object, device_type: str, has_kernel: bool
) -> bool:
    """Whether to build the optimizer fused: `requested` (optimizer.fused) null fuses on CUDA where
    torch `has_kernel`, false never, true where torch can and refuses where it cannot."""
    if requested is None:
        return backend_for(device_type).fuses_optimizer_by_default and has_kernel
    if requested and not has_kernel:
        name = getattr(optimizer_class, "__qualname__", str(optimizer_class))
        fusable = ", ".join(
            kind.__name__ for kind in FUSED_OPERATORS if has_fused_kernel(kind, device_type)
        )
        raise ExperimentError(
            f"optimizer.fused=true, but torch {torch.__version__} has no fused step of {name} "
            f"on {device_type} (it has {fusable or 'none'}); set optimizer.fused=null (fused "
            "where torch can) or false"
        )
    return requested


# The layers whose parameters `optimizer.norm_weight_decay` decays (torchvision's `norm_classes`).
NORM_LAYERS = (
    nn.modules.batchnorm._BatchNorm,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.modules.instancenorm._InstanceNorm,
    nn.LocalResponseNorm,
)
GROUPING_KEYS = ("norm_weight_decay", "bias_weight_decay")  # shape the groups, not the optimizer


def decay_groups(
    model: nn.Module,
    weight_decay: float,
    norm_weight_decay: float | None,
    bias_weight_decay: float | None,
) -> list[dict[str, Any]]:
    """`model`'s parameters grouped by weight decay (None: `weight_decay`), each once."""
    decays = {"norm": norm_weight_decay, "bias": bias_weight_decay, "other": None}
    grouped: dict[str, list[nn.Parameter]] = {kind: [] for kind in decays}
    seen: set[int] = set()
    for module in model.modules():
        norm = isinstance(module, NORM_LAYERS)
        for name, parameter in module.named_parameters(recurse=False):
            if not parameter.requires_grad or id(parameter) in seen:
                continue
            seen.add(id(parameter))
            grouped["norm" if norm else "bias" if name == "bias" else "other"].append(parameter)
    return [
        {"params": grouped[kind], "weight_decay": weight_decay if decay is None else decay}
        for kind, decay in decays.items()
        if grouped[kind]
    ]


def build_optimizer(
    config: DictConfig, model: nn.Module, device_type: str
) -> tuple[torch.optim.Optimizer, bool]:
    """The optimizer `config` names, and whether its step is fused (whatever a checkpoint says)."""
    built = build(config, leave_out=("fused", *GROUPING_KEYS))
    parameters: Iterable[Any] = model.parameters()
    if any(config.get(key) is not None for key in GROUPING_KEYS):
        parameters = decay_groups(
            model,
            config.get("weight_decay", 0.0),
            config.get("norm_weight_decay"),
            config.get("bias_weight_decay"),
        )
    optimizer_class = getattr(built, "func", built)  # (a partial of the class, `_partial_`)
    has_kernel = has_fused_kernel(optimizer_class, device_type)
    fused = decide_fused(config.get("fused"), optimizer_class, device_type, has_kernel)
    optimizer = built(parameters, fused=True) if fused else built(parameters)
    if optimizer_class in FUSED_OPERATORS:
        optimizer.register_load_state_dict_pre_hook(_keep_built_fused)
    return optimizer, fused


def host_waits_at_every_step(
    optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, device_type: str
) -> str | None:
    """A line for a GPU run whose GradScaler waits for each unfused step's overflow; else None."""
    waits = backend_for(device_type).runs_ahead_of_host and scaler.is_enabled()
    if not waits or getattr(optimizer, "_step_supports_amp_scaling", False):
        return None
    fusable = ", ".join(kind.__name__ for kind in FUSED_OPERATORS)
    return (
        f"trainer.precision=fp16 with {type(optimizer).__name__}'s step unfused: GradScaler reads "
        "back whether each step's gradients overflowed, so the host waits for the GPU at every "
        f"step; optimizer.fused=null fuses the step where torch has one ({fusable})"
    )


def _keep_built_fused(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's optimizer state, each group fused as this run chose, not as saved."""
    groups = [
        {**saved_group, "fused": group["fused"]}
        for saved_group, group in zip(saved["param_groups"], optimizer.param_groups, strict=False)
    ]
    return {**saved, "param_groups": groups}
