"""The GPUs a job's device= asks SLURM for on each node, by the nodes' GPUs and tasks."""

from __future__ import annotations

import pytest

from experiments.devices.slurm_request import gpus_to_ask
from helpers import compose_config


@pytest.mark.parametrize(
    ("device", "node_gpus", "tasks", "asked"),
    [
        (["device=cpu"], 8, 1, 0),
        (["device=cuda"], 8, 1, 1),
        (["device=cuda:2"], 8, 1, 3),  # the job sees its GPUs numbered from 0
        (["device=auto"], 8, 1, 1),
        (["device=auto"], 0, 1, 0),
        (["device=dp"], 4, 1, 4),
        (["device=dp", "device.ids=[0,1]"], 8, 1, 2),
        (["device=ddp"], 8, 4, 4),  # one per task: NCCL
        (["device=ddp"], 0, 2, 0),  # CPU nodes: gloo
    ],
)
def test_a_device_asks_the_gpus_its_plan_will_use(
    device: list[str], node_gpus: int, tasks: int, asked: int
) -> None:
    request = compose_config(*device).device
    assert gpus_to_ask(request, node_gpus, tasks) == asked
