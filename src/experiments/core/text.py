"""How shapes, GPUs, paths, counts, names and samples are written in every message and record."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Unit:
    """What a dataset's samples are called in messages (file keys say images whatever the unit)."""

    one: str  # "FLOPs per image"
    many: str  # "1000 test images"
    rate: str  # "2,862 img/s"


IMAGES = Unit("image", "images", "img/s")
ROWS = Unit("row", "rows", "rows/s")
SAMPLES = Unit("sample", "samples", "samples/s")


def shared_unit(names: Iterable[str | None]) -> Unit:
    """The runs' shared `data.unit` (None, of older runs: images), or samples where they differ."""
    found = {ROWS if name == ROWS.many else IMAGES for name in names}
    return found.pop() if len(found) == 1 else SAMPLES


def shape_text(shape: Sequence[int]) -> str:
    """(3, 32, 32) as 3x32x32."""
    return "x".join(map(str, shape))


GPU_PREFIX = "cuda:"


def gpu_name(index: int) -> str:
    """cuda:N, in options, messages and records alike."""
    return f"{GPU_PREFIX}{index}"


def display_path(path: Path) -> str:
    """The path relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def as_typed(value: object) -> str:
    """A value as the command line types it: true, null, 2.5, and '64' for text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and _reads_as_other_than_text(value):
        return f"'{value}'"
    return str(value)


def _reads_as_other_than_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.lower() in ("true", "false", "null")
    return True


def printable(text: str) -> str:
    """`text` with unprintable characters escaped (`\\x1b`): one line, never a terminal command."""
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text
    )


def part_of_split(evaluated: int, in_split: int) -> str | None:
    """ "64 of 1,000" when only part of a split was evaluated; None for the whole split."""
    return f"{evaluated:,} of {in_split:,}" if evaluated < in_split else None


def abridged(options: list[str]) -> list[str]:
    """Collapse a run of `cuda:0`, `cuda:1`, ... into `cuda:0 ... cuda:15`, where the first was."""
    numbered = sorted(
        (option for option in options if option.startswith(GPU_PREFIX)),
        key=lambda option: int(option.partition(":")[2]),
    )
    if len(numbered) < 3:
        return options
    first = options.index(numbered[0])
    others = [option for option in options if option not in numbered]
    return [*others[:first], f"{numbered[0]} ... {numbered[-1]}", *others[first:]]


PREFIXES = ("", "k", "M", "G", "T", "P")


def short_count(count: float) -> str:
    """A count to three figures with its SI prefix: 314, 62.0k, 11.2M, 1.82G (inf as it is)."""
    if not math.isfinite(count) or abs(count) < 1000:
        return str(count)
    power = min(int(math.log10(abs(count))) // 3, len(PREFIXES) - 1)
    value = count / 1000**power
    decimals = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:.{decimals}f}{PREFIXES[power]}"
