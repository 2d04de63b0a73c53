"""Evaluation is limited in images (trainer.limit_eval_images) or in a fraction of each split
(trainer.limit_eval_fraction), not in batches: runs of any batch size are tested on the same
images, and every run of the same data on the same ones. The old names say what to type now; a
bad limit is refused in one line."""

from __future__ import annotations

import pytest
import torch
from hydra.errors import HydraException

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError, one_line
from experiments.data.batches import Batches
from experiments.data.subset import evaluated_rows
from experiments.data.types import Split
from helpers import assert_field_refused, compose_config, on

# 1,000 images whose labels are their row numbers, so a pass's labels say which rows it took.
NUMBERED = Split(torch.zeros(1000, 1, 2, 2, dtype=torch.uint8), torch.arange(1000))


def rows_taken(batch_size: int, images: int | None, fraction: float | None) -> list[int]:
    subset = evaluated_rows(len(NUMBERED), images, fraction)
    batches = Batches(
        NUMBERED, batch_size=batch_size, mean=[0.5], std=[0.5], runtime=on(), subset=subset
    )
    return torch.cat([labels for _, labels in batches]).tolist()


@pytest.mark.parametrize(("images", "fraction", "count"), [(200, None, 200), (None, 0.2, 200)])
def test_batches_of_64_and_of_128_are_tested_on_the_same_images(
    images: int | None, fraction: float | None, count: int
) -> None:
    in_64s, in_128s = rows_taken(64, images, fraction), rows_taken(128, images, fraction)
    assert in_64s == in_128s
    assert len(in_64s) == len(set(in_64s)) == count
    # In the split's order, and drawn from all of it, not its first rows.
    assert in_64s == sorted(in_64s) and in_64s[-1] > 800


def test_every_class_of_a_split_read_class_by_class_is_tested() -> None:
    # An image folder's split is read class by class: its first 100 images are one class.
    labels = torch.arange(10).repeat_interleave(100)
    rows = evaluated_rows(len(labels), 100, None)
    assert rows is not None
    assert set(labels[rows].tolist()) == set(range(10))


def test_a_fraction_is_of_each_split_and_a_smaller_limit_takes_some_of_a_larger_ones() -> None:
    assert len(evaluated_rows(250, None, 0.2)) == 50  # a validation split
    assert len(evaluated_rows(3, None, 0.1)) == 1  # at least one image
    # The whole split: in its order, no subset.
    assert evaluated_rows(1000, None, 1.0) is None
    assert evaluated_rows(1000, 5000, None) is None
    assert evaluated_rows(1000, None, None) is None
    fewer, more = evaluated_rows(1000, 100, None), evaluated_rows(1000, None, 0.5)
    assert set(fewer.tolist()) < set(more.tolist())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "trainer.limit_eval_batches=1",
            "trainer.limit_eval_batches=1: 'trainer' has no key 'limit_eval_batches'; renamed: "
            "validation and test are limited in images, the same whatever the batch size: "
            "trainer.limit_eval_images=N, or a fraction of each split: "
            "trainer.limit_eval_fraction=0.2",
        ),
        (
            # Lightning's name, whose float is a fraction.
            "trainer.limit_val_batches=0.2",
            "trainer.limit_val_batches=0.2: 'trainer' has no key 'limit_val_batches'; validation "
            "and test are limited in images, the same whatever the batch size: "
            "trainer.limit_eval_images=N, or a fraction of each split: "
            "trainer.limit_eval_fraction=0.2",
        ),
        (
            "trainer.limit_eval_images=abc",
            "trainer.limit_eval_images=abc: Value 'abc' of type 'str' could not be converted to "
            "Integer",
        ),
        (
            "trainer.limit_eval_images=1.5",
            "trainer.limit_eval_images=1.5: Value '1.5' of type 'float' could not be converted "
            "to Integer",
        ),
    ],
)
def test_the_old_name_and_values_of_another_type_are_refused_while_composing(
    override: str, line: str
) -> None:
    with pytest.raises(HydraException) as error:
        compose_config(override)
    assert one_line(error.value) == line


def test_eval_pys_old_name_says_what_to_type_now() -> None:
    with pytest.raises(HydraException) as error:
        compose_config("ckpt=run", "limit_batches=2", config_name="eval")
    assert one_line(error.value) == (
        "limit_batches=2: the config has no key 'limit_batches'; renamed: eval.py is limited in "
        "test images, the same whatever the batch size: limit_images=N, or a fraction of the "
        "split: limit_fraction=0.2 (by default, the images its run was tested on)"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "key", "typed", "other"),
    [
        (["trainer.limit_eval_images=0"], "trainer.limit_eval_images", "0", "limit_eval_fraction"),
        (
            ["trainer.limit_eval_images=-3"],
            "trainer.limit_eval_images",
            "-3",
            "limit_eval_fraction",
        ),
        (
            ["trainer.limit_eval_fraction=1.5"],
            "trainer.limit_eval_fraction",
            "1.5",
            "limit_eval_images",
        ),
        (
            ["trainer.limit_eval_fraction=0"],
            "trainer.limit_eval_fraction",
            "0.0",
            "limit_eval_images",
        ),
    ],
)
def test_a_bad_limit_is_refused_naming_it_and_the_other_limit(
    overrides: list[str], key: str, typed: str, other: str
) -> None:
    with pytest.raises(ExperimentError) as error:
        validate(compose_config(*overrides))
    assert_field_refused(str(error.value), key, typed)
    assert f" trainer.{other}=" in str(error.value)


def test_two_limits_are_refused_naming_both() -> None:
    with pytest.raises(ExperimentError) as error:
        validate(compose_config("trainer.limit_eval_images=100", "trainer.limit_eval_fraction=0.2"))
    assert str(error.value) == (
        "trainer.limit_eval_images=100 and trainer.limit_eval_fraction=0.2 both limit the "
        "evaluation; set one of them (a number of images, or a fraction of the images)"
    )


def test_eval_pys_bad_limit_is_refused_in_its_own_keys() -> None:
    cfg = compose_config("ckpt=run", "device=cpu", "limit_fraction=2", config_name="eval")
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert_field_refused(str(error.value), "limit_fraction", "2.0")
    assert " limit_images=N" in str(error.value)
