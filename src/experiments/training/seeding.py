"""Every source of randomness a run draws from (Python's, NumPy's, torch's CPU and GPU generators,
the shuffling one): seeded at the start, saved in each checkpoint, and put back on resume."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # every CUDA device too


def capture(shuffle: torch.Generator, gpus: tuple[int, ...] = ()) -> dict[str, Any]:
    """Every generator's state, loadable with weights_only, the GPUs' in the order of `gpus`."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": position,
            "has_gauss": has_gauss,
            "cached_gaussian": cached_gaussian,
        },
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
    numpy = state["numpy"]
    np.random.set_state(
        (
            numpy["kind"],
            numpy["keys"].numpy().astype(np.uint32),
            numpy["position"],
            numpy["has_gauss"],
            numpy["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    shuffle.set_state(state["shuffle"])
    for saved, index in zip(state.get("cuda", []), gpus, strict=False):
        torch.cuda.set_rng_state(saved, index)
