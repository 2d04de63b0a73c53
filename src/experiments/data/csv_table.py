"""A CSV file of numbers as train and test splits (`dataset=csv`): a row's features a float32
(F, 1, 1) "image" of F channels, its target a float32 vector of one value."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import torch

from experiments.core.errors import ExperimentError
from experiments.core.files import TABLE, opened
from experiments.data.types import Split

# The shipped sample (`sample_data/diabetes/PROVENANCE.md`), when dataset.path is null.
SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "diabetes" / "diabetes.csv"
FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def csv_splits(
    path: str | None, target: str, test_fraction: float, seed: int
) -> tuple[Split, Split]:
    """Rows of the CSV file at `path` (None: the shipped sample), `test_fraction` for test."""
    file = Path(path) if path is not None else SAMPLE
    columns, rows = _read(file)
    if target not in columns:
        raise ExperimentError(
            f"dataset.target={target}: {file} has no such column; its columns: {', '.join(columns)}"
        )
    if len(columns) < 2:
        raise ExperimentError(f"dataset.path={file} has one column: no feature to predict from")
    values = torch.tensor(rows, dtype=torch.float64)
    at = columns.index(target)
    features = torch.cat([values[:, :at], values[:, at + 1 :]], dim=1).float()[:, :, None, None]
    targets = values[:, at : at + 1].float()
    test_rows = round(len(rows) * test_fraction)
    if not 0 < test_rows < len(rows) - 1:
        raise ExperimentError(
            f"dataset.test_fraction={test_fraction} of {file}'s {len(rows)} rows leaves no "
            "test or too few training rows; give a fraction in (0, 1) of a file with more rows"
        )
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))
    test, train = order[:test_rows].sort().values, order[test_rows:].sort().values
    return Split(features[train], targets[train]), Split(features[test], targets[test])


def _read(file: Path) -> tuple[list[str], list[list[float]]]:
    """The header and the rows of numbers of a CSV file (UTF-8, BOM or not, at most a `TABLE`)."""
    try:
        with (
            opened(file, TABLE) as binary,
            io.TextIOWrapper(binary, encoding="utf-8-sig", newline="") as text,
        ):
            reader = csv.reader(text)
            try:
                columns = _columns(next(reader, []), file)
                rows = [_numbers(row, columns, file, reader.line_num) for row in reader if row]
            except csv.Error as error:  # a cell past csv's field limit, a NUL byte
                raise ExperimentError(
                    f"dataset.path={file}, line {reader.line_num} is no row of numbers ({error}); "
                    "each cell of a dataset=csv file is one number"
                ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ExperimentError(f"dataset.path={file} cannot be read: {error}") from None
    if not rows:
        raise ExperimentError(f"dataset.path={file} has no rows of numbers under its header")
    return columns, rows


def _columns(header: list[str], file: Path) -> list[str]:
    """The header's column names, each once (which would the target be?)."""
    columns = [name.strip() for name in header]
    first: dict[str, int] = {}
    for at, name in enumerate(columns, start=1):
        if name in first:
            raise ExperimentError(
                f"dataset.path={file}: column {name!r} is named twice in its header (columns "
                f"{first[name]} and {at}); give each column a name of its own"
            )
        first[name] = at
    return columns


def _numbers(row: list[str], columns: list[str], file: Path, line: int) -> list[float]:
    if len(row) != len(columns):
        raise ExperimentError(
            f"dataset.path={file}, line {line}: {len(row)} values for {len(columns)} columns"
        )
    return [_number(cell, file, line, column) for cell, column in zip(row, columns, strict=True)]


def _number(cell: str, file: Path, line: int, column: str) -> float:
    """The number in `cell`, which float32 must hold."""
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ExperimentError(
            f"dataset.path={file}, line {line}, column {column}: {cell!r} is not a number (every "
            "cell of a dataset=csv file must be one)"
        )
    if abs(value) > FLOAT32_MAX:
        raise ExperimentError(
            f"dataset.path={file}, line {line}, column {column}: {cell.strip()} is beyond "
            f"float32's range (±{FLOAT32_MAX:.4g}), in which a run holds the table; scale the "
            "column down"
        )
    return value
