"""The garbage collector kept off the objects imports make once and keep (docs/speed.md)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_then_frozen() -> Iterator[None]:
    """No collection in the block; what it made (and all that lives) frozen when it ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
