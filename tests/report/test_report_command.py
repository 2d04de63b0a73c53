"""`python -m experiments.report <folder>` on runs as they lie on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.report.command import main


def test_a_results_file_that_cannot_be_read_is_a_run_without_results(
    old_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (old_run / "results.json").write_text('{"status": "comp')

    assert main([str(tmp_path)]) == 0
    assert ": 1 no results" in capsys.readouterr().err
