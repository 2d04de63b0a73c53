"""The trackers of the `tracker` config group: where a run's numbers go besides metrics.jsonl."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection, Iterable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from omegaconf import DictConfig

from experiments.config.build import build, plain
from experiments.config.metric_names import LOSS, TEST, TRAIN, VAL
from experiments.core import collection
from experiments.core.errors import ExperimentError
from experiments.devices.plan import DevicePlan
from experiments.records import hparams
from experiments.records.hparams import METRICS_GROUP, Hyperparameters, Numbers, Value

log = logging.getLogger("experiments")

# The tag an epoch's row is found by in a tracker's store: every task's rows have a test loss.
EPOCH_ROW_TAG = LOSS.tag(TEST)
SPEED_TAG = "perf/images_per_second"
MFU_TAG = "perf/mfu"
STEP_TAGS = (LOSS.tag(TRAIN), "lr")


def step_scalars(loss: float, lr: float) -> dict[str, float]:
    return dict(zip(STEP_TAGS, (loss, lr), strict=True))


def epoch_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """An epoch row's numbers by their tags: each split's metrics, loss last, then speed and MFU."""
    tagged = {}
    for split in (VAL, TEST):
        on_split = [key for key in row if key.startswith(f"{split}_")]
        loss = LOSS.key(split)
        for key in [key for key in on_split if key != loss] + [loss] * (loss in on_split):
            tagged[key] = f"{split}/{key.removeprefix(f'{split}_')}"
    tagged |= {"images_per_second": SPEED_TAG, "mfu": MFU_TAG}
    return {tag: row[key] for key, tag in tagged.items() if isinstance(row.get(key), float)}


# The model's size among the hyperparameters, which some trackers log with the final numbers.
MODEL_SIZE = ("model_parameters", "model_flops_per_image", "model_training_flops_per_image")


def final_numbers(hyperparameters: Mapping[str, Any], numbers: Numbers) -> dict[str, float | None]:
    """The final `numbers` by their tags, and the model's size (`model/parameters`) where known."""
    final = {f"{METRICS_GROUP}/{name}": value for name, value in numbers.items()}
    size = [key for key in MODEL_SIZE if key in hyperparameters]
    return final | {
        f"model/{key.removeprefix('model_')}": float(hyperparameters[key]) for key in size
    }


# What a tracker's run is tagged with (of the HParams columns), besides its sweep.
TAGS = ("model", "dataset", "device", "placement", "precision", "seed")
# A global step and the numbers sent at it, by their tags.
Sent = tuple[int, dict[str, float]]


def sent_scalars(rows: Iterable[Mapping[str, Any]]) -> list[Sent]:
    return [
        (row["global_step"], epoch_scalars(row))
        if row["kind"] == "epoch"
        else (row["global_step"], step_scalars(row["train_loss"], row["lr"]))
        for row in rows
    ]


# results.json's key of the folder the tracker runs it names ("trackers") were begun in.
TRACKED_IN = "trackers_begun_in"


@dataclass(frozen=True)
class TrackedRun:
    name: str  # the run folder's name
    group: str | None  # its sweep's folder (relative to outputs/), for a sweep's job
    parameters: dict[str, Value]  # the config, flattened: {"model.name": "tudui", ...}
    tags: dict[str, str]  # model, dataset, device, placement, precision, seed, sweep
    resumed_id: str | None = None  # the tracker's id of the run `resume=` continues


def tracked_run(
    config: DictConfig, plan: DevicePlan, run_dir: Path, sweep: str | None
) -> TrackedRun:
    columns = hparams.hyperparameters(config, plan, [])
    return TrackedRun(
        name=run_dir.name,
        group=sweep,
        parameters=flattened(plain(config)),
        tags={
            **{column: str(columns[column]) for column in TAGS},
            **({"sweep": sweep} if sweep else {}),
        },
    )


class Tracker(Protocol):
    """A store of a run's numbers that something besides this project reads (docs/trackers.md)."""

    def begin(self, run: TrackedRun) -> str | None:
        """Begin `run` (or carry on `run.resumed_id`); returns the tracker's id of it, if any."""

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """Numbers by their tags at a global `step`."""

    def hyperparameters(
        self, hyperparameters: Hyperparameters, numbers: Numbers, step: int, swept: Collection[str]
    ) -> None:
        """The run's hyperparameters, those its sweep varies first, and its final `numbers`."""

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        """An encoded PNG of `size` (height, width, channels) at `step`."""

    def close(self, status: str) -> None:
        """Write what is pending and let go; the run ended `status` (completed, failed, ...)."""


ROW_TAGS = (STEP_TAGS[0], EPOCH_ROW_TAG)


@dataclass(frozen=True)
class Logged:
    """What a tracker's store holds of a run: its rows' steps, and what its end sent ("hparams")."""

    steps: Set[int] = frozenset()
    epochs: Set[int] = frozenset()
    ends: Set[str] = frozenset()


@runtime_checkable
class ReadBack(Tracker, Protocol):
    """A tracker that can say what its store holds, so a resumed run sends it only what it lacks."""

    record: str  # what a warning calls it: "the TensorBoard events"

    def logged(self, through: int) -> Logged | None:
        """What the store holds (None: nothing or unreadable), dropping steps after `through`
        where it can."""


def resumed_ids(
    recorded: Mapping[str, Any], run_dir: Path, chosen: Collection[str]
) -> dict[str, str]:
    """The tracker runs a resume of `run_dir` carries on (none where the folder was copied)."""
    found = recorded.get("trackers")
    found = found if isinstance(found, dict) else {}
    ids = {key: id_ for key, id_ in found.items() if isinstance(id_, str)}  # (read as data)
    begun_in = recorded.get(TRACKED_IN, str(run_dir.resolve()))
    if not ids or begun_in == str(run_dir.resolve()):
        return ids
    begun_anew = [key for key in ids if key in chosen]
    if begun_anew:
        log.info(
            "resume: this run folder was begun as %s (copied or moved since), so new tracker "
            "runs are begun for it (%s) and sent all it holds",
            begun_in,
            ", ".join(begun_anew),
        )
    return {}


def trackers(chosen: DictConfig, run_dir: Path) -> dict[str, Tracker]:
    built = {}
    # A library's modules (MLflow's are many objects), never collected.
    with collection.paused_then_frozen():
        for key, node in chosen.items():
            _refuse_missing_package(key, str(node._target_))
            built[key] = build(node, run_dir=run_dir)
    return built


def _refuse_missing_package(key: str, target: str) -> None:
    """Refuse a shipped tracker whose optional library is missing (Hydra's own report misleads)."""
    module = target.rpartition(".")[0]
    if not module.startswith("experiments.records."):
        return
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        package = str(error.name).partition(".")[0]
        raise ExperimentError(
            f"tracker={key} needs {package}, which is not installed: pip install -e "
            f"'.[trackers]' (or pip install {package})"
        ) from None


def flattened(config: Mapping[str, Any], prefix: str = "") -> dict[str, Value]:
    """A config (plain data) as one level of dotted keys; a list, or None, as its text."""
    flat: dict[str, Value] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            flat |= flattened(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value if isinstance(value, Value) else str(value)
    return flat
