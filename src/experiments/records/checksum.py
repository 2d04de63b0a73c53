"""A checkpoint's SHA-256 over what it holds once loaded (torch.load checks none), not its bytes."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import torch


def digest(state: Any) -> str:
    """The SHA-256 of `state`, tensors and plain data nested in dicts, lists and tuples."""
    hasher = hashlib.sha256()
    _feed(hasher, state)
    return hasher.hexdigest()


def _feed(hasher: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        hasher.update(f"tensor {value.dtype} {tuple(value.shape)}\n".encode())
        # Bytes as they are, whatever the dtype (bfloat16 has no NumPy counterpart).
        flat = value.detach().cpu().contiguous().reshape(-1)
        hasher.update(flat.view(torch.uint8).numpy())
    elif isinstance(value, Mapping):
        hasher.update(f"mapping {len(value)}\n".encode())
        for key, item in value.items():
            _feed(hasher, key)
            _feed(hasher, item)
    elif isinstance(value, (list, tuple)):
        hasher.update(f"sequence {len(value)}\n".encode())
        for item in value:
            _feed(hasher, item)
    else:  # str, int, float, bool, None: what weights_only loads besides the above
        hasher.update(f"{type(value).__name__} {value!r}\n".encode())
