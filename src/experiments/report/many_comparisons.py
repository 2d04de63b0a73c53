"""Many comparisons at once: Holm's step-down, so a sweep's verdicts on one measure are wrong
somewhere at most 5% of the time, not 5% each; and a compact letter display for a ranking,
where configurations that share a letter are not told apart."""

from __future__ import annotations

import string
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

ERROR_RATE = 0.05


@dataclass(frozen=True)
class Holm:
    """One comparison's outcome in its family: whether it differs, and the confidence its
    interval is drawn at, so the interval excludes no change exactly when it differs."""

    differs: bool
    confidence: float


def holm(p_values: Sequence[float], error_rate: float = ERROR_RATE) -> list[Holm]:
    """Holm's step-down over a family's p-values, in their order. The k-th smallest is tested
    at error_rate / (m - k + 1) until one fails; that one and every larger p-value take the
    failed step's level, which their intervals then hold no change at."""
    m = len(p_values)
    outcome: list[Holm | None] = [None] * m
    level = error_rate / m if m else error_rate
    stopped = False
    for step, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        if not stopped:
            level = error_rate / (m - step)
            stopped = p_values[i] >= level
        outcome[i] = Holm(not stopped, 1 - level)
    return [each for each in outcome if each is not None]


def letters(ranked: Sequence[Hashable], differ: set[frozenset[Hashable]]) -> dict[Hashable, str]:
    """A compact letter display by insert and absorb (Piepho, 2004): `ranked` best first,
    `differ` the pairs told apart. Two share a letter exactly when they are not told apart;
    letters run a, b, c ... from the best's group."""
    groups: list[list[Hashable]] = [list(ranked)]
    for pair in differ:
        first, second = tuple(pair)
        split: list[list[Hashable]] = []
        for group in groups:
            if first in group and second in group:
                split += [[x for x in group if x != first], [x for x in group if x != second]]
            else:
                split.append(group)
        groups = [g for g in split if not any(set(g) < set(h) for h in split)]
        groups = [g for i, g in enumerate(groups) if g not in groups[:i]]
    place = {name: i for i, name in enumerate(ranked)}
    groups.sort(key=lambda group: sorted(place[x] for x in group))
    alphabet = string.ascii_lowercase + string.ascii_uppercase
    return {
        name: "".join(alphabet[i] for i, group in enumerate(groups) if name in group)
        for name in ranked
    }
