"""Checkpoints: what is saved loads back as it was; a file damaged since is refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from experiments.config.build import plain
from experiments.core.errors import ExperimentError
from experiments.records import checkpoints
from experiments.training import models, schedules, seeding
from experiments.training.optimizers import build_optimizer
from helpers import compose_config


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A LeNet run's checkpoint after one optimizer step, as a run saves it; and what it holds."""
    cfg = compose_config("model=lenet", "scheduler=cosine")
    model = models.build_for(cfg.model, (3, 32, 32), 10, "cifar10_sample")
    optimizer, _ = build_optimizer(cfg.optimizer, model, "cpu")
    scheduler, _ = schedules.for_run(cfg.scheduler, optimizer, epochs=2, steps_per_epoch=3)
    model(torch.zeros(2, 3, 32, 32)).sum().backward()
    optimizer.step()
    scheduler.step()
    state = checkpoints.state(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=torch.amp.GradScaler("cpu", enabled=False),
        epoch=1,
        config=plain(cfg),
        history=[{"epoch": 1, "train_loss": 2.3}],
        rng=seeding.capture(torch.Generator().manual_seed(0)),
        selected_confusion=[[1, 0], [0, 1]],
        data={"dataset": "cifar10_sample", "images": {"train": 4000}, "held_out": None},
        steps_per_epoch=3,
    )
    path = tmp_path_factory.mktemp("checkpoint") / "last.pt"
    checkpoints.save(path, state)
    return path, state


def test_a_saved_checkpoint_loads_back_as_it_was(saved: tuple[Path, dict[str, Any]]) -> None:
    path, state = saved
    loaded = checkpoints.load(path)
    assert loaded["epoch"] == 1 and loaded["config"] == state["config"]
    for name, weights in state["model"].items():
        assert torch.equal(loaded["model"][name], weights)


