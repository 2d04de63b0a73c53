"""Keys renamed since the last release, taken in their old spelling: `logger` is `tracker`."""

from __future__ import annotations

import pytest

from experiments.config.renamed_keys import in_todays_keys


@pytest.mark.parametrize(
    ("typed", "today"),
    [
        (["logger=csv"], ["tracker=csv"]),
        (["logger=[tensorboard,mlflow]"], ["tracker=[tensorboard,mlflow]"]),
        (["-m", "logger=tensorboard,csv"], ["-m", "tracker=tensorboard,csv"]),
        (["logger.mlflow.timeout=5"], ["tracker.mlflow.timeout=5"]),
        (["+logger.mlflow.tracking_uri=x"], ["+tracker.mlflow.tracking_uri=x"]),
        (["++logger.wandb.entity=me"], ["++tracker.wandb.entity=me"]),
        (["~logger"], ["~tracker"]),
        (["~logger.csv"], ["~tracker.csv"]),
        (["logger@here=csv"], ["tracker@here=csv"]),
        (["--cfg", "job", "-p", "logger"], ["--cfg", "job", "-p", "tracker"]),
        (["--package", "logger.mlflow"], ["--package", "tracker.mlflow"]),
        (["--package=logger", "-p=logger"], ["--package=tracker", "-p=tracker"]),
    ],
)
def test_the_old_group_name_is_read_as_todays_in_every_form(
    typed: list[str], today: list[str]
) -> None:
    assert in_todays_keys(typed) == today


@pytest.mark.parametrize(
    "argument",
    [
        ["loggers=1"],  # another key
        ["model.logger=x"],  # a key of the same name elsewhere
        ["hydra.job.name=logger"],  # a value
        ["dataset.root=logger=1"],
        ["--config-dir", "logger"],  # a flag's value that is no key
        ["tracker=csv"],
    ],
)
def test_nothing_else_is_renamed(argument: list[str]) -> None:
    assert in_todays_keys(argument) == argument
