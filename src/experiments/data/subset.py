"""The images an evaluation is limited to (`trainer.limit_eval_*`), the same in every run."""

from __future__ import annotations

import torch

# Fixed, not trainer.seed: runs that differ in their seed are tested on the same images.
SUBSET_SEED = 0


def limited_count(in_split: int, images: int | None, fraction: float | None) -> int:
    """How many of a split's `in_split` images an evaluation takes (a fraction: at least one)."""
    if images is not None:
        return min(images, in_split)
    return min(in_split, max(1, round(fraction * in_split))) if fraction is not None else in_split


def evaluated_rows(
    in_split: int, images: int | None, fraction: float | None
) -> torch.Tensor | None:
    """The rows an evaluation takes, in the split's order (None: all): drawn by a fixed seed (an
    image folder's first rows are its first classes); a smaller limit's are among a larger's."""
    count = limited_count(in_split, images, fraction)
    if count == in_split:
        return None
    permutation = torch.randperm(in_split, generator=torch.Generator().manual_seed(SUBSET_SEED))
    return permutation[:count].sort().values


def overfit_rows(in_split: int, count: int, seed: int) -> torch.Tensor:
    """The `count` rows `trainer.overfit_batches` trains on every epoch, drawn once by `seed`."""
    return torch.randperm(in_split, generator=torch.Generator().manual_seed(seed))[:count]
