"""The GPUs a job lets CUDA see: device.visible counted among those a scheduler granted."""

from __future__ import annotations

import pytest

from experiments.core.errors import ExperimentError
from experiments.devices.process_settings import visible_mask


@pytest.mark.parametrize(
    ("inherited", "visible", "mask"),
    [
        (None, None, None),
        (None, [2, 3], "2,3"),
        ("4,5", None, "4,5"),
        # A scheduler gave the job GPUs 4 and 5: device.visible counts among those.
        ("4,5", [1], "5"),
        ("4,5", [1, 0], "5,4"),
        ("GPU-8f3c,GPU-11aa", [1], "GPU-11aa"),
    ],
)
def test_visible_gpus_are_counted_among_those_the_process_may_see(
    inherited: str | None, visible: list[int] | None, mask: str | None
) -> None:
    assert visible_mask(inherited, visible) == mask


def test_visible_gpus_beyond_a_schedulers_share_are_refused() -> None:
    with pytest.raises(ExperimentError) as error:
        visible_mask("4,5", [2])
    assert str(error.value) == (
        "device.visible=[2] names GPU 2, but CUDA_VISIBLE_DEVICES=4,5 lets this process see 2 "
        "GPU(s), numbered from 0; device.visible counts among those"
    )
