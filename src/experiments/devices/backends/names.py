"""What each kind of device is called: `torch.device.type`'s spelling, which records keep
(results.json's `device.type`, and `device.used` for a run on the CPU alone). Free of torch: the
report reads run folders and never computes."""

from __future__ import annotations

CPU = "cpu"
CUDA = "cuda"
