"""timm's architectures by name (`model=timm model.arch=resnet10t`), built by
`timm.create_model` and fitted to the data by timm's own arguments:

- classes and channels: `num_classes` and `in_chans`, the dataset's (with pretrained weights,
  timm adapts the first layer's to the channels and starts a new classifier for other classes);
- size: an architecture timm marks as taking one input size (`fixed_input_size` in its
  pretrained config: ViT, DeiT, Swin, MLP-Mixer, ...) is built for the dataset's, `img_size=`
  (pretrained position embeddings resampled by timm); the others, convolutional, take any size
  their layers can.

Untrained unless `model.pretrained=true`, when timm fetches the architecture's default weights
from the Hugging Face Hub (or finds them in its cache). Only a new run starts from them: a resume
and an evaluation build the model untrained, and their checkpoint's weights replace it.

timm is an optional extra (pip install 'experiments[timm]'): it is imported when a model is
built, so that without it the run says in one line how to install it.
"""

from __future__ import annotations

from types import ModuleType

from torch import nn

from experiments.core.errors import ExperimentError
from experiments.core.hints import did_you_mean

INSTALL = "pip install 'experiments[timm]'"


def build(
    arch: str, in_channels: int, image_size: int, num_classes: int, pretrained: bool = False
) -> nn.Module:
    """timm's `arch` for `in_channels` x `image_size` images of `num_classes`; with `pretrained`,
    starting from timm's default weights for it."""
    timm = _imported()
    if not timm.is_model(arch):
        known = timm.list_models()
        meant = did_you_mean(arch, known)
        hint = f" ({meant})" if meant else ""
        raise ExperimentError(
            f"model.arch={arch} is not one of timm's {len(known)} architectures{hint}; "
            "python -c \"import timm; print(timm.list_models('resnet*'))\" lists a family's"
        )
    _refuse_unknown_tag(timm, arch)
    fitted = {"img_size": image_size} if takes_one_size(timm, arch) else {}
    try:
        return timm.create_model(
            arch, pretrained=pretrained, num_classes=num_classes, in_chans=in_channels, **fitted
        )
    except OSError as error:  # (only fetching weights reads a file or the network)
        if not pretrained:
            raise
        raise ExperimentError(
            f"model.pretrained=true: timm could not fetch {arch}'s weights from the Hugging Face "
            f"Hub nor find them in its cache ({str(error).splitlines()[0]}); run once where "
            "huggingface.co is reachable, or set model.pretrained=false"
        ) from error


def takes_one_size(timm: ModuleType, arch: str) -> bool:
    """Whether timm builds `arch` for one input size only (its pretrained config's
    `fixed_input_size`)."""
    config = timm.models.get_pretrained_cfg(arch)
    return bool(config and config.fixed_input_size)


def _refuse_unknown_tag(timm: ModuleType, arch: str) -> None:
    """An architecture named with a pretrained tag (`resnet10t.c3_in1k`) timm has no weights
    under, refused in one line naming the tags it has."""
    name, tag = timm.models.split_model_name_tag(arch)
    tags = [known.partition(".")[2] for known in timm.list_pretrained(f"{name}.*")]
    if not tag or tag in tags:
        return
    raise ExperimentError(
        f"model.arch={arch}: timm has no weights of {name} tagged {tag}; its tags are "
        f"{', '.join(tags) or 'none'} (model.arch={name}: the default's)"
    )


def _imported() -> ModuleType:
    """timm, or the one line saying how to install it."""
    try:
        import timm
    except ModuleNotFoundError:
        raise ExperimentError(f"model=timm needs timm, which is not installed: {INSTALL}") from None
    return timm
