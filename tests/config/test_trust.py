"""Which targets a config read from a file may have built (experiments.config.trust)."""

from __future__ import annotations

import importlib

import pytest
import torch
from omegaconf import OmegaConf
from torch.optim.lr_scheduler import LRScheduler

from experiments.config.store import group_options
from experiments.config.trust import (
    TORCH_OPTIMIZERS,
    Target,
    is_shipped,
    targets_in,
    targets_named,
)
from helpers import compose_config


@pytest.mark.parametrize(
    "group", ["model", "optimizer", "scheduler", "placement", "dataset"], ids=str
)
def test_every_shipped_option_builds_only_shipped_targets(group: str) -> None:
    for option in group_options(group):
        if option == "custom":  # the user's own: typed, never shipped
            continue
        extra = ("model.arch=resnet18",) if option == "torchvision" else ()
        node = compose_config(f"{group}={option}", *extra)[group]
        found = list(targets_in(OmegaConf.to_container(node)))  # (unresolved: dataset.root=???)
        assert found and all(is_shipped(target.target) for target in found), (option, found)


@pytest.mark.parametrize(
    ("target", "shipped"),
    [
        ("torch.optim.AdamW", True),
        ("torch.optim.lr_scheduler.CosineAnnealingLR", True),
        ("experiments.training.models.Tudui", True),
        ("torch.load", False),
        ("builtins.open", False),
        ("torch.optim.Optimizer.zero_grad", False),
        ("experiments.config.build.build", False),
    ],
)
def test_shipped_are_the_options_targets_and_torchs_optimizers(target: str, shipped: bool) -> None:
    assert is_shipped(target) is shipped


def test_a_target_inside_anothers_arguments_is_nested() -> None:
    config = {
        "model": {
            "_target_": "a.Net",
            "head": {"_target_": "b.Head"},
            "layers": [{"_target_": "c"}],
        },
        "dataset": {"source": {"_target_": "d.splits"}},
    }
    assert list(targets_in(config)) == [
        Target("model._target_", "a.Net", False),
        Target("model.head._target_", "b.Head", True),
        Target("model.layers[0]._target_", "c", True),
        Target("dataset.source._target_", "d.splits", False),
    ]


def test_overrides_name_targets_as_values_and_inside_values() -> None:
    named = targets_named(
        [
            "model._target_=a.Net,b.Net",
            "+model.head={_target_:c.Head}",
            "+model.block._target_=d.Block",
            "trainer.epochs=3",
        ]
    )
    assert [(found.key, found.target, found.nested) for found in named] == [
        ("model._target_", "a.Net", False),
        ("model._target_", "b.Net", False),
        ("model.head._target_", "c.Head", True),
        ("model.block._target_", "d.Block", True),
    ]
    assert named[2].override == "+model.head={_target_:c.Head}"


def test_torchs_optimizers_are_named_by_what_they_are() -> None:
    """The names are looked up, never imported to be checked: each must be one of torch's
    optimizers or schedulers (Counter and Any are imported into lr_scheduler too)."""
    for target in TORCH_OPTIMIZERS:
        module, _, name = target.rpartition(".")
        found = getattr(importlib.import_module(module), name, None)
        if found is not None:  # (Muon and Adafactor are newer than torch 2.4)
            assert issubclass(found, (torch.optim.Optimizer, LRScheduler)), target
    assert not is_shipped("torch.optim.lr_scheduler.Counter")
