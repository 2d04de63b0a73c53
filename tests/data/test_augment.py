"""Augmentation's effects: a policy's ops as torchvision's, drawn per image; erasing the share
asked; mixup's and CutMix's images and labels mixed in the same shares; the same draws for the
same seed, on a resume and in every process; refused where a task cannot learn from them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torchvision.transforms import v2

from experiments.config.schemas import MOST_MIXING_ALPHA, RANDAUGMENT_OPS
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.data import builtin
from experiments.data.augment import ERASED_AREA, Augment
from experiments.data.batches import Batches
from experiments.data.policies import OPS, RANDAUGMENT
from experiments.data.types import Split
from experiments.devices.process_group import TORCHRUN, ProcessGroup
from experiments.training.tasks import Classification
from helpers import QUICK, compose_config, metrics, on, train_cli

EVERY_OPTION = {
    "policy": "randaugment",
    "erasing": 0.5,
    "mixup_alpha": 0.2,
    "cutmix_alpha": 1.0,
    "num_classes": 10,
}
# Magnitudes of each op for six images (signed, as policies draw them).
MAGNITUDES = {
    "Posterize": [8, 7, 6, 5, 4, 2],
    "Solarize": [1.0, 0.9, 0.5, 0.1, 0.0, 0.3],
    "TranslateX": [3.7, -5.2, 0, 10, -1.9, 14],
    "TranslateY": [3.7, -5.2, 0, 10, -1.9, 14],
    "Rotate": [30, -30, 12, -7, 3, 135],
}


@pytest.fixture(scope="module")
def cifar() -> Split:
    train, _ = builtin.cifar10_sample()
    return Split(train.images[:512], train.labels[:512])


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("channels", [3, 1])
@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_does_to_each_image_what_torchvisions_does(name: str, channels: int) -> None:
    # (Not the full range of values, which AutoContrast would leave as it is.)
    images = torch.randint(40, 200, (6, channels, 32, 28), dtype=torch.uint8, generator=generator())
    magnitudes = torch.tensor(MAGNITUDES.get(name, [0.25, -0.3, 0.1, 0.9, -0.05, 0.6]))
    ours = OPS[name](images.clone(), magnitudes.double())
    reference = v2.RandAugment()
    theirs = torch.stack(
        [
            reference._apply_image_or_video_transform(
                image, name, float(magnitude), interpolation=v2.InterpolationMode.NEAREST, fill={}
            )
            for image, magnitude in zip(images, magnitudes, strict=True)
        ]
    )
    differ = (ours.int() - theirs.int()).abs()
    # Blends round a last bit differently now and then: a level at most, in few pixels.
    assert differ.float().mean() < 0.01 and (name in ("ShearX", "ShearY") or differ.max() <= 1)
    if name != "Color" or channels == 3:  # (saturation leaves grey images as they are)
        assert not torch.equal(ours, images)


@pytest.mark.parametrize("policy", ["randaugment", "trivialaugment", "autoaugment"])
@pytest.mark.parametrize("channels", [3, 1])
def test_a_policy_draws_ops_per_image_not_one_for_the_batch(policy: str, channels: int) -> None:
    mnist, _ = builtin.mnist_sample(10)
    image = (mnist if channels == 1 else builtin.cifar10_sample()[0]).images[:1]
    same = image.expand(64, -1, -1, -1)
    augmented = Augment(0, False, generator(), policy=policy).pixels(same, 64, slice(0, 64))
    outcomes = {bytes(each.flatten().tolist()) for each in augmented}
    assert len(outcomes) > 10  # 64 copies of one image, made different by their own draws
    assert same.unique(dim=0).shape[0] == 1  # (the batch given, left as it was)


def augmented_batches(
    split: Split, seed: int, group_rank: tuple[int, int] = (0, 1), **options: object
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    rank, world = group_rank
    group = ProcessGroup(rank, world, rank, world, launcher=TORCHRUN if world > 1 else None)
    shuffle = generator(seed)
    augment = Augment(4, True, shuffle, **options)
    batches = Batches(
        split,
        batch_size=64,
        mean=[0.5],
        std=[0.5],
        runtime=on("cpu", group=group),
        shuffle=shuffle,
        limit=2,
        augment=augment,
    )
    return list(batches)


def test_the_same_seed_gives_the_same_batches_and_another_seed_others(cifar: Split) -> None:
    first, again = (augmented_batches(cifar, 5, **EVERY_OPTION) for _ in range(2))
    other = augmented_batches(cifar, 6, **EVERY_OPTION)
    for (images, labels), (images_again, labels_again) in zip(first, again, strict=True):
        assert torch.equal(images, images_again) and torch.equal(labels, labels_again)
    assert not torch.equal(first[0][0], other[0][0])
    assert first[0][1].shape == (64, 10)  # (mixed: a probability per class)


def test_a_resumed_pass_draws_what_the_uninterrupted_one_did(cifar: Split) -> None:
    """A checkpoint keeps the shuffle generator's state: every draw of the next pass repeats."""

    def augmented(shuffle: torch.Generator) -> Batches:
        augment = Augment(4, True, shuffle, **EVERY_OPTION)
        return Batches(
            cifar,
            batch_size=64,
            mean=[0.5],
            std=[0.5],
            runtime=on("cpu"),
            shuffle=shuffle,
            limit=2,
            augment=augment,
        )

    shuffle = generator(2)
    batches = augmented(shuffle)
    list(batches)  # the first epoch
    saved = shuffle.get_state()
    uninterrupted = list(batches)
    resumed_shuffle = torch.Generator()
    resumed_shuffle.set_state(saved)
    resumed = augmented(resumed_shuffle)
    for ours, theirs in zip(uninterrupted, resumed, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_processes_draw_for_the_whole_batch_and_mix_within_their_share(cifar: Split) -> None:
    options = {"policy": "trivialaugment", "erasing": 0.5}
    whole = augmented_batches(cifar, 4, **options)
    halves = [augmented_batches(cifar, 4, (rank, 2), **options) for rank in (0, 1)]
    for (images, _), first, second in zip(whole, *halves, strict=True):
        assert torch.equal(images, torch.cat([first[0], second[0]]))
    # Mixing: the share of the batch drawn once (the same in both processes), the partner within.
    mixed = [
        augmented_batches(cifar, 4, (rank, 2), mixup_alpha=0.4, num_classes=10) for rank in (0, 1)
    ]
    for (_, first), (_, second) in zip(*mixed, strict=True):
        assert first.max(1).values.min() == pytest.approx(second.max(1).values.min())


def constant_images(count: int) -> torch.Tensor:
    """Normalized images, each of one value of its own, unlike its neighbours'."""
    return (
        torch.arange(1, count + 1, dtype=torch.float32)[:, None, None, None]
        .expand(-1, 3, 32, 32)
        .clone()
    )


def test_mixup_mixes_images_and_labels_in_the_same_shares() -> None:
    images, labels = constant_images(16), torch.arange(16) % 10
    augment = Augment(0, False, generator(), mixup_alpha=0.2, num_classes=10)
    mixed, soft = augment.normalized(images.clone(), labels, 16, slice(0, 16))
    assert soft.shape == (16, 10) and torch.allclose(soft.sum(1), torch.ones(16))
    share = soft[0, labels[0]].item()  # the image's own class's (its partner's is another)
    assert 0 <= share <= 1 and soft[0, labels[-1]].item() == pytest.approx(1 - share, abs=1e-6)
    assert torch.allclose(mixed, share * images + (1 - share) * images.roll(1, 0))
    assert ((soft > 0).sum(1) <= 2).all()


def test_cutmix_labels_share_the_box_area() -> None:
    images, labels = constant_images(8), torch.arange(8)
    shares = []
    for seed in range(20):
        augment = Augment(0, False, generator(seed), cutmix_alpha=1.0, num_classes=10)
        mixed, soft = augment.normalized(images.clone(), labels, 8, slice(0, 8))
        pasted = mixed != images  # (each image's neighbour holds another value)
        rows, columns = pasted[0, 0].any(1).nonzero(), pasted[0, 0].any(0).nonzero()
        if len(rows):  # the box is a rectangle
            height, width = len(rows), len(columns)
            assert pasted[0, 0].sum() == height * width
        area = pasted[0, 0].float().mean().item()
        assert soft[0, 0].item() == pytest.approx(1 - area) and torch.equal(pasted[0], pasted[1])
        assert torch.allclose(soft.sum(1), torch.ones(8))
        shares.append(area)
    assert len(set(shares)) > 10  # boxes of many sizes


def test_with_both_on_each_batch_is_mixed_by_one_of_the_two() -> None:
    images, labels = constant_images(8), torch.arange(8)
    augment = Augment(0, False, generator(), mixup_alpha=1.0, cutmix_alpha=1.0, num_classes=10)
    kinds = set()
    for _ in range(30):
        mixed, _ = augment.normalized(images.clone(), labels, 8, slice(0, 8))
        blended = ~torch.isin(mixed, images).all()  # mixup makes values no image holds
        kinds.add("mixup" if blended else "cutmix")
    assert kinds == {"mixup", "cutmix"}


@pytest.mark.parametrize("chance", [0.25, 1.0])
def test_erasing_erases_the_share_of_images_asked_a_rectangle_each(chance: float) -> None:
    images = constant_images(2000)
    augment = Augment(0, False, generator(), erasing=chance)
    erased, labels = augment.normalized(
        images.clone(), torch.zeros(2000, dtype=torch.long), 2000, slice(0, 2000)
    )
    assert labels.shape == (2000,)  # (class indices: erasing mixes nothing)
    zeroed = erased[:, 0] == 0
    hit = zeroed.flatten(1).any(1)
    assert hit.float().mean().item() == pytest.approx(chance, abs=0.03)
    for mask in zeroed[hit][:200]:
        height, width = mask.any(1).sum().item(), mask.any(0).sum().item()
        assert mask.sum() == height * width  # a rectangle
        assert ERASED_AREA[0] * 0.7 <= mask.float().mean().item() <= ERASED_AREA[1] * 1.3
    assert torch.equal(erased[~hit], images[~hit])


def test_label_smoothing_smooths_the_mixed_probabilities() -> None:
    logits = torch.randn(6, 4, generator=generator())
    probabilities = torch.softmax(torch.randn(6, 4, generator=generator(1)), 1)
    smoothed = 0.9 * probabilities + 0.1 / 4
    expected = -(smoothed * logits.log_softmax(1)).sum(1).mean()
    assert Classification(label_smoothing=0.1)(logits, probabilities) == pytest.approx(
        expected.item()
    )


def test_every_option_changes_pixels_a_mask_would_not_follow_and_mixing_needs_classification() -> (
    None
):
    every = Augment(4, True, generator(), policy="autoaugment", erasing=0.1, mixup_alpha=0.2)
    assert every.refusal("classification", "classes", takes_probabilities=True) is None
    assert every.refusal("segmentation", "masks", takes_probabilities=False) == (
        "dataset.augment.crop_padding=4 dataset.augment.flip=true "
        "dataset.augment.policy=autoaugment dataset.augment.erasing=0.1 "
        "dataset.augment.mixup_alpha=0.2: each changes an image's pixels but not its mask's; "
        "task=segmentation trains without them (dataset.augment.crop_padding=0 "
        "dataset.augment.flip=false dataset.augment.policy=null dataset.augment.erasing=0 "
        "dataset.augment.mixup_alpha=0)"
    )
    # Crops, flips, a policy and erasing leave a task of values, or one's own, its targets.
    assert every.refusal("custom", "classes", takes_probabilities=False) == (
        "dataset.augment.mixup_alpha=0.2: it makes the labels class probabilities, which its "
        "loss does not take; task=custom trains without it (dataset.augment.mixup_alpha=0)"
    )
    assert not Augment(0, False, generator())


def test_a_policy_refuses_a_tables_float_values() -> None:
    rows = torch.rand(8, 10, 1, 1)  # (a CSV table's features, as dataset=csv gives them)
    with pytest.raises(ExperimentError) as refused:
        Augment(0, False, generator(), policy="randaugment").pixels(rows, 8, slice(0, 8))
    assert str(refused.value) == (
        "dataset.augment.policy=randaugment works on images of 8-bit pixels, but this dataset "
        "holds float values (a table's rows); train without it (dataset.augment.policy=null)"
    )


def test_mixing_a_regression_is_refused_before_training(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "task=regression",
        "dataset=csv",
        "model=mlp",
        *QUICK,
        "dataset.augment.cutmix_alpha=1.0",
    )
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: dataset.augment.cutmix_alpha=1.0: it makes the labels class probabilities, which "
        "its loss does not take; task=regression trains without it (dataset.augment.cutmix_alpha=0)"
    )


