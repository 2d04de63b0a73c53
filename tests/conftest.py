"""Number GPUs as every run does, and skip the tests marked `gpu` when there is no CUDA GPU."""

from __future__ import annotations

import os

import pytest
import torch

# Before anything asks CUDA: the tests compare GPUs by index with what runs recorded, and runs
# number them in PCI bus order (experiments.devices.process_settings.number_gpus_by_bus).
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
