"""A run's hyperparameters for TensorBoard's HParams dashboard, on the run's own writer (torch's
`add_hparams` opens a sub-run folder) from TensorBoard's protos (torch writes a bool as 1.0)."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from torch.utils.tensorboard import SummaryWriter

from experiments.devices.plan import DevicePlan

Value = bool | int | float | str
Hyperparameters = Mapping[str, Value]
Numbers = Mapping[str, float | None]  # a run's final numbers (None: not measured)
NOT_HYPERPARAMETERS = ("resume", "replay", "hparams_search", "tracker")
# The columns every run has, by the config key they come from (an override of it is that column).
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
    """The dashboard's columns: the `COLUMNS`, then each other key the command line set."""
    values: dict[str, Value] = {
        column: str(plan) if column == "device" else _plain(OmegaConf.select(cfg, key))
        for column, key in COLUMNS.items()
    }
    covered = {*COLUMNS, *COLUMNS.values(), *NOT_HYPERPARAMETERS}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group  # (without its + or ~: the grammar keeps them apart)
        if key not in covered and not override.is_hydra_override():
            values[key] = _composed(cfg, key, str(override.value()))
    return values


def _composed(cfg: DictConfig, key: str, given: str) -> Value:
    """The config's value at an override's key (a group's option's `name`), else the override's."""
    value = OmegaConf.select(cfg, key.replace("/", "."), default=None)
    if isinstance(value, DictConfig) and "name" in value:
        value = value.name
    return _plain(value) if isinstance(value, Value) else given


def _plain(value: Any) -> Value:
    """An Enum as its str (a `Choice` is a str subclass the protos would keep as such)."""
    if isinstance(value, Enum | str):
        return str(value)
    if isinstance(value, bool | int | float):
        return value
    raise TypeError(f"a hyperparameter is a bool, int, float or str, not {value!r}")


# The metric columns' scalars' group: it sorts after the curves', so Time Series opens on those.
METRICS_GROUP = "whole_run"


def swept_columns(keys: Iterable[str]) -> list[str]:
    column_of = {key: column for column, key in COLUMNS.items()}
    return [column_of.get(key.lstrip("+~"), key.lstrip("+~")) for key in keys]


def write(
    writer: SummaryWriter,
    hyperparameters: dict[str, Value],
    metrics: dict[str, float | None],
    step: int,
    swept: Collection[str] = (),
) -> None:
    """The run's `hyperparameters` and `metrics` (but None ones), the `swept` columns first."""
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
    if isinstance(value, bool):
        return api_pb2.DATA_TYPE_BOOL
    return api_pb2.DATA_TYPE_FLOAT64 if isinstance(value, float) else api_pb2.DATA_TYPE_STRING


def _experiment(
    hyperparameters: dict[str, Value], tags: list[str], swept: Collection[str]
) -> Summary:
    experiment = api_pb2.Experiment(
        hparam_infos=[
            api_pb2.HParamInfo(name=name, type=_type(value), differs=name in swept)
            for name, value in hyperparameters.items()
        ],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in tags],
        time_created_secs=time.time(),
    )
    return _summary(metadata.EXPERIMENT_TAG, experiment=experiment)


def _session_start(hyperparameters: dict[str, Value]) -> Summary:
    """This run's row (no group name: a row of its own even for repeats)."""
    start = plugin_data_pb2.SessionStartInfo()
    for name, value in hyperparameters.items():
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
        elif isinstance(value, float):
            start.hparams[name].number_value = value
        else:  # an int too: the dashboard shows numbers to five significant digits
            start.hparams[name].string_value = str(value)
    return _summary(metadata.SESSION_START_INFO_TAG, session_start_info=start)


def _session_end() -> Summary:
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time())
    return _summary(metadata.SESSION_END_INFO_TAG, session_end_info=end)


def _summary(tag: str, **data: Any) -> Summary:
    """A summary as TensorBoard's own HParams writer makes it (summary_v2._summary_pb)."""
    plugin = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(**data))
    summary = Summary()
    summary.value.add(tag=tag, metadata=plugin, tensor=metadata.NULL_TENSOR)
    return summary
