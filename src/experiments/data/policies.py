"""RandAugment, TrivialAugment and AutoAugment (`dataset.augment.policy`) on uint8 batches on the
device, as torchvision's but with each image drawing its own ops (torchvision's: one per batch)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torchvision.transforms.v2 import functional

from experiments.core.errors import ExperimentError
from experiments.devices.placement import to_device_async

# An op's magnitudes over a policy's steps, for images of (height, width); None: it has none.
Magnitudes = Callable[[int, int, int], torch.Tensor] | None


def _up_to(largest: float, axis: int | None = None) -> Magnitudes:
    """Up to `largest`, or that share of the image's width (`axis` 1) or height (0)."""
    if axis is None:
        return lambda steps, height, width: torch.linspace(0.0, largest, steps)
    return lambda steps, height, width: torch.linspace(0.0, largest * (height, width)[axis], steps)


def _bits(fewest_lost: int) -> Magnitudes:
    """Posterize's bits kept: 8 down to 8 - `fewest_lost`."""
    return lambda steps, *_: (8 - torch.arange(steps) / ((steps - 1) / fewest_lost)).round()


def _threshold(steps: int, height: int, width: int) -> torch.Tensor:
    return torch.linspace(1.0, 0.0, steps)  # Solarize's, as a share of 255


# Each op: RandAugment's magnitudes, TrivialAugment's, and whether half the images negate them.
_SPACE: dict[str, tuple[Magnitudes, Magnitudes, bool]] = {
    "Identity": (None, None, False),
    "ShearX": (_up_to(0.3), _up_to(0.99), True),
    "ShearY": (_up_to(0.3), _up_to(0.99), True),
    "TranslateX": (_up_to(150 / 331, axis=1), _up_to(32.0), True),
    "TranslateY": (_up_to(150 / 331, axis=0), _up_to(32.0), True),
    "Rotate": (_up_to(30.0), _up_to(135.0), True),
    "Brightness": (_up_to(0.9), _up_to(0.99), True),
    "Color": (_up_to(0.9), _up_to(0.99), True),
    "Contrast": (_up_to(0.9), _up_to(0.99), True),
    "Sharpness": (_up_to(0.9), _up_to(0.99), True),
    "Posterize": (_bits(4), _bits(6), False),
    "Solarize": (_threshold, _threshold, False),
    "AutoContrast": (None, None, False),
    "Equalize": (None, None, False),
}
RANDAUGMENT = {name: (rand, signed) for name, (rand, _, signed) in _SPACE.items()}
TRIVIALAUGMENT = {name: (trivial, signed) for name, (_, trivial, signed) in _SPACE.items()}
AUTOAUGMENT = {name: op for name, op in RANDAUGMENT.items() if name != "Identity"}
AUTOAUGMENT["Invert"] = (None, False)
# AutoAugment's ImageNet policy: 25 pairs of (op, probability, magnitude step of 10).
IMAGENET_POLICY = (
    (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, 0)),
    (("Equalize", 0.8, 0), ("Equalize", 0.6, 0)),
    (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
    (("Equalize", 0.4, 0), ("Solarize", 0.2, 4)),
    (("Equalize", 0.4, 0), ("Rotate", 0.8, 8)),
    (("Solarize", 0.6, 3), ("Equalize", 0.6, 0)),
    (("Posterize", 0.8, 5), ("Equalize", 1.0, 0)),
    (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)),
    (("Equalize", 0.6, 0), ("Posterize", 0.4, 6)),
    (("Rotate", 0.8, 8), ("Color", 0.4, 0)),
    (("Rotate", 0.4, 9), ("Equalize", 0.6, 0)),
    (("Equalize", 0.0, 0), ("Equalize", 0.8, 0)),
    (("Invert", 0.6, 0), ("Equalize", 1.0, 0)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
    (("Color", 0.8, 8), ("Solarize", 0.8, 7)),
    (("Sharpness", 0.4, 7), ("Invert", 0.6, 0)),
    (("ShearX", 0.6, 5), ("Equalize", 1.0, 0)),
    (("Color", 0.4, 0), ("Equalize", 0.6, 0)),
    (("Equalize", 0.4, 0), ("Solarize", 0.2, 4)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, 0)),
    (("Invert", 0.6, 0), ("Equalize", 1.0, 0)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Equalize", 0.8, 0), ("Equalize", 0.6, 0)),
)
SPACES = {"randaugment": RANDAUGMENT, "trivialaugment": TRIVIALAUGMENT, "autoaugment": AUTOAUGMENT}
STEPS = {"randaugment": 31, "trivialaugment": 31, "autoaugment": 10}


