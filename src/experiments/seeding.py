"""Every source of randomness a run draws from: seeded at the start, saved in each checkpoint, and
put back on resume, so a run repeats itself exactly on the same machine.

The sources: Python's `random`, NumPy's global generator, torch's CPU and CUDA generators (weights,
any random layer), and the generator that shuffles the training batches. There are no DataLoader
workers: batches are cut from tensors in the training process.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch

# cuBLAS needs a fixed workspace to be deterministic; it reads this when CUDA starts.
CUBLAS_WORKSPACE = ":4096:8"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # every CUDA device too


def make_deterministic() -> None:
    """Ask torch for deterministic algorithms only (an error names any op that has none)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def capture(shuffle: torch.Generator) -> dict[str, Any]:
    """The state of every generator, as tensors and plain data (loadable with weights_only)."""
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
    if torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict[str, Any], shuffle: torch.Generator) -> None:
    """Put every generator back as `capture` found it."""
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
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
