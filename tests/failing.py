"""Models that fail on purpose, for the tests of failure handling (loaded by `model._target_`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import torch

from experiments.training.models import LeNet


def rank() -> str:
    """This process's rank: torchrun's, or srun's task's."""
    return os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))


class FailsAtThirdStep(LeNet):
    """LeNet that raises at its third training step (in the processes `failing` picks)."""

    FAILING_STEP = 3

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__(in_channels, image_size, num_classes)
        self.steps = 0

    def failing(self) -> bool:
        return True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self.failing():
            self.steps += 1
            if self.steps == self.FAILING_STEP:
                raise RuntimeError(f"deliberate failure in process {rank()}")
        return super().forward(x)


class InterruptedAtThirdStep(FailsAtThirdStep):
    """LeNet whose third training step is stopped as Ctrl-C stops it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.steps += 1
            if self.steps == self.FAILING_STEP:
                raise KeyboardInterrupt
        return super(FailsAtThirdStep, self).forward(x)


class FailsAtFourthStep(FailsAtThirdStep):
    """LeNet that raises at its fourth training batch: the first of epoch 2 of 3-batch epochs."""

    FAILING_STEP = 4


class FailsInProcess1(FailsAtThirdStep):
    """Fails at its third training step in process 1 only."""

    def failing(self) -> bool:
        return rank() == "1"


# A file a SlowLeNet job makes at its first step, where the environment names one: a job that
# kills its process waits for it, so that the other job has begun training (its records
# written) whatever the order the machine ran their start-ups in.
STARTED_FILE = "FAILING_STARTED_FILE"
# How long a killing job waits for that file at most (the other job starts in seconds).
STARTED_WAIT_SECONDS = 300


class KillsItsProcess(LeNet):
    """LeNet whose first training step kills its own process, as the system's OOM killer would
    (once a SlowLeNet job has begun training, where STARTED_FILE is set)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            started = os.environ.get(STARTED_FILE)
            waited_until = time.monotonic() + STARTED_WAIT_SECONDS
            while started and not os.path.exists(started) and time.monotonic() < waited_until:
                time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().forward(x)


class KillsProcess1(LeNet):
    """LeNet whose second training step kills process 1 (SIGKILL, as the system's OOM
    killer would): it dies without a word, in the middle of the run."""

    KILLED = "1"

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__(in_channels, image_size, num_classes)
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and rank() == self.KILLED:
            self.steps += 1
            if self.steps == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().forward(x)


class KillsProcess0(KillsProcess1):
    """The same in process 0, the one that writes the run's records."""

    KILLED = "0"


class SlowLeNet(LeNet):
    """LeNet whose training steps take two seconds each: a job still going when another dies."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            if started := os.environ.get(STARTED_FILE):
                open(started, "a").close()
            time.sleep(2)
        return super().forward(x)


class AssertsOnTheGpu(LeNet):
    """LeNet whose first training step reads one image past its batch's end on the GPU: a
    device-side assert, the CUDA error that leaves CUDA unusable for the rest of the process."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:  # the index is checked on the device only, the shape stays the batch's
            x = x.index_select(0, torch.arange(1, len(x) + 1, device=x.device))
        return super().forward(x)


# How long a preempted job waits for SLURM's signal at most (it comes within a second).
SIGNAL_WAIT_SECONDS = 60


class PreemptedInEpoch2(LeNet):
    """LeNet whose first SLURM job is preempted at its third training step, the first of epoch 2
    of 2-batch epochs: it has SLURM send the job the warning submitit asks for (USR2) and waits
    for it. Outside SLURM, and in the job once requeued, it is LeNet."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__(in_channels, image_size, num_classes)
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first_attempt = os.environ.get("SLURM_RESTART_COUNT", "0") == "0"
        if self.training and "SLURM_JOB_ID" in os.environ and first_attempt:
            self.steps += 1
            if self.steps == 3:
                job = os.environ["SLURM_JOB_ID"]
                subprocess.run(["scancel", "--signal=USR2", job], check=True)
                time.sleep(SIGNAL_WAIT_SECONDS)  # the signal's interruption ends the sleep
        return super().forward(x)


# Set for a sweep's first attempt only: `StopsOnce` fails or stops then, by its seed.
FIRST_ATTEMPT = "FAILING_FIRST_ATTEMPT"


class StopsOnce(LeNet):
    """LeNet that, where FIRST_ATTEMPT is set, fails at its third training step when seeded 1
    (before its first checkpoint, of 3-batch epochs) and is stopped as Ctrl-C stops it at its
    fourth when seeded 2 (the first of epoch 2, after a checkpoint); it trains as LeNet else."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__(in_channels, image_size, num_classes)
        self.seed, self.steps = torch.initial_seed(), 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and os.environ.get(FIRST_ATTEMPT):
            self.steps += 1
            if self.seed == 1 and self.steps == 3:
                raise RuntimeError("deliberate failure before the first checkpoint")
            if self.seed == 2 and self.steps == 4:
                raise KeyboardInterrupt
        return super().forward(x)
