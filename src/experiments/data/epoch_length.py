"""How many batches, and optimizer steps, an epoch of a split makes: `Batches` cuts a split so,
and trainer.batch_size=auto's choice counts its candidates' so. Without torch (the report's)."""

from __future__ import annotations


def batch_count(images: int, batch_size: int, processes: int, fewest: int) -> int:
    """The full batches, and a last of the rest unless too small to give each process one image
    or BatchNorm its `fewest` (left out)."""
    full, rest = divmod(images, batch_size)
    return full + int(rest >= max(processes, fewest, 1))


def optimizer_steps(batches: int, accumulate_batches: int) -> int:
    """The optimizer steps of an epoch of `batches`, a last one for the batches left over."""
    return -(-batches // accumulate_batches)
