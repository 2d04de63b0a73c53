"""How parts of splits, counts and names from files are written in messages and records."""

from __future__ import annotations

import math

import pytest

from experiments.core.text import (
    IMAGES,
    ROWS,
    SAMPLES,
    as_typed,
    part_of_split,
    printable,
    shared_unit,
    short_count,
)


def test_a_test_split_evaluated_in_part_says_how_much_of_it() -> None:
    assert part_of_split(64, 1000) == "64 of 1,000"
    assert part_of_split(1000, 1000) is None  # the whole split: nothing to add


def test_a_name_from_a_file_prints_on_one_line_as_it_is() -> None:
    assert printable("lr-0.01") == "lr-0.01"
    assert printable("a\nb\tc\x1b[2J\udce9 é") == "a\\nb\\tc\\x1b[2J\\udce9 é"


def test_a_count_from_a_file_from_elsewhere_is_written_whatever_it_is() -> None:
    assert [short_count(count) for count in (314, 62_006, 1_820_000_000)] == [
        "314",
        "62.0k",
        "1.82G",
    ]
    assert [short_count(count) for count in (-5000, math.inf, math.nan)] == ["-5.00k", "inf", "nan"]


def test_runs_of_images_and_of_rows_are_spoken_of_as_samples() -> None:
    assert shared_unit(["rows", "rows"]) == ROWS
    assert shared_unit(["images", None]) == IMAGES  # None: a run of an earlier version
    assert shared_unit(["images", "rows"]) == SAMPLES
    assert SAMPLES.rate == "samples/s"


@pytest.mark.parametrize(
    ("value", "typed"),
    [
        (True, "true"),
        (None, "null"),
        (2.5, "2.5"),
        ("lots", "lots"),
        ("64", "'64'"),
        ("null", "'null'"),
    ],
)
def test_a_value_is_said_as_the_command_line_types_it(value: object, typed: str) -> None:
    assert as_typed(value) == typed
