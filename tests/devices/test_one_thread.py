"""A probe of one image on one of torch's threads, the run's thread count back after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from experiments.devices.process_settings import one_thread


@pytest.fixture
def two_threads() -> Iterator[int]:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(threads)


def test_one_thread_in_the_block_and_as_many_as_before_after_it(two_threads: int) -> None:
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == two_threads


def test_the_threads_are_put_back_after_a_failure(two_threads: int) -> None:
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError("the probe failed")
    assert torch.get_num_threads() == two_threads
