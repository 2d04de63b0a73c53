"""The device a job used, described for people and records: the torch build, and for
results.json the device asked for and the one used (with what its kind records of it:
`Backend.device_record_fields`)."""

from __future__ import annotations

from typing import Any

import torch

from experiments.config.schemas import DeviceConfig
from experiments.devices.backends.registry import backend_for
from experiments.devices.plan import DevicePlan, request_text


def device_record(request: DeviceConfig, plan: DevicePlan) -> dict[str, Any]:
    """The device asked for and the one actually used, for results.json: type, index, name, and
    for a GPU its UUID (which tells identical GPUs apart); the DataParallel GPUs and the DDP
    backend if any."""
    record: dict[str, Any] = {
        "requested": request_text(request),
        "used": str(plan),
        "type": plan.type,
        "index": plan.index,
    }
    record.update(backend_for(plan.type).device_record_fields(plan.device))
    if plan.ids:
        record["ids"] = list(plan.ids)
    if plan.backend:
        record["backend"] = plan.backend
    if plan.reason:
        record["reason"] = plan.reason
    return record


def torch_build() -> str:
    """Which accelerator this torch was built for: "CUDA 12.4 build", "ROCm 6.2 build" or
    "CPU-only build"."""
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda} build"
    if torch.version.hip:
        return f"ROCm {torch.version.hip} build"
    return "CPU-only build"
