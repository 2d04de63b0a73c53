"""torch.profiler on request: on a GPU, the kernels too, ranked by their GPU time. (On the CPU,
a whole run with trainer.profile=true: tests/run/test_train.py.)"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.training import profiling


@pytest.mark.gpu
def test_a_profile_on_a_gpu_records_its_kernels_and_ranks_operators_by_gpu_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cuda = torch.device("cuda")
    model = nn.Linear(256, 256).to(cuda)
    images = torch.randn(64, 256, device=cuda)
    with (
        caplog.at_level(logging.INFO, logger="experiments"),
        profiling.profiled(tmp_path, "cuda") as after_step,
    ):
        for _ in range(profiling.STEPS):
            model(images).square().mean().backward()
            after_step()
    trace = json.loads((tmp_path / profiling.TRACE).read_text())
    assert any(event.get("cat") == "kernel" for event in trace["traceEvents"])
    assert "the operators that took most GPU time" in caplog.text
