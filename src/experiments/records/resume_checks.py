"""What a resumed run may not change (older checkpoints that lack one are not checked for it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.config.choices import AUTO_BATCH
from experiments.core.errors import ExperimentError
from experiments.core.text import as_typed
from experiments.core.typed import mismatch
from experiments.data import fingerprint
from experiments.records import checkpoints, running
from experiments.records.recorded import BatchSearch

# What decides an epoch's steps, besides the images, the batch size and the number of processes.
BATCH_SETTINGS = ("limit_train_batches", "accumulate_batches")

# What a run keeps throughout, and why; a section stands for each of its keys.
KEPT_SETTINGS = {
    "trainer.batch_size": "a run keeps its batch size throughout",
    "trainer.auto_batch_halvings": "a run keeps the batch its search chose",
    "trainer.auto_batch": "a run keeps the batch its search chose",
    "trainer.auto_batch_min_steps": "a run keeps the batch its search chose",
    "trainer.ema": "a run keeps its moving average of the weights as it began",
    "dataset.augment": "a run keeps its augmentation throughout",
}


def refuse_other_data(checkpoint: dict[str, Any], run: str, data: dict[str, Any]) -> None:
    changed = fingerprint.difference(checkpoint["data"], data) if "data" in checkpoint else None
    if changed is not None:
        raise ExperimentError(
            f"resume={run}: its data differs from the data it was trained on: {changed}; its "
            "epochs were trained and selected on that data: resume on it, or start a new run "
            "on this data"
        )


def refuse_other_steps(
    checkpoint: dict[str, Any], run: str, steps_per_epoch: int, trainer: Mapping[str, Any]
) -> None:
    saved = checkpoint.get("steps_per_epoch")
    if saved is None or saved == steps_per_epoch:
        return
    then = {"accumulate_batches": 1, **checkpoint["config"]["trainer"]}  # (older: no such key)
    changed = [
        f"trainer.{key}={as_typed(then[key])} then, {as_typed(trainer[key])} now"
        for key in BATCH_SETTINGS
        if then[key] != trainer[key]
    ]
    why = "; ".join(changed) or (
        "the same trainer.batch_size, trainer.limit_train_batches and trainer.accumulate_batches: "
        "another number of processes"
    )
    raise ExperimentError(
        f"resume={run}: its epochs were {saved} optimizer steps each, {steps_per_epoch} now "
        f"({why}); its schedule and its records' step numbers count {saved} to an epoch: resume "
        "with the run's own settings, or start a new run"
    )


def batch_search_of(checkpoint: dict[str, Any], run: str) -> BatchSearch | None:
    """The search that chose the batch of `run` (None: given), from its checkpoint or results."""
    batch = checkpoint["config"]["trainer"]["batch_size"]
    if checkpoints.BATCH_SEARCH not in checkpoint:
        found = running.read_results(Path(run)).get(checkpoints.BATCH_SEARCH)
        return found if found is not None and _search_fault(found, batch) is None else None
    search = checkpoint[checkpoints.BATCH_SEARCH]
    fault = None if search is None else _search_fault(search, batch)
    if fault:
        raise ExperimentError(
            f"checkpoint {Path(run) / checkpoints.LAST} is not one of this tool's: its {fault}; "
            "it was altered, and was not used"
        )
    return search


def _search_fault(search: Any, batch: Any) -> str | None:
    """What a saved batch search holds that no search of `batch` writes, in words after "its"."""
    fault = mismatch(search, BatchSearch, checkpoints.BATCH_SEARCH)
    if fault is None and search["trained"] != batch:
        fault = (
            f"{checkpoints.BATCH_SEARCH}: trained is {search['trained']}, where the run trained "
            f"with trainer.batch_size={batch}"
        )
    return fault


def refuse_changed_settings(
    checkpoint: dict[str, Any], run: str, cfg: DictConfig, *, searched: bool
) -> None:
    saved = checkpoint["config"]
    then = _settings(lambda key: _at(saved, key))
    if searched:
        then["trainer.batch_size"] = AUTO_BATCH
    now = _settings(lambda key: OmegaConf.select(cfg, key, default=_ABSENT))
    for key in then:
        if key in now and then[key] != now[key]:
            was, asked = as_typed(then[key]), as_typed(now[key])
            why = next(said for kept, said in KEPT_SETTINGS.items() if key.startswith(kept))
            raise ExperimentError(
                f"resume={run}: it was trained with {key}={was}, not {asked}; {why}: resume with "
                f"{key}={was}, or start a new run with replay={run} {key}={asked}"
            )


# A setting a config lacks (a checkpoint's from before it, a section taken away now).
_ABSENT = object()


def _at(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = config.get(part, _ABSENT) if isinstance(config, Mapping) else _ABSENT
    return config


def _settings(value_at: Callable[[str], Any]) -> dict[str, Any]:
    """The `KEPT_SETTINGS` of a config, a section's as each of its keys, Enums by name."""
    return {leaf: value for kept in KEPT_SETTINGS for leaf, value in _leaves(kept, value_at(kept))}


def _leaves(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    if value is _ABSENT:
        return
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from _leaves(f"{key}.{name}", item)
    else:
        yield key, value.name if isinstance(value, Enum) else value


def refuse_other_average(checkpoint: dict[str, Any], run: str, decay: float | None) -> None:
    """Refuse to resume `run` keeping a moving average where it kept none, or the reverse."""
    saved = checkpoint["config"]["trainer"].get("ema", {}).get("decay")
    if (checkpoint.get("ema") is None) == (decay is None):
        return
    if decay is None:
        raise ExperimentError(
            f"resume={run}: it was trained with trainer.ema.decay={saved}, its epochs evaluated "
            "and selected by the moving average of its weights; resume with it (leave "
            f"trainer.ema.decay out), or start a new run without it with replay={run} "
            "trainer.ema.decay=null"
        )
    raise ExperimentError(
        f"resume={run}: it was trained without a moving average of its weights, which cannot "
        f"begin part-way (trainer.ema.decay={decay}); resume without it, or start a new run with "
        f"it with replay={run} trainer.ema.decay={decay}"
    )