@pytest.mark.parametrize(
    ("override", "line"),
    [
        # A field's own rule: its key and value (its words: the golden file's).
        ("dataset.augment.magnitude=31", "dataset.augment.magnitude=31 must be "),
        (
            "dataset.augment.crop_padding=32",
            "dataset.augment.crop_padding=32 must be less than dataset.image_size=32: a crop of "
            "images padded by their size or more may hold none of the image (e.g. 4 for 32x32)",
        ),
        *(
            (f"dataset.augment.num_ops={ops}", f"dataset.augment.num_ops={ops} must be ")
            for ops in (0, 15)
        ),
        ("dataset.augment.erasing=nan", "dataset.augment.erasing=nan is not a number: it must be "),
        ("dataset.augment.mixup_alpha=-1", "dataset.augment.mixup_alpha=-1.0 must be "),
        # Python's Beta never draws from 9e307 on: the first step would never end.
        ("dataset.augment.mixup_alpha=1e308", "dataset.augment.mixup_alpha=1e+308 must be "),
        ("dataset.augment.cutmix_alpha=1001", "dataset.augment.cutmix_alpha=1001.0 must be "),
        (
            "dataset.augment.cutmix_alpha=inf",
            "dataset.augment.cutmix_alpha=inf is infinite: it must be ",
        ),
    ],
)
def test_values_out_of_range_are_refused(override: str, line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(override))
    assert str(refused.value).startswith(line) and "\n" not in str(refused.value)


def test_the_bounds_are_taken_and_num_ops_is_the_policys_ops() -> None:
    assert len(RANDAUGMENT) == RANDAUGMENT_OPS
    validate(compose_config(f"dataset.augment.num_ops={RANDAUGMENT_OPS}"))
    validate(compose_config(f"dataset.augment.mixup_alpha={MOST_MIXING_ALPHA}"))
    validate(compose_config("dataset.augment.crop_padding=31"))


def test_a_run_trains_with_every_option_and_evaluates_unmixed(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        *QUICK,
        "dataset.augment.policy=trivialaugment",
        "dataset.augment.erasing=0.25",
        "dataset.augment.mixup_alpha=0.2",
        "dataset.augment.cutmix_alpha=1.0",
        "trainer.label_smoothing=0.1",
    )
    # (Evaluation tallies a confusion matrix of class indices: mixed labels there would fail.)
    assert done.returncode == 0, done.stderr
    epochs = metrics(done.run_dir, "epoch")
    assert all(
        math.isfinite(row["train_loss"]) and 0 <= row["test_accuracy"] <= 1 for row in epochs
    )
