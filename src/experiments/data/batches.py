"""A split cut into batches of normalized float images on the training device, with no per-image
Python work and no step that makes the host wait for a GPU."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import accumulate

import torch

from experiments.data.augment import Augment
from experiments.data.epoch_length import batch_count
from experiments.data.streaming import StreamRows
from experiments.data.types import Split, Streamed
from experiments.devices.backends.registry import backend_for
from experiments.devices.placement import to_device_async
from experiments.devices.runtime import Runtime
from experiments.devices.timing import DeviceTimer


class TensorRows:
    """Each batch's rows gathered from the split's uint8 tensors, on the host or the device."""

    def __init__(self, split: Split, *, channels_last: bool, pin: bool) -> None:
        # Stored (N, H, W, C) for channels-last batches: cheaper than converting every batch.
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
        """For each (low, high) of `bounds`: those rows of the pass's order."""
        if order is not None:
            order = to_device_async(order, self.images.device)
        for low, high in bounds:
            if order is None:
                images, labels = self.images[low:high], self.labels[low:high]
            else:  # index_select: far quicker than indexing by a tensor on the CPU (docs/speed.md)
                at = order[low:high]
                images, labels = self.images.index_select(0, at), self.labels.index_select(0, at)
            if self.pin:
                images, labels = images.pin_memory(), labels.pin_memory()
            yield images, labels


class Batches:
    """One pass over a split (or its `subset` rows), shuffled by `shuffle` if given, at most
    `limit` batches. Each process takes its contiguous share of every batch; a last batch too small
    to give every process an image, or smaller than `fewest`, is left out, counted in `left_out`."""

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
        count = batch_count(self.length, batch_size, runtime.group.world_size, fewest)
        self.sizes = ([batch_size] * full + [rest] * (count - full))[:limit]  # over all processes
        # The images of a last batch left out for being too small, where `limit` left it in.
        self.left_out = rest if count == full and (limit is None or limit > full) else 0
        # uint8 pixels are scaled to [0, 1] first; float values (a CSV file's) are taken as read.
        pixels = not (isinstance(split, Split) and split.images.is_floating_point())
        channels = max(len(mean), len(std))
        self.scale, self.shift = self._normalization(mean, std, channels, 255 if pixels else 1)
        self.copy_timer = DeviceTimer(runtime.device)
        self.wait_seconds = 0.0

    def __len__(self) -> int:
        return len(self.sizes)

    def count_images(self) -> int:
        """How many images one pass yields, over all processes."""
        return sum(self.sizes)

    def times(self) -> tuple[float, float]:
        """Seconds waiting for batches (host clock) and copying them to the device (on a GPU by CUDA
        events: overlaps, not part of, the wait), since the last call."""
        waited, self.wait_seconds = self.wait_seconds, 0.0
        return waited, self.copy_timer.take()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        shares = [self._share(size) for size in self.sizes]
        starts = accumulate(self.sizes[:-1], initial=0)
        bounds = [
            (start + s.start, start + s.stop) for start, s in zip(starts, shares, strict=True)
        ]
        rows = self.rows.batches(self._order(), bounds)
        channels_last, placement = self.runtime.channels_last, self.runtime.placement
        layout = torch.channels_last if channels_last else torch.contiguous_format
        began = time.perf_counter()
        for (images, labels), size, share in zip(rows, self.sizes, shares, strict=True):
            span = self.copy_timer.start()
            images, labels = placement.tensor(images), placement.tensor(labels)
            self.copy_timer.stop(span)
            if channels_last:
                images = images.permute(0, 3, 1, 2)  # the (N, H, W, C) rows seen as (N, C, H, W)
            if self.augment:
                images = self.augment.pixels(images, size, share).contiguous(memory_format=layout)
            images = self._normalize(images)
            if self.augment:
                images, labels = self.augment.normalized(images, labels, size, share)
            self.wait_seconds += time.perf_counter() - began
            yield images, labels
            began = time.perf_counter()

    def _order(self) -> torch.Tensor | None:
        if self.shuffle is None:
            return self.subset
        order = torch.randperm(self.length, generator=self.shuffle)
        return order if self.subset is None else self.subset[order]

    def _share(self, size: int) -> slice:
        rank, world = self.runtime.group.rank, self.runtime.group.world_size
        return slice(size * rank // world, size * (rank + 1) // world)

    def _normalize(self, images: torch.Tensor) -> torch.Tensor:
        # In place on a new float copy, keeping the memory format (float rows may be the split's).
        copy = images.clone() if images.is_floating_point() else images.float()
        return copy.mul_(self.scale).add_(self.shift)

    def _normalization(
        self, mean: list[float], std: list[float], channels: int, full_scale: int
    ) -> tuple[float | torch.Tensor, float | torch.Tensor]:
        """(value / full_scale - mean) / std as value * scale + shift: plain numbers where every
        channel has the same mean and std (much faster on channels-last batches), else tensors."""
        means = torch.tensor(mean, dtype=torch.float64).expand(channels)
        stds = torch.tensor(std, dtype=torch.float64).expand(channels)
        scale, shift = 1 / (full_scale * stds), -means / stds
        if len(set(mean)) == 1 and len(set(std)) == 1:
            return scale[0].item(), shift[0].item()
        scale, shift = (values.float().reshape(1, channels, 1, 1) for values in (scale, shift))
        return self.runtime.placement.tensor(scale), self.runtime.placement.tensor(shift)
