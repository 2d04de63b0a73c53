"""Configs as the records a run writes hold them (experiments.config.build.as_written): a text read
from the environment is kept as its interpolation's text, whatever the record."""

from __future__ import annotations

import pytest

from experiments.config.build import as_written, plain
from helpers import compose_config

SECRET = "s3cret-token"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKING_TOKEN", SECRET)
    monkeypatch.setenv("ARRAY_TASK", "7")


def test_a_text_read_from_the_environment_is_recorded_as_its_interpolation() -> None:
    cfg = compose_config(
        "tracker=[tensorboard,mlflow]",
        "tracker.mlflow.tracking_uri=https://runs:${oc.env:TRACKING_TOKEN}@tracking.example",
        "+model.tags=[lenet,'${oc.env:TRACKING_TOKEN}']",
        "+model.copied=${tracker.mlflow.tracking_uri}",  # (reads it through another key)
        "trainer.seed=${oc.env:ARRAY_TASK}",
    )
    record = plain(as_written(cfg))
    uri = "https://runs:${oc.env:TRACKING_TOKEN}@tracking.example"
    assert record["tracker"]["mlflow"]["tracking_uri"] == uri
    assert record["model"]["tags"] == ["lenet", "${oc.env:TRACKING_TOKEN}"]
    assert record["model"]["copied"] == uri
    # A number is the run's own (its seed), and no secret: recorded as used.
    assert record["trainer"]["seed"] == 7
    assert SECRET not in str(record)
    # What the run builds still reads the environment.
    assert plain(cfg)["tracker"]["mlflow"]["tracking_uri"].startswith(f"https://runs:{SECRET}@")
    assert record["optimizer"] == plain(cfg)["optimizer"]  # (the rest as it was)


def test_a_config_that_reads_no_text_from_the_environment_is_recorded_as_it_is() -> None:
    cfg = compose_config("trainer.seed=${oc.env:ARRAY_TASK}")
    assert as_written(cfg) is cfg
