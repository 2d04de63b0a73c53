"""The debug presets (`debug=fast`, `debug=overfit`, `debug=profile`): overlays on whatever else is
chosen, each shown by what its run does."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.data.subset import overfit_rows
from experiments.training import profiling
from helpers import compose_config, metrics, results, trained_run


def test_debug_fast_trains_on_one_batch_and_tests_on_one(tmp_path: Path) -> None:
    run = trained_run(tmp_path, "debug=fast", "device=cpu", "model=lenet", "trainer.batch_size=16")
    (epoch,) = metrics(run, "epoch")
    assert epoch["train_images"] == 16
    assert results(run)["test_images"] == 16


def test_debug_overfit_drives_the_loss_down_on_the_same_batches_every_epoch(
    tmp_path: Path,
) -> None:
    run = trained_run(
        tmp_path,
        "debug=overfit",
        "device=cpu",
        "model=lenet",
        "optimizer=adam",
        "trainer.batch_size=16",
        "optimizer.lr=0.003",
        "trainer.epochs=12",
    )
    epochs = metrics(run, "epoch")
    assert [epoch["train_images"] for epoch in epochs] == [3 * 16] * 12
    # 36 steps on 48 images learn them; on 36 batches of a fresh shuffle of 4,000 they would
    # leave the loss near its start (ln 10 = 2.30).
    losses = [epoch["train_loss"] for epoch in epochs]
    assert losses[-1] < losses[0] / 4


def test_the_overfit_batches_are_drawn_by_the_seed_not_the_first_rows() -> None:
    rows = overfit_rows(4000, 48, seed=0)
    assert rows.equal(overfit_rows(4000, 48, seed=0))
    assert not rows.equal(overfit_rows(4000, 48, seed=1))
    assert len(set(rows.tolist())) == 48 and rows.max() >= 48


def test_debug_profile_trains_the_steps_the_profiler_records() -> None:
    trainer = compose_config("debug=profile").trainer
    assert trainer.profile and trainer.epochs == 1
    assert trainer.limit_train_batches >= profiling.STEPS


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            ("debug=overfit", "trainer.limit_train_batches=5"),
            "trainer.overfit_batches=3 trains on those batches every epoch, and "
            "trainer.limit_train_batches=5 on the first of a new shuffle: set one (the other null)",
        ),
        (
            ("debug=fast", "trainer.batch_size=auto"),
            "trainer.limit_eval_images=${trainer.batch_size} (a debug preset's: a batch's worth) "
            "has no size while trainer.batch_size=auto: give trainer.batch_size=N, or "
            "trainer.limit_eval_images=N",
        ),
    ],
)
def test_a_preset_that_cannot_apply_is_refused_in_one_line(
    overrides: tuple[str, ...], says: str
) -> None:
    with pytest.raises(ExperimentError) as error:
        validate(compose_config(*overrides))
    assert str(error.value) == says
