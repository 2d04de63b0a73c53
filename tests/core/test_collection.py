"""The collector held off while a process makes what it keeps, and kept off it afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from experiments.core import collection


class Cycle:
    """An object in a reference cycle: only the collector frees it."""

    def __init__(self) -> None:
        self.itself = self


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the collector as it found it."""
    enabled = gc.isenabled()
    gc.unfreeze()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_nothing_is_collected_in_the_block_and_what_it_made_is_frozen_after(
    unfrozen: None,
) -> None:
    gc.enable()
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with collection.paused_then_frozen():
            assert not gc.isenabled()
            kept = [Cycle() for _ in range(100_000)]  # 100,000 allocations: would collect
            assert collections == []
    finally:
        gc.callbacks.remove(count)
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)


def test_a_collector_turned_off_before_stays_off(unfrozen: None) -> None:
    gc.disable()
    with collection.paused_then_frozen():
        pass
    assert not gc.isenabled()


def test_the_collector_is_back_after_a_failure_in_the_block(unfrozen: None) -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collection.paused_then_frozen():
        raise RuntimeError("setup failed")
    assert gc.isenabled()
