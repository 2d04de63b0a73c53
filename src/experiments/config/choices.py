"""The closed choices of the configs (Enums: a typo fails while Hydra composes)."""

from __future__ import annotations

from enum import Enum


class Choice(str, Enum):
    """Equal to its name, and printed as it (in messages, JSON and YAML)."""

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class DeviceName(Choice):
    auto = "auto"  # CUDA if the machine has it, else the CPU
    cpu = "cpu"
    cuda = "cuda"  # one GPU: device.index, or the current one
    dp = "dp"  # nn.DataParallel over device.ids
    ddp = "ddp"  # DistributedDataParallel, a process per device, under torchrun


class Precision(Choice):
    fp32 = "fp32"
    bf16 = "bf16"  # autocast to bfloat16
    fp16 = "fp16"  # autocast to float16, with gradient scaling (CUDA only)


class Preload(Choice):
    host = "host"  # pinned host memory for a GPU; a copy per batch
    device = "device"  # the whole uint8 dataset on the device, copied there once


class Mode(Choice):
    auto = "auto"  # the metric's own (`metric_names`): max for an accuracy, min for a loss
    max = "max"
    min = "min"


class Interval(Choice):
    epoch = "epoch"  # the learning rate changes after every epoch
    step = "step"  # after every optimizer step


class AugmentPolicy(Choice):
    # Per image, on the uint8 batch after crop and flip, as torchvision.transforms.v2's:
    randaugment = "randaugment"  # dataset.augment.num_ops ops at dataset.augment.magnitude
    trivialaugment = "trivialaugment"  # TrivialAugmentWide: one op at a random magnitude
    autoaugment = "autoaugment"  # AutoAugment's ImageNet policy: one of its 25 pairs of ops


class Loader(Choice):
    auto = "auto"  # memory when the decoded images fit dataset.cache_max_gb, else stream
    memory = "memory"  # decoded once (through the cache) into one uint8 array; batches cut from it
    stream = "stream"  # DataLoader workers decode the images of every batch, every epoch


AUTO_BATCH = "auto"  # trainer.batch_size: searched on the device (`training.batch_search`)


class AutoBatch(Choice):
    """The batch trainer.batch_size=auto trains at, of those its search found to fit."""

    knee = "knee"  # where more batch stops paying, bounded by trainer.auto_batch_min_steps
    largest = "largest"  # the largest that fits, halved trainer.auto_batch_halvings times
