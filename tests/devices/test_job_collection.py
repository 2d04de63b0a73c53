"""A job's garbage is collected when it ends, by a collection of the job's own objects only: what
lived before the job (torch's and Hydra's modules) is frozen meanwhile, and thawed after."""

from __future__ import annotations

import gc
import weakref

from experiments.devices.process_settings import isolated_job


class Model:
    """Stands for a model in reference cycles (DDP's), which only the collector frees."""

    def __init__(self) -> None:
        self.itself = self


def test_a_job_collects_its_own_cycles_without_going_through_the_process() -> None:
    from_before = Model()  # the process's: lives on, a cycle the job's collection leaves alone
    gc.unfreeze()  # (a command run before in this process froze what its start-up made)
    with isolated_job(None):
        # Frozen: out of the generations a collection goes through.
        assert not any(tracked is from_before for tracked in gc.get_objects())
        model = Model()
        freed = weakref.ref(model)
        del model
        assert freed() is not None  # only the collector frees a cycle
    assert freed() is None  # collected as the job ended
    assert any(tracked is from_before for tracked in gc.get_objects())  # thawed
    assert gc.get_freeze_count() == 0  # and the process as the job found it
