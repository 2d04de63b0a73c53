"""A run folder's own overrides, as `resume=<run>` and `replay=<run>` bring them back: its
`.hydra/overrides.yaml`, read as data (garbled, an evaluation's, setting Hydra's own config or
naming a target neither shipped nor typed now: refused in one line), in today's keys.

Which keys said where a run ran (`resume=`, `replay=`, `hydra.run.dir=`), and whether a folder
is an evaluation's (`ckpt=`), is read from the text: earlier versions wrote paths there as typed,
some of which Hydra's grammar cannot read.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import ListConfig, OmegaConf

from experiments.config.trust import refuse_untrusted, targets_named, typed_again, typed_as
from experiments.core.errors import ExperimentError
from experiments.core.files import RECORD, read_text

# Where the run ran: the command that brings it back says that anew.
WHERE_IT_RAN = ("resume=", "replay=", "hydra.run.dir=")


def overrides_saved_in(folder: Path, given: str, typed: list[str]) -> list[str]:
    """The overrides of the run in `folder` (`given`: the resume=<run> or replay=<run> typed),
    but where it ran, in today's keys; `typed`: the overrides typed now, whose targets it may
    build."""
    saved = folder / ".hydra" / "overrides.yaml"
    if not saved.is_file():
        raise ExperimentError(
            f"{given} is not a run folder (it has no {saved.name} "
            "in .hydra/); give a folder under outputs/ that a run made"
        )
    kept = [
        override
        for override in _saved_overrides(saved, given)
        if not override.startswith(WHERE_IT_RAN)
    ]
    parsed = OverridesParser.create().parse_overrides(kept)
    _refuse_untrusted(given, parsed, typed)
    return [_renamed(override, folder) for override in parsed]


def _renamed(override: Override, folder: Path) -> str:
    """A saved override in today's keys: `trainer.limit_eval_batches=N`, batches of the run's
    trainer.batch_size, is `trainer.limit_eval_images=` that many images (drawn as every run's
    are now, not the first ones)."""
    as_saved = override.input_line or ""
    if override.key_or_group != "trainer.limit_eval_batches" or override.is_delete():
        return as_saved
    batches = override.value()
    if batches in ("", None):
        return "trainer.limit_eval_images=null"
    config = folder / ".hydra" / "config.yaml"
    counted = isinstance(batches, int) and not isinstance(batches, bool) and batches >= 0
    if not counted or not config.is_file():
        return as_saved  # refused as a key renamed, with what to type now
    batch_size = OmegaConf.create(read_text(config, RECORD)).trainer.batch_size
    return f"trainer.limit_eval_images={batches * batch_size}"


def _refuse_untrusted(given: str, saved: list[Override], typed: list[str]) -> None:
    """A run folder's overrides are data: they never set Hydra's own config (its callbacks and
    launchers are built from it), and a `_target_` they name is built only when it is a shipped
    one in its usual place or typed now (experiments.config.trust)."""
    for override in saved:
        if override.is_hydra_override():
            raise ExperimentError(
                f"{given}: its .hydra/overrides.yaml sets Hydra's own config "
                f"({override.input_line}), which no run's saved overrides do; it was not written "
                "by this tool, or it was altered, and was not used"
            )
    typed_targets = typed_as(targets_named(typed))
    where = f"{given}: its .hydra/overrides.yaml"
    named = targets_named(override.input_line or "" for override in saved)
    refuse_untrusted(named, typed_targets, where, typed_again)


def _saved_overrides(saved: Path, given: str) -> list[str]:
    """The overrides in a run folder's .hydra/overrides.yaml (`saved`; `given`: resume=<run> or
    replay=<run>), or one line naming what else the file holds; a folder eval.py made (its
    overrides name ckpt=) is refused too."""
    try:
        overrides = _overrides_in(saved)
    except ValueError as wrong:
        raise ExperimentError(
            f"{given}: its .hydra/overrides.yaml {wrong}, where Hydra wrote the run's overrides "
            "as a YAML list of key=value; put it back from a copy, or write them there again"
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
    """The list of overrides in `saved`; ValueError saying what else it holds."""
    try:
        loaded = OmegaConf.create(read_text(saved, RECORD))
    except UnicodeDecodeError:
        raise ValueError("is not text") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"is not YAML ({getattr(error, 'problem', None)}{where})") from None
    if not isinstance(loaded, ListConfig):
        raise ValueError("holds no list")
    # As written: an override's ${...} is Hydra's to resolve, in the run's config.
    entries = OmegaConf.to_container(loaded, resolve=False)
    for entry in entries:
        # Hydra's forms: key=value, +key=value, ++key=value, ~key and ~key=value.
        if not isinstance(entry, str) or not ("=" in entry or entry.startswith("~")):
            raise ValueError(f"holds {entry!r}, which is no override (key=value)")
    return entries


def refuse_read_only(folder: Path, given: str) -> None:
    """Hydra's log file would fail first, in words that name no file. (A link in the folder is
    replaced, never written through: what it points to is not asked.)"""
    for path in (folder, *folder.iterdir(), *folder.glob("checkpoints/*")):
        linked = path != folder and path.is_symlink()
        if not linked and not os.access(path, os.W_OK):
            raise ExperimentError(
                f"{given}: {path} is read-only, and a resume writes into the run's own folder; "
                f"make it writable (chmod -R u+w {folder}), or replay= the run in a new folder"
            )