# Per round of a batch: each image's op (an index of the policy's names), step and whether it runs.
Draws = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


class Policy:
    """`policy`: randaugment (`num_ops` ops at step `magnitude`), trivialaugment or autoaugment."""

    def __init__(
        self, policy: str, num_ops: int, magnitude: int, generator: torch.Generator
    ) -> None:
        self.policy = policy
        self.space = SPACES[policy]
        self.names = list(self.space)
        self.signed = torch.tensor([signed for _, signed in self.space.values()])
        self.steps = STEPS[policy]
        self.draw: Callable[[int], Draws] = getattr(self, f"_draw_{policy}")
        self.num_ops = num_ops
        self.magnitude = magnitude
        self.generator = generator

    def __call__(self, images: torch.Tensor, batch_size: int, share: slice) -> torch.Tensor:
        """`images`, the `share` of a batch of `batch_size`, each through its own ops."""
        if images.is_floating_point():
            raise ExperimentError(
                f"dataset.augment.policy={self.policy} works on images of 8-bit pixels, but this "
                "dataset holds float values (a table's rows); train without it "
                "(dataset.augment.policy=null)"
            )
        _, _, height, width = images.shape
        table = self._magnitudes(height, width)
        images = images.clone()  # (they may be the split's own rows, on the device)
        for ops, steps, applied in self.draw(batch_size):
            negated = torch.rand(batch_size, generator=self.generator) <= 0.5
            magnitudes = table[ops, steps]
            magnitudes = torch.where(self.signed[ops] & negated, -magnitudes, magnitudes)
            ops, magnitudes, applied = ops[share], magnitudes[share], applied[share]
            for op in ops[applied].unique().tolist():
                if self.names[op] == "Identity":
                    continue
                chosen = ((ops == op) & applied).nonzero()[:, 0]
                rows = to_device_async(chosen, images.device)
                done = OPS[self.names[op]](images.index_select(0, rows), magnitudes[chosen])
                images.index_copy_(0, rows, done)
        return images

    def _draw_randaugment(self, batch_size: int) -> Draws:
        ops = torch.randint(len(self.names), (self.num_ops, batch_size), generator=self.generator)
        steps = torch.full((batch_size,), self.magnitude)
        return [(each, steps, torch.ones(batch_size, dtype=torch.bool)) for each in ops]

    def _draw_trivialaugment(self, batch_size: int) -> Draws:
        ops = torch.randint(len(self.names), (batch_size,), generator=self.generator)
        steps = torch.randint(self.steps, (batch_size,), generator=self.generator)
        return [(ops, steps, torch.ones(batch_size, dtype=torch.bool))]

    def _draw_autoaugment(self, batch_size: int) -> Draws:
        """A pair of the policy per image; whether each of its ops runs, by its chance."""
        pairs = torch.randint(len(IMAGENET_POLICY), (batch_size,), generator=self.generator)
        draws = []
        for place in (0, 1):
            ops = [(self.names.index(pair[place][0]), *pair[place][1:]) for pair in IMAGENET_POLICY]
            op, chance, step = (torch.tensor(column)[pairs] for column in zip(*ops, strict=True))
            draws.append((op, step, torch.rand(batch_size, generator=self.generator) <= chance))
        return draws

    def _magnitudes(self, height: int, width: int) -> torch.Tensor:
        """(ops, steps): each op's magnitude at each step (0 for an op without)."""
        rows = [
            torch.zeros(self.steps) if of is None else of(self.steps, height, width).float()
            for of, _ in self.space.values()
        ]
        return torch.stack(rows).double()


