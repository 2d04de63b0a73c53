"""dataset=csv read from a file of one's own: only a regular file, of numbers float32 holds, under
a header of names each given once; whatever else is said in one line naming the file and where."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.data import loading, validation
from experiments.data.csv_table import csv_splits
from helpers import compose_config, failing_if_still_reading

TABLE = "a,b,y\n" + "".join(f"{row},{2 * row},{3 * row}\n" for row in range(20))
WHAT_IS_VALID = (
    "dataset.path= takes a CSV file, read whole (a larger table is read best by a dataset of "
    "one's own: docs/own-data.md)"
)


def refusal(path: Path, target: str = "y") -> str:
    with pytest.raises(ExperimentError) as refused:
        csv_splits(str(path), target, test_fraction=0.2, seed=0)
    return str(refused.value)


def test_a_named_pipe_or_a_device_is_refused_before_it_is_read(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.csv"
    os.mkfifo(pipe)
    with failing_if_still_reading():
        assert refusal(pipe) == f"{pipe} is not a regular file (a named pipe); {WHAT_IS_VALID}"
    endless = tmp_path / "zero.csv"  # read to its end, it would fill the memory
    endless.symlink_to("/dev/zero")
    assert refusal(endless) == (
        f"{endless} is not a regular file (a character device); {WHAT_IS_VALID}"
    )


def test_a_number_float32_cannot_hold_is_named_by_line_and_column(tmp_path: Path) -> None:
    """1e308 is finite in float64 but inf in the float32 a run holds the table in: its RMSE
    would be nan, and the run "completed"."""
    table = tmp_path / "table.csv"
    table.write_text(TABLE.replace("\n4,8,12\n", "\n4,1e308,12\n"))
    assert refusal(table) == (
        f"dataset.path={table}, line 6, column b: 1e308 is beyond float32's range "
        "(±3.403e+38), in which a run holds the table; scale the column down"
    )
    table.write_text(TABLE.replace("\n4,8,12\n", "\n4,-3e38,12\n"))  # within it
    train, test = csv_splits(str(table), "y", test_fraction=0.2, seed=0)
    assert min(train.images.min(), test.images.min()) == pytest.approx(-3e38)


def test_a_byte_order_mark_is_no_part_of_the_first_columns_name(tmp_path: Path) -> None:
    table = tmp_path / "table.csv"
    table.write_text(TABLE, encoding="utf-8-sig")  # as Excel writes "CSV UTF-8"
    train, _ = csv_splits(str(table), "a", test_fraction=0.2, seed=0)
    assert train.labels.flatten().tolist()[:2] == [0.0, 1.0]


def test_a_column_named_twice_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "table.csv"
    table.write_text(TABLE.replace("a,b,y", "y,b,y"))
    assert refusal(table) == (
        f"dataset.path={table}: column 'y' is named twice in its header (columns 1 and 3); give "
        "each column a name of its own"
    )


def test_a_cell_past_csvs_field_limit_names_the_file_and_line(tmp_path: Path) -> None:
    table = tmp_path / "table.csv"
    table.write_text(TABLE + f"1,{'9' * 200_000},3\n")
    assert refusal(table) == (
        f"dataset.path={table}, line 22 is no row of numbers (field larger than field limit "
        "(131072)); each cell of a dataset=csv file is one number"
    )


def test_a_validation_share_that_leaves_no_training_row_speaks_of_rows(tmp_path: Path) -> None:
    table = tmp_path / "table.csv"
    table.write_text(TABLE)
    config = compose_config(
        "task=regression",
        "dataset=csv",
        f"dataset.path={table}",
        "dataset.target=y",
        "dataset.val_fraction=0.99",
    ).dataset
    with pytest.raises(ExperimentError) as refused:
        validation.with_validation(loading.load(config), config)
    assert str(refused.value) == (
        "dataset.val_fraction=0.99 would leave no training row (of the 16); lower "
        "dataset.val_fraction, or give the data more rows"
    )
