"""Config keys this project has renamed, still taken in their old spelling: the config group of
the trackers was `logger`, and is `tracker` (`records.tracker`).

    typed now            logger=csv, +logger.mlflow.timeout=5, ~logger, --cfg job -p logger
    saved by a run       its .hydra/overrides.yaml, which resume= and replay= bring back

Both are read in today's keys before Hydra composes the config. A run folder's other records
(its config.yaml, Hydra's choices) are left as they were written: the report reads an earlier
version's run as it ran, under its own keys.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Today's key of each renamed one.
RENAMED = {"logger": "tracker"}

# A renamed key at the start of an override, after its +, ++ or ~, and before what follows the
# key: its subkeys, its package (@), its value, or nothing (a deletion: ~logger).
_OLD_KEY = re.compile(rf"^(~|\+\+|\+)?({'|'.join(RENAMED)})(?=[.@=]|$)")

# Hydra's flag whose value is a key (the package `--cfg` prints).
PACKAGE_FLAGS = ("-p", "--package")


def in_todays_keys(arguments: Sequence[str]) -> list[str]:
    """`arguments` (a command line, or a run's saved overrides) with each renamed key in today's
    spelling: an override's key, and the package `-p` names; anything else as it is."""
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
    """Whether an argument sets or deletes a key (key=value, ~key), rather than being a flag."""
    return not argument.startswith("-") and ("=" in argument or argument.startswith("~"))


def _in_todays_key(argument: str) -> str:
    return _OLD_KEY.sub(lambda old: f"{old[1] or ''}{RENAMED[old[2]]}", argument)
