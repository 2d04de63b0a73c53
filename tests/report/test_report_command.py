"""`python -m experiments.report <folder>` on runs as they lie on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.report.command import main


def test_a_damaged_metrics_line_is_named_in_one_line(
    old_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = old_run / "metrics.jsonl"
    first, *rest = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join([first, "not json\n", *rest]))

    assert main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"Error: {metrics} line 2 is not a JSON row (Expecting value); each line holds one, and "
        "only the last may be cut short (by a killed run)\n"
    )


def test_a_results_file_that_cannot_be_read_is_a_run_without_results(
    old_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (old_run / "results.json").write_text('{"status": "comp')

    assert main([str(tmp_path)]) == 0
    assert ": 1 no results" in capsys.readouterr().err
