"""The device a job used, described for people and records."""

from __future__ import annotations

from typing import Any

import torch

from experiments.config.schemas import DeviceConfig
from experiments.devices.backends.registry import backend_for
from experiments.devices.plan import DevicePlan, request_text


def device_record(request: DeviceConfig, plan: DevicePlan) -> dict[str, Any]:
    """The device asked for and the one used, for results.json (with what its kind records)."""
    record: dict[str, Any] = {
        "requested": request_text(request),
        "used": str(plan),
        "type": plan.type,
        "index": plan.index,
        **backend_for(plan.type).device_record_fields(plan.device),
    }
    optional = {"ids": list(plan.ids), "backend": plan.backend, "reason": plan.reason}
    return record | {key: value for key, value in optional.items() if value}


def torch_build() -> str:
    """Which accelerator this torch was built for: "CUDA 12.4 build", "ROCm 6.2 build", ..."""
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda} build"
    if torch.version.hip:
        return f"ROCm {torch.version.hip} build"
    return "CPU-only build"
