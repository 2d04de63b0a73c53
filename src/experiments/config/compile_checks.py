"""What a config asks of how its model computes that torch.compile or DataParallel cannot do."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from omegaconf import DictConfig

from experiments.config.choices import DeviceName


class CompileBackends(NamedTuple):
    """torch.compile's backends and inductor's modes, as torch lists them (no torch here)."""

    accepted: frozenset[str]  # every one it takes, its debugging ones (eager) too
    offered: tuple[str, ...]  # those a refusal offers: installed, and not for debugging
    modes: tuple[str, ...] = ()  # inductor's (trainer.compile_mode)
    cuda_graph_modes: frozenset[str] = frozenset()  # those that capture CUDA graphs
    cuda_graph_backends: frozenset[str] = frozenset()  # backends that capture them (cudagraphs)
    debugging: frozenset[str] = frozenset()  # those torch tags for debugging: they speed nothing up
    uninstalled: tuple[tuple[str, str], ...] = ()  # (backend, its package), not installed here


def compute_settings(cfg: DictConfig) -> tuple[str, DictConfig]:
    """The prefix and section of how a model computes: the trainer, or eval.py's top level."""
    return ("trainer.", cfg.trainer) if "trainer" in cfg else ("", cfg)


def unusable_backend(cfg: DictConfig, backends: Callable[[], CompileBackends] | None) -> str | None:
    """A backend not installed, or capturing CUDA graphs on the CPU (torch would say so later)."""
    prefix, settings = compute_settings(cfg)
    backend, key = settings.compile, f"{prefix}compile"
    if backends is None or not backend:
        return None
    known = backends()
    choose = f"choose one of {', '.join(known.offered)}, or null (not compiled)"
    if backend not in known.accepted:
        return f"{key}={backend} is not a backend of torch.compile; {choose}"
    if package := dict(known.uninstalled).get(backend):
        return f"{key}={backend} needs the package {package}, which is not installed; {choose}"
    if backend in known.cuda_graph_backends and cfg.device.name == DeviceName.cpu:
        return cuda_graphs_need_a_gpu(key, backend, "device=cpu")
    return None


def debugging_backend(key: str, backend: str) -> str:
    """What a run compiled by one of torch's debugging backends is told."""
    return (
        f"{key}={backend} is one of torch.compile's debugging backends: it checks what torch "
        f"captures and speeds nothing up; {key}=inductor compiles for speed"
    )


INDUCTOR = "inductor"


def compile_mode(cfg: DictConfig, backends: Callable[[], CompileBackends] | None) -> str | None:
    """`compile_mode` is one of inductor's modes, with compile=inductor (CUDA graphs: a GPU)."""
    prefix, settings = compute_settings(cfg)
    mode, backend, key = settings.get("compile_mode"), settings.compile, f"{prefix}compile_mode"
    if mode is None:
        return None
    if not backend:
        return f"{key}={mode} is a mode of torch.compile: add {prefix}compile=inductor"
    if backend != INDUCTOR:
        return (
            f"{key}={mode} is a mode of the inductor backend, and "
            f"{prefix}compile={backend} takes none: use {prefix}compile=inductor, or leave the "
            "mode out"
        )
    if backends is None:
        return None
    known = backends()
    if mode not in known.modes:
        return (
            f"{key}={mode} is not a mode of torch.compile; choose one of "
            f"{', '.join(known.modes)}, or null (its default)"
        )
    if mode in known.cuda_graph_modes and cfg.device.name == DeviceName.cpu:
        return cuda_graphs_need_a_gpu(key, mode, "device=cpu")
    return None


# What the CPU takes instead of a backend or mode that captures CUDA graphs, by key.
WITHOUT_CUDA_GRAPHS = {
    "compile": "inductor, or null (not compiled)",
    "compile_mode": "max-autotune-no-cudagraphs, or default",
}


def cuda_graphs_need_a_gpu(key: str, value: str, device: str) -> str:
    """A backend or mode capturing CUDA graphs, asked of a run on the CPU (`device`: how)."""
    instead = WITHOUT_CUDA_GRAPHS[key.rpartition(".")[2]]
    return (
        f"{key}={value} captures CUDA graphs, which need a GPU, and {device} has none; on the "
        f"CPU use {key}={instead}"
    )


def compile_under_dp(cfg: DictConfig) -> str | None:
    prefix, settings = compute_settings(cfg)
    if not (settings.compile and cfg.device.name == DeviceName.dp):
        return None
    return (
        f"{prefix}compile={settings.compile} cannot compile device=dp's DataParallel (it "
        "copies the model to every GPU at every step); use device=ddp"
    )


def channels_last_under_dp(cfg: DictConfig) -> str | None:
    prefix, settings = compute_settings(cfg)
    if not (settings.channels_last and cfg.device.name == DeviceName.dp):
        return None
    return (
        f"{prefix}channels_last=true cannot hold under device=dp: DataParallel copies the "
        "model to its other GPUs at every step in the default memory format; use "
        f"device=ddp, which keeps channels-last on every GPU, or {prefix}channels_last=null"
    )
