"""Config keys this project has renamed (`logger` is `tracker`), still taken in their old
spelling, typed now or saved in a run's overrides. A run folder's other records are left as
written: the report reads an earlier version's run under its own keys."""

from __future__ import annotations

import re
from collections.abc import Sequence

RENAMED = {"logger": "tracker"}

# A renamed key after an override's +, ++ or ~, before its subkeys, package, value or nothing.
_OLD_KEY = re.compile(rf"^(~|\+\+|\+)?({'|'.join(RENAMED)})(?=[.@=]|$)")

# Hydra's flags whose value is a key (the package `--cfg` prints).
PACKAGE_FLAGS = ("-p", "--package")


def in_todays_keys(arguments: Sequence[str]) -> list[str]:
    """`arguments` with each renamed key (an override's, the package `-p` names) in today's
    spelling."""
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
