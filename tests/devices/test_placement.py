"""The placement audit: a tensor of the model, the loss or the batch off the device is named."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.devices.placement import audit
from experiments.devices.plan import DevicePlan
from experiments.training.models import Tudui


def test_the_audit_names_a_misplaced_tensor() -> None:
    model = Tudui(3, 32, 10)
    model.register_buffer("running_scale", torch.ones(1, device="meta"))
    batch = (torch.zeros(1, 3, 32, 32), torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ExperimentError) as error:
        audit(model, nn.CrossEntropyLoss(), batch, DevicePlan("cpu"))
    assert str(error.value) == (
        "placement audit: model buffer running_scale is on meta, but device=cpu puts everything "
        "on cpu"
    )


def test_the_audit_checks_the_task_and_the_batch() -> None:
    model = Tudui(3, 32, 10)
    weighted = nn.CrossEntropyLoss(weight=torch.ones(10, device="meta"))  # a task's weights
    batch = (torch.zeros(1, 3, 32, 32), torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ExperimentError, match="task buffer weight is on meta"):
        audit(model, weighted, batch, DevicePlan("cpu"))
    misplaced = (torch.zeros(1, 3, 32, 32, device="meta"), batch[1])
    with pytest.raises(ExperimentError, match="batch images is on meta"):
        audit(model, nn.CrossEntropyLoss(), misplaced, DevicePlan("cpu"))
    audit(model, nn.CrossEntropyLoss(), batch, DevicePlan("cpu"))  # all in place: no error
