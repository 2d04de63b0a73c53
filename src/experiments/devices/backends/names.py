"""Each kind of device's name, as `torch.device.type` spells it; free of torch, for the report."""

from __future__ import annotations

CPU = "cpu"
CUDA = "cuda"
