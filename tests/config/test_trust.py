"""Which targets a config read from a file may have built (experiments.config.trust)."""

from __future__ import annotations

import importlib

import pytest
import torch
from torch.optim.lr_scheduler import LRScheduler

from experiments.config.trust import (
    NOTHING_TYPED,
    TORCH_OPTIMIZERS,
    Built,
    Target,
    is_shipped,
    refuse_untrusted,
    targets_in,
    targets_named,
    typed_again,
)
from experiments.core.errors import ExperimentError


@pytest.mark.parametrize(
    ("target", "slot", "shipped"),
    [
        ("torch.optim.AdamW", "optimizer", True),
        ("torch.optim.lr_scheduler.CosineAnnealingLR", "scheduler", True),
        ("experiments.training.models.Tudui", "model", True),
        ("experiments.data.csv_table.csv_splits", "dataset.source", True),
        ("experiments.records.mlflow_run.MlflowRun", "tracker.mlflow", True),
        ("experiments.training.tasks.Regression", "task", True),
        # Shipped, but for another slot: a scheduler is no model, a data source no optimizer.
        ("experiments.training.schedules.cosine", "model", False),
        ("experiments.data.csv_table.csv_splits", "optimizer", False),
        ("torch.optim.SGD", "scheduler", False),
        ("experiments.records.mlflow_run.MlflowRun", "tracker.tensorboard", False),
        ("experiments.training.models.Tudui", "model.head", False),
        ("torch.load", "model", False),
        ("builtins.open", "dataset.source", False),
        ("torch.optim.Optimizer.zero_grad", "optimizer", False),
        ("experiments.config.build.build", "model", False),
    ],
)
def test_shipped_are_the_options_targets_and_torchs_optimizers_in_their_slots(
    target: str, slot: str, shipped: bool
) -> None:
    assert is_shipped(target, slot) is shipped


@pytest.mark.parametrize(
    ("found", "said"),
    [
        (
            Target("model._target_", "experiments.training.schedules.cosine", False),
            "would build experiments.training.schedules.cosine (model._target_), which this "
            "project ships as scheduler, not as model",
        ),
        (
            Target("optimizer._target_", "experiments.data.csv_table.csv_splits", False),
            "would build experiments.data.csv_table.csv_splits (optimizer._target_), which this "
            "project ships as dataset.source, not as optimizer",
        ),
        (
            Target("model.head._target_", "experiments.training.models.Tudui", True),
            "would build experiments.training.models.Tudui (model.head._target_), inside another "
            "target's arguments",
        ),
    ],
)
def test_a_shipped_target_in_another_slot_is_refused_naming_both(found: Target, said: str) -> None:
    with pytest.raises(ExperimentError) as error:
        refuse_untrusted(Built((found,)), NOTHING_TYPED, "checkpoint x.pt", typed_again)
    assert str(error.value).startswith(f"checkpoint x.pt {said}; ")
    refuse_untrusted(Built((found,)), Built((found,)), "checkpoint x.pt")  # typed: built


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
    kinds = {"optimizer": torch.optim.Optimizer, "scheduler": LRScheduler}
    for slot, targets in TORCH_OPTIMIZERS.items():
        for target in targets:
            module, _, name = target.rpartition(".")
            found = getattr(importlib.import_module(module), name, None)
            if found is not None:  # (Muon and Adafactor are newer than torch 2.4)
                assert issubclass(found, kinds[slot]), target
    assert not is_shipped("torch.optim.lr_scheduler.Counter", "scheduler")
