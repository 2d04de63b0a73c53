"""The compute bound of a run on several GPUs: their peaks together, since its images/s counts
the images of all of them (`device=dp`'s GPUs, or one per torchrun process)."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.report import scaling
from experiments.report.summary import gpus_used


@pytest.mark.parametrize(
    ("device", "world_size", "gpus"),
    [
        ({"type": "cpu", "index": None}, 1, None),
        ({"type": "cpu", "index": None, "backend": "gloo"}, 2, None),  # torchrun on one CPU
        ({"type": "cuda", "index": 1}, 1, 1),
        ({"type": "cuda", "index": 0, "ids": [0, 1, 2]}, 1, 3),  # device=dp
        ({"type": "cuda", "index": 1, "backend": "nccl"}, 4, 4),  # device=ddp, process 0's record
    ],
)
def test_the_gpus_a_run_used_come_from_its_results(
    device: dict[str, Any], world_size: int, gpus: int | None
) -> None:
    assert gpus_used({"device": device, "world_size": world_size}) == gpus


def test_the_bound_of_a_run_on_several_gpus_multiplies_the_peak_by_them() -> None:
    def line(gpus: int | None) -> list[dict[str, Any]]:
        run = {"device_peak_flops": 1e12, "model_training_flops_per_image": 1e9, "gpus": gpus}
        return [run, {**run, "device_peak_flops": 0.8e12}]  # the best peak of the line

    assert scaling.compute_bound(line(None)) == 1000.0  # the CPU, or a run of an earlier version
    assert scaling.compute_bound(line(1)) == 1000.0
    assert scaling.compute_bound(line(2)) == 2000.0  # two GPUs' images/s: two GPUs' FLOP/s
