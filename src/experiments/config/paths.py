"""Paths as the values of overrides: a file or folder that exists is taken as it is, whatever
its characters, and one that no override can carry is refused saying how to pass it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from experiments.core.errors import ExperimentError


def as_value(path: str) -> str:
    """`path` as one value of an override that Hydra reads back as `path`, whatever its
    characters: as it is where the grammar reads it so (`/home/me/outputs/2026-11-24/10-00-00_ab`),
    else single-quoted. Hydra's grammar (OverrideLexer.g4) reads only ASCII letters, digits and a
    few signs unquoted: `outputs/café`, `ünï_ドル` and the folders of sweep jobs made by earlier
    versions (`1_trainer.seed=1,model=lenet`) are quoted values; within quotes a backslash is
    special only before a quote, or at the end. A path no override can carry is refused."""
    _refuse_uncarried(path)
    if _read_by_hydra(path) == path:
        return path
    quoted = re.sub(r"(\\*)'", lambda found: found[1] * 2 + "\\'", path)
    return "'" + re.sub(r"(\\+)$", lambda found: found[1] * 2, quoted) + "'"


def path_given(value: str) -> str:
    """The path an override's value names: the value as typed (a path that exists is taken as it
    is, whatever its characters), or as Hydra's grammar reads it where only that exists (quoted
    as Hydra's documentation shows: `resume='outputs/my run'`)."""
    if Path(value).expanduser().exists():
        return value
    read = _read_by_hydra(value)
    return read if isinstance(read, str) and Path(read).expanduser().exists() else value


def _read_by_hydra(value: str) -> object:
    """What Hydra's grammar reads `value` as (a string, a number, a sweep...); None where it
    cannot read it."""
    try:
        return OverridesParser.create().parse_override(f"key={value}").value()
    except HydraException:
        return None


def _refuse_uncarried(path: str) -> None:
    """Say how to pass a path no override can carry: one with a control character (a newline
    would split the override, and every log line that names the run), with bytes that are not
    text in this locale (no record could be written with them), or with `${`, which OmegaConf
    reads as an interpolation wherever Hydra copies the run folder's path (its log file's)."""
    uncarried = [character for character in path if unicodedata.category(character) in ("Cc", "Cs")]
    if uncarried:
        first = uncarried[0]
        what = "a control character" if unicodedata.category(first) == "Cc" else "not text"
        held = f"{_escaped(first)} ({what})"
    elif "${" in path:
        held = "${ (the start of an interpolation)"
    else:
        return
    raise ExperimentError(
        f"{''.join(map(_escaped, path))} holds {held}, which an override cannot carry; rename "
        "it, and pass its new name"
    )


def _escaped(character: str) -> str:
    """A character as it is, or, if not printable, as Python writes it (`\\n`, `\\x1b`), a byte
    that is not text (a lone surrogate) as that byte (`\\xe9`)."""
    if unicodedata.category(character) == "Cs":
        return repr(os.fsencode(character))[2:-1]
    return character if character.isprintable() else repr(character)[1:-1]


# The keys whose value names a file or folder that must exist (`resume=` and `replay=` are
# `with_saved_overrides`').
PATH_KEYS = ("ckpt", "dataset.root", "model.weights")


def with_paths_as_given(arguments: list[str]) -> list[str]:
    """An override of a PATH_KEYS key (`ckpt=<path>`) naming a file or folder that exists means
    that path, as it is."""
    return [_path_as_given(argument) for argument in arguments]


def _path_as_given(argument: str) -> str:
    # As text, not by Hydra's grammar: the value is a path as typed, which the grammar may not
    # read (`dataset.root=/data/my images`), and which this makes into one it reads.
    key, _, value = argument.partition("=")
    if key.lstrip("+") not in PATH_KEYS:
        return argument
    path = path_given(value)
    return f"{key}={as_value(path)}" if Path(path).expanduser().exists() else argument
