"""A model whose sweep jobs meet at their first training step, so that they certainly train side
by side whatever the order the machine started them in (loaded by `model._target_`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from experiments.training.models import LeNet

# The folder where each job leaves a file at its first training step, and how many jobs meet.
MEETING_FOLDER, JOBS = "SIDE_BY_SIDE_FOLDER", "SIDE_BY_SIDE_JOBS"
# How long a job waits for the others at most (they start in seconds).
WAIT_SECONDS = 300


class MeetingLeNet(LeNet):
    """LeNet whose first training step waits until the sweep's other jobs have reached theirs."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__(in_channels, image_size, num_classes)
        self.met = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and not self.met:
            folder, jobs = Path(os.environ[MEETING_FOLDER]), int(os.environ[JOBS])
            (folder / str(os.getpid())).touch()
            waited_until = time.monotonic() + WAIT_SECONDS
            while len(list(folder.iterdir())) < jobs and time.monotonic() < waited_until:
                time.sleep(0.1)
            self.met = True
        return super().forward(x)
