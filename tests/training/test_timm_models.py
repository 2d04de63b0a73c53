"""timm's architectures by name (`model=timm`), as timm builds them for the data's channels,
size and classes; timm's pretrained weights where asked, read from the Hugging Face Hub's cache
here (nothing is downloaded), and never fetched again for a checkpoint's model; names that are
not timm's, and timm not installed, refused in one line."""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
import safetensors.torch
import timm
import torch
from torch import nn

from experiments.core.errors import ExperimentError
from helpers import SMALL, eval_cli, model_by_name, results, train_cli, trained_run

# A small convolutional network and a small ViT of timm's tests, and the Hub's repository of
# each one's default pretrained weights.
CNN, VIT = "test_resnet", "test_vit"
CNN_REPOSITORY = "timm/test_resnet.r160_in1k"


def timm_model(arch: str, shape: tuple[int, int, int], classes: int, *more: str) -> nn.Module:
    return model_by_name("timm", arch, shape, classes, *more)


def parameters(model: nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())


def test_a_convolutional_network_is_timms_own_for_the_channels_and_classes() -> None:
    model = timm_model(CNN, (3, 32, 32), 10)
    assert parameters(model) == parameters(timm.create_model(CNN, num_classes=10, in_chans=3))
    grey = timm_model(CNN, (1, 32, 32), 7)
    assert grey.conv1[0].in_channels == 1
    assert grey(torch.zeros(2, 1, 32, 32)).shape == (2, 7)


def test_a_vision_transformer_is_built_for_the_image_size() -> None:
    model = timm_model(VIT, (3, 32, 32), 10)
    assert model.patch_embed.img_size == (32, 32)
    theirs = timm.create_model(VIT, num_classes=10, in_chans=3, img_size=32)
    assert parameters(model) == parameters(theirs)
    # Built for timm's own 160x160, it would have other position embeddings than 32x32 needs.
    assert parameters(model) != parameters(timm.create_model(VIT, num_classes=10, in_chans=3))


def test_a_name_that_is_no_timm_architecture_is_refused_with_the_closest() -> None:
    with pytest.raises(ExperimentError) as error:
        timm_model("resnet19", (3, 32, 32), 10)
    message = str(error.value)
    assert message.startswith(
        f"model.arch=resnet19 is not one of timm's {len(timm.list_models())} architectures "
        "(did you mean resnet18"
    )
    assert "timm.list_models('resnet*')" in message
    assert "\n" not in message


def test_a_pretrained_tag_timm_has_not_got_is_refused_naming_those_it_has() -> None:
    tagged = timm_model(f"{CNN}.r160_in1k", (3, 32, 32), 10)
    assert tagged(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ExperimentError) as error:
        timm_model(f"{CNN}.in22k", (3, 32, 32), 10)
    assert str(error.value) == (
        f"model.arch={CNN}.in22k: timm has no weights of {CNN} tagged in22k; its tags are "
        f"r160_in1k (model.arch={CNN}: the default's)"
    )


def cached_weights(root: Path) -> dict[str, torch.Tensor]:
    """A Hugging Face Hub cache under `root` holding weights for `CNN`'s default pretrained
    tag, as a download leaves them; returns them."""
    weights = timm.create_model(CNN).state_dict()  # ImageNet's 1000 classes, 3 channels
    snapshot = root / f"models--{CNN_REPOSITORY.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    safetensors.torch.save_file(weights, snapshot / "model.safetensors")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    return weights


def hub_cache(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, torch.Tensor]:
    """`cached_weights(root)`, read offline."""
    weights = cached_weights(root)
    offline(root, monkeypatch)
    return weights


