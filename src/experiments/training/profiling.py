"""torch.profiler over a few optimizer steps of training (trainer.profile=true): the trace, for
TensorBoard or chrome://tracing, and the operators that took the most time, in the log.

The first step is skipped and the second only warms the profiler up (its first recorded step
carries its own start-up), so steps 3 to 5 are recorded.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from torch.profiler import ProfilerActivity, profile, schedule

from experiments.core.files import write_atomically, writing
from experiments.core.text import display_path

log = logging.getLogger("experiments")

SKIPPED, WARM_UP, RECORDED = 1, 1, 3
FIRST = SKIPPED + WARM_UP + 1  # the first step recorded (steps count from 1)
STEPS = SKIPPED + WARM_UP + RECORDED  # the optimizer steps an epoch needs for a profile
# In the run folder; TensorBoard's profiler plugin finds traces by their `.pt.trace.json`.
TRACE = Path("profile") / "training.pt.trace.json"
TOP_OPERATORS = 5


@contextmanager
def profiled(run_dir: Path, device_type: str) -> Iterator[Callable[[], None]]:
    """Profile the optimizer steps of the block (CPU, and CUDA on a GPU), saving the trace to
    `run_dir`/TRACE; yields what to call after each step."""
    # Kineto's own lines (profiler_start, profiler_stop and, without a GPU, an ERROR that it found
    # none) would break into the run's log; level 6 silences them. A user's own level wins.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    activities = [ProfilerActivity.CPU]
    if device_type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    steps = schedule(wait=SKIPPED, warmup=WARM_UP, active=RECORDED, repeat=1)
    with profile(
        activities=activities,
        schedule=steps,
        on_trace_ready=lambda profiler: _save(profiler, run_dir / TRACE, device_type),
    ) as profiler:
        yield profiler.step


def _save(profiler: profile, path: Path, device_type: str) -> None:
    """The trace, written whole or not at all, and the top operators by their own time."""
    with writing(path):
        path.parent.mkdir(exist_ok=True)  # in the run folder, which is not made again
    with tempfile.TemporaryDirectory() as folder:
        exported = Path(folder) / path.name
        profiler.export_chrome_trace(str(exported))
        write_atomically(path, lambda file: file.write(exported.read_bytes()))
    # Without the steps' own spans (ProfilerStep*): the time between operators, not an operator.
    averages = [event for event in profiler.key_averages() if event.key != "ProfilerStep*"]
    own_time = "self_device_time_total" if device_type == "cuda" else "self_cpu_time_total"
    total = sum(getattr(event, own_time) for event in averages) or 1
    top = sorted(averages, key=lambda event: getattr(event, own_time), reverse=True)
    lines = [
        f"  {(took := getattr(event, own_time)) / 1000:8.2f} ms {100 * took / total:4.0f}%  "
        + event.key
        for event in top[:TOP_OPERATORS]
    ]
    where = "GPU" if device_type == "cuda" else "CPU"
    log.info(
        "profile of training steps %d to %d: %s; the operators that took most %s time "
        "(their own, over %d steps):\n%s",
        FIRST,
        STEPS,
        display_path(path),
        where,
        RECORDED,
        "\n".join(lines),
    )
