"""A split cut into batches of normalized float images on the training device.

A batch is made in five steps (`Batches.__iter__`): this process's rows of the pass's seeded
order; gathered from the uint8 split (`TensorRows`) or decoded by workers (`streaming.StreamRows`);
copied to the device as uint8 (pinned, non-blocking for a GPU); augmented batch-wise there
(`augment`); converted and normalized there. No per-image Python work in memory, and no step that
makes the host wait for a GPU (docs/speed.md, The data path).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import accumulate

import torch

from experiments.data.augment import Augment
from experiments.data.streaming import StreamRows
from experiments.data.types import Split, Streamed
from experiments.devices.backends.registry import backend_for
from experiments.devices.placement import to_device_async
from experiments.devices.runtime import Runtime
from experiments.devices.timing import DeviceTimer


class TensorRows:
    """The in-memory path: each batch's rows gathered from the split's uint8 tensors (on the
    host, or on the device with `dataset.preload=device`)."""

    def __init__(self, split: Split, *, channels_last: bool, pin: bool) -> None:
        # For channels-last batches, the split stored as (N, H, W, C): a batch of its rows, seen
        # as (N, C, H, W), is channels-last already, cheaper than converting every batch. A split
        # preloaded so (`loading.preload`) is only viewed, not copied.
        self.images = (
            split.images.contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1)
            if channels_last
            else split.images
        )
        self.labels = split.labels
        # Pinned host memory lets copies to a GPU run without holding up the host.
        self.pin = pin and backend_for(self.images.device.type).is_host

    def batches(
        self, order: torch.Tensor | None, bounds: list[tuple[int, int]]
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """For each (low, high) of `bounds`: rows `low` to `high` of the pass's order."""
        if order is not None:
            order = to_device_async(order, self.images.device)
        for low, high in bounds:
            if order is None:
                images, labels = self.images[low:high], self.labels[low:high]
            else:
                # index_select: far quicker than indexing with a tensor on the CPU (docs/speed.md).
                rows = order[low:high]
                images, labels = (
                    self.images.index_select(0, rows),
                    self.labels.index_select(0, rows),
                )
            if self.pin:
                images, labels = images.pin_memory(), labels.pin_memory()
            yield images, labels