def test_bytes_overwritten_inside_a_checkpoint_are_refused_in_one_line(
    saved: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """64 bytes of the first layer's weights overwritten in place: the file keeps its size, and
    torch.load reads it without complaint (NaN weights)."""
    path, state = saved
    whole = bytearray(path.read_bytes())
    at = whole.index(state["model"]["features.0.weight"].numpy().tobytes()[:256]) + 64
    whole[at : at + 64] = b"\xff" * 64
    damaged = tmp_path / "last.pt"
    damaged.write_bytes(bytes(whole))
    assert torch.load(damaged, weights_only=True)["model"]["features.0.weight"].isnan().any()
    with pytest.raises(ExperimentError) as error:
        checkpoints.load(damaged)
    assert str(error.value) == (
        f"checkpoint {damaged} is corrupted: what it holds does not match the checksum saved in "
        "it (damaged on disk or in a copy), so it was not loaded; use an intact copy, or train "
        "afresh with replay=<run>"
    )


def test_a_checkpoint_whose_checksum_key_was_overwritten_is_refused(
    saved: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Damage that hits the key's own name must not pass the file off as an older checkpoint,
    which would load unchecked."""
    path, _ = saved
    whole = path.read_bytes()
    assert whole.count(b"checksum") == 1
    damaged = tmp_path / "last.pt"
    damaged.write_bytes(whole.replace(b"checksum", b"checksuX"))
    with pytest.raises(ExperimentError, match=f"checkpoint {damaged} is corrupted"):
        checkpoints.load(damaged)


@pytest.mark.gpu
def test_a_checkpoint_saved_from_a_gpu_passes_its_check_and_loads_onto_the_host(
    saved: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Its checksum covers the tensors' bytes wherever they lay: a CUDA run's checkpoint loads
    onto the host (whatever device saved it), as the one saved."""
    _, state = saved
    path = tmp_path / "last.pt"
    checkpoints.save(path, {**state, "model": {k: v.cuda() for k, v in state["model"].items()}})
    weights = checkpoints.load(path)["model"]["features.0.weight"]
    assert weights.device == torch.device("cpu")
    assert torch.equal(weights, state["model"]["features.0.weight"])


ALTERED = "it was altered, and was not used"
SAVED_SECTIONS = "where every saved config has its settings"


@pytest.mark.parametrize(
    ("alter", "said"),
    [
        (
            lambda config: "model: lenet",
            "is a string ('model: lenet'), where a saved config maps each section to its settings",
        ),
        (lambda config: None, "is null, where a saved config maps each section to its settings"),
        (lambda config: [config], "is of type list, where a saved config maps each section"),
        (
            lambda config: {k: v for k, v in config.items() if k != "model"},
            f"section model is missing, {SAVED_SECTIONS}",
        ),
        (lambda config: {**config, "model": None}, f"section model is null, {SAVED_SECTIONS}"),
        (
            lambda config: {**config, "trainer": 3},
            f"section trainer is of type int, {SAVED_SECTIONS}",
        ),
        (
            lambda config: {**config, "model": {**config["model"], "_partial_": True}},
            "sets model._partial_, which changes what its section builds; the project sets such "
            "keys only at optimizer._partial_, scheduler._partial_",
        ),
        (
            lambda config: {
                **config,
                "dataset": {
                    **config["dataset"],
                    "source": {**config["dataset"]["source"], "_args_": ["/etc/passwd"]},
                },
            },
            "sets dataset.source._args_, which changes what its section builds",
        ),
    ],
    ids=["string", "null", "list", "no-model", "null-model", "int-trainer", "partial", "args"],
)
def test_a_checkpoint_whose_config_no_run_saves_is_refused_in_one_line(
    saved: tuple[Path, dict[str, Any]], tmp_path: Path, alter: Any, said: str
) -> None:
    """Each with a valid checksum (its function is public): evaluation and resume read the
    config's sections unchecked once it has loaded."""
    _, state = saved
    altered = tmp_path / "altered.pt"
    checkpoints.save(altered, {**state, "config": alter(state["config"])})
    with pytest.raises(ExperimentError) as error:
        checkpoints.load(altered)
    message = str(error.value)
    assert message.startswith(f"checkpoint {altered} is not one of this tool's: its config {said}")
    assert message.endswith(f"; {ALTERED}") and "\n" not in message


def test_a_text_its_run_read_from_the_environment_loads_as_that_text(
    saved: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run records it as its interpolation's text (`config.build.as_written`); loaded, it stays
    that text, whatever the environment holds now."""
    monkeypatch.setenv("TRACKING_TOKEN", "s3cret")
    _, state = saved
    uri = "https://runs:${oc.env:TRACKING_TOKEN}@tracking.example"
    config = {**state["config"], "model": {**state["config"]["model"], "uri": uri}}
    path = tmp_path / "last.pt"
    checkpoints.save(path, {**state, "config": config})
    assert OmegaConf.create(checkpoints.load(path)["config"]).model.uri == uri


def with_trainer(state: dict[str, Any], **changed: Any) -> dict[str, Any]:
    config = state["config"]
    return {**state, "config": {**config, "trainer": {**config["trainer"], **changed}}}


def with_dataset(state: dict[str, Any], **changed: Any) -> dict[str, Any]:
    config = state["config"]
    return {**state, "config": {**config, "dataset": {**config["dataset"], **changed}}}


@pytest.mark.parametrize(
    ("alter", "said"),
    [
        (
            lambda state: with_trainer(state, epochs="lots"),
            "its config's trainer.epochs=lots must be a whole number >= 1",
        ),
        (
            lambda state: with_trainer(state, limit_eval_fraction="half"),
            "its config's trainer.limit_eval_fraction=half must be ",
        ),
        (
            lambda state: with_trainer(state, limit_eval_images=64.5),
            "its config's trainer.limit_eval_images=64.5 must be ",
        ),
        (
            lambda state: with_trainer(state, accumulate_batches=True),
            "its config's trainer.accumulate_batches=true must be a whole number >= 1",
        ),
        (
            lambda state: with_trainer(state, ema=3),
            "its config's trainer.ema=3 must be ",
        ),
        (
            lambda state: with_trainer(state, monitor_mode="best"),
            "its config's trainer.monitor_mode=best must be one of auto, max, min",
        ),
        (
            lambda state: with_dataset(state, num_classes="ten"),
            "its config's dataset.num_classes=ten must be ",
        ),
        (
            lambda state: with_dataset(state, classes="cats"),
            "its config's dataset.classes=cats must be the classes' names, in label order, or null",
        ),
        (
            lambda state: with_dataset(state, num_classes=3),
            "its config's dataset.classes names 10 classes, but dataset.num_classes=3",
        ),
        (
            lambda state: with_dataset(state, augment=[0, 1]),
            "its config's dataset.augment.crop_padding cannot be read (Index 'crop_padding' (str) "
            "is not an int): each section on its way holds settings",
        ),
        (
            lambda state: with_dataset(state, std=[0.0]),
            "its config's dataset.std=[0.0] must be ",
        ),
        (
            lambda state: {**state, "config": {**state["config"], "scheduler": 3}},
            "its config section scheduler is of type int, where a saved config that has one has "
            "its settings",
        ),
        (
            lambda state: with_dataset(state, augment={(1, 2): 3}),
            "its config is no config OmegaConf reads (Incompatible key type 'tuple'",
        ),
        (
            lambda state: {**state, "epoch": 11},
            "its epoch=11 must be a whole number from 1 to its config's trainer.epochs=10",
        ),
        (
            lambda state: {**state, "steps_per_epoch": -1},
            "its steps_per_epoch=-1 must be a whole number >= 1",
        ),
    ],
    ids=[
        "epochs",
        "fraction",
        "images",
        "accumulate",
        "ema",
        "mode",
        "classes",
        "class-names",
        "miscounted",
        "augment-list",
        "std",
        "scheduler",
        "tuple-key",
        "epoch",
        "steps",
    ],
)
def test_a_checkpoints_field_no_run_saves_is_refused_as_it_loads(
    saved: tuple[Path, dict[str, Any]], tmp_path: Path, alter: Any, said: str
) -> None:
    """Each field evaluation or resume reads, checked as the command line's would be, whatever
    its type: a saved config is typed by no schema."""
    _, state = saved
    altered = tmp_path / "altered.pt"
    checkpoints.save(altered, alter(state))
    with pytest.raises(ExperimentError) as error:
        checkpoints.load(altered)
    message = str(error.value)
    assert message.startswith(f"checkpoint {altered} is not one of this tool's: {said}")
    assert message.endswith(f"; {ALTERED}") and "\n" not in message