def _factors(magnitudes: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A colour op's weights, per image: image * (1 + m) + other * -m, rounded as torchvision's."""
    weights = torch.stack([1 + magnitudes, -magnitudes]).float()[..., None, None, None]
    return to_device_async(weights, device).unbind()


def _blend(images: torch.Tensor, other: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    image_weight, other_weight = _factors(magnitudes, images.device)
    blended = images.float().mul_(image_weight).add_(other * other_weight)
    return blended.clamp_(0, 255).to(torch.uint8)


def _grey(images: torch.Tensor) -> torch.Tensor:
    """The luminance of RGB images, floored as torchvision's."""
    if images.shape[1] == 1:
        return images.float()
    red, green, blue = images.float().unbind(1)
    return red.mul(0.2989).add_(green, alpha=0.587).add_(blue, alpha=0.114)[:, None].floor_()


def _sharpness(images: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    """Blended with a 3x3 blur of itself, all but the border."""
    channels, height, width = images.shape[1:]
    if height <= 2 or width <= 2:
        return images
    kernel = torch.ones(3, 3, device=images.device) / 13
    kernel[1, 1] = 5 / 13
    output = images.float()
    blurred = nn.functional.conv2d(output, kernel.expand(channels, 1, 3, 3), groups=channels)
    image_weight, other_weight = _factors(magnitudes, images.device)
    output[..., 1:-1, 1:-1].mul_(image_weight).add_(blurred.round_() * other_weight)
    return output.clamp_(0, 255).to(torch.uint8)


def _posterize(images: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    masks = ((255 << (8 - magnitudes.long())) & 255).to(torch.uint8)[:, None, None, None]
    return images & to_device_async(masks, images.device)


def _solarize(images: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    thresholds = to_device_async((255 * magnitudes).float(), images.device)
    return torch.where(images >= thresholds[:, None, None, None], 255 - images, images)


def _autocontrast(images: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    """Each channel stretched to the full range, without torchvision's host-waiting mask."""
    floats = images.float()
    low, high = floats.amin((2, 3), keepdim=True), floats.amax((2, 3), keepdim=True)
    flat = high == low
    scale = torch.where(flat, 1.0, (high - low).mul_(1.0 / 255))
    return floats.sub_(torch.where(flat, 0.0, low)).div_(scale).clamp_(0, 255).to(torch.uint8)


def _moved(images: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """Each image's pixels from where its (2, 3) `inverse` affine map puts them, as `affine`."""
    count, _, height, width = images.shape
    device = images.device
    across = torch.linspace((1 - width) / 2, (width - 1) / 2, width, device=device)
    down = torch.linspace((1 - height) / 2, (height - 1) / 2, height, device=device)
    ones = torch.ones(height, width, device=device)
    base = torch.stack(
        [across.expand(height, width), down[:, None].expand(height, width), ones], -1
    ).reshape(1, height * width, 3)
    # Scaled to the grid's [-1, 1] before it maps the pixels, as torchvision's (rounding alike).
    scale = torch.tensor([width / 2, height / 2], dtype=torch.float32)
    scaled = to_device_async(inverse.float().transpose(1, 2) / scale, device)
    grid = base.expand(count, -1, -1) @ scaled
    moved = nn.functional.grid_sample(
        images.float(), grid.reshape(count, height, width, 2), mode="nearest", align_corners=False
    )
    return moved.round_().to(torch.uint8)


def _affine(
    images: torch.Tensor, magnitudes: torch.Tensor, top: list[Any], bottom: list[Any]
) -> torch.Tensor:
    """`_moved` by the maps of rows `top` and `bottom`, each entry a tensor or a number for all."""
    rows = [
        torch.stack([torch.full_like(magnitudes, v) if isinstance(v, int) else v for v in row], -1)
        for row in (top, bottom)
    ]
    return _moved(images, torch.stack(rows, 1))


def _rotate(images: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    """Counter-clockwise by `magnitudes` degrees about the image's centre."""
    radians = magnitudes * (math.pi / 180)
    cos, sin = radians.cos(), radians.sin()
    return _affine(images, magnitudes, [cos, -sin, 0], [sin, cos, 0])


# Each op on a sub-batch of uint8 images, a magnitude per image (a float64 host tensor).
OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "ShearX": lambda images, m: _affine(images, m, [1, m, m * (images.shape[2] / 2)], [0, 1, 0]),
    "ShearY": lambda images, m: _affine(images, m, [1, 0, 0], [m, 1, m * (images.shape[3] / 2)]),
    "TranslateX": lambda images, m: _affine(images, m, [1, 0, -m.trunc()], [0, 1, 0]),
    "TranslateY": lambda images, m: _affine(images, m, [1, 0, 0], [0, 1, -m.trunc()]),
    "Rotate": _rotate,
    "Brightness": lambda images, m: _blend(images, torch.zeros((), device=images.device), m),
    # (A grey image's saturation is its own, as in PIL and torchvision.)
    "Color": lambda images, m: images if images.shape[1] == 1 else _blend(images, _grey(images), m),
    "Contrast": lambda images, m: _blend(images, _grey(images).mean((1, 2, 3), keepdim=True), m),
    "Sharpness": _sharpness,
    "Posterize": _posterize,
    "Solarize": _solarize,
    "AutoContrast": _autocontrast,
    "Equalize": lambda images, magnitudes: functional.equalize(images),
    "Invert": lambda images, magnitudes: functional.invert(images),
}
