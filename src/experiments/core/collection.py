"""Python's cyclic garbage collector, kept off the objects a process makes once and keeps.

Importing torch, torch._dynamo and Hydra makes hundreds of thousands of objects that live as long
as the process, and the collector scans them all again each time its objects grow by a quarter
(the cost: docs/speed.md, Start-up). `paused_then_frozen` keeps the collector off while such
objects are made and then freezes them (`gc.freeze`). What a job makes and drops is still
collected (`devices.process_settings.restored` unfreezes all after each job).
"""

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
