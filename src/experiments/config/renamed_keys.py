"""Config keys renamed (`logger` is `tracker`), taken in their old spelling, typed or saved; the
report reads a run folder's other records under the keys they were written with."""

from __future__ import annotations

import re
from collections.abc import Sequence

RENAMED = {"logger": "tracker"}

# A renamed key after an override's +, ++ or ~, before its subkeys, package, value or nothing.
_OLD_KEY = re.compile(rf"^(~|\+\+|\+)?({'|'.join(RENAMED)})(?=[.@=]|$)")

PACKAGE_FLAGS = ("-p", "--package")  # Hydra's flags whose value is a key (`--cfg`'s package)


def in_todays_keys(arguments: Sequence[str]) -> list[str]:
    """`arguments` with each renamed key (an override's, `-p`'s package) in today's spelling."""
    renamed = []
    for index, argument in enumerate(arguments):
        flag, equals, package = argument.partition("=")
        if flag in PACKAGE_FLAGS and equals:  # (--package=logger)
            argument = f"{flag}={_in_todays_key(package)}"
        elif _is_override(argument) or (index > 0 and arguments[index - 1] in PACKAGE_FLAGS):
            argument = _in_todays_key(argument)
        renamed.append(argument)
    return renamed


def _is_override(argument: str) -> bool:
    return not argument.startswith("-") and ("=" in argument or argument.startswith("~"))


def _in_todays_key(argument: str) -> str:
    return _OLD_KEY.sub(lambda old: f"{old[1] or ''}{RENAMED[old[2]]}", argument)
