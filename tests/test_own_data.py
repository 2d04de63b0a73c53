"""Data of one's own: image folders written at test time (PNG, and JPEG of another size) and a
custom torch Dataset, streamed by DataLoader workers or decoded once through the cache, train to
the same numbers; and every mistake in a folder, a source or the cache is refused in one line."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from experiments.config.choices import Loader
from experiments.config.schemas import DatasetConfig
from experiments.core.errors import ExperimentError
from experiments.data import builtin, loading, own_data
from experiments.data.batches import Batches
from experiments.data.types import ImageData, Split
from experiments.devices import process_settings
from experiments.records import checkpoints
from experiments.run.evaluate import evaluate
from helpers import (
    CIFAR10_CLASSES,
    assert_same_epochs_as_one_process,
    compose_config,
    killed_in_epoch_2,
    metrics,
    numbers,
    on,
    results,
    torchrun_cli,
    train_cli,
    write_image_folder,
)

CLASSES = CIFAR10_CLASSES
# Two epochs of four steps of LeNet, each step logged: two seconds or so a run, and a second epoch
# to kill a run in.
TRAIN = (
    "model=lenet",
    "device=cpu",
    "trainer.epochs=2",
    "trainer.limit_train_batches=4",
    "trainer.limit_eval_batches=2",
    "trainer.log_interval=1",
    "trainer.deterministic=true",
)
LAYOUT = "an image folder holds train/<class>/*, test/<class>/* and optionally val/<class>/*"
IMAGE_FILES = ".jpg, .jpeg, .png, .ppm, .bmp, .pgm, .tif, .tiff, .webp"


@dataclass
class Folders:
    png: Path  # the sample's first 300 train and 100 test images, as 32x32 PNG files
    jpeg: Path  # the same images as 48x48 JPEG files (resized back to 32x32 when loaded)
    whole: Path  # all 4,000 train and 1,000 test images of the sample, as 32x32 PNG files


@pytest.fixture(scope="module")
def sample() -> tuple[Split, Split]:
    return builtin.cifar10_sample()


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, sample: tuple[Split, Split]) -> Folders:
    root = tmp_path_factory.mktemp("folders")
    train, test = sample
    first = {"train": _first(train, 300), "test": _first(test, 100)}
    return Folders(
        png=write_image_folder(root / "png", first, CLASSES),
        jpeg=write_image_folder(root / "jpeg", first, CLASSES, ".jpg", size=48),
        whole=write_image_folder(root / "whole", {"train": train, "test": test}, CLASSES),
    )


def _first(split: Split, count: int) -> Split:
    return Split(split.images[:count], split.labels[:count])


# The runs the equalities compare, each a dataset option of its own (a config file in a folder on
# Hydra's search path), so that one multirun trains them all, with dataset=cifar10_sample, in one
# process.
SWEPT = {
    # auto, with a cache_max_gb the folder exceeds: streamed, and results.json says why.
    "png_auto": {"root": "png", "loader": "auto", "cache_max_gb": 0.0001},
    "png_memory": {"root": "png", "loader": "memory"},
    "jpeg_stream": {"root": "jpeg", "loader": "stream"},
    "jpeg_memory": {"root": "jpeg", "loader": "memory"},
    # The whole sample as a folder, normalized as dataset=cifar10_sample normalizes it.
    "sample_folder": {"root": "whole", "loader": "stream", "mean": [0.5], "std": [0.5]},
}


@dataclass
class Sweep:
    cwd: Path  # where the sweep ran: its outputs/ and its data/cache/
    runs: dict[str, Path]  # run folder by dataset option


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, folders: Folders) -> Sweep:
    cwd = tmp_path_factory.mktemp("sweep")
    options = cwd / "conf" / "dataset"
    options.mkdir(parents=True)
    for name, fields in SWEPT.items():
        root = str(getattr(folders, fields["root"]))
        config = {"defaults": ["image_folder", "_self_"], "name": name}
        config |= {**fields, "root": root}
        OmegaConf.save(OmegaConf.create(config), options / f"{name}.yaml")
    done = train_cli(
        cwd,
        "-m",
        f"dataset={','.join(SWEPT)},cifar10_sample",
        f"hydra.searchpath=[file://{cwd / 'conf'}]",
        *TRAIN,
    )
    assert done.returncode == 0, done.stderr
    runs = {results(run_dir)["dataset"]: run_dir for run_dir in done.run_dirs}
    assert sorted(runs) == sorted([*SWEPT, "cifar10_sample"])
    return Sweep(cwd, runs)


@pytest.mark.parametrize(
    ("kind", "streamed_option"), [("png", "png_auto"), ("jpeg", "jpeg_stream")]
)
def test_a_streamed_and_a_cached_run_of_a_folder_give_identical_numbers(
    sweep: Sweep, kind: str, streamed_option: str
) -> None:
    streamed, cached = sweep.runs[streamed_option], sweep.runs[f"{kind}_memory"]
    assert numbers(streamed) == numbers(cached)
    assert len(numbers(cached)) == 2 * (4 + 1)  # 4 steps and 1 epoch row per epoch

    stream, memory = results(streamed)["data"], results(cached)["data"]
    assert (stream["loader"], memory["loader"]) == ("stream", "memory")
    for data in (stream, memory):
        assert data["images"] == {"train": 300, "test": 100}
        assert (data["channels"], data["image_size"], data["num_classes"]) == (3, 32, 10)
        assert data["classes"] == CLASSES
        assert data["statistics"].startswith("computed from 300 training images")
    # Both computed the same mean and std, from the same decoded training images.
    assert (stream["mean"], stream["std"]) == (memory["mean"], memory["std"])
    assert len(memory["mean"]) == 3 and all(0.3 < value < 0.6 for value in memory["mean"])
    assert "cache" not in stream
    for split in ("train", "test"):
        entry = memory["cache"][split]
        assert entry["built"] is True and entry["megabytes"] > 0
        # In dataset.cache_dir, data/cache by default, of the working directory.
        assert (sweep.cwd / entry["path"]).parent == sweep.cwd / "data" / "cache"
        assert Path(entry["path"]).name.startswith(f"{kind}_memory-{split}-")
    # The checkpoint's config holds what the data told, for an evaluation to normalize as training.
    trained = checkpoints.load(cached / checkpoints.LAST)["config"]["dataset"]
    assert (trained["mean"], trained["classes"]) == (memory["mean"], CLASSES)


def test_the_folders_hold_the_samples_images_in_its_order(
    sweep: Sweep, sample: tuple[Split, Split]
) -> None:
    train = _first(sample[0], 300)

    def cached(option: str) -> tuple[np.ndarray, np.ndarray]:
        entry = sweep.cwd / results(sweep.runs[option])["data"]["cache"]["train"]["path"]
        meta = json.loads((entry / "meta.json").read_text())
        assert (meta["count"], meta["shape"]) == (300, [3, 32, 32])
        return np.load(entry / "images.npy"), np.load(entry / "labels.npy")

    images, labels = cached("png_memory")
    assert np.array_equal(images, train.images.numpy())  # lossless, and in the files' order
    assert np.array_equal(labels, train.labels.numpy())
    images, labels = cached("jpeg_memory")
    assert np.array_equal(labels, train.labels.numpy())
    # Up to 48x48, JPEG, and back down to 32x32: close to the originals, not equal.
    difference = np.abs(images.astype(float) - train.images.numpy()).mean()
    assert 0 < difference < 12, difference


def test_the_sample_written_as_a_folder_trains_as_the_sample_does(sweep: Sweep) -> None:
    folder, shipped = sweep.runs["sample_folder"], sweep.runs["cifar10_sample"]
    assert numbers(folder) == numbers(shipped)
    data = results(folder)["data"]
    assert data["images"] == {"train": 4000, "test": 1000}
    assert (data["mean"], data["std"], data["classes"]) == ([0.5], [0.5], CLASSES)
    assert "statistics" not in data  # given, not computed
    assert "loader" not in results(shipped)["data"]  # whole tensors: no loader to choose


def test_loader_auto_streams_a_folder_beyond_cache_max_gb_and_says_why(sweep: Sweep) -> None:
    data = results(sweep.runs["png_auto"])["data"]
    assert data["loader"] == "stream"
    # 400 images of 3x32x32 bytes.
    assert data["loader_reason"] == "auto: 1.2 MB decoded exceeds dataset.cache_max_gb=0.0001"
    assert data["workers"] == own_data.default_workers()
    log = (sweep.runs["png_auto"] / "train.log").read_text()
    assert f"dataset png_auto: loader=stream ({data['loader_reason']})" in log


@pytest.mark.parametrize(
    ("requested", "decoded_bytes", "max_gb", "chosen", "reason"),
    [
        (
            "auto",
            3_500_000_000,
            4.0,
            "memory",
            "auto: 3,500.0 MB decoded fits dataset.cache_max_gb=4",
        ),
        (
            "auto",
            4_000_000_000,
            4.0,
            "memory",
            "auto: 4,000.0 MB decoded fits dataset.cache_max_gb=4",
        ),
        (
            "auto",
            4_000_000_001,
            4.0,
            "stream",
            "auto: 4,000.0 MB decoded exceeds dataset.cache_max_gb=4",
        ),
        ("auto", 1, 0.0, "stream", "auto: 0.0 MB decoded exceeds dataset.cache_max_gb=0"),
        ("memory", 10**12, 4.0, "memory", "dataset.loader=memory"),
        ("stream", 1, 4.0, "stream", "dataset.loader=stream"),
    ],
)
def test_choose_loader(
    requested: str, decoded_bytes: int, max_gb: float, chosen: str, reason: str
) -> None:
    assert own_data.choose_loader(Loader[requested], decoded_bytes, max_gb) == (
        Loader[chosen],
        reason,
    )


def test_two_processes_streaming_match_one(sweep: Sweep, folders: Folders, tmp_path: Path) -> None:
    ddp = torchrun_cli(
        tmp_path,
        2,
        "device=ddp",
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=stream",
        *(override for override in TRAIN if override != "device=cpu"),
    )
    assert ddp.returncode == 0, ddp.stderr
    result = results(ddp.run_dir)
    assert (result["world_size"], result["per_process_batch_size"]) == (2, 32)
    data = result["data"]
    assert (data["loader"], data["images"]) == ("stream", {"train": 300, "test": 100})
    assert data["workers"] == own_data.default_workers(processes_here=2)
    # The two processes decode the two halves of each batch one process decodes: the same
    # numbers, up to the order of floating point additions.
    single = sweep.runs["png_auto"]
    assert data["mean"] == results(single)["data"]["mean"]
    assert_same_epochs_as_one_process(ddp.run_dir, single, epochs=2, train_images=4 * 64)


def test_a_streamed_run_killed_mid_epoch_resumes_to_the_same_end(
    sweep: Sweep, folders: Folders, tmp_path: Path
) -> None:
    overrides = ("dataset=image_folder", f"dataset.root={folders.png}", "dataset.loader=stream")
    run_dir = killed_in_epoch_2(tmp_path, *TRAIN, *overrides)
    assert results(run_dir)["status"] == "running"
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1]

    done = train_cli(tmp_path, f"resume={run_dir}")
    assert done.returncode == 0, done.stderr
    assert done.run_dir == run_dir
    result = results(run_dir)
    assert (result["status"], result["resumed_after_epochs"]) == ("completed", [1])
    assert result["data"]["workers"] == own_data.default_workers()
    reference = sweep.runs["png_memory"]
    assert numbers(run_dir) == numbers(reference)
    assert result["final_test_accuracy"] == results(reference)["final_test_accuracy"]


def evaluate_on_folder(trained: Path, root: Path, out: Path, *overrides: str) -> float:
    """`python eval.py ckpt=<trained> dataset=image_folder dataset.root=<root>` on the CPU, in this
    process, recording in `out`; its test accuracy."""
    out.mkdir()
    cfg = compose_config(
        f"ckpt='{trained}'",  # quoted: a sweep's job folder has = in its name
        "device=cpu",
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.workers=0",
        *overrides,
        config_name="eval",
    )
    with process_settings.restored():
        return evaluate(cfg, out)


def test_eval_on_a_folder_normalizes_as_training_did_and_rebuilds_a_torn_cache(
    sweep: Sweep, folders: Folders, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trained = sweep.runs["png_memory"]
    built = sweep.cwd / results(trained)["data"]["cache"]["test"]["path"]
    # The entry, under the name dataset=image_folder gives it, cut short (a copy interrupted, say).
    cache_dir = tmp_path / "cache"
    test_entry = cache_dir / built.name.replace("png_memory", "image_folder")
    shutil.copytree(built, test_entry)
    images = test_entry / "images.npy"
    with open(images, "r+b") as file:
        file.truncate(images.stat().st_size // 2)

    out = tmp_path / "eval"
    accuracy = evaluate_on_folder(
        trained,
        folders.png,
        out,
        "dataset.loader=memory",
        f"dataset.cache_dir={cache_dir}",
        "limit_batches=2",
        "batch_size=64",
    )

    torn = (
        f"cache {test_entry} is torn (a file is not the size it was written with): decoding again"
    )
    assert torn in caplog.messages
    evaluation, training = results(out), results(trained)
    assert evaluation["data"]["cache"]["test"]["built"] is True
    assert np.array_equal(np.load(images), np.load(built / "images.npy"))
    # The training images' mean and std, from the checkpoint (an evaluation has no train split).
    assert evaluation["data"]["mean"] == training["data"]["mean"] != [0.5]
    assert accuracy == evaluation["test_accuracy"] == training["final_test_accuracy"]
    assert evaluation["test_loss"] == pytest.approx(training["test_loss"], rel=1e-6)


def test_eval_needs_only_a_folders_test_split(
    sweep: Sweep, folders: Folders, tmp_path: Path
) -> None:
    trained = sweep.runs["png_memory"]
    only_test = tmp_path / "photos"
    shutil.copytree(folders.png / "test", only_test / "test")
    out = tmp_path / "eval"
    accuracy = evaluate_on_folder(
        trained,
        only_test,
        out,
        f"dataset.cache_dir={tmp_path / 'cache'}",
        "limit_batches=2",
        "batch_size=64",
    )
    evaluation = results(out)
    assert evaluation["data"]["images"] == {"test": 100}
    assert accuracy == results(trained)["final_test_accuracy"]
    # Training on it still needs its train/ folder.
    assert load_error("dataset=image_folder", f"dataset.root={only_test}") == (
        f"dataset.root={only_test} has no train/ folder (its folders: test); {LAYOUT}"
    )


def test_eval_refuses_a_folder_whose_classes_differ_from_the_trained_ones(
    sweep: Sweep, folders: Folders, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(folders.png / "test", other / "test")
    (other / "test" / "cat").rename(other / "test" / "kitten")
    out = tmp_path / "eval"
    with pytest.raises(ExperimentError) as error:
        evaluate_on_folder(
            sweep.runs["png_memory"], other, out, f"dataset.cache_dir={tmp_path / 'cache'}"
        )
    message = (
        f"dataset.root={other} has other classes than those the model was trained on "
        "(png_memory): missing cat; not trained on kitten"
    )
    assert str(error.value) == message
    assert (results(out)["status"], results(out)["reason"]) == ("failed", message)


# A user's own source: a module on PYTHONPATH whose functions return torch Datasets.
SOURCE = '''
"""Stripes across or down, as torch Datasets: a source for dataset=custom."""

import torch
from torch.utils.data import Dataset


class Stripes(Dataset):
    classes = ["across", "down"]

    def __init__(self, count, size=16, floats=False):
        self.count, self.size, self.floats = count, size, floats

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        label = index % 2
        generator = torch.Generator().manual_seed(index)
        image = torch.randint(0, 100, (1, self.size, self.size), generator=generator)
        if label == 0:
            image[:, ::2, :] += 150
        else:
            image[:, :, ::2] += 150
        image = image.to(torch.uint8)
        return (image.float() / 255 if self.floats else image), label


def make_splits(train_size=96, test_size=32, size=16):
    """uint8 training images, float test images (torchvision's ToTensor gives floats)."""
    return Stripes(train_size, size), Stripes(test_size, size, floats=True)


class Broken(Stripes):
    def __init__(self, kind, at):
        super().__init__(8)
        self.kind, self.at = kind, at

    def __getitem__(self, index):
        image, label = super().__getitem__(index)
        if index != self.at:
            return image, label
        return {
            "bare": image,
            "numpy": (image.numpy(), label),
            "int32": (image.int(), label),
            "normalized": ((image.float() / 255 - 0.5) / 0.5, label),
            "smaller": (image[:, 1:, 1:], label),
            "oblong": (image[:, :, 2:], label),
            "label": (image, 2),
        }[self.kind]


def broken(kind, at=0):
    return Broken(kind, at), Stripes(4)


class Unnamed(Stripes):
    classes = None


def unnamed():
    return Unnamed(8), Unnamed(4)


def returns(what):
    return {
        "int": 3,
        "one": (Stripes(4),),
        "int test": (Stripes(4), 5),
        "empty test": (Stripes(4), Stripes(0)),
    }[what]
'''
MODULE = "own_stripes"


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder holding the source's module, on this process's import path."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return tmp_path


def test_a_custom_dataset_trains_with_what_its_data_tells(source: Path) -> None:
    done = train_cli(
        source / "cwd",
        "dataset=custom",
        f"dataset.source._target_={MODULE}.make_splits",
        "+dataset.source.size=24",
        *TRAIN,
        "trainer.epochs=1",
        env={"PYTHONPATH": str(source)},
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["status"] == "completed"
    data = result["data"]
    assert (data["channels"], data["image_size"]) == (1, 24)
    assert (data["num_classes"], data["classes"]) == (2, ["across", "down"])
    assert data["images"] == {"train": 96, "test": 32}
    assert data["loader"] == "memory"
    not_cached = {"cached": False, "why": "the Dataset names no files to key it by"}
    assert data["cache"] == {"train": not_cached, "test": not_cached}
    # The mean and std of the training images, as fractions of 255.
    train, _ = __import__(MODULE).make_splits(size=24)
    pixels = torch.stack([train[index][0] for index in range(96)]).double() / 255
    assert data["mean"] == [round(pixels.mean().item(), 4)]
    assert data["std"] == [round(pixels.std(unbiased=False).item(), 4)]
    assert [row["epoch"] for row in metrics(done.run_dir, "epoch")] == [1]


def load(*overrides: str) -> ImageData:
    """What `python train.py <overrides>` would train on, loaded in this process (without
    DataLoader worker processes unless the overrides ask for them)."""
    return loading.load(compose_config("dataset.workers=0", *overrides).dataset)


def load_error(*overrides: str) -> str:
    with pytest.raises(ExperimentError) as error:
        load(*overrides)
    return str(error.value)


CONTRACT = "(train, test) or (train, test, val) torch Datasets of (image tensor, int label)"
NOT_A_TENSOR = (
    "holds a numpy.ndarray, not an image tensor; return a uint8 (C, H, W) tensor (torchvision's "
    "PILToTensor) or a float one in [0, 1] (ToTensor)"
)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [f"dataset.source._target_={MODULE}.nothing"],
            f"dataset.source._target_={MODULE}.nothing: module '{MODULE}' has no attribute "
            "'nothing'",
        ),
        (
            ["dataset.source._target_=no_such_module.make_splits"],
            "dataset.source._target_=no_such_module.make_splits cannot be imported (No module "
            "named 'no_such_module'); its module must be on PYTHONPATH",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what=int"],
            f"{MODULE}.returns returned an int; it must return {CONTRACT}",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what=one"],
            f"{MODULE}.returns returned a tuple of 1 (Stripes); it must return {CONTRACT}",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what='int test'"],
            f"{MODULE}.returns returned an int as its test split; it must return {CONTRACT}",
        ),
        (
            [f"dataset.source._target_={MODULE}.returns", "+dataset.source.what='empty test'"],
            f"{MODULE}.returns returned an empty test split",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=bare"],
            f"{MODULE}.broken's train[0] is a torch.Tensor, not (image tensor, int label)",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=numpy"],
            f"{MODULE}.broken's train[0] {NOT_A_TENSOR}",
        ),
        (
            [
                f"dataset.source._target_={MODULE}.broken",
                "+dataset.source.kind=numpy",
                "+dataset.source.at=5",
            ],
            f"{MODULE}.broken's train[5] {NOT_A_TENSOR}",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=int32"],
            f"{MODULE}.broken's train[0] holds a torch.int32 image; use uint8 or float in [0, 1]",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=normalized"],
            f"{MODULE}.broken's train[0] holds values from -1 to 0.953; return images before "
            "normalizing (floats in [0, 1] or uint8): dataset.mean and dataset.std normalize them",
        ),
        (
            [f"dataset.source._target_={MODULE}.broken", "+dataset.source.kind=oblong"],
            f"{MODULE}.broken's train[0] is a 1x16x14 image; the models take square images: crop "
            "them in the Dataset",
        ),
        (
            [
                f"dataset.source._target_={MODULE}.broken",
                "+dataset.source.kind=smaller",
                "+dataset.source.at=3",
            ],
            f"{MODULE}.broken's train[3] is a 1x15x15 image; the split's images are 1x16x16 "
            "(dataset.channels, dataset.image_size)",
        ),
        (
            [
                f"dataset.source._target_={MODULE}.broken",
                "+dataset.source.kind=label",
                "+dataset.source.at=2",
            ],
            f"{MODULE}.broken's train[2] has label 2; labels are ints from 0 to 1",
        ),
        (
            [f"dataset.source._target_={MODULE}.make_splits", "dataset.classes=[dark,light]"],
            f"{MODULE}.make_splits: the train split has 2 classes (across, down); leave "
            "dataset.classes and dataset.num_classes null to take them",
        ),
        (
            [f"dataset.source._target_={MODULE}.make_splits", "dataset.num_classes=3"],
            f"{MODULE}.make_splits: the train split has 2 classes (across, down); leave "
            "dataset.classes and dataset.num_classes null to take them",
        ),
        (
            [f"dataset.source._target_={MODULE}.unnamed"],
            f"dataset.num_classes is needed: {MODULE}.unnamed's train Dataset has no `classes` "
            "list",
        ),
    ],
)
def test_a_custom_source_breaking_the_contract_is_refused_in_one_line(
    source: Path, overrides: list[str], message: str
) -> None:
    assert load_error("dataset=custom", *overrides) == message


def test_a_custom_dataset_without_classes_is_named_by_number(source: Path) -> None:
    data = load(
        "dataset=custom", f"dataset.source._target_={MODULE}.unnamed", "dataset.num_classes=2"
    )
    assert data.classes == ["0", "1"]
    assert isinstance(data.train, Split) and data.train.images.shape == (8, 1, 16, 16)


def small_folder(root: Path, layout: dict[str, list[str]], images: int = 2) -> Path:
    """A tiny image folder: `images` 8x8 PNG files in each class folder of each split."""
    for split, classes in layout.items():
        for index, name in enumerate(classes):
            (root / split / name).mkdir(parents=True)
            for number in range(images):
                colour = (40 * index, 20 * number, 100)
                Image.new("RGB", (8, 8), colour).save(root / split / name / f"{number}.png")
    return root


CAT_DOG = {"train": ["cat", "dog"], "test": ["cat", "dog"]}


def test_image_folder_mistakes_are_refused_in_one_line(tmp_path: Path) -> None:
    def refused(root: Path, *overrides: str) -> str:
        return load_error("dataset=image_folder", f"dataset.root={root}", *overrides)

    missing = tmp_path / "nowhere"
    assert refused(missing) == f"dataset.root={missing}: no such folder; {LAYOUT}"

    misnamed = small_folder(tmp_path / "misnamed", {"train": ["cat"], "tests": ["cat"]})
    assert refused(misnamed) == (
        f"dataset.root={misnamed} has no test/ folder (its folders: tests, train); {LAYOUT}"
    )
    no_train = small_folder(tmp_path / "no_train", {"test": ["cat"]})
    assert refused(no_train).startswith(f"dataset.root={no_train} has no train/ folder")

    flat = small_folder(tmp_path / "flat", CAT_DOG)
    for image in (flat / "train").glob("*/*.png"):
        image.rename(flat / "train" / f"{image.parent.name}-{image.name}")
    shutil.rmtree(flat / "train" / "cat"), shutil.rmtree(flat / "train" / "dog")
    assert refused(flat) == f"{flat / 'train'} has no class folders; {LAYOUT}"

    others = small_folder(tmp_path / "others", {"train": ["bird", "cat"], "test": ["cat", "dog"]})
    assert refused(others) == (
        f"dataset.root={others}: train/ and test/ have different classes "
        "(only in train/: bird; only in test/: dog)"
    )
    val = small_folder(tmp_path / "val", {**CAT_DOG, "val": ["cat", "dog", "eel"]})
    assert refused(val) == (
        f"dataset.root={val}: train/ and val/ have different classes (only in val/: eel)"
    )

    empty = small_folder(tmp_path / "empty", CAT_DOG)
    for image in (empty / "test" / "dog").iterdir():
        image.unlink()
    (empty / "test" / "dog" / ".DS_Store").write_bytes(b"\0")  # hidden files are passed over
    assert refused(empty) == (
        f"dataset.root={empty}: class folder test/dog has no images ({IMAGE_FILES})"
    )

    # Hidden folders are not classes, hidden files not images.
    hidden = small_folder(tmp_path / "hidden", CAT_DOG)
    (hidden / "train" / ".ipynb_checkpoints").mkdir()
    (hidden / "test" / "dog" / ".DS_Store").write_bytes(b"\0")
    data = load("dataset=image_folder", f"dataset.root={hidden}", "dataset.cache=false")
    assert data.classes == ["cat", "dog"] and data.record["images"] == {"train": 4, "test": 4}

    stray = small_folder(tmp_path / "stray", CAT_DOG)
    (stray / "train" / "cat" / "notes.txt").write_text("taken on a Tuesday")
    assert refused(stray) == (
        f"{stray / 'train' / 'cat' / 'notes.txt'} is not an image; class folders hold only "
        f"images ({IMAGE_FILES})"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        ["dataset.loader=memory"],
        ["dataset.loader=memory", "dataset.cache=false"],
        ["dataset.loader=stream"],  # the mean and std are computed from decoded images
    ],
)
def test_an_image_that_cannot_be_decoded_is_named(tmp_path: Path, overrides: list[str]) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    bad = root / "train" / "dog" / "1.png"
    bad.write_bytes(b"not a PNG after all")
    message = f"{bad} cannot be decoded as an image (cannot identify image file '{bad}')"
    cache_dir = tmp_path / "cache"
    assert (
        load_error(
            "dataset=image_folder",
            f"dataset.root={root}",
            f"dataset.cache_dir={cache_dir}",
            *overrides,
        )
        == message
    )
    # A build that failed leaves nothing behind to be taken for an entry.
    assert [path.name for path in cache_dir.glob("*") if path.is_dir()] == []


def test_a_worker_that_cannot_decode_an_image_names_it_and_is_let_go(tmp_path: Path) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    bad = root / "train" / "dog" / "1.png"
    bad.write_bytes(b"not a PNG after all")
    before = set(multiprocessing.active_children())
    message = load_error(
        "dataset=image_folder",
        f"dataset.root={root}",
        f"dataset.cache_dir={tmp_path / 'cache'}",
        "dataset.loader=memory",
        "dataset.workers=1",  # decoded by a worker process
    )
    assert message == f"{bad} cannot be decoded as an image (cannot identify image file '{bad}')"
    assert lingering(set(multiprocessing.active_children()) - before) == []


def test_an_image_that_cannot_be_decoded_while_streaming_is_named(tmp_path: Path) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    bad = root / "test" / "cat" / "0.png"
    bad.write_bytes(b"")
    data = load(
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.loader=stream",
        "dataset.mean=[0.5]",
        "dataset.std=[0.5]",
    )
    batches = Batches(data.test, batch_size=2, mean=[0.5], std=[0.5], device=on("cpu"))
    with pytest.raises(ExperimentError) as error:
        list(batches)
    assert str(error.value) == (
        f"{bad} cannot be decoded as an image (cannot identify image file '{bad}')"
    )


def test_a_cache_dir_that_cannot_be_written_is_refused(folders: Folders, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file, where the cache's parent folder should be")
    cache_dir = tmp_path / "file" / "cache"
    assert load_error(
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=memory",
        f"dataset.cache_dir={cache_dir}",
    ) == (
        f"dataset.cache_dir={cache_dir} is not a writable folder (Not a directory); name another "
        "folder, or set dataset.cache=false to keep nothing there"
    )


def test_a_bad_folder_fails_the_run_in_one_line(folders: Folders, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    shutil.copytree(folders.png, root)
    (bad,) = (root / "test").glob("*/03.png")  # in the first test batch
    bad.write_bytes(b"GIF89a, or so it says")
    done = train_cli(
        tmp_path,
        *TRAIN,
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.loader=stream",  # decoded by DataLoader worker processes
        "dataset.mean=[0.5]",
        "dataset.std=[0.5]",
    )
    message = f"{bad} cannot be decoded as an image (cannot identify image file '{bad}')"
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.last_line.endswith(f"Error: {message}")
    assert (results(done.run_dir)["status"], results(done.run_dir)["reason"]) == (
        "failed",
        message,
    )


def test_a_folder_is_decoded_to_the_channels_and_size_asked_for(
    folders: Folders, sample: tuple[Split, Split]
) -> None:
    data = load(
        "dataset=image_folder",
        f"dataset.root={folders.jpeg}",
        "dataset.channels=1",
        "dataset.image_size=24",
        "dataset.loader=memory",
        "dataset.cache=false",
    )
    assert isinstance(data.train, Split) and data.train.images.shape == (300, 1, 24, 24)
    assert data.record["cache"]["train"] == {"cached": False, "why": "dataset.cache=false"}
    # Grey is PIL's luminance of the RGB originals.
    rgb = sample[0].images[:300].double().mean(dim=(0, 2, 3))
    luminance = (rgb * torch.tensor([0.299, 0.587, 0.114], dtype=torch.float64)).sum()
    assert data.train.images.double().mean().item() == pytest.approx(luminance.item(), abs=2)


def test_a_changed_folder_gets_a_new_cache_entry(folders: Folders, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    shutil.copytree(folders.png, root)
    overrides = (
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.loader=memory",
        f"dataset.cache_dir={tmp_path / 'cache'}",
    )

    def entries() -> dict[str, tuple[str, bool]]:
        cache = load(*overrides).record["cache"]
        return {split: (Path(cache[split]["path"]).name, cache[split]["built"]) for split in cache}

    first = entries()
    assert all(built for _, built in first.values())
    assert entries() == {split: (name, False) for split, (name, _) in first.items()}

    touched = next((root / "train").glob("*/010.png"))
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    second = entries()
    assert second["test"] == (first["test"][0], False)
    assert second["train"][0] != first["train"][0] and second["train"][1] is True

    replaced = next((root / "test").glob("*/20.png"))
    Image.new("RGB", (32, 32), "white").save(replaced)
    third = entries()
    assert third["train"] == (second["train"][0], False)
    assert third["test"][0] != first["test"][0] and third["test"][1] is True
    kept = {path.name for path in (tmp_path / "cache").iterdir() if path.is_dir()}
    assert kept == {first["train"][0], first["test"][0], second["train"][0], third["test"][0]}


def _build_cache(config: DatasetConfig, start: Any, records: Any) -> None:
    """In a process of its own: load `config` once the other builder is ready too."""
    torch.set_num_threads(1)  # as DataLoader workers do: the pool forked with them is unusable
    start.wait()
    records.put(loading.load(config).record["cache"])


def test_two_processes_building_the_same_cache_at_once_share_one_entry(
    folders: Folders, sample: tuple[Split, Split], tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    config = compose_config(
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=memory",
        f"dataset.cache_dir={cache_dir}",
        "dataset.workers=0",
    ).dataset
    # Forked, so both have everything imported already, and load at the same moment.
    context = multiprocessing.get_context("fork")
    start, records = context.Barrier(2), context.Queue()
    builders = [
        context.Process(target=_build_cache, args=(config, start, records)) for _ in range(2)
    ]
    for builder in builders:
        builder.start()
    try:
        found = [records.get(timeout=120) for _ in builders]
        for builder in builders:
            builder.join(timeout=60)
            assert builder.exitcode == 0
    finally:
        for builder in builders:
            if builder.is_alive():
                builder.kill()

    for split, count, images in (("train", 300, sample[0].images), ("test", 100, sample[1].images)):
        # One process built the entry; the other waited for it, and used it.
        assert sorted(record[split]["built"] for record in found) == [False, True]
        (path,) = {record[split]["path"] for record in found}
        entry = Path(path)
        meta = json.loads((entry / "meta.json").read_text())
        assert meta["count"] == count
        assert (entry / "images.npy").stat().st_size == meta["images_bytes"]
        assert np.array_equal(np.load(entry / "images.npy"), images[:count].numpy())
    assert sorted(path.name for path in cache_dir.iterdir() if path.is_dir()) == sorted(
        Path(record[split]["path"]).name for record in found[:1] for split in ("train", "test")
    )


def test_a_streamed_split_lets_its_workers_go_when_it_is_dropped(folders: Folders) -> None:
    data = load(
        "dataset=image_folder",
        f"dataset.root={folders.png}",
        "dataset.loader=stream",
        "dataset.mean=[0.5]",
        "dataset.std=[0.5]",
        "dataset.workers=1",
    )
    before = set(multiprocessing.active_children())
    batches = Batches(data.test, batch_size=64, mean=[0.5], std=[0.5], device=on("cpu"))
    assert sum(len(labels) for _, labels in batches) == 100
    workers = set(multiprocessing.active_children()) - before
    assert len(workers) == 1
    del batches  # at once, not when the garbage collector finds it (5 s a worker, then)
    assert lingering(workers) == []


def lingering(workers: set[multiprocessing.process.BaseProcess]) -> list[Any]:
    """The worker processes still alive half a second from now."""
    deadline = time.monotonic() + 0.5
    while any(worker.is_alive() for worker in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [worker for worker in workers if worker.is_alive()]
    gc.collect()  # if they linger, let them go before the next test rather than in it
    return alive
