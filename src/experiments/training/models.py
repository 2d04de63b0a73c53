"""The tutorials' models, and `build_for`, which builds any model for the dataset's shape."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Sequence

import torch
from torch import nn

from experiments.config.build import build, check_importable
from experiments.config.schemas import ModelConfig
from experiments.core.errors import ExperimentError
from experiments.core.text import shape_text
from experiments.devices.process_settings import one_thread

# Where `build_for` builds every model and tries it on an image (`run.setup.place_model` moves it).
HOST = torch.device("cpu")


class ShapeError(ValueError):
    """The model cannot take images of the requested shape."""


def build_for(
    config: ModelConfig,
    image_shape: tuple[int, int, int],
    num_classes: int,
    dataset: str,
    task_option: str = "classification",
    outputs_per_image: tuple[int, ...] | None = None,
    from_checkpoint: bool = False,
) -> nn.Module:
    """The model the config names, on the `HOST`, checked to take the dataset's images and give
    `outputs_per_image` (default: a logit per class); `from_checkpoint`: untrained, unfetched."""
    cannot = f"model {config.name} cannot take dataset {dataset} ({shape_text(image_shape)} images)"
    target = check_importable("model._target_", config._target_)
    try:
        starts = (PRETRAINED,) if from_checkpoint else ()
        model = build(
            config, leave_out=(*WEIGHTS_FIELDS, *starts, *_shape_fields_not_taken(target))
        )
        model.eval()  # the probe below must not change any state (batch-norm statistics)
        with torch.no_grad(), one_thread():
            outputs = model(torch.zeros(1, *image_shape, device=HOST))
        model.train()
    # torch's own shape checks raise AssertionError (torch._assert), the others RuntimeError.
    except (ShapeError, RuntimeError, AssertionError) as error:
        raise ExperimentError(f"{cannot}: {error}".splitlines()[0]) from error
    expected = outputs_per_image or (num_classes,)
    if tuple(outputs.shape) == (1, *expected):
        return model
    if len(expected) == 1 and outputs.dim() == 2:
        raise ExperimentError(
            f"{cannot}: it gives {outputs.shape[-1]} outputs per image for {num_classes} classes"
        )
    raise ExperimentError(
        f"{cannot}: it gives {shape_text(outputs.shape[1:])} outputs per image, but "
        f"task={task_option} needs {shape_text(expected)}"
    )


SHAPE_FIELDS = ("in_channels", "image_size", "num_classes")  # the dataset fills them in
WEIGHTS_FIELDS = ("weights", "weights_partial")  # loaded once it is built (`training.weights`)
PRETRAINED = "pretrained"  # model=timm's: weights it fetches, which a checkpoint's replace


def _shape_fields_not_taken(target: Callable[..., nn.Module]) -> tuple[str, ...]:
    """The shape fields a model's constructor has no argument for (one taking **kwargs: none)."""
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):  # a builtin without a signature: give it everything
        return ()
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters.values()):
        return ()
    return tuple(field for field in SHAPE_FIELDS if field not in parameters)


class _ConvClassifier(nn.Module):
    def __init__(
        self,
        features: nn.Sequential,
        hidden: Sequence[int],
        in_channels: int,
        image_size: int,
        num_classes: int,
        activation: bool,
    ) -> None:
        super().__init__()
        self.features = features
        try:
            with torch.no_grad():
                flat = features(torch.zeros(1, in_channels, image_size, image_size)).numel()
        except RuntimeError as error:
            shrunk = f"its layers shrink {image_size}x{image_size} images to nothing"
            raise ShapeError(shrunk) from error
        self.classifier = _fully_connected([flat, *hidden, num_classes], activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def _fully_connected(sizes: Sequence[int], activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for index, (size_in, size_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(size_in, size_out))
        if activation and index < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Tudui(_ConvClassifier):
    """The CIFAR-10 tutorial's "Tudui" CNN, without activations, as the tutorial wrote it."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 5, padding=2),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 5, padding=2),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2),
            nn.MaxPool2d(2),
        )
        super().__init__(features, [64], in_channels, image_size, num_classes, activation=False)


def _two_conv_relu_pool(in_channels: int, second_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, 6, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, second_channels, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


class LeNet(_ConvClassifier):
    """The PyTorch CIFAR-10 tutorial's `Net`: LeNet-5 with ReLU."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        features = _two_conv_relu_pool(in_channels, 16)
        super().__init__(features, [120, 84], in_channels, image_size, num_classes, activation=True)


class Network(_ConvClassifier):
    """The MNIST tutorial's `Network`."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        features = _two_conv_relu_pool(in_channels, 12)
        super().__init__(features, [120, 60], in_channels, image_size, num_classes, activation=True)


class MLP(nn.Module):
    """Fully connected layers with ReLU over the flattened image, e.g. 12288→25→16→6 on 3x64x64."""

    def __init__(
        self, in_channels: int, image_size: int, num_classes: int, hidden_sizes: Sequence[int]
    ) -> None:
        super().__init__()
        sizes = [in_channels * image_size * image_size, *hidden_sizes, num_classes]
        self.layers = _fully_connected(sizes, activation=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(torch.flatten(x, 1))


class UNet(nn.Module):
    """A small U-Net (Ronneberger et al., 2015) for task=segmentation, of `depth` levels."""

    def __init__(
        self,
        in_channels: int,
        image_size: int,
        num_classes: int,
        base_channels: int = 16,
        depth: int = 2,
    ) -> None:
        super().__init__()
        if image_size % 2**depth:
            raise ShapeError(f"its {depth} halvings need a size that divides by {2**depth}")
        widths = [base_channels * 2**level for level in range(depth + 1)]
        self.down = nn.ModuleList(
            _two_convs(size_in, size_out)
            for size_in, size_out in zip([in_channels, *widths[:-2]], widths[:-1], strict=True)
        )
        self.bottom = _two_convs(widths[-2], widths[-1])
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(wide, narrow, 2, stride=2)
            for wide, narrow in zip(widths[:0:-1], widths[-2::-1], strict=True)
        )
        self.joined = nn.ModuleList(_two_convs(2 * narrow, narrow) for narrow in widths[-2::-1])
        self.classify = nn.Conv2d(base_channels, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for level in self.down:
            x = level(x)
            skips.append(x)
            x = nn.functional.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, joined, skip in zip(self.up, self.joined, reversed(skips), strict=True):
            x = joined(torch.cat([skip, up(x)], dim=1))
        return self.classify(x)


def _two_convs(size_in: int, size_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(size_in, size_out, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(size_out, size_out, 3, padding=1),
        nn.ReLU(),
    )
