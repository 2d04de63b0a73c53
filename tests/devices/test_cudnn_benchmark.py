"""trainer.cudnn_benchmark: cuDNN's algorithm search for the job, put back when it ends, refused
beside trainer.deterministic, and recorded."""

from __future__ import annotations

import pytest
import torch

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.devices import process_settings
from helpers import compose_config


@pytest.mark.parametrize("benchmark", [False, True])
def test_a_job_sets_cudnn_benchmark_and_the_next_finds_it_as_it_was(benchmark: bool) -> None:
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = not benchmark  # what an earlier job, or the user, left
    try:
        with process_settings.isolated_job(None):
            process_settings.apply(None, None, deterministic=False, cudnn_benchmark=benchmark)
            assert torch.backends.cudnn.benchmark is benchmark
        assert torch.backends.cudnn.benchmark is not benchmark
    finally:
        torch.backends.cudnn.benchmark = before


def test_cudnn_benchmark_beside_deterministic_is_refused_in_one_line() -> None:
    cfg = compose_config("trainer.cudnn_benchmark=true", "trainer.deterministic=true")
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert str(error.value) == (
        "trainer.cudnn_benchmark=true lets cuDNN choose its algorithms by timing them, which "
        "trainer.deterministic=true rules out; set one of them false"
    )


def test_cudnn_benchmark_is_off_unless_asked() -> None:
    # torch's own default, kept until a GPU measures otherwise (docs/speed.md).
    assert compose_config().trainer.cudnn_benchmark is False
