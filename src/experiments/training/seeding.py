"""Every source of randomness a run draws from: seeded at the start, saved in each checkpoint, and
put back on resume, so a run repeats itself exactly on the same machine.

The sources: Python's `random`, NumPy's global generator, torch's CPU and GPU generators, and the
generator that shuffles the training batches and draws their augmentation. DataLoader workers of
the stream path are seeded from the run's seed (`data.streaming`).
"""

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
    """The state of every generator the run draws from, as tensors and plain data (loadable with
    weights_only). Only `gpus`' states are saved, in the run's order: a resumed run may see
    fewer GPUs or run on another (moved from cuda:1 to cuda:0, it continues with cuda:1's)."""
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
    """Put every generator back as `capture` found it; the saved GPU states go to `gpus`, the
    GPUs of the resumed run, in order."""
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
