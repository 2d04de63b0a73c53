"""timm's architectures by name (`model=timm model.arch=resnet10t`), an optional extra."""

from __future__ import annotations

import logging
import urllib.error
import urllib.parse
import urllib.request
from types import ModuleType

from torch import nn

from experiments.core.errors import ExperimentError
from experiments.core.hints import did_you_mean

INSTALL = "pip install 'experiments[timm]'"

HUB_ANSWER_SECONDS = 5.0  # before the Hugging Face Hub is taken as out of reach


def build(
    arch: str, in_channels: int, image_size: int, num_classes: int, pretrained: bool = False
) -> nn.Module:
    """timm's `arch` for the data; with `pretrained`, from timm's default weights for it."""
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
    arguments = {"num_classes": num_classes, "in_chans": in_channels, **fitted}
    if pretrained:
        return _pretrained(timm, arch, arguments)
    return timm.create_model(arch, **arguments)


def _pretrained(timm: ModuleType, arch: str, arguments: dict[str, int]) -> nn.Module:
    """timm's `arch` from its default weights: fetched from the Hub where it answers, else from its
    cache alone (its library would otherwise retry for about a minute, printing every try)."""
    import huggingface_hub.constants as hub

    offline = hub.HF_HUB_OFFLINE
    unreachable = "HF_HUB_OFFLINE is set" if offline else _unreachable(hub.ENDPOINT)
    library_logger = logging.getLogger("huggingface_hub")
    level = library_logger.level
    library_logger.setLevel(logging.ERROR)
    hub.HF_HUB_OFFLINE = unreachable is not None  # (read at every request)
    try:
        return timm.create_model(arch, pretrained=True, **arguments)
    except OSError as error:  # (only fetching weights reads a file or the network)
        why = unreachable or f"{hub.ENDPOINT}: {str(error).splitlines()[0]}"
        host = urllib.parse.urlsplit(hub.ENDPOINT).hostname
        raise ExperimentError(
            f"model.pretrained=true: timm could not fetch {arch}'s weights from the Hugging Face "
            f"Hub ({why}) nor find them in its cache, {hub.HF_HUB_CACHE}; run once where {host} "
            "is reachable (the weights are then kept in that cache), or set "
            "model.pretrained=false"
        ) from error
    finally:
        hub.HF_HUB_OFFLINE = offline
        library_logger.setLevel(level)


def _unreachable(endpoint: str) -> str | None:
    """Why the Hub is out of reach, asked through the proxies as its library asks, or None."""
    request = urllib.request.Request(endpoint, method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=HUB_ANSWER_SECONDS).close()
    except urllib.error.HTTPError:
        return None
    except OSError as error:  # (URLError, a timeout, a connection refused or reset)
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        return f"{endpoint} cannot be reached: {reason}"
    return None


def takes_one_size(timm: ModuleType, arch: str) -> bool:
    """Whether timm builds `arch` for one input size only (ViT, Swin, ...)."""
    config = timm.models.get_pretrained_cfg(arch)
    return bool(config and config.fixed_input_size)


def _refuse_unknown_tag(timm: ModuleType, arch: str) -> None:
    name, tag = timm.models.split_model_name_tag(arch)
    tags = [known.partition(".")[2] for known in timm.list_pretrained(f"{name}.*")]
    if not tag or tag in tags:
        return
    raise ExperimentError(
        f"model.arch={arch}: timm has no weights of {name} tagged {tag}; its tags are "
        f"{', '.join(tags) or 'none'} (model.arch={name}: the default's)"
    )


def _imported() -> ModuleType:
    try:
        import timm
    except ModuleNotFoundError:
        raise ExperimentError(f"model=timm needs timm, which is not installed: {INSTALL}") from None
    return timm
