"""trainer.ema's fields out of their range, or set without the decay that keeps an average, are
refused in one line."""

from __future__ import annotations

import pytest

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from helpers import assert_field_refused, compose_config


@pytest.mark.parametrize(
    ("overrides", "key", "typed"),
    [
        (["trainer.ema.decay=1"], "trainer.ema.decay", "1.0"),
        (["trainer.ema.decay=0"], "trainer.ema.decay", "0.0"),
        (["trainer.ema.decay=nan"], "trainer.ema.decay", "nan"),
        (["trainer.ema.decay=0.99", "trainer.ema.every=0"], "trainer.ema.every", "0"),
        (
            ["trainer.ema.decay=0.99", "trainer.ema.warmup_steps=-1"],
            "trainer.ema.warmup_steps",
            "-1",
        ),
    ],
)
def test_ema_settings_out_of_range_are_refused(overrides: list[str], key: str, typed: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert_field_refused(str(refused.value), key, typed)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
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
def test_ema_settings_without_a_decay_are_refused(overrides: list[str], line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert str(refused.value) == line


def test_an_average_in_range_is_taken() -> None:
    validate(compose_config("trainer.ema.decay=0.9999", "trainer.ema.every=32"))
    validate(compose_config("trainer.ema.decay=0.5", "trainer.ema.warmup_steps=0"))
