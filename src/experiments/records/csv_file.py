"""`tracker=csv`: metrics.csv (a row per logged step and epoch) and hparams.csv (at the end)."""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO

from experiments.core.files import LOG, open_to_append, read_data, write_text_atomically, writing
from experiments.records.hparams import METRICS_GROUP, Hyperparameters, Numbers
from experiments.records.tracker import ROW_TAGS, Logged, TrackedRun

METRICS = "metrics.csv"
HPARAMS = "hparams.csv"
STEP = "step"


class CsvFile:
    """metrics.csv and hparams.csv of one run folder (a `records.tracker.ReadBack`)."""

    record = METRICS

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / METRICS
        self.hparams_path = run_dir / HPARAMS
        self._columns: list[str] = []
        self._file: IO[str] | None = None

    def begin(self, run: TrackedRun) -> None:
        """Its hyperparameters are written at the run's end, with its final numbers."""

    def logged(self, through: int) -> Logged:
        """Its rows after `through` are dropped (and a last one cut short)."""
        rows = [row for row in self._rows() if int(row[STEP]) <= through]
        if self.path.is_file():
            self._columns = _widened([], [name for row in rows for name in row])
            self._rewrite(rows)
        # An epoch's row is the one with its numbers (a logged step's may share its step).
        steps, epochs = ({int(row[STEP]) for row in rows if row.get(tag)} for tag in ROW_TAGS)
        return Logged(steps, epochs, {"hparams"} if self.hparams_path.is_file() else set())

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        row = {STEP: str(step), **{tag: repr(float(value)) for tag, value in values.items()}}
        with writing(self.path):
            columns = _widened(self._columns, list(row))
            if columns != self._columns:
                self._columns = columns
                self._rewrite([*self._rows(), row])
                return
            if self._file is None:
                self._file = open_to_append(self.path)
                if self._file.tell() == 0:
                    self._file.write(_line(self._columns))
            self._file.write(_line([row.get(name, "") for name in self._columns]))
            self._file.flush()

    def hyperparameters(
        self, hyperparameters: Hyperparameters, numbers: Numbers, step: int, swept: Collection[str]
    ) -> None:
        first = {name: hyperparameters[name] for name in swept if name in hyperparameters}
        final = {f"{METRICS_GROUP}/{name}": value for name, value in numbers.items()}
        named = first | dict(hyperparameters) | final
        lines = [_line(["name", "value"])]
        lines += [_line([key, "" if value is None else str(value)]) for key, value in named.items()]
        write_text_atomically(self.hparams_path, "".join(lines))

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        """A CSV file holds no pictures: confusion_matrix.png is in the run folder."""

    def close(self, status: str) -> None:
        if self._file is not None:
            with writing(self.path):
                self._file.close()

    def _rows(self) -> list[dict[str, str]]:
        """metrics.csv's rows, but a last one a killed run cut short (no newline at its end)."""
        if not self.path.is_file():
            return []
        text = read_data(self.path, LOG)
        whole = text[: text.rfind("\n") + 1]
        return [dict(row) for row in csv.DictReader(io.StringIO(whole))]

    def _rewrite(self, rows: Sequence[Mapping[str, str]]) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        lines = [_line(self._columns)]
        lines += [_line([row.get(name, "") for name in self._columns]) for row in rows]
        write_text_atomically(self.path, "".join(lines))


def _widened(columns: list[str], names: list[str]) -> list[str]:
    wider = columns or [STEP]
    return wider + [name for name in dict.fromkeys(names) if name not in wider]


def _line(cells: Sequence[str]) -> str:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow(cells)
    return text.getvalue()
