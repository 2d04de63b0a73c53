"""A sweep runs every configuration once before any twice: the seed's sweep goes first."""

from __future__ import annotations

import pytest

from experiments.config.sweep_order import with_repeats_interleaved


@pytest.mark.parametrize(
    ("typed", "ordered"),
    [
        (
            ["-m", "device=cpu,cuda", "trainer.seed=0,1,2"],
            ["-m", "trainer.seed=0,1,2", "device=cpu,cuda"],
        ),
        (  # Hydra's flags stay before the overrides, each with its value
            ["model=lenet,mlp", "--cfg", "job", "trainer.seed=range(3)", "-m"],
            ["--cfg", "job", "-m", "trainer.seed=range(3)", "model=lenet,mlp"],
        ),
        (
            ["hydra.mode=MULTIRUN", "model=lenet,mlp", "trainer.seed=0,1"],
            ["trainer.seed=0,1", "hydra.mode=MULTIRUN", "model=lenet,mlp"],
        ),
    ],
)
def test_the_seed_is_swept_first(typed: list[str], ordered: list[str]) -> None:
    assert with_repeats_interleaved(typed) == ordered


@pytest.mark.parametrize(
    "typed",
    [
        ["device=cpu,cuda", "trainer.seed=0,1"],  # no -m: no sweep, and Hydra says so
        ["-m", "device=cpu,cuda", "trainer.seed=1"],  # one seed: nothing repeats
        ["-m", "trainer.seed=0,1", "model=lenet,mlp"],  # already first
        ["-m", "model=lenet,mlp", "trainer.seed=[0,"],  # Hydra names the broken override
        ["-m", "model=lenet,mlp", "trainer.seeds=0,1"],  # not the seed
    ],
)
def test_other_command_lines_are_left_as_typed(typed: list[str]) -> None:
    assert with_repeats_interleaved(typed) == typed


def test_an_evaluation_sweeps_its_own_seed_first() -> None:
    # eval.py's repeats are `seed` (the images its benchmark feeds); trainer.seed is not its key.
    typed = ["-m", "device=cpu,cuda", "seed=0,1,2"]
    assert with_repeats_interleaved(typed, seed="seed") == ["-m", "seed=0,1,2", "device=cpu,cuda"]
    assert with_repeats_interleaved(typed) == typed
