"""A run folder's `.hydra/overrides.yaml` as `resume=` and `replay=` bring it back, in today's
keys, refused in one line where garbled, an evaluation's, or building what is not allowed."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override

from experiments.config.checks import whole_number
from experiments.config.metric_names import BEFORE_TASKS
from experiments.config.naming import planned_ahead, sweep_hydra_section
from experiments.config.paths import parsed
from experiments.config.renamed_keys import in_todays_keys
from experiments.config.saved_yaml import read_saved_yaml
from experiments.config.trust import Built, refuse_untrusted
from experiments.core.errors import ExperimentError
from experiments.core.files import RECORD, Unparsed, UnreadableFile, as_json, read_data

# Read from the text: earlier versions wrote paths as typed, which the grammar may not read.
WHERE_IT_RAN = ("resume=", "replay=", "hydra.run.dir=")
# What writes outside the run's folder: a file from elsewhere never chooses it, only typing.
WRITES_ELSEWHERE = ("tracker", "dataset.download", "dataset.source.download", "dataset.cache_dir")

log = logging.getLogger("experiments")


def overrides_saved_in(folder: Path, given: str, typed: list[str]) -> list[str]:
    """The overrides of the run in `folder` (`given`: the resume= or replay= typed), but where it
    ran and what it wrote elsewhere; `typed`: those typed now, whose targets it may build."""
    saved = folder / ".hydra" / "overrides.yaml"
    if not saved.is_file():
        raise ExperimentError(
            f"{given} is not a run folder (it has no {saved.name} "
            "in .hydra/); give a folder under outputs/ that a run made"
        )
    where = f"{given}: its .hydra/overrides.yaml"
    brought_back = _brought_back(_saved_overrides(saved, given), given, typed, where)
    measured = _metrics_measured(folder, brought_back)
    if measured:  # (what they declared, and what they left out: `task.metrics.<name>`)
        brought_back = [o for o in brought_back if not o.key_or_group.startswith(METRICS)]
    return [*(_renamed(override, folder) for override in brought_back), *measured]


def sweep_overrides_saved_in(folder: Path, given: str, typed: list[str]) -> list[str]:
    """The command line of the sweep in `folder` (its multirun.yaml's), as `overrides_saved_in`
    brings a run's back; refused where its sweeper did not plan its jobs ahead."""
    hydra = sweep_hydra_section(folder / "multirun.yaml")
    if not planned_ahead(hydra):
        raise ExperimentError(
            f"{given}: its sweep was run by {hydra['sweeper']['_target_']}, which chose each job "
            "from the results before it; only a sweep of Hydra's basic sweeper (comma lists) "
            "can be resumed: start the search again in a new folder"
        )
    lines = _override_lines(hydra["overrides"]["task"])
    if isinstance(lines, str):
        raise ExperimentError(
            f"{given}: its multirun.yaml's hydra.overrides.task {lines}, where Hydra wrote the "
            "sweep's command line as a list of key=value; put it back from a copy"
        )
    where = f"{given}: its multirun.yaml"
    return [override.input_line or "" for override in _brought_back(lines, given, typed, where)]


def _brought_back(lines: list[str], given: str, typed: list[str], where: str) -> list[Override]:
    """`lines` read from a file (`where`), in today's keys, without where it ran, what it wrote
    elsewhere (unless typed again) and what trust refuses."""
    kept = [override for override in in_todays_keys(lines) if not override.startswith(WHERE_IT_RAN)]
    read = OverridesParser.create().parse_overrides(kept)
    # One typed again now is not left out: what is typed keeps it.
    typed_now = map(parsed, in_todays_keys(typed))
    again = {_setting(override) for override in typed_now if override is not None}
    elsewhere = [
        override
        for override in read
        if writes_elsewhere(override) and _setting(override) not in again
    ]
    if elsewhere:
        log.warning(
            "%s: left out %s, which its run had: where a run writes outside its folder comes "
            "from what you type; type them again to keep them",
            given,
            " ".join(override.input_line or "" for override in elsewhere),
        )
    brought_back = [override for override in read if not writes_elsewhere(override)]
    _refuse_untrusted(brought_back, typed, where)
    return brought_back


def _setting(override: Override) -> tuple[str, str]:
    return override.key_or_group, str(override.value())


def writes_elsewhere(override: Override) -> bool:
    key = override.key_or_group
    return any(key == at or key.startswith((f"{at}.", f"{at}/")) for at in WRITES_ELSEWHERE)


def _renamed(override: Override, folder: Path) -> str:
    """`trainer.limit_eval_batches=N` as `trainer.limit_eval_images=` that many images."""
    as_saved = override.input_line or ""
    if override.key_or_group != "trainer.limit_eval_batches" or override.is_delete():
        return as_saved
    batches = override.value()
    if batches in ("", None):
        return "trainer.limit_eval_images=null"
    trainer = (
        _in_saved_config(folder, "trainer") if whole_number(batches) and batches >= 0 else None
    )
    batch_size = trainer.get("batch_size") if isinstance(trainer, dict) else None
    if not whole_number(batch_size):
        return as_saved  # refused as a key renamed, with what to type now
    return f"trainer.limit_eval_images={batches * batch_size}"


METRICS = "task.metrics"


def _metrics_measured(folder: Path, saved: list[Override]) -> list[str]:
    """`task.metrics=` as the run measured them (its config.yaml's, `BEFORE_TASKS` with no task,
    else results.json's), so it goes on measuring what its rows hold; [] where unknown."""
    if any(override.key_or_group == METRICS for override in saved):
        return []
    task = _in_saved_config(folder, "task", unread={})
    declared = task.get("metrics") if isinstance(task, dict) else BEFORE_TASKS.better_ways()
    if not declared and any(override.key_or_group == "task._target_" for override in saved):
        with contextlib.suppress(UnreadableFile, AttributeError):
            declared = read_data(folder / "results.json", RECORD, as_json).get("task_metrics")
    ways = declared.items() if isinstance(declared, dict) else ()
    if not ways or not all(
        f"{name}".isidentifier() and way in ("max", "min") for name, way in ways
    ):
        return []
    return [f"{METRICS}={{{','.join(f'{name}:{way}' for name, way in declared.items())}}}"]


def _in_saved_config(folder: Path, section: str, unread: Any = None) -> Any:
    """A section of the run's .hydra/config.yaml; `unread` where it is missing or unreadable."""
    config = folder / ".hydra" / "config.yaml"
    try:
        loaded = read_saved_yaml(config) if config.is_file() else {section: unread}
    except UnreadableFile:
        return unread
    return loaded.get(section) if isinstance(loaded, dict) else None


def _refuse_untrusted(saved: list[Override], typed: list[str], where: str) -> None:
    """Never Hydra's own config (its callbacks and launchers are built), nor what trust refuses."""
    for override in saved:
        if override.is_hydra_override():
            raise ExperimentError(
                f"{where} sets Hydra's own config ({override.input_line}), which no run's saved "
                "overrides do; it was not written by this tool, or it was altered, and was not "
                "used"
            )
    lines = [override.input_line or "" for override in saved]
    refuse_untrusted(Built.in_overrides(lines), Built.in_overrides(typed), where)


def _saved_overrides(saved: Path, given: str) -> list[str]:
    """The overrides in `saved`, refused where it holds something else or is an evaluation's."""
    try:
        overrides = _overrides_in(saved)
    except (UnreadableFile, Unparsed) as wrong:
        raise ExperimentError(
            f"{given}: its .hydra/overrides.yaml {wrong.why}, where Hydra wrote the run's "
            "overrides as a YAML list of key=value; put it back from a copy, or write them there "
            "again"
        ) from None
    evaluated = [override for override in overrides if override.startswith("ckpt=")]
    if evaluated:
        key = given.partition("=")[0]
        raise ExperimentError(
            f"{given} is the folder of an evaluation (eval.py {evaluated[-1]}), not of a "
            f"training run; {key}= takes a training run's folder, such as the one it evaluated"
        )
    return overrides


def _overrides_in(saved: Path) -> list[str]:
    # As written: an override's ${...} is Hydra's to resolve, in the run's config.
    lines = _override_lines(read_saved_yaml(saved))
    if isinstance(lines, str):
        raise Unparsed(lines)
    return lines


def _override_lines(entries: Any) -> list[str] | str:
    """`entries` as a list of overrides, or what is wrong with them."""
    if not isinstance(entries, list):
        return "holds no list"
    for entry in entries:
        # Hydra's forms: key=value, +key=value, ++key=value, ~key and ~key=value.
        if not isinstance(entry, str) or not ("=" in entry or entry.startswith("~")):
            return f"holds {entry!r}, which is no override (key=value)"
    return entries


def refuse_read_only(folder: Path, given: str) -> None:
    """Hydra's log file would fail first, naming no file. (A link is replaced, not written.)"""
    for path in (folder, *folder.iterdir(), *folder.glob("checkpoints/*")):
        linked = path != folder and path.is_symlink()
        if not linked and not os.access(path, os.W_OK):
            raise ExperimentError(
                f"{given}: {path} is read-only, and a resume writes into the run's own folder; "
                f"make it writable (chmod -R u+w {folder}), or replay= the run in a new folder"
            )
