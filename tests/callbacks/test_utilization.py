"""MFU's peak, measured or read from the cache, changes no number of the training: the same seed
gives the same digits with a cold cache and a warm one, dropout's draws among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import QUICK, metrics, results, train_cli

# A model of one's own whose dropout draws from the global generator after the run is seeded.
MY_MODELS = """
from torch import nn


class Dropping(nn.Sequential):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__(
            nn.Flatten(), nn.Linear(3 * 32 * 32, 32), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(32, num_classes),
        )
"""


@pytest.mark.slow
def test_the_same_seed_gives_the_same_digits_with_a_cold_and_a_warm_peak_cache(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_models.py").write_text(MY_MODELS)
    model = ("model=custom", "model._target_=my_models.Dropping")
    cold = train_cli(tmp_path, *QUICK, *model, "trainer.measure_peak_flops=true")
    assert cold.returncode == 0, cold.stderr
    assert results(cold.run_dir)["device_peak_measured"] is True
    (tmp_path / "warm").mkdir()
    (tmp_path / "warm" / "my_models.py").write_text(MY_MODELS)
    warm = train_cli(tmp_path / "warm", *QUICK, *model)
    assert warm.returncode == 0, warm.stderr
    assert results(warm.run_dir)["device_peak_measured"] is False
    losses = [[row["train_loss"] for row in metrics(done.run_dir, "step")] for done in (cold, warm)]
    assert losses[0] == losses[1]
    tested = [[row["test_loss"] for row in metrics(done.run_dir, "epoch")] for done in (cold, warm)]
    assert tested[0] == tested[1]
