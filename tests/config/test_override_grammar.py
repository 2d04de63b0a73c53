"""The command line's overrides read as Hydra's grammar reads them (experiments.config.overrides):
a quoted value is its text, a sweep is each of its choices, and what the grammar cannot read is
left to Hydra, which says so in one line."""

from __future__ import annotations

import pytest

from experiments.config.overrides import (
    evaluation_arguments,
    refuse_numbers_for_groups,
    refuse_optimizing_on_test,
    refuse_own_class_on_a_shipped_model,
    with_every_device,
)
from experiments.core.errors import ExperimentError


@pytest.mark.parametrize(
    ("override", "line"),
    [
        # A GPU's number is a whole one: no device=cuda:1.5 to suggest.
        (
            "device=1.5",
            "device=1.5 is not an option of 'device': options have names; python train.py "
            "--help lists them",
        ),
        (
            "device=choice(0,1)",
            "device=choice(0,1) is not an option of 'device'; a GPU is device=cuda:N, here "
            "device=cuda:0,cuda:1",
        ),
        (
            "+device=1",
            "+device=1 is not an option of 'device'; a GPU is device=cuda:N, here device=cuda:1",
        ),
    ],
)
def test_a_number_for_a_group_is_read_as_hydra_reads_it(override: str, line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        refuse_numbers_for_groups(["-m", override])
    assert str(refused.value) == line


def test_what_is_no_number_to_hydra_is_left_to_its_own_answer() -> None:
    # A quoted number is a name, true is a bool, and `device=[` is Hydra's to call malformed.
    refuse_numbers_for_groups(["device='1'", "model=true", "device=[", "--cfg", "job"])


def test_a_quoted_metric_is_its_name_and_a_sweep_is_checked_value_by_value() -> None:
    refuse_optimizing_on_test(["optimized_metric='val_loss'", "optimized_metric=null"])
    with pytest.raises(ExperimentError) as refused:
        refuse_optimizing_on_test(["-m", "optimized_metric=val_loss,test_accuracy"])
    assert str(refused.value).startswith(
        "optimized_metric=test_accuracy would choose hyperparameters on the test split: "
    )


@pytest.mark.parametrize("model", ["model=custom,lenet", "model='lenet'"])
def test_a_class_of_ones_own_is_refused_on_each_shipped_model_a_sweep_names(model: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        refuse_own_class_on_a_shipped_model(["-m", model, "model._target_=my_models.Net"])
    assert str(refused.value) == (
        "model._target_=my_models.Net would build your class under model=lenet's name and "
        "fields; a model of your own is model=custom model._target_=my_models.Net"
    )
    refuse_own_class_on_a_shipped_model(["model=custom", "model._target_=my_models.Net"])


def test_device_every_quoted_is_the_sweep_over_every_device() -> None:
    arguments = ["-m", "device='every'", "model=lenet"]
    assert with_every_device(arguments, lambda: ["cpu", "cuda:0"]) == [
        "-m",
        "device=cpu,cuda:0",
        "model=lenet",
    ]


def test_eval_refuses_a_group_of_training_under_a_package_too() -> None:
    evaluation_arguments(["ckpt=outputs/run", "model=custom", "model._target_=my_models.Net"])
    with pytest.raises(ExperimentError, match=r"^model@head=lenet: eval.py evaluates the model"):
        evaluation_arguments(["ckpt=outputs/run", "model@head=lenet"])
