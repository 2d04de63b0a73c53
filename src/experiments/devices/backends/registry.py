"""Each kind of device's backend, by `torch.device.type`; a new kind is a module and a line here."""

from __future__ import annotations

from experiments.core.errors import ExperimentError
from experiments.devices.backends.base import Backend
from experiments.devices.backends.cpu import CpuBackend
from experiments.devices.backends.cuda import CudaBackend

BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (CpuBackend(), CudaBackend())}


def backend_for(device_type: str) -> Backend:
    """The backend of `device_type` (`torch.device.type`), or one line naming the known ones."""
    backend = BACKENDS.get(device_type)
    if backend is None:
        raise ExperimentError(
            f"experiments has no backend for {device_type!r} devices; it knows "
            f"{', '.join(BACKENDS)}"
        )
    return backend
