"""torch.profiler over optimizer steps 3 to 5 of training (trainer.profile=true), the second only
warming the profiler up: the trace, and the operators that took the most time, in the log."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEventAvg
from torch.profiler import profile, schedule

from experiments.core.files import write_atomically, writing
from experiments.core.text import display_path
from experiments.devices.backends.base import Backend
from experiments.devices.backends.registry import backend_for

log = logging.getLogger("experiments")

SKIPPED, WARM_UP, RECORDED = 1, 1, 3
FIRST = SKIPPED + WARM_UP + 1  # the first step recorded (steps count from 1)
STEPS = SKIPPED + WARM_UP + RECORDED  # the optimizer steps an epoch needs for a profile
# In the run folder; TensorBoard's profiler plugin finds traces by their `.pt.trace.json`.
TRACE = Path("profile") / "training.pt.trace.json"
TOP_OPERATORS = 5


@contextmanager
def profiled(run_dir: Path, device_type: str) -> Iterator[Callable[[], None]]:
    """Profile the block's optimizer steps into `run_dir`/TRACE; yields what to call after each."""
    # Kineto's own lines (without a GPU, an ERROR that it found none) would break into the run's
    # log; level 6 silences them. A user's own level wins.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    backend = backend_for(device_type)
    steps = schedule(wait=SKIPPED, warmup=WARM_UP, active=RECORDED, repeat=1)
    with profile(
        activities=backend.profiler_activities(),
        schedule=steps,
        on_trace_ready=lambda profiler: _save(profiler, run_dir / TRACE, backend),
    ) as profiler:
        yield profiler.step


def _save(profiler: profile, path: Path, backend: Backend) -> None:
    with writing(path):
        path.parent.mkdir(exist_ok=True)  # in the run folder, which is not made again
    with tempfile.TemporaryDirectory() as folder:
        exported = Path(folder) / path.name
        profiler.export_chrome_trace(str(exported))
        write_atomically(path, lambda file: file.write(exported.read_bytes()))
    ranked, total = own_times(profiler.key_averages(), on_gpu=not backend.is_host)
    lines = [
        f"  {took / 1000:8.2f} ms {100 * took / (total or 1):4.0f}%  {name}"
        for name, took in ranked[:TOP_OPERATORS]
    ]
    log.info(
        "profile of training steps %d to %d: %s; the operators that took most %s time "
        "(their own, and their share of the %.2f ms it ran over %d steps):\n%s",
        FIRST,
        STEPS,
        display_path(path),
        backend.noun,
        total / 1000,
        RECORDED,
        "\n".join(lines),
    )


def own_times(
    averages: Sequence[FunctionEventAvg], on_gpu: bool
) -> tuple[list[tuple[str, float]], float]:
    """The operators, most first, by their own microseconds, and the total, each GPU kernel once."""
    operators = [
        event
        for event in averages
        # Without the steps' own spans: the time between operators, not an operator.
        if event.device_type == DeviceType.CPU and event.key != "ProfilerStep*"
    ]
    own = "self_device_time_total" if on_gpu else "self_cpu_time_total"
    ranked = sorted(
        ((event.key, getattr(event, own)) for event in operators),
        key=lambda pair: pair[1],
        reverse=True,
    )
    if not on_gpu:
        return ranked, sum(took for _, took in ranked)
    return ranked, sum(event.self_device_time_total for event in averages if _on_the_gpu(event))


def _on_the_gpu(event: FunctionEventAvg) -> bool:
    """A kernel or copy the GPU ran (not a span such as ProfilerStep*), or a legacy operator's."""
    if event.device_type == DeviceType.CPU:
        return event.is_legacy
    return not event.is_user_annotation
