"""Paths as the values of overrides, taken as they are whatever their characters."""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException

from experiments.core.errors import ExperimentError


def as_value(path: str) -> str:
    """`path` as one override value Hydra reads back as `path`: as it is, else single-quoted (within
    quotes a backslash is special only before a quote, or at the end)."""
    _refuse_uncarried(path)
    if _read_by_hydra(path) == path:
        return path
    quoted = re.sub(r"(\\*)'", lambda found: found[1] * 2 + "\\'", path)
    return "'" + re.sub(r"(\\+)$", lambda found: found[1] * 2, quoted) + "'"


def path_given(value: str) -> str:
    """The path a value names: as typed where it exists, else as Hydra reads it (`'my run'`)."""
    if Path(value).expanduser().exists():
        return value
    read = _read_by_hydra(value)
    return read if isinstance(read, str) and Path(read).expanduser().exists() else value


# Every check reads the same few arguments again, a report each run's: each is parsed once.
@functools.cache
def parsed(argument: str) -> Override | None:
    try:
        return OverridesParser.create().parse_override(argument)
    except HydraException:  # Hydra says what is wrong with it, in its place
        return None


def _read_by_hydra(value: str) -> object:
    read = parsed(f"key={value}")
    return None if read is None else read.value()


def _refuse_uncarried(path: str) -> None:
    """A control character would split the override and log lines, bytes not text in this locale
    no record could hold, and `${` OmegaConf reads as an interpolation wherever Hydra copies it."""
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
    """As it is, or as Python writes it where not printable; a lone surrogate as its byte."""
    if unicodedata.category(character) == "Cs":
        return repr(os.fsencode(character))[2:-1]
    return character if character.isprintable() else repr(character)[1:-1]


PATH_KEYS = ("ckpt", "dataset.root", "model.weights")  # (resume= and replay=: with_saved_overrides)


def with_paths_as_given(arguments: list[str]) -> list[str]:
    """An override of a PATH_KEYS key naming a path that exists means that path, as it is."""
    return [_path_as_given(argument) for argument in arguments]


def _path_as_given(argument: str) -> str:
    # As text: the grammar may not read a path as typed (`dataset.root=/data/my images`).
    key, _, value = argument.partition("=")
    if key.lstrip("+") not in PATH_KEYS:
        return argument
    path = path_given(value)
    return f"{key}={as_value(path)}" if Path(path).expanduser().exists() else argument
