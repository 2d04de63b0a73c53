"""What the report reads of a run folder, checked against the types its readers declare; a file that
cannot be read raises `UnreadableRun` naming it, for the run's row to say."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import yaml
from omegaconf import Container, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from experiments.config.metric_names import (
    BEFORE_TASKS,
    TEST,
    TRAIN_LOSS,
    VAL,
    TaskMetrics,
    declared,
)
from experiments.config.overrides import parsed
from experiments.config.task_metrics import metrics_of, percent_names, task_class
from experiments.core.errors import ExperimentError
from experiments.core.files import LOG, RECORD, as_json, as_json_lines, as_yaml, read_data
from experiments.core.typed import checked
from experiments.records.recorded import EvaluationRecord, ResultsFile, task_numbers
from experiments.report.run_configs import run_config
from experiments.training.history import EpochRow, History, validated
from experiments.training.selection import Monitor

CONFIG = ".hydra/config.yaml"
OVERRIDES = ".hydra/overrides.yaml"
HYDRA_YAML = ".hydra/hydra.yaml"
RESULTS = "results.json"
METRICS = "metrics.jsonl"

GROUPS = ("model", "dataset", "device", "placement")
# Where a run came from, not what it ran: no swept key.
ORIGINS = ("resume", "replay")

# The keys of a run's config that the report reads, resolved where they can be.
ConfigRead = TypedDict(
    "ConfigRead",
    {
        "model.name": str | None,
        "dataset.name": str | None,
        "dataset.num_classes": int | None,
        "device.name": str | None,
        "placement.name": str | None,
        "task": dict[str, Any] | None,
        "task.name": str | None,
        "task._target_": str | None,
        "task.metrics": dict[str, Literal["min", "max"]] | None,
        "trainer.monitor": str | None,
        "trainer.monitor_mode": Literal["auto", "min", "max"] | None,
    },
)


class _Row(TypedDict):
    kind: str  # step, epoch, ...


class UnreadableRun(Exception):
    """A run's file that the report cannot read; the message names the file, in one phrase."""


@dataclass(frozen=True)
class RunRecords:
    """A run's files as the report reads them, each checked for its shape."""

    config: DictConfig  # read-only; a key that cannot be resolved is read as None
    evaluation: bool  # eval.py's, not a training run's
    names: dict[str, str | None]  # the model, dataset, device and placement: their `name`
    measures: TaskMetrics  # its task's metrics
    own_task: bool  # whether they are a task of one's own's
    given: dict[str, str]  # the overrides its command line gave, by key
    choices: dict[str, Any]  # Hydra's choice in each config group (none without hydra.yaml)
    results: ResultsFile  # nothing where there is no results.json
    history: History  # metrics.jsonl's epoch rows (none before an epoch is done)
    monitor: Monitor | None  # what selects its epoch, where it has a validation split


def read_run(run_dir: Path) -> RunRecords:
    """The files of the run in `run_dir`; UnreadableRun naming the first that cannot be read."""
    try:
        config = _config(run_dir)
        read = _config_read(config)
        evaluation = is_evaluation(config)
        results = _results(run_dir, evaluation)
        measures, own_task = _measures(read, results)
        history = epochs(run_dir)
        monitor = _monitor(read, measures) if validated(history) else None
        _check_epochs(history, measures, monitor)
        names = {group: read[f"{group}.name"] for group in GROUPS}
        given, choices = _given(run_dir), _choices(run_dir)
        return RunRecords(
            config, evaluation, names, measures, own_task, given, choices, results, history, monitor
        )
    except ExperimentError as error:
        raise UnreadableRun(str(error)) from None


def is_evaluation(config: DictConfig) -> bool:
    """Whether a run's config is an evaluation's: it has no trainer."""
    return "trainer" not in config


def epochs(run_dir: Path) -> History:
    """The epoch rows of a run's metrics.jsonl as written, with their `kind` and `time`."""
    path = run_dir / METRICS
    if not path.is_file():
        return []
    with _reading(METRICS):
        rows = read_data(path, LOG, as_json_lines)
    for number, row in enumerate(rows, start=1):
        checked(row, _Row, f"{METRICS} row {number}")
    return [row for row in rows if row["kind"] == "epoch"]


@contextlib.contextmanager
def _reading(record: str) -> Iterator[None]:
    """A parser's failure besides `read_data`'s to read `record` as UnreadableRun."""
    try:
        yield
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None)
        raise UnreadableRun(f"{record} is not YAML ({problem}{where})") from None
    except RecursionError:
        raise UnreadableRun(f"{record} is nested too deep to read") from None
    except OmegaConfBaseException as error:
        raise UnreadableRun(f"{record} is not a config ({str(error).splitlines()[0]})") from None
    except (OSError, ValueError) as error:  # OmegaConf's "Invalid loaded object type", say
        why = getattr(error, "strerror", None) or error
        raise UnreadableRun(f"{record} cannot be read ({why})") from None


