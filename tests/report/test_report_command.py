"""`python -m experiments.report <folder>` on runs as they lie on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.report.command import main


def test_a_results_file_that_cannot_be_read_is_a_run_that_says_so(
    old_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (old_run / "results.json").write_text('{"status": "comp')

    assert main([str(tmp_path)]) == 0
    console = capsys.readouterr().err
    assert ": 1 unreadable\n" in console
    reason = "results.json is not JSON (Unterminated string starting at: line 1 column 12)"
    assert f"\nflat_layout_run: {reason}\n" in console
