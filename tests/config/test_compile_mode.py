"""trainer.compile_mode: one of inductor's modes, as torch lists them, for trainer.compile=inductor;
a mode that captures CUDA graphs only on a GPU; trainer.compile: a backend whose package is
installed, one that captures CUDA graphs only on a GPU. Each refusal is one line, before the data
loads."""

from __future__ import annotations

import functools
import importlib.util

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


def test_the_modes_and_backends_that_replay_cuda_graphs_are_torchs() -> None:
    inductor = functools.partial(uses_cuda_graphs, "inductor")
    assert inductor("reduce-overhead") and inductor("max-autotune")
    assert not inductor("max-autotune-no-cudagraphs") and not inductor("default")
    assert not inductor(None)
    # The cudagraphs backend keeps CUDA graph trees, as reduce-overhead does, in any mode.
    assert uses_cuda_graphs("cudagraphs", None)
    # Not compiled, nothing is replayed, whatever the mode says.
    assert not uses_cuda_graphs(None, "reduce-overhead")


def settings_of(config_name: str) -> tuple[str, tuple[str, ...]]:
    """Where train.py's (its trainer) or eval.py's config (its top level) keeps how the model
    computes, and what its command line needs besides (eval.py's checkpoint)."""
    return ("trainer.", ()) if config_name == "train" else ("", ("ckpt=run/checkpoints/best.pt",))


@pytest.mark.parametrize("config_name", ["train", "eval"])
def test_a_backend_that_captures_cuda_graphs_is_refused_on_the_cpu(config_name: str) -> None:
    prefix, given = settings_of(config_name)
    cfg = compose_config(
        *given, "device=cpu", f"{prefix}compile=cudagraphs", config_name=config_name
    )
    with pytest.raises(ExperimentError) as refused:
        validate(cfg, backends=compile_backends)
    assert str(refused.value) == (
        f"{prefix}compile=cudagraphs captures CUDA graphs, which need a GPU, and device=cpu has "
        f"none; on the CPU use {prefix}compile=inductor, or null (not compiled)"
    )
    # Asked of a GPU, it is accepted (refused later where device=auto finds none: tests/run).
    validate(
        compose_config(
            *given, "device=cuda", f"{prefix}compile=cudagraphs", config_name=config_name
        ),
        backends=compile_backends,
    )


@pytest.mark.skipif(importlib.util.find_spec("tvm") is not None, reason="tvm is installed here")
@pytest.mark.parametrize("config_name", ["train", "eval"])
def test_a_backend_whose_package_is_not_installed_is_refused_naming_it(config_name: str) -> None:
    prefix, given = settings_of(config_name)
    cfg = compose_config(*given, f"{prefix}compile=tvm", config_name=config_name)
    with pytest.raises(ExperimentError) as refused:
        validate(cfg, backends=compile_backends)
    offered = compile_backends().offered
    assert str(refused.value) == (
        f"{prefix}compile=tvm needs the package tvm, which is not installed; choose one of "
        f"{', '.join(offered)}, or null (not compiled)"
    )
    assert "inductor" in offered and "tvm" not in offered  # none offered that cannot run


def test_torchs_debugging_backends_are_known_as_such() -> None:
    known = compile_backends()
    assert {"eager", "aot_eager", "aot_eager_decomp_partition"} <= known.debugging
    assert not {"inductor", "cudagraphs"} & known.debugging
    assert known.cuda_graph_backends == {"cudagraphs"}
