"""TensorBoard as a person opens it on a sweep, read back with TensorBoard's own HParams plugin:
the swept keys first, trials named by the values they ran with, and the Time Series tab's
groups of cards with the curves before the one-point final numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard import context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from tensorboard.plugins.hparams import (
    api_pb2,
    backend_context,
    get_experiment,
    list_session_groups,
)
from torch.utils.tensorboard import SummaryWriter

from experiments.config.naming import job_name
from experiments.records import hparams
from helpers import read_events

SWEPT = ["optimizer.lr", "trainer.seed"]  # as `-m optimizer.lr=0.01,0.1 trainer.seed=0` sweeps


def write_sweep(logdir: Path) -> list[str]:
    """Two jobs of a sweep over the learning rate, each in the folder the sweep names it by, with
    a curve and its HParams; returns the folders' names."""
    names = []
    for number, lr in enumerate([0.01, 0.1]):
        overrides = [f"optimizer.lr={lr}", "trainer.seed=0", "model=lenet"]
        names.append(job_name(number, overrides, set(SWEPT)))
        writer = SummaryWriter(logdir / names[-1])
        writer.add_scalar("train/loss", 2.3, 1)
        chosen = {"model": "lenet", "device": "cpu", "lr": lr, "batch_size": 64, "seed": 0}
        final = {"test_accuracy": 0.1 + lr, "val_accuracy": None}
        hparams.write(writer, chosen, final, 4, hparams.swept_columns(SWEPT))
        writer.close()
    return names


def plugin_context(logdir: Path) -> backend_context.Context:
    """The HParams plugin's view of `logdir`, as `tensorboard --logdir` builds it."""
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    return backend_context.Context(
        base_plugin.TBContext(logdir=str(logdir), data_provider=provider)
    )


def test_hparams_lists_the_swept_keys_first_and_names_trials_by_their_values(
    tmp_path: Path,
) -> None:
    names = write_sweep(tmp_path)
    plugin, request = plugin_context(tmp_path), context.RequestContext()

    experiment = get_experiment.Handler(request, plugin, "", api_pb2.GetExperimentRequest()).run()
    columns = [(info.name, info.differs) for info in experiment.hparam_infos]
    assert columns[:2] == [("lr", True), ("seed", True)]  # what the sweep varies, first
    assert all(not differs for _, differs in columns[2:])
    assert [info.name.tag for info in experiment.metric_infos] == ["whole_run/test_accuracy"]

    everything = api_pb2.ListSessionGroupsRequest(
        start_index=0, slice_size=10, allowed_statuses=[api_pb2.STATUS_SUCCESS]
    )
    groups = list_session_groups.Handler(request, plugin, "", everything).run().session_groups
    trials = {group.name: group.metric_values[0].value for group in groups}
    assert names == ["0_optimizer.lr-0.01+trainer.seed-0", "1_optimizer.lr-0.1+trainer.seed-0"]
    assert trials.keys() == set(names)  # a trial per run, named by its values
    assert trials[names[1]] == pytest.approx(0.2)


def test_the_final_numbers_come_after_the_curves_in_the_time_series_tab(tmp_path: Path) -> None:
    (name, _) = write_sweep(tmp_path)
    tags = read_events(tmp_path / name).Tags()["scalars"]
    # TensorBoard orders its groups of cards by name: the curves first, the one-point cards last.
    assert sorted(tags) == ["train/loss", "whole_run/test_accuracy"]
    assert not [tag for tag in tags if tag.startswith("hparams/")]


def test_a_swept_key_is_its_column() -> None:
    keys = ["optimizer.lr", "device", "model", "trainer.batch_size", "+note", "model.arch"]
    assert hparams.swept_columns(keys) == [
        "lr",
        "device",
        "model",
        "batch_size",
        "note",
        "model.arch",
    ]
