"""trainer.compile_mode: one of inductor's modes, as torch lists them, for trainer.compile=inductor;
a mode that captures CUDA graphs only on a GPU. Each refusal is one line, before the data loads."""

from __future__ import annotations

import pytest

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.run.setup import compile_backends, uses_cuda_graphs
from helpers import compose_config


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["trainer.compile_mode=max-autotune"],
            "trainer.compile_mode=max-autotune is a mode of torch.compile: add "
            "trainer.compile=inductor",
        ),
        (
            ["trainer.compile=eager", "trainer.compile_mode=max-autotune"],
            "trainer.compile_mode=max-autotune is a mode of the inductor backend, and "
            "trainer.compile=eager takes none: use trainer.compile=inductor, or leave the mode out",
        ),
        (
            ["device=cpu", "trainer.compile=inductor", "trainer.compile_mode=reduce-overhead"],
            "trainer.compile_mode=reduce-overhead captures CUDA graphs, which need a GPU, and "
            "device=cpu has none; on the CPU use trainer.compile_mode=max-autotune-no-cudagraphs, "
            "or default",
        ),
    ],
)
def test_a_mode_that_cannot_apply_is_refused_in_one_line(overrides: list[str], line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides), backends=compile_backends)
    assert str(refused.value) == line


def test_a_mode_is_one_torch_lists() -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(
            compose_config("trainer.compile=inductor", "trainer.compile_mode=fast"),
            backends=compile_backends,
        )
    modes = ", ".join(compile_backends().modes)
    assert str(refused.value) == (
        f"trainer.compile_mode=fast is not a mode of torch.compile; choose one of {modes}, or "
        "null (its default)"
    )
    assert {"default", "reduce-overhead", "max-autotune"} <= set(compile_backends().modes)
    # Accepted: kernels tried on the CPU; CUDA graphs asked of a GPU (refused later where the
    # device turns out to be the CPU, by device=auto: tests/run).
    validate(
        compose_config(
            "device=cpu",
            "trainer.compile=inductor",
            "trainer.compile_mode=max-autotune-no-cudagraphs",
        ),
        backends=compile_backends,
    )
    validate(
        compose_config(
            "device=cuda", "trainer.compile=inductor", "trainer.compile_mode=max-autotune"
        ),
        backends=compile_backends,
    )


def test_the_modes_that_replay_cuda_graphs_are_torchs() -> None:
    assert uses_cuda_graphs("reduce-overhead") and uses_cuda_graphs("max-autotune")
    assert not uses_cuda_graphs("max-autotune-no-cudagraphs") and not uses_cuda_graphs("default")
    assert not uses_cuda_graphs(None)
