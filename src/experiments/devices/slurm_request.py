"""The GPUs a job's `device=` request asks SLURM for on each node; pure, without torch (the
launcher sizes its jobs on a login node that may have no GPU and need not load torch)."""

from __future__ import annotations

from experiments.config.choices import DeviceName
from experiments.config.schemas import DeviceConfig


def gpus_to_ask(request: DeviceConfig, node_gpus: int, tasks_per_node: int) -> int:
    """GPUs per node for `request`, on nodes of `node_gpus` GPUs running `tasks_per_node` tasks.

    device=cpu asks none; device=cuda one (cuda:N, N + 1: the job sees them numbered from 0);
    device=auto one where the nodes have any, else none; device=dp its device.ids, or a node's
    every GPU; device=ddp one per task where the nodes have GPUs (NCCL), else none (gloo)."""
    name = request.name
    if name == DeviceName.cpu:
        return 0
    if name == DeviceName.cuda:
        return (request.index or 0) + 1
    if name == DeviceName.auto:
        return min(node_gpus, 1)
    if name == DeviceName.dp:
        return len(request.ids) if request.ids else max(node_gpus, 1)
    if name == DeviceName.ddp:
        return tasks_per_node if node_gpus else 0
    raise ValueError(f"device={name} has no rule for the GPUs it asks SLURM for")
