"""trainer.ema's fields out of their range, or set without the decay that keeps an average, are
refused in one line."""

from __future__ import annotations

import pytest

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from helpers import compose_config

IN_RANGE = (
    "must be in (0, 1), the share of the average kept at each optimizer step (e.g. 0.9999), "
    "or null (no average)"
)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (["trainer.ema.decay=1"], f"trainer.ema.decay=1.0 {IN_RANGE}"),
        (["trainer.ema.decay=0"], f"trainer.ema.decay=0.0 {IN_RANGE}"),
        (["trainer.ema.decay=nan"], f"trainer.ema.decay=nan is not a number: it {IN_RANGE}"),
        (
            ["trainer.ema.decay=0.99", "trainer.ema.every=0"],
            "trainer.ema.every=0 must be a whole number >= 1",
        ),
        (
            ["trainer.ema.decay=0.99", "trainer.ema.warmup_steps=-1"],
            "trainer.ema.warmup_steps=-1 must be a whole number >= 0",
        ),
        (
            ["trainer.ema.every=4"],
            "trainer.ema.every=4 sets how the average of the weights is kept, but "
            "trainer.ema.decay is null: none is kept; add trainer.ema.decay=0.9999",
        ),
        (
            ["trainer.ema.every=4", "trainer.ema.warmup_steps=100"],
            "trainer.ema.every=4 and trainer.ema.warmup_steps=100 set how the average of the "
            "weights is kept, but trainer.ema.decay is null: none is kept; add "
            "trainer.ema.decay=0.9999",
        ),
    ],
)
def test_ema_settings_out_of_range_are_refused(overrides: list[str], line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert str(refused.value) == line


def test_an_average_in_range_is_taken() -> None:
    validate(compose_config("trainer.ema.decay=0.9999", "trainer.ema.every=32"))
    validate(compose_config("trainer.ema.decay=0.5", "trainer.ema.warmup_steps=0"))
