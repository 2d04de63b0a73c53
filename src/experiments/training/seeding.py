"""Every generator a run draws from: seeded at its start, saved in each checkpoint, and put back
on resume, so that a run repeats itself exactly on the same machine."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # every CUDA device too


# NumPy's legacy generator state, in the order `np.random.get_state()` gives it.
_NUMPY_STATE = ("kind", "keys", "position", "has_gauss", "cached_gaussian")


def capture(shuffle: torch.Generator, gpus: tuple[int, ...] = ()) -> dict[str, Any]:
    """Every generator's state, loadable with weights_only, the GPUs' in the order of `gpus`."""
    numpy = dict(zip(_NUMPY_STATE, np.random.get_state(), strict=True))
    numpy["keys"] = torch.from_numpy(numpy["keys"].astype(np.int64))
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": numpy,
        "torch": torch.get_rng_state(),
        "shuffle": shuffle.get_state(),
    }
    if gpus:
        state["cuda"] = [torch.cuda.get_rng_state(index) for index in gpus]
    return state


def restore(state: dict[str, Any], shuffle: torch.Generator, gpus: tuple[int, ...] = ()) -> None:
    """Put every generator back as `capture` found it, the GPU states to `gpus` in order."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy = {**state["numpy"], "keys": state["numpy"]["keys"].numpy().astype(np.uint32)}
    np.random.set_state(tuple(numpy[name] for name in _NUMPY_STATE))
    torch.set_rng_state(state["torch"])
    shuffle.set_state(state["shuffle"])
    for saved, index in zip(state.get("cuda", []), gpus, strict=False):
        torch.cuda.set_rng_state(saved, index)