def offline(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub's library reads only the cache at `cache`, as HF_HUB_OFFLINE=1 and HF_HUB_CACHE
    would have it read when imported."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_pretrained_weights_are_timms_fitted_to_the_channels_and_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pretrained = hub_cache(tmp_path, monkeypatch)
    model = timm_model(CNN, (1, 32, 32), 10, "model.pretrained=true")
    built = model.state_dict()
    adapted = {"conv1.0.weight", "fc.weight", "fc.bias"}
    for name, tensor in built.items():
        if name not in adapted:
            assert torch.equal(tensor, pretrained[name]), name
    # timm sums the first convolution's weights over the colours for grey images, and gives
    # 10 classes a new classifier.
    assert torch.allclose(built["conv1.0.weight"], pretrained["conv1.0.weight"].sum(1, True))
    assert built["fc.weight"].shape == (10, pretrained["fc.weight"].shape[1])
    untrained = timm_model(CNN, (1, 32, 32), 10)
    assert not torch.equal(
        untrained.state_dict()["layer1.0.conv1.weight"], pretrained["layer1.0.conv1.weight"]
    )


# What a connection to an address where nothing listens is told.
REFUSED = f"[Errno {errno.ECONNREFUSED}] {os.strerror(errno.ECONNREFUSED)}"


@pytest.fixture
def no_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The Hub's library, not in offline mode, asks the Hub at a local address where nothing
    listens (a connection is refused at once), its cache at tmp_path/hub; yields that address."""
    with socket.socket() as bound:  # (bound, never listening)
        bound.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{bound.getsockname()[1]}"
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        yield endpoint


def test_pretrained_weights_out_of_reach_are_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline(tmp_path, monkeypatch)
    done = train_cli(tmp_path, *SMALL, "model=timm", f"model.arch={CNN}", "model.pretrained=true")
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: model.pretrained=true: timm could not fetch {CNN}'s weights from the Hugging "
        f"Face Hub (HF_HUB_OFFLINE is set) nor find them in its cache, {tmp_path}; run once "
        "where huggingface.co is reachable (the weights are then kept in that cache), or set "
        "model.pretrained=false"
    )
    assert results(done.run_dir)["status"] == "failed"


def test_a_hub_that_cannot_be_reached_is_asked_once_and_quietly(
    tmp_path: Path, no_hub: str
) -> None:
    # Its library would try each file five times over a minute, printing every try.
    done = train_cli(tmp_path, *SMALL, "model=timm", f"model.arch={CNN}", "model.pretrained=true")
    assert done.returncode == 1
    printed = done.stderr.strip().splitlines()
    failure = printed.index(done.last_line)
    assert printed[failure - 1].endswith(
        "Loading pretrained weights from Hugging Face hub (timm/test_resnet.r160_in1k)"
    )  # (timm's line, saying where from)
    assert done.last_line.endswith(
        f"Error: model.pretrained=true: timm could not fetch {CNN}'s weights from the Hugging "
        f"Face Hub ({no_hub} cannot be reached: {REFUSED}) nor find them "
        f"in its cache, {tmp_path / 'hub'}; run once where 127.0.0.1 is reachable (the weights "
        "are then kept in that cache), or set model.pretrained=false"
    )
    assert results(done.run_dir)["status"] == "failed"
    assert huggingface_hub.constants.HF_HUB_OFFLINE is False  # (as it was)


def test_a_hub_that_cannot_be_reached_leaves_its_cache_to_read(tmp_path: Path, no_hub: str) -> None:
    pretrained = cached_weights(tmp_path / "hub")
    model = timm_model(CNN, (3, 32, 32), 10, "model.pretrained=true")
    weights = "layer1.0.conv1.weight"
    assert torch.equal(model.state_dict()[weights], pretrained[weights])


def test_a_pretrained_runs_checkpoint_is_evaluated_and_resumed_without_fetching_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_cache(tmp_path / "hub", monkeypatch)
    run = trained_run(tmp_path, *SMALL, "model=timm", f"model.arch={CNN}", "model.pretrained=true")
    offline(tmp_path / "empty", monkeypatch)  # the weights are gone: a fetch would fail
    (tmp_path / "eval").mkdir()
    evaluated = eval_cli(tmp_path / "eval", f"ckpt={run}", "device=cpu")
    assert evaluated.returncode == 0, evaluated.stderr
    assert results(evaluated.run_dir)["model"] == f"timm_{CNN}"
    assert results(evaluated.run_dir)["test_accuracy"] == results(run)["test_accuracy"]
    resumed = train_cli(tmp_path, f"resume={run}", "trainer.epochs=2")
    assert resumed.returncode == 0, resumed.stderr
    assert results(run)["epochs_completed"] == 2


def test_without_timm_installed_the_run_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == "timm"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm: ModuleNotFoundError
    done = train_cli(tmp_path, *SMALL, "model=timm", f"model.arch={CNN}")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: model=timm needs timm, which is not installed: pip install 'experiments[timm]'"
    )
    assert results(done.run_dir)["status"] == "failed"
