"""DataLoader workers decoding a Dataset's images, every pass (`dataset.loader=stream`) or once;
`Batches` still picks each batch's rows, so streamed runs see what cached ones see."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from experiments.core.errors import ExperimentError
from experiments.data.types import Streamed


class StreamRows:
    """Persistent workers decoding the rows asked for, seeded from `seed` in every run alike."""

    def __init__(
        self, streamed: Streamed, *, pin_memory: bool, channels_last: bool, seed: int
    ) -> None:
        # The pass's batches of rows: no reference back, so dropping a split lets its workers go.
        self._rows: list[list[int]] = []
        self.loader = DataLoader(
            streamed.dataset,
            batch_sampler=self._rows,
            num_workers=streamed.workers,
            collate_fn=partial(stack, channels_last=channels_last),
            pin_memory=pin_memory,
            persistent_workers=streamed.workers > 0,
            prefetch_factor=4 if streamed.workers else None,
            generator=torch.Generator().manual_seed(seed),
        )

    def batches(
        self, order: torch.Tensor | None, bounds: list[tuple[int, int]]
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """For each (low, high) of `bounds`: those rows of the pass's order, decoded."""
        self._rows[:] = [
            order[low:high].tolist() if order is not None else list(range(low, high))
            for low, high in bounds
        ]
        yield from _from_workers(iter(self.loader))


def stack(
    items: list[tuple[torch.Tensor, int]], channels_last: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of (C, H, W) uint8 images and their labels; (N, H, W, C) when `channels_last`."""
    images, labels = zip(*items, strict=True)
    if channels_last:
        images = tuple(image.permute(1, 2, 0) for image in images)
    return torch.stack(images), torch.tensor(labels, dtype=torch.int64)


def decode_all(
    dataset: Dataset, shape: tuple[int, ...], workers: int, into: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every image of `dataset` in order, decoded into `into` or a new array; and the labels."""
    count = len(dataset)  # type: ignore[arg-type]
    images = np.empty((count, *shape), dtype=np.uint8) if into is None else into
    labels = np.empty(count, dtype=np.int64)
    loader = DataLoader(dataset, batch_size=256, num_workers=workers, collate_fn=stack)
    start = 0
    for batch_images, batch_labels in _from_workers(iter(loader)):  # (the wrapper alone holds it)
        images[start : start + len(batch_labels)] = batch_images.numpy()
        labels[start : start + len(batch_labels)] = batch_labels.numpy()
        start += len(batch_labels)
    return images, labels


def _from_workers(batches: Iterator[Any]) -> Iterator[Any]:
    """`batches`, a worker's error raised as the one line it raised, without the traceback the
    DataLoader puts before it; the error's frames, and `batches`, which hold the workers, let go."""
    try:
        yield from batches
    except ExperimentError as error:
        traceback.clear_frames(error.__traceback__)
        text = str(error).rstrip()
    else:
        return
    del batches  # its workers stop now, rather than when the garbage collector gets to them
    marker = "ExperimentError: "
    raise ExperimentError(text[text.rindex(marker) + len(marker) :] if marker in text else text)
