"""A run whose metrics.jsonl cannot be read (binary, or damaged mid-file) is a row that says so:
`python -m experiments.report` makes the report all the same."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments.report.command import main


@pytest.mark.parametrize(
    ("garbled", "why"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "line 1 is not text (byte 0x89 is not UTF-8)"),
        (b'{"kind": "epoch"}\nnot json\n{}\n', "line 2 is not a JSON row (Expecting value)"),
    ],
    ids=["binary", "damaged line"],
)
def test_an_unreadable_metrics_file_is_named_in_its_row_and_the_report_is_made(
    old_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    garbled: bytes,
    why: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # the paths in messages are relative to it
    (old_run / "metrics.jsonl").write_bytes(garbled)

    assert main([str(tmp_path)]) == 0

    reason = f"its metrics.jsonl is unreadable: flat_layout_run/metrics.jsonl {why}; each line "
    console = capsys.readouterr().err
    assert "Traceback" not in console
    assert f"\nflat_layout_run: {reason}" in console
    with open(tmp_path / "summary.csv", newline="", encoding="utf-8") as file:
        (row,) = csv.DictReader(file)
    assert (row["status"], row["test_accuracy"]) == ("completed", "0.1484375")  # results.json's
    assert row["reason"].startswith(reason)
    assert {"summary.md", "throughput.png"} <= {path.name for path in tmp_path.iterdir()}
