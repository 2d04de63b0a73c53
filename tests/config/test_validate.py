"""The table of checks (experiments.config.validate): a command line or config with several
mistakes is told the first in the table's order, and both commands run the command line's
checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.config.compile_checks import CompileBackends
from experiments.config.validate import validate, validate_command_line
from experiments.core.errors import ExperimentError
from experiments.run.setup import compile_backends
from helpers import assert_field_refused, compose_config, eval_cli, train_cli

# One mistake for each command-line check but the missing plugin's (the plugins are installed
# here), in the table's order; each is told in a line that begins with it.
MISTAKES = (
    "hparams_search=optuna",
    "device=1",
    "optimized_metric=test_accuracy",
    "model._target_=my_models.Net",
)


def refusal(call: Callable[[], None]) -> str:
    with pytest.raises(ExperimentError) as error:
        call()
    return str(error.value)


@pytest.mark.parametrize("first", range(len(MISTAKES)))
def test_a_command_line_is_told_its_first_mistake_in_the_table(first: int) -> None:
    arguments = list(MISTAKES[first:])
    told = refusal(lambda: validate_command_line(arguments, arguments))
    assert told.startswith(f"{MISTAKES[first]} ")


def test_a_sweep_s_option_is_checked_as_typed() -> None:
    """replay= of one job of a sweep brings back the sweep's option: that is one run."""
    validate_command_line(["replay=outputs/job"], ["hparams_search=optuna"])
    told = refusal(lambda: validate_command_line(["hparams_search=optuna"], []))
    assert told.startswith("hparams_search=optuna is a sweep over ")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mistakes", "told"),
    [
        # The trainer's section before the dataset's, the device's, and the compile backend's.
        (
            ("trainer.epochs=0", "dataset.val_fraction=2", "device.visible=[-1]"),
            "trainer.epochs=0 must be a whole number >= 1",
        ),
        (
            ("dataset.val_fraction=2", "trainer.compile=nonexistent"),
            "dataset.val_fraction=2.0 must be in [0, 1): the share of the training images held "
            "out for validation",
        ),
        (
            ("device.visible=[-1]", "trainer.compile=nonexistent"),
            "device.visible=[-1] must be whole numbers, each >= 0: GPUs are numbered from 0, or "
            "null",
        ),
    ],
)
def test_a_config_is_told_its_first_mistake_in_the_table(
    mistakes: tuple[str, ...], told: str
) -> None:
    cfg = compose_config(*mistakes)
    assert refusal(lambda: validate(cfg, backends=compile_backends)) == told


def test_torch_lists_its_compile_backends_only_for_a_config_that_compiles() -> None:
    """(Listing them takes torch seconds.)"""
    asked = []

    def backends() -> CompileBackends:
        asked.append("trainer.compile")
        return compile_backends()

    validate(compose_config(), backends=backends)
    assert asked == []
    validate(compose_config("trainer.compile=inductor"), backends=backends)
    assert asked == ["trainer.compile"]


@pytest.mark.parametrize(
    ("asked", "key", "typed"),
    [
        ("serving.rounds=0", "serving.rounds", "0"),
        ("serving.warmup_calls=-1", "serving.warmup_calls", "-1"),
        ("serving.batch_size=0", "serving.batch_size", "0"),
        ("serving.batch_size=1000000000", "serving.batch_size", "1000000000"),
        ("seed=-1", "seed", "-1"),
        ("threads=0", "threads", "0"),
    ],
)
def test_an_evaluations_benchmark_settings_are_checked(asked: str, key: str, typed: str) -> None:
    cfg = compose_config("ckpt=outputs/run", "device=cpu", asked, config_name="eval")
    assert_field_refused(refusal(lambda: validate(cfg)), key, typed)


def test_train_py_and_eval_py_run_the_command_line_checks(tmp_path: Path) -> None:
    said = (
        "Error: device=1 is not an option of 'device'; a GPU is device=cuda:N, here device=cuda:1"
    )
    for done in (train_cli(tmp_path, "device=1"), eval_cli(tmp_path, "ckpt=run", "device=1")):
        assert (done.returncode, done.stderr.strip()) == (1, said)
    assert not (tmp_path / "outputs").exists()  # refused before Hydra made a folder
