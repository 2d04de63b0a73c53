"""Precision as an autocast dtype and a gradient scaler; fp16 needs a GPU."""

from __future__ import annotations

import pytest
import torch

from experiments.config.choices import Precision
from experiments.core.errors import ExperimentError
from experiments.devices import precision


def test_fp16_needs_a_gpu() -> None:
    with pytest.raises(ExperimentError) as error:
        precision.autocast_and_scaler(Precision.fp16, torch.device("cpu"))
    assert str(error.value) == (
        "trainer.precision=fp16 needs a CUDA device (its gradient scaling, and its fast kernels, "
        "run there); on cpu use bf16 or fp32"
    )


@pytest.mark.parametrize(
    ("name", "dtype", "scaled"),
    [(Precision.fp32, None, False), (Precision.bf16, torch.bfloat16, False)],
)
def test_precision_is_an_autocast_dtype_and_a_scaler(
    name: Precision, dtype: torch.dtype | None, scaled: bool
) -> None:
    autocast_dtype, scaler = precision.autocast_and_scaler(name, torch.device("cpu"))
    assert autocast_dtype == dtype and scaler.is_enabled() is scaled
