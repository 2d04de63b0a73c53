"""YAML a run folder holds, read as data: a regular file of a mebibyte at most, without the
anchors and aliases Hydra never writes (aliases of aliases grow as a power: a "billion laughs")."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import yaml
from yaml.events import AliasEvent

from experiments.core.files import MIB, PUT_BACK, Bound, Unparsed, not_yaml, read_data

SAVED_YAML = Bound("a run's saved configuration", MIB, PUT_BACK)


class _Aliased(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _WithoutAliases(yaml.SafeLoader):
    """PyYAML's safe loader, stopping at the first anchor or alias."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Aliased(event.start_mark.line + 1)
        return super().compose_node(parent, index)


def read_saved_yaml(path: Path) -> Any:
    """UnreadableFile where not text, not YAML, or aliased; ExperimentError where too big."""
    return read_data(path, SAVED_YAML, _without_aliases)


def _without_aliases(file: IO[bytes]) -> Any:
    try:
        text = file.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Unparsed("is not text") from None
    try:
        return yaml.load(text, Loader=_WithoutAliases)  # (a SafeLoader)
    except yaml.YAMLError as error:
        raise Unparsed(not_yaml(error)) from None
    except _Aliased as aliased:
        raise Unparsed(
            f"holds a YAML anchor or alias (&name, *name) at line {aliased.line}, which Hydra "
            "never writes"
        ) from None
