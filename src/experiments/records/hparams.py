"""A run's hyperparameters and final numbers for TensorBoard's HParams dashboard.

    tensorboard --logdir outputs/2026-11-22/10-00-00_ab12cd34    # a sweep: a row per job

Written on the run's own SummaryWriter, into the event file of the run folder itself: torch's
`SummaryWriter.add_hparams` would open a sub-run folder of its own, a second row in every view.
The dashboard names each run (a "trial") by that folder, relative to the logdir: a sweep's job
folders carry the values they were swept over (`3_device-cuda-1+model-lenet`,
`experiments.config.naming`), so the trials keep them.

The dashboard's metric columns are scalars of the same run folder, tagged `whole_run/<name>`: a
single point each, which the Time Series tab shows as cards too. It orders its groups of cards by
name, and `whole_run` comes after the curves' (`lr`, `perf`, `test`, `train`, `val`), so the tab
opens on the curves. (Runs of earlier versions tagged them `hparams/<name>`, which came first.)

The dashboard lists the hyperparameters marked as differing first (TensorBoard sorts them by that
mark, then by name): those of the keys the run's sweep varies.

The three HParams summaries (experiment, session start, session end) are built here from
TensorBoard's own protos rather than with `torch.utils.tensorboard.summary.hparams`, which
records a bool as the number 1.0 (it checks for int before bool).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence
from enum import Enum
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from torch.utils.tensorboard import SummaryWriter

from experiments.devices.plan import DevicePlan

Value = bool | int | float | str

# Overrides that say where a run came from, how it was searched or where its numbers go, not how
# it trains.
NOT_HYPERPARAMETERS = ("resume", "replay", "hparams_search", "tracker")

# The columns every run has, by the config key they come from (an override of one of these keys
# is that column, not another).
COLUMNS = {
    "model": "model.name",
    "dataset": "dataset.name",
    "device": "device",
    "placement": "placement.name",
    "optimizer": "optimizer.name",
    "lr": "optimizer.lr",
    "batch_size": "trainer.batch_size",
    "precision": "trainer.precision",
    "scheduler": "scheduler.name",
    "seed": "trainer.seed",
}


def hyperparameters(
    cfg: DictConfig, plan: DevicePlan, overrides: Sequence[str]
) -> dict[str, Value]:
    """What a run is, as the dashboard's columns: model, dataset, device, placement, optimizer,
    lr, batch_size, precision, scheduler and seed, then each other key the command line set
    (the job's overrides, `hydra.overrides.task`: what a sweep varies). The device is what the
    run computed on, as every record names it: its `plan`'s text (cuda:1, dp over cuda:0,
    cuda:1), not the request `cfg.device` holds (auto).

    An override's key takes the composed config's value there; a config group its option's
    `name`; a list, a mapping or a deleted key the str of the override's value (`[0, 1]`,
    `None`). An override of a column's own key (`optimizer.lr=0.1`, `device=auto`) is that
    column, which keeps the plan the run resolved to."""
    values: dict[str, Value] = {
        column: str(plan) if column == "device" else _plain(OmegaConf.select(cfg, key))
        for column, key in COLUMNS.items()
    }
    covered = {*COLUMNS, *COLUMNS.values(), *NOT_HYPERPARAMETERS}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group  # (without its + or ~: the grammar keeps them apart)
        if key in covered or override.is_hydra_override():
            continue
        values[key] = _composed(cfg, key, str(override.value()))
    return values


def _composed(cfg: DictConfig, key: str, given: str) -> Value:
    """The config's value at an override's key, or the override's value as `given` where that is
    no single value (nested groups are named with /, their package with .)."""
    value = OmegaConf.select(cfg, key.replace("/", "."), default=None)
    if isinstance(value, DictConfig) and "name" in value:
        value = value.name
    if isinstance(value, bool | int | float | str):
        return _plain(value)
    return given


def _plain(value: Any) -> Value:
    """An Enum as its str (a `Choice` is a str subclass the protos would keep as such)."""
    if isinstance(value, Enum | str):
        return str(value)
    if isinstance(value, bool | int | float):
        return value
    raise TypeError(f"a hyperparameter is a bool, int, float or str, not {value!r}")


# The group of the metric columns' scalars (see above).
METRICS_GROUP = "whole_run"


def swept_columns(keys: Iterable[str]) -> list[str]:
    """The columns of the keys a sweep varies: a column's own key (`optimizer.lr`) is that column
    (`lr`), any other key a column of its name."""
    column_of = {key: column for column, key in COLUMNS.items()}
    return [column_of.get(key.lstrip("+~"), key.lstrip("+~")) for key in keys]


def write(
    writer: SummaryWriter,
    hyperparameters: dict[str, Value],
    metrics: dict[str, float | None],
    step: int,
    swept: Collection[str] = (),
) -> None:
    """Record the run's `hyperparameters` and its `metrics` at `step`, in the run folder `writer`
    writes to; the columns in `swept` (`swept_columns`) first, marked as differing. A metric this
    run has no value for (None: a run without a validation split has no val_accuracy) is no
    column of its: it would be an empty one."""
    metrics = {name: value for name, value in metrics.items() if value is not None}
    first = {name: hyperparameters[name] for name in swept if name in hyperparameters}
    hyperparameters = first | hyperparameters
    file_writer = writer._get_file_writer()
    for summary in (
        _experiment(hyperparameters, [f"{METRICS_GROUP}/{name}" for name in metrics], first),
        _session_start(hyperparameters),
        _session_end(),
    ):
        file_writer.add_summary(summary, step)
    for name, value in metrics.items():
        writer.add_scalar(f"{METRICS_GROUP}/{name}", value, step)
    writer.flush()


def _type(value: Value) -> api_pb2.DataType:
    if isinstance(value, bool):  # before int: True is an int too
        return api_pb2.DATA_TYPE_BOOL
    if isinstance(value, float):
        return api_pb2.DATA_TYPE_FLOAT64
    return api_pb2.DATA_TYPE_STRING  # an int too: see _session_start


def _experiment(
    hyperparameters: dict[str, Value], tags: list[str], swept: Collection[str]
) -> Summary:
    """The dashboard's columns: every hyperparameter with its type (those `swept` marked as
    differing), and the metric tags."""
    experiment = api_pb2.Experiment(
        hparam_infos=[
            api_pb2.HParamInfo(name=name, type=_type(value), differs=name in swept)
            for name, value in hyperparameters.items()
        ],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in tags],
        time_created_secs=time.time(),
    )
    return _summary(
        metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)
    )


def _session_start(hyperparameters: dict[str, Value]) -> Summary:
    """This run's row. No group name: each run folder is a row of its own, even when two runs
    share every hyperparameter (a repeat), rather than one row of their averages.

    An int is its digits: the dashboard shows every number to five significant digits (a batch
    size of 64 as 64.000, a seed of 123456789 as 1.2346e+8), so whole numbers are shown as text
    (and sorted and filtered as text)."""
    start = plugin_data_pb2.SessionStartInfo()
    for name, value in hyperparameters.items():
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
        elif isinstance(value, int):
            start.hparams[name].string_value = str(value)
        elif isinstance(value, float):
            start.hparams[name].number_value = value
        else:
            start.hparams[name].string_value = value
    return _summary(
        metadata.SESSION_START_INFO_TAG,
        plugin_data_pb2.HParamsPluginData(session_start_info=start),
    )


def _session_end() -> Summary:
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time())
    return _summary(
        metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end)
    )


def _summary(tag: str, data: plugin_data_pb2.HParamsPluginData) -> Summary:
    """A summary as TensorBoard's own HParams writer makes it (summary_v2._summary_pb)."""
    summary = Summary()
    summary.value.add(
        tag=tag, metadata=metadata.create_summary_metadata(data), tensor=metadata.NULL_TENSOR
    )
    return summary
