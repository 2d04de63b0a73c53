"""Image folders, streamed or cached: the same numbers, eval on a folder, mistakes in one line."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from experiments.core.errors import ExperimentError
from experiments.data import image_folder, own_data
from experiments.data.types import Split
from experiments.devices import process_settings
from experiments.records import checkpoints
from experiments.run.evaluate import evaluate_checkpoint
from helpers import (
    CAT_DOG,
    CIFAR10_CLASSES,
    TRAIN,
    Folders,
    assert_same_epochs_as_one_process,
    compose_config,
    first_images,
    killed_in_epoch_2,
    load,
    load_error,
    metrics,
    numbers,
    results,
    small_folder,
    torchrun_cli,
    train_cli,
)

CLASSES = CIFAR10_CLASSES
LAYOUT = "an image folder holds train/<class>/*, test/<class>/* and optionally val/<class>/*"
IMAGE_FILES = ".jpg, .jpeg, .png, .ppm, .bmp, .pgm, .tif, .tiff, .webp"


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


@pytest.mark.slow
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
    train = first_images(sample[0], 300)

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


@pytest.mark.slow
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


@pytest.mark.slow
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
        return evaluate_checkpoint(cfg, out)


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
        "limit_images=128",
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
        "limit_images=128",
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    message = f"{bad} cannot be decoded as an image (it is in no image format Pillow reads)"
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


@pytest.mark.slow
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
    message = f"{bad} cannot be decoded as an image (it is in no image format Pillow reads)"
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


def test_training_images_of_one_value_are_refused_before_normalizing(tmp_path: Path) -> None:
    # Their std is 0: normalizing would divide by it, and the run would train on nan.
    root = tmp_path / "grey"
    for split in ("train", "test"):
        for name in ("cat", "dog"):
            (root / split / name).mkdir(parents=True)
            Image.new("RGB", (8, 8), (7, 7, 7)).save(root / split / name / "0.png")
    message = load_error("dataset=image_folder", f"dataset.root={root}", "dataset.cache=false")
    assert message == (
        "dataset image_folder: channel 0 of its 2 training images holds one value only (its "
        "std is 0), which cannot be normalized; set dataset.mean and dataset.std, or check the "
        "images"
    )


@pytest.mark.parametrize("suffix", [".png", ".pgm"])
def test_16_bit_grey_images_decode_to_their_8_bit_values(tmp_path: Path, suffix: str) -> None:
    eight_bit = np.arange(0, 256, 17, dtype=np.uint16).reshape(4, 4)
    sixteen_bit = eight_bit * 257  # each 8-bit value in 16 bits: 255 is 65535
    sixteen_bit[0, 1] = 1000  # between two: 1000 / 257 = 3.9, so 4 (the PNG spec's rounding)
    eight_bit[0, 1] = 4
    path = tmp_path / f"deep{suffix}"
    Image.fromarray(sixteen_bit).save(path)
    with Image.open(path) as written:
        assert written.mode in ("I;16", "I")  # a real 16-bit file, as Pillow opens it
    grey = image_folder.decode(path, 4, channels=1)
    # Before: every value over 255 came out 255, white.
    assert torch.equal(grey, torch.from_numpy(eight_bit.astype(np.uint8))[None])
    rgb = image_folder.decode(path, 4, channels=3)
    assert torch.equal(rgb, grey.expand(3, 4, 4))


@pytest.mark.slow
def test_an_image_too_large_to_decode_is_named_in_one_line(tmp_path: Path) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    huge = root / "train" / "dog" / "1.png"
    Image.new("1", (14000, 14000)).save(huge)  # 196 million pixels, 24 KB on disk
    message = load_error(
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.cache=false",
        "dataset.workers=1",  # decoded by a DataLoader worker process
    )
    assert message == (
        f"{huge} is 14000x14000 (196,000,000 pixels): more than the 178,956,970 pixels Pillow "
        "decodes, a guard against decompression bombs; shrink it"
    )


def test_a_symbolic_link_loop_in_a_folder_is_named(tmp_path: Path) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    link = root / "train" / "cat" / "again"
    link.symlink_to(root / "train" / "cat")
    assert load_error("dataset=image_folder", f"dataset.root={root}") == (
        f"{link} is a symbolic link loop: it leads back to {root / 'train' / 'cat'}, which "
        "holds it; remove it"
    )
    link.unlink()
    link.symlink_to(link)
    assert load_error("dataset=image_folder", f"dataset.root={root}") == (
        f"{link} is a symbolic link loop: it leads back to itself; remove it"
    )


def test_images_of_another_size_are_resized_and_the_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = small_folder(tmp_path / "folder", CAT_DOG)
    for image in root.glob("*/*/*.png"):
        Image.open(image).resize((64, 48)).save(image)
    with caplog.at_level(logging.INFO, logger="experiments"):
        data = load("dataset=image_folder", f"dataset.root={root}", "dataset.cache=false")
    assert data.shape == (3, 32, 32)
    first = root / "train" / "cat" / "0.png"
    assert (
        f"dataset.root={root}: its images are resized (shorter side) and center-cropped from "
        f"64x48 ({first}, the first) to 32x32, the size the model is built for "
        "(dataset.image_size=32)"
    ) in caplog.messages
    for image in root.glob("*/*/*.png"):
        Image.open(image).resize((32, 32)).save(image)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="experiments"):
        load("dataset=image_folder", f"dataset.root={root}", "dataset.cache=false")
    assert not [message for message in caplog.messages if "resized" in message]


@pytest.mark.slow
def test_a_folder_of_train_and_val_only_tests_on_val(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # ImageNet's layout: its val/ is the held-out split its accuracy is reported on.
    root = small_folder(tmp_path / "imagenet", {"train": ["cat", "dog"], "val": ["cat", "dog"]})
    Image.new("RGB", (8, 8), "white").save(root / "val" / "dog" / "2.png")
    with caplog.at_level(logging.INFO, logger="experiments"):
        data = load("dataset=image_folder", f"dataset.root={root}", "dataset.cache=false")
    assert (len(data.train), len(data.test), data.val) == (4, 5, None)
    assert data.record["images"] == {"train": 4, "test": 5}
    assert (
        f"dataset.root={root} has train/ and val/ but no test/ (ImageNet's layout): val/ is the "
        "test split"
    ) in caplog.messages
    # A validation split is still there to hold out of train/, and eval.py tests on val/.
    held_out = load(
        "dataset=image_folder",
        f"dataset.root={root}",
        "dataset.cache=false",
        "dataset.val_fraction=0.5",
    )
    assert len(held_out.test) == 5
    evaluated = image_folder.image_folder(str(root), 8, 3, evaluating=True)
    assert [len(split) for split in evaluated] == [5, 5]


@pytest.mark.slow
def test_streamed_and_cached_statistics_come_from_the_same_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(own_data, "STATISTICS_SAMPLE", 5)  # as 10,000 of a larger folder
    root = small_folder(tmp_path / "folder", CAT_DOG, images=6)
    overrides = ("dataset=image_folder", f"dataset.root={root}", "dataset.cache=false")
    cached = load(*overrides, "dataset.loader=memory")
    streamed = load(*overrides, "dataset.loader=stream")
    assert (cached.mean, cached.std) == (streamed.mean, streamed.std)
    for data in (cached, streamed):
        assert data.record["statistics"] == "computed from 5 of 12 training images, evenly spaced"
    # And those of the five images (0, 3, 6, 8, 11 of the twelve in order) alone.
    assert isinstance(cached.train, Split)
    five = cached.train.images[[0, 3, 6, 8, 11]].double().div(255)
    assert cached.mean == [round(v, 4) for v in five.mean(dim=(0, 2, 3)).tolist()]
