"""Batch-wise augmentation on the device (`dataset.augment`), in torchvision's reference order; each
draw is from the shuffle generator for the whole batch, of which each process takes its share."""

from __future__ import annotations

import math
import random

import torch
from torch import nn

from experiments.core.text import as_typed
from experiments.data.policies import Policy
from experiments.devices.placement import to_device_async

# Random erasing's rectangle as torchvision's: a share of the area, a ratio (log scale), tries.
ERASED_AREA = (0.02, 0.33)
ERASED_RATIO = (0.3, 3.3)
ERASING_TRIES = 10

# Each option of `dataset.augment` that augments, off.
OFF = dict(crop_padding=0, flip=False, policy=None, erasing=0, mixup_alpha=0, cutmix_alpha=0)


class Augment:
    """What `dataset.augment` asks of the training batches (false with every option off)."""

    def __init__(
        self,
        crop_padding: int,
        flip: bool,
        generator: torch.Generator,
        *,
        policy: str | None = None,
        num_ops: int = 2,
        magnitude: int = 9,
        erasing: float = 0.0,
        mixup_alpha: float = 0.0,
        cutmix_alpha: float = 0.0,
        num_classes: int | None = None,
    ) -> None:
        self.options = dict(crop_padding=crop_padding, flip=flip, policy=policy, erasing=erasing)
        self.options |= dict(mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha)
        self.padding = crop_padding
        self.flip = flip
        self.generator = generator
        self.policy = Policy(policy, num_ops, magnitude, generator) if policy else None
        self.erasing = erasing
        self.alphas = {"mixup": mixup_alpha, "cutmix": cutmix_alpha}
        self.mixes = [name for name, alpha in self.alphas.items() if alpha]
        self.num_classes = num_classes

    def __bool__(self) -> bool:
        return bool(self.padding or self.flip or self.policy or self.erasing or self.mixes)

    def refusal(self, task: str, targets: str, *, takes_probabilities: bool) -> str | None:
        """Why task=`task`, learning `targets`, cannot train with the options on (None: it can)."""
        if targets == "masks":
            keys, why = tuple(OFF), "changes an image's pixels but not its mask's"
        elif not takes_probabilities:
            keys = ("mixup_alpha", "cutmix_alpha")
            why = "makes the labels class probabilities, which its loss does not take"
        else:
            return None
        refused = [key for key in keys if self.options[key] != OFF[key]]
        if not refused:
            return None
        on = " ".join(f"dataset.augment.{key}={as_typed(self.options[key])}" for key in refused)
        off = " ".join(f"dataset.augment.{key}={as_typed(OFF[key])}" for key in refused)
        each, them = ("it", "it") if len(refused) == 1 else ("each", "them")
        return f"{on}: {each} {why}; task={task} trains without {them} ({off})"

    def pixels(self, images: torch.Tensor, batch_size: int, share: slice) -> torch.Tensor:
        """Crop, flip and the policy on uint8 `images`, the `share` of a batch of `batch_size`."""
        count, _, height, width = images.shape
        device = images.device
        if self.padding:
            offsets = torch.randint(2 * self.padding + 1, (2, batch_size), generator=self.generator)
            top, left = to_device_async(offsets[:, share], device)
            padded = nn.functional.pad(images, [self.padding] * 4)
            rows = (top[:, None] + torch.arange(height, device=device))[:, :, None]
            columns = (left[:, None] + torch.arange(width, device=device))[:, None, :]
            pixels = padded[torch.arange(count, device=device)[:, None, None], :, rows, columns]
            images = pixels.permute(0, 3, 1, 2)  # indexing put the channels last
        if self.flip:
            flips = torch.rand(batch_size, generator=self.generator) < 0.5
            flipped = to_device_async(flips[share], device)
            images = torch.where(flipped[:, None, None, None], images.flip(3), images)
        if self.policy:
            images = self.policy(images, batch_size, share)
        return images

    def normalized(
        self, images: torch.Tensor, labels: torch.Tensor, batch_size: int, share: slice
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Erasing and mixing, in place, of normalized `images` (mixing makes labels (N, K))."""
        if self.erasing:
            self._erase(images, batch_size, share)
        if self.mixes:
            images, labels = self._mix(images, labels)
        return images, labels

    def _erase(self, images: torch.Tensor, batch_size: int, share: slice) -> None:
        """Zero (the mean) a rectangle of each image with chance `erasing`, as RandomErasing."""
        _, _, height, width = images.shape
        tries = (batch_size, ERASING_TRIES)
        low, high = ERASED_AREA
        area = height * width * (low + (high - low) * torch.rand(tries, generator=self.generator))
        low, high = (math.log(bound) for bound in ERASED_RATIO)
        ratio = torch.exp(low + (high - low) * torch.rand(tries, generator=self.generator))
        tall = (area * ratio).sqrt().round().long()
        wide = (area / ratio).sqrt().round().long()
        fits = (tall < height) & (wide < width)
        first = fits.long().argmax(1, keepdim=True)  # the first try that fits (0 if none does)
        tall, wide = tall.gather(1, first)[:, 0], wide.gather(1, first)[:, 0]
        erased = (torch.rand(batch_size, generator=self.generator) < self.erasing) & fits.any(1)
        where = torch.rand(2, batch_size, generator=self.generator)
        top = (where[0] * (height - tall + 1)).long()
        left = (where[1] * (width - wide + 1)).long()
        drawn = torch.stack([top, tall * erased, left, wide])[:, share]
        top, tall, left, wide = to_device_async(drawn, images.device)
        rows = torch.arange(height, device=images.device)[None, :]
        columns = torch.arange(width, device=images.device)[None, :]
        inside_rows = (rows >= top[:, None]) & (rows < (top + tall)[:, None])
        inside_columns = (columns >= left[:, None]) & (columns < (left + wide)[:, None])
        inside = inside_rows[:, None, :, None] & inside_columns[:, None, None, :]
        images.masked_fill_(inside, 0.0)

    def _mix(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mixup or CutMix (one at random where both are on), as torchvision's: each image mixed
        with the one before it in this process's share (another's would cost a collective)."""
        mix = self.mixes[0]
        if len(self.mixes) > 1:
            mix = self.mixes[int(torch.rand((), generator=self.generator) < 0.5)]
        seed = int(torch.randint(2**62, (), generator=self.generator))
        alpha = self.alphas[mix]
        share = random.Random(seed).betavariate(alpha, alpha)  # of the image's own
        partner = images.roll(1, 0)
        if mix == "mixup":
            images.mul_(share).add_(partner, alpha=1 - share)
        else:
            _, _, height, width = images.shape
            centre = torch.rand(2, generator=self.generator)
            half = 0.5 * math.sqrt(1 - share)
            y, x = int(centre[0] * height), int(centre[1] * width)
            half_height, half_width = int(half * height), int(half * width)
            top, bottom = max(y - half_height, 0), min(y + half_height, height)
            left, right = max(x - half_width, 0), min(x + half_width, width)
            images[:, :, top:bottom, left:right] = partner[:, :, top:bottom, left:right]
            share = 1 - (bottom - top) * (right - left) / (height * width)
        assert self.num_classes is not None
        # (one_hot's check of the labels' range would make the host wait for a GPU)
        classes = images.new_zeros(len(labels), self.num_classes).scatter_(1, labels[:, None], 1)
        partners = classes.roll(1, 0)
        return images, classes.mul_(share).add_(partners, alpha=1 - share)
