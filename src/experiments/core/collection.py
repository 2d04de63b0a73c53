"""Python's cyclic garbage collector, kept off the objects a process makes once and keeps.

Importing torch (and, on the first optimizer or FLOP count, torch._dynamo) and Hydra makes some
350,000 objects that live as long as the process. The collector scans all of them again each
time the objects it holds grow by a quarter: 5 to 7 full collections while a run starts, and one
more as the interpreter exits, 0.3-0.5 s of a one-batch run on a 2-core EPYC, more than all its
records take. `held` keeps the collector off while such objects are made and then freezes them
(`gc.freeze`: left out of every later collection). What a job makes and drops is still collected
(`experiments.devices.process_settings.restored` unfreezes all after each job), and the command
line freezes all again as the process exits (`experiments.cli.main`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held() -> Iterator[None]:
    """No collection in the block; what it made (and all that lives) frozen when it ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