def _config(run_dir: Path) -> DictConfig:
    with _reading(CONFIG):
        config = run_config(run_dir / CONFIG)
    if not isinstance(config, DictConfig):
        raise UnreadableRun(f"{CONFIG} is a list, where the run's config (an object) belongs")
    return config


def _config_read(config: DictConfig) -> ConfigRead:
    read: dict[str, Any] = {}
    for key in ConfigRead.__optional_keys__ | ConfigRead.__required_keys__:
        value = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
        with _reading(CONFIG):  # a key within that is not text ({1: 2})
            read[key] = OmegaConf.to_container(value) if isinstance(value, Container) else value
    checked(read, ConfigRead, CONFIG)
    return cast(ConfigRead, read)


def _results(run_dir: Path, evaluation: bool) -> ResultsFile:
    path = run_dir / RESULTS
    if not (path.exists() or path.is_symlink()):  # (a device in its place is read, and refused)
        return {}
    results = read_data(path, RECORD, as_json, name=RESULTS)
    checked(results, ResultsFile, RESULTS, partial=True)
    if evaluation:
        checked(results, EvaluationRecord, RESULTS, partial=True)
    if "started_at" in results:
        try:
            datetime.fromisoformat(results["started_at"])
        except ValueError:
            said = f"started_at is {results['started_at']}, where a time (ISO 8601) belongs"
            raise UnreadableRun(f"{RESULTS}: {said}") from None
    return results


def _measures(read: ConfigRead, results: ResultsFile) -> tuple[TaskMetrics, bool]:
    """The run's task's metrics, its numbers checked against them; whether they are one's own."""
    task = None
    if read["task"]:
        task = {key: read[f"task.{key}"] for key in ("name", "_target_", "metrics")}
    measures = metrics_of({"task": task, "dataset": {"num_classes": read["dataset.num_classes"]}})
    if measures is None and results.get("task_metrics"):
        measures = declared(results["task_metrics"], percent_names())
    own = measures is not None and task is not None and task_class(task) is None
    measures = measures or BEFORE_TASKS
    checked(results, task_numbers(measures), RESULTS, partial=True)
    return measures, own


def _check_epochs(history: History, measures: TaskMetrics, monitor: Monitor | None) -> None:
    metrics = {"epoch", "epoch_seconds", TRAIN_LOSS, *measures.metrics_on(TEST)}
    if monitor is not None:
        metrics.update({*measures.metrics_on(VAL), monitor.metric})
    for number, row in enumerate(history, start=1):
        where = f"{METRICS} epoch row {number}"
        checked(row, EpochRow, where, partial=True)
        for key in sorted(metrics):
            if key not in row:
                raise UnreadableRun(f"{where} lacks {key}")
            checked(row[key], float, f"{where}: {key}")


def _monitor(read: ConfigRead, measures: TaskMetrics) -> Monitor:
    monitor, mode = read["trainer.monitor"], read["trainer.monitor_mode"] or "auto"
    if mode == "auto" and monitor is not None and monitor not in measures.metrics_on(VAL):
        measured = " or ".join(measures.metrics_on(VAL))
        raise UnreadableRun(f"{CONFIG}: trainer.monitor is {monitor}, where {measured} belongs")
    return Monitor.chosen(monitor, mode, measures)


def _given(run_dir: Path) -> dict[str, str]:
    """The run's overrides by key, as given; one that Hydra's grammar cannot read left out."""
    path = run_dir / OVERRIDES
    if not path.is_file():
        return {}
    overrides = read_data(path, RECORD, as_yaml) or []
    checked(overrides, list[str], OVERRIDES)
    given = {}
    for override in filter(None, map(parsed, overrides)):
        if override.key_or_group not in ORIGINS:
            value = override.value()
            given[override.key_or_group] = "" if value is None else str(value)
    return given


def _choices(run_dir: Path) -> dict[str, Any]:
    path = run_dir / HYDRA_YAML
    if not path.is_file():
        return {}
    recorded: Any = read_data(path, RECORD, as_yaml)
    for key in ("hydra", "runtime", "choices"):
        recorded = recorded.get(key) if isinstance(recorded, dict) else None
    checked(recorded, dict[str, Any] | None, f"{HYDRA_YAML}: hydra.runtime.choices")
    return recorded or {}