class Batches:
    """One pass over a split in batches of normalized float images and labels, on the device.

    With a `shuffle` generator every pass draws a new permutation; without, the split's order;
    with `subset` (`data.subset`), only those rows. `limit` stops a pass after that many batches.
    Of several processes, each takes its contiguous share of every batch (together they see the
    batch one process would); a last batch too small to give every process an image, or smaller
    than `fewest` (BatchNorm's need), is left out and counted in `left_out`. A `Split` and a
    `Streamed` split give the same rows in the same order.
    """

    def __init__(
        self,
        split: Split | Streamed,
        *,
        batch_size: int,
        mean: list[float],
        std: list[float],
        runtime: Runtime,
        shuffle: torch.Generator | None = None,
        limit: int | None = None,
        subset: torch.Tensor | None = None,
        augment: Augment | None = None,
        fewest: int = 1,
    ) -> None:
        self.subset = subset
        self.length = len(split) if subset is None else len(subset)
        self.runtime = runtime
        self.shuffle = shuffle
        self.augment = augment
        pin = runtime.backend.copies_from_pinned_memory
        if isinstance(split, Streamed):
            seed = shuffle.initial_seed() if shuffle is not None else 0
            self.rows: TensorRows | StreamRows = StreamRows(
                split, pin_memory=pin, channels_last=runtime.channels_last, seed=seed
            )
        else:
            self.rows = TensorRows(split, channels_last=runtime.channels_last, pin=pin)
        full, rest = divmod(self.length, batch_size)
        too_small = rest < max(runtime.group.world_size, fewest)
        sizes = [batch_size] * full + ([rest] if rest and not too_small else [])
        self.sizes = sizes[:limit]  # of each batch, over all processes
        # The images of a last batch left out for being too small, where `limit` left it in.
        self.left_out = rest if too_small and (limit is None or limit > full) else 0
        # uint8 pixels are scaled to [0, 1] first; float values (a CSV file's) are taken as read.
        pixels = not (isinstance(split, Split) and split.images.is_floating_point())
        self.scale, self.shift = self._normalization(
            mean, std, max(len(mean), len(std)), 255 if pixels else 1
        )
        self.copy_timer = DeviceTimer(runtime.device)
        self.wait_seconds = 0.0

    def __len__(self) -> int:
        return len(self.sizes)

    def count_images(self) -> int:
        """How many images one pass yields, over all processes."""
        return sum(self.sizes)

    def times(self) -> tuple[float, float]:
        """Since the last call: seconds the loop waited for batches (host clock), and seconds
        copying them to the device (on a GPU by CUDA events: overlaps, not part of, the wait)."""
        waited, self.wait_seconds = self.wait_seconds, 0.0
        return waited, self.copy_timer.take()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        shares = [self._share(size) for size in self.sizes]
        starts = accumulate(self.sizes[:-1], initial=0)
        bounds = [
            (start + s.start, start + s.stop) for start, s in zip(starts, shares, strict=True)
        ]
        rows = self.rows.batches(self._order(), bounds)
        began = time.perf_counter()
        for (images, labels), size, share in zip(rows, self.sizes, shares, strict=True):
            images, labels = self._to_device(images, labels)
            if self.augment:
                images = self._augment(images, size, share)
            images = self._normalize(images)
            if self.augment:
                images, labels = self.augment.normalized(images, labels, size, share)
            self.wait_seconds += time.perf_counter() - began
            yield images, labels
            began = time.perf_counter()

    def _order(self) -> torch.Tensor | None:
        """This pass's order of the split's rows (None: as stored)."""
        if self.shuffle is None:
            return self.subset
        order = torch.randperm(self.length, generator=self.shuffle)
        return order if self.subset is None else self.subset[order]

    def _share(self, size: int) -> slice:
        """This process's contiguous part of a batch of `size` images of all processes."""
        rank, world = self.runtime.group.rank, self.runtime.group.world_size
        return slice(size * rank // world, size * (rank + 1) // world)

    def _to_device(
        self, images: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        span = self.copy_timer.start()
        placement = self.runtime.placement
        images, labels = placement.tensor(images), placement.tensor(labels)
        self.copy_timer.stop(span)
        if self.runtime.channels_last:
            images = images.permute(0, 3, 1, 2)  # the (N, H, W, C) rows seen as (N, C, H, W)
        return images, labels

    def _augment(self, images: torch.Tensor, size: int, share: slice) -> torch.Tensor:
        assert self.augment is not None
        memory_format = (
            torch.channels_last if self.runtime.channels_last else torch.contiguous_format
        )
        return self.augment.pixels(images, size, share).contiguous(memory_format=memory_format)

    def _normalize(self, images: torch.Tensor) -> torch.Tensor:
        # In place on a new float copy, which keeps the memory format (float values, a view of
        # the split's own rows, are copied first).
        copy = images.clone() if images.is_floating_point() else images.float()
        return copy.mul_(self.scale).add_(self.shift)

    def _normalization(
        self, mean: list[float], std: list[float], channels: int, full_scale: int
    ) -> tuple[float | torch.Tensor, float | torch.Tensor]:
        """(value / full_scale - mean) / std as value * scale + shift: with plain numbers where
        every channel has the same mean and std (much faster on channels-last batches than
        broadcasting a per-channel tensor), else with per-channel tensors."""
        means = torch.tensor(mean, dtype=torch.float64).expand(channels)
        stds = torch.tensor(std, dtype=torch.float64).expand(channels)
        scale, shift = 1 / (full_scale * stds), -means / stds
        if len(set(mean)) == 1 and len(set(std)) == 1:
            return scale[0].item(), shift[0].item()
        per_channel = (1, channels, 1, 1)
        return (
            self.runtime.placement.tensor(scale.float().reshape(per_channel)),
            self.runtime.placement.tensor(shift.float().reshape(per_channel)),
        )
