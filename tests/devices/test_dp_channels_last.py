"""device=dp with channels_last is refused before the run: DataParallel copies the model to its
other GPUs at every step (broadcast_coalesced), in the default memory format."""

from __future__ import annotations

import pytest

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from helpers import compose_config


def test_channels_last_under_data_parallel_is_refused_in_one_line() -> None:
    cfg = compose_config("device=dp", "trainer.channels_last=true")
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert str(error.value) == (
        "trainer.channels_last=true cannot hold under device=dp: DataParallel copies the model to "
        "its other GPUs at every step in the default memory format; use device=ddp, which keeps "
        "channels-last on every GPU, or trainer.channels_last=null"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        ("device=dp",),  # null: channels-last only on the CPU, so not here
        ("device=dp", "trainer.channels_last=false"),
        ("device=ddp", "trainer.channels_last=true"),
    ],
)
def test_what_the_refusal_offers_is_accepted(overrides: tuple[str, ...]) -> None:
    validate(compose_config(*overrides))
