"""A tracker library's calls, each in a thread of its own waited for `timeout` seconds at most
(MLflow retries a store it cannot open for 100 s, whatever its settings), its loggers quiet."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from typing import TypeVar

log = logging.getLogger("experiments")

Result = TypeVar("Result")


class Guard:
    """The first call that fails or does not return in time: one warning line, nothing more sent."""

    def __init__(
        self,
        name: str,
        timeout: float,
        loggers: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name  # what the warning calls it: "W&B", "MLflow (<its tracking URI>)"
        self.timeout = timeout
        self.loggers = loggers  # the library's loggers, quiet while its calls run
        self.environment = dict(environment or {})  # set while its calls run, unless the user did
        self.failed = False

    def __call__(self, action: Callable[[], Result]) -> Result | None:
        """`action`'s result (None once anything has failed or not answered)."""
        if self.failed:
            return None
        answer: Future[Result] = Future()
        threading.Thread(
            target=self._answer, args=(action, answer), name=f"{self.name} call", daemon=True
        ).start()
        wait([answer], timeout=self.timeout)
        if not answer.done():
            self._fail(f"no answer within {self.timeout:g} s")
            return None
        try:
            return answer.result()
        except Exception as error:
            said = str(error).strip()
            self._fail(type(error).__name__ + (f": {said.splitlines()[0]}" if said else ""))
            return None

    def _answer(self, action: Callable[[], Result], answer: Future[Result]) -> None:
        with _held(self.loggers, self.environment):
            try:
                answer.set_result(action())
            except BaseException as error:  # (raised in the caller's thread, as if its own)
                answer.set_exception(error)

    def _fail(self, why: str) -> None:
        self.failed = True
        log.warning(
            "%s failed, and the run goes on without it (its folder has every number): %s",
            self.name,
            why,
        )


# By "logger:<name>" or "environment:<variable>": how many calls hold each, how to put it back.
_holding = threading.Lock()
_holders: Counter[str] = Counter()
_put_back: dict[str, Callable[[], None]] = {}


@contextlib.contextmanager
def _held(loggers: Sequence[str], environment: Mapping[str, str]) -> Iterator[None]:
    """`loggers` quiet and `environment` set (where the user has not) until no call holds them."""
    with _holding:
        keys = [f"logger:{name}" for name in loggers] + [
            f"environment:{variable}"
            for variable in environment
            if _holders[f"environment:{variable}"] or variable not in os.environ
        ]
        for key in keys:
            if not _holders[key]:
                _put_back[key] = _take(key, environment)
            _holders[key] += 1
    try:
        yield
    finally:
        with _holding:
            for key in keys:
                _holders[key] -= 1
                if not _holders[key]:
                    _put_back.pop(key)()


def _take(key: str, environment: Mapping[str, str]) -> Callable[[], None]:
    kind, _, name = key.partition(":")
    if kind == "logger":
        logger = logging.getLogger(name)
        level = logger.level
        logger.setLevel(logging.CRITICAL + 1)
        return lambda: logger.setLevel(level)
    os.environ[name] = environment[name]
    return lambda: os.environ.pop(name, None)
