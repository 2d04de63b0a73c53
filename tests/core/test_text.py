"""How parts of splits are written in messages and records."""

from __future__ import annotations

from experiments.core.text import part_of_split


def test_a_test_split_evaluated_in_part_says_how_much_of_it() -> None:
    assert part_of_split(64, 1000) == "64 of 1,000"
    assert part_of_split(1000, 1000) is None  # the whole split: nothing to add
