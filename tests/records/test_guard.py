"""A tracker library's calls through `Guard`: a call that fails or does not return said once, and
nothing sent after it; the library's loggers and settings changed only while its calls run."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from experiments.records.guard import Guard


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "experiments"]


def test_a_call_that_does_not_return_is_said_once_and_nothing_is_sent_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = Guard("A library", timeout=0.2)
    answered = threading.Event()
    assert guard(lambda: 1) == 1
    assert guard(answered.wait) is None  # (a server that never answers)
    assert guard(lambda: 2) is None
    answered.set()
    assert warnings(caplog) == [
        "A library failed, and the run goes on without it (its folder has every number): no "
        "answer within 0.2 s"
    ]


def test_a_call_that_fails_is_said_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    def refused() -> None:
        raise ConnectionError("refused\nand more lines of it")

    guard = Guard("A library", timeout=5)
    assert guard(refused) is None
    assert guard(lambda: 2) is None
    assert warnings(caplog) == [
        "A library failed, and the run goes on without it (its folder has every number): "
        "ConnectionError: refused"
    ]


def test_its_loggers_and_settings_change_only_while_its_calls_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EXPERIMENTS_TEST_RETRIES", raising=False)
    monkeypatch.setenv("EXPERIMENTS_TEST_TIMEOUT", "the user's")
    library = logging.getLogger("experiments_test_library")
    library.setLevel(logging.INFO)
    settings = {"EXPERIMENTS_TEST_RETRIES": "0", "EXPERIMENTS_TEST_TIMEOUT": "1"}
    guard = Guard("A library", 5, ["experiments_test_library"], settings)

    def seen() -> tuple[str | None, str, bool]:
        return (
            os.environ.get("EXPERIMENTS_TEST_RETRIES"),
            os.environ["EXPERIMENTS_TEST_TIMEOUT"],
            library.isEnabledFor(logging.CRITICAL),
        )

    assert guard(seen) == ("0", "the user's", False)  # the user's setting wins
    assert seen() == (None, "the user's", True)
