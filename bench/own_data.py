"""Own data: `dataset=image_folder` against a loop written the torchvision way, on a PNG folder.

The folder is written at bench time from the 4,000 + 1,000 shipped CIFAR-10 images
(`experiments.data.builtin.cifar10_sample()`, written by `experiments.data.image_folder.export` as
`python -m experiments.data.image_folder DIR` does): DIR/train/<class>/0000.png ... 3999.png and
DIR/test/<class>/000.png ... 999.png (zero-padded indices, the class names of
conf/dataset/cifar10_sample.yaml). Every variant trains the same model for the same epochs at
batch 64 on the CPU in fp32, with SGD at the lr of conf/optimizer/sgd.yaml, and evaluates on the
test split after every epoch, as train.py does; each runs in a fresh process of its own:

  torchvision     the torchvision way, in a subprocess of this script: `ImageFolder` with
                  `ToTensor` and `Normalize`, `DataLoader(batch_size=64, num_workers=2,
                  shuffle=True)` (the test split: the same without shuffling), `.to(device)` per
                  batch, `loss.item()` every step, the test loss and accuracy every epoch;
  image_folder    `python train.py dataset=image_folder dataset.root=DIR` (dataset.loader=auto,
                  so the memory path through the cache), in a fresh working folder, so the cache
                  (dataset.cache_dir, data/cache under it) starts EMPTY and is built in the run;
  warm cache      the same with a cache built before the rounds (a run that only maps it);
  stream          the same with dataset.loader=stream and dataset.workers=2: no cache, workers
                  decode every batch every epoch;
  cifar10_sample  `python train.py dataset=cifar10_sample`: the same images in memory, shipped.

What each timing includes:

  seconds         from the start of dataset construction to the end of the last epoch (its test
                  evaluation included): for train.py, from the log line just before
                  `setup.load_data` ("device: ...", in the run's train.log, millisecond stamps) to
                  the last epoch's row of metrics.jsonl, so it counts the ImageFolder scan, the
                  cache build (decoding the PNGs), the mean/std computed from the training images,
                  the model set-up, every epoch with its evaluation, and the checkpoint each
                  epoch writes (trainer.checkpoint_every=1); for the torchvision loop, from
                  constructing the ImageFolders to the end of its last evaluation. Both windows
                  open with torch imported and torchvision not: train.py imports it (through
                  `experiments.data.image_folder`, when Hydra builds `dataset.source`) inside its
                  window, so the torchvision loop's window includes its `from torchvision import
                  datasets, transforms` too. Most of that import is torch._dynamo (over 1 s
                  here), which torchvision.ops imports, and which the first `torch.optim`
                  optimizer built in a process imports if nothing did before: each window pays
                  it once (train.py's even with cifar10_sample, when it builds SGD).
                  --torchvision-imported-first leaves it out of the torchvision loop's window
                  only: the stricter reading, as a script imports torchvision at its top.
                  Neither counts Python's start-up, the other imports, or train.py's Hydra
                  composition.
  train img/s     training images of all epochs over the seconds of their training passes (not
                  the evaluation): results.json's train_images_per_second for train.py, and the
                  same sum for the torchvision loop (each pass timed from asking the DataLoader
                  for its first batch to the last step).
  cache build     results.json "data" -> "cache" -> train and test: build_seconds and megabytes
                  (the cold runs' medians; the build is inside their seconds).

The variants run in rounds, each round starting one further along the list, so that drift in the
machine's speed touches all alike; the table gives medians over the rounds and, for the ratios,
the medians of each round's own ratios. glibc's malloc keeps freed memory in every variant, as
train.py does by default (trainer.keep_freed_memory) and as bench/throughput.py does for its
tutorial loop (--plain-malloc-torchvision: the torchvision loop as a script would leave it).
The PNG files are in the page cache for all variants (written, then read by a priming run).

    python bench/own_data.py                          # lenet and tudui, 10 epochs, 1 round
    python bench/own_data.py --models lenet --rounds 3 --record    # and append to RESULTS.md
    python bench/own_data.py --epochs 1 --models lenet             # a quick check of the script
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from record import append_to_results

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("lenet", "tudui")
BATCH = 64
# The targets: image_folder (cold cache) over the torchvision loop, in seconds.
SPEEDUP_TARGET = {"lenet": 3.0, "tudui": 2.0}
STREAM_TARGET = 1.3  # stream over the torchvision loop, in seconds
EPOCHS_TARGET = 0.95  # image_folder's epochs over cifar10_sample's, in train images/s
# The file log's stamp: "[2026-11-22 22:40:01,123][experiments][INFO] - device: cpu ...".
LOG_STAMP = "%Y-%m-%d %H:%M:%S,%f"


# --- The PNG folder -----------------------------------------------------------------------------


def write_folder(root: Path) -> None:
    """The shipped CIFAR-10 sample as PNG files in ImageFolder layout under `root`, as
    `python -m experiments.data.image_folder DIR` writes it."""
    from omegaconf import OmegaConf

    from experiments.data import builtin
    from experiments.data.image_folder import export

    classes = list(OmegaConf.load(ROOT / "conf/dataset/cifar10_sample.yaml").classes)
    train, test = builtin.cifar10_sample()
    export({"train": train, "test": test}, classes, root)


# --- The torchvision way (run in a subprocess: `--torchvision-loop DIR`) ------------------------


def torchvision_loop(
    root: Path, model_name: str, epochs: int, workers: int, imported_first: bool
) -> dict[str, Any]:
    """Train and evaluate as a torchvision tutorial does; seconds from dataset construction to
    the end of the last evaluation, and the train images/s of the training passes."""
    if imported_first:
        import torchvision  # noqa: F401  (outside the window)
    import torch
    from omegaconf import OmegaConf
    from torch import nn
    from torch.utils.data import DataLoader
    from tutorial import tutorial_steps

    from experiments.training import models

    lr = OmegaConf.load(ROOT / "conf/optimizer/sgd.yaml").lr
    device = torch.device("cpu")
    assert imported_first or "torchvision" not in sys.modules
    started = time.perf_counter()
    # By default inside the window, as train.py imports torchvision (experiments.data.image_folder)
    # inside its own.
    from torchvision import datasets, transforms

    transform = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.5] * 3)]
    )
    train_data = datasets.ImageFolder(str(root / "train"), transform=transform)
    test_data = datasets.ImageFolder(str(root / "test"), transform=transform)
    train_loader = DataLoader(train_data, batch_size=BATCH, shuffle=True, num_workers=workers)
    test_loader = DataLoader(test_data, batch_size=BATCH, num_workers=workers)
    torch.manual_seed(0)
    model = {"lenet": models.LeNet, "tudui": models.Tudui}[model_name](
        3, 32, len(train_data.classes)
    ).to(device)
    loss_fn = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    train_seconds, train_images, accuracy = 0.0, 0, 0.0
    for _ in range(epochs):
        model.train()
        began = time.perf_counter()
        train_images += tutorial_steps(model, train_loader, device, loss_fn, optimizer)
        train_seconds += time.perf_counter() - began
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for images, targets in test_loader:
                images, targets = images.to(device), targets.to(device)
                outputs = model(images)
                test_loss += loss_fn(outputs, targets).item() * len(targets)
                correct += (outputs.argmax(1) == targets).sum().item()
        accuracy = correct / len(test_data)
    return {
        "seconds": time.perf_counter() - started,
        "train_images_per_second": train_images / train_seconds,
        "final_test_accuracy": accuracy,
    }


def run_torchvision(root: Path, model: str, options: argparse.Namespace) -> dict[str, Any]:
    """The torchvision loop in a subprocess of this script: its numbers."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--torchvision-loop",
        str(root),
        "--models",
        model,
        "--epochs",
        str(options.epochs),
        "--workers",
        str(options.workers),
        *(["--plain-malloc-torchvision"] if options.plain_malloc_torchvision else []),
        *(["--torchvision-imported-first"] if options.torchvision_imported_first else []),
    ]
    done = _run(command, ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- train.py -----------------------------------------------------------------------------------


def run_train(
    scratch: Path, model: str, epochs: int, overrides: list[str], limit: bool = False
) -> dict[str, Any]:
    """`python train.py` in a fresh working folder under `scratch`: its numbers."""
    with tempfile.TemporaryDirectory(dir=scratch) as cwd:
        command = [
            sys.executable,
            str(ROOT / "train.py"),
            "device=cpu",
            f"model={model}",
            f"trainer.epochs={epochs}",
            f"trainer.batch_size={BATCH}",
            *(["trainer.limit_train_batches=1", "trainer.limit_eval_images=64"] if limit else []),
            *overrides,
        ]
        _run(command, Path(cwd))
        (results_file,) = Path(cwd).rglob("results.json")
        run_dir = results_file.parent
        results = json.loads(results_file.read_text())
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        log_text = (run_dir / "train.log").read_text()
    if results["status"] != "completed":
        raise SystemExit(f"{' '.join(command)}: {results['status']}: {results['reason']}")
    last_epoch = [row for row in rows if row.get("kind") == "epoch"][-1]
    cache = results["data"].get("cache", {})
    # "device: ..." is logged just before `setup.load_data` (what comes between is a results.json
    # write and small settings); "training ..." just before the first epoch.
    started = _logged_at(log_text, "device: ")
    return {
        "seconds": last_epoch["time"] - started,
        "setup_seconds": _logged_at(log_text, "training ") - started,
        "train_images_per_second": results["train_images_per_second"],
        "final_test_accuracy": results["final_test_accuracy"],
        "loader": results["data"].get("loader", "memory"),  # shipped: always in memory
        "workers": results["data"].get("workers"),
        "cache_built": [entry["built"] for entry in cache.values()],
        "build_seconds": sum(entry.get("build_seconds", 0) for entry in cache.values()),
        "megabytes": sum(entry["megabytes"] for entry in cache.values()),
    }


def _logged_at(log_text: str, message: str) -> float:
    """When train.py logged the first line starting with `message` (its file log's stamp)."""
    for line in log_text.splitlines():
        if f"] - {message}" in line:
            stamp = line[1 : line.index("]")]
            return datetime.strptime(stamp, LOG_STAMP).timestamp()  # local time, as logged
    raise SystemExit(f"no '{message}' line in train.log: did its format change?")


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-20:])
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{tail}")
    return done


# --- Rounds and the table -----------------------------------------------------------------------


def measure(
    model: str, folder: Path, warm_cache: Path, scratch: Path, options: argparse.Namespace
) -> dict[str, list[dict[str, Any]]]:
    """Each variant's numbers in every round, the rounds interleaved."""
    folder_args = ["dataset=image_folder", f"dataset.root={folder}"]
    runs = {
        "torchvision": lambda: run_torchvision(folder, model, options),
        "image_folder": lambda: run_train(scratch, model, options.epochs, folder_args),
        "warm_cache": lambda: run_train(
            scratch, model, options.epochs, [*folder_args, f"dataset.cache_dir={warm_cache}"]
        ),
        "stream": lambda: run_train(
            scratch,
            model,
            options.epochs,
            [*folder_args, "dataset.loader=stream", f"dataset.workers={options.workers}"],
        ),
        "cifar10_sample": lambda: run_train(
            scratch, model, options.epochs, ["dataset=cifar10_sample"]
        ),
    }
    numbers: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    names = list(runs)
    for round_number in range(options.rounds):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            got = runs[name]()
            numbers[name].append(got)
            setup = f" (set-up {got['setup_seconds']:.1f} s)" if "setup_seconds" in got else ""
            print(
                f"  {model} round {round_number + 1}/{options.rounds} {name}: "
                f"{got['seconds']:.1f} s{setup}, "
                f"{got['train_images_per_second']:,.0f} train img/s, "
                f"test accuracy {100 * got['final_test_accuracy']:.1f}%",
                file=sys.stderr,
            )
    _check_paths(numbers)
    return numbers


def _check_paths(numbers: dict[str, list[dict[str, Any]]]) -> None:
    """Each variant took the path it stands for (the cache built, or only mapped, or none)."""
    expected = {
        "image_folder": ("memory", True),
        "warm_cache": ("memory", False),
        "stream": ("stream", None),
    }
    for name, (loader, built) in expected.items():
        for got in numbers[name]:
            cache = set(got["cache_built"])
            built_ok = not cache if built is None else cache == {built}
            if got["loader"] != loader or not built_ok:
                raise SystemExit(
                    f"{name} took loader {got['loader']} with cache built {got['cache_built']}; "
                    f"expected {loader}, built {built}"
                )


def summary(numbers: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    def median(name: str, key: str) -> float:
        return statistics.median(got[key] for got in numbers[name])

    def ratio(top: str, bottom: str, key: str) -> float:
        pairs = zip(numbers[top], numbers[bottom], strict=True)
        return statistics.median(a[key] / b[key] for a, b in pairs)

    seconds = {name: median(name, "seconds") for name in numbers}
    speed = {name: median(name, "train_images_per_second") for name in numbers}
    return {
        **{f"{name} s": value for name, value in seconds.items()},
        **{f"{name} img/s": value for name, value in speed.items()},
        "image_folder x": ratio("torchvision", "image_folder", "seconds"),
        "warm_cache x": ratio("torchvision", "warm_cache", "seconds"),
        "stream x": ratio("torchvision", "stream", "seconds"),
        "image_folder /mem": ratio("image_folder", "cifar10_sample", "train_images_per_second"),
        "warm_cache /mem": ratio("warm_cache", "cifar10_sample", "train_images_per_second"),
        "setup s": median("image_folder", "setup_seconds"),
        "build s": median("image_folder", "build_seconds"),
        "MB": median("image_folder", "megabytes"),
    }


def machine() -> str:
    import torch

    from experiments.devices.backends.cpu import cpu_name

    return (
        f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )


def tables(rows: dict[str, dict[str, float]], workers: int) -> list[str]:
    seconds = [
        "Seconds from dataset construction to the end of the last epoch (cache build included), "
        "and the speed-up: the torchvision loop's seconds over each one's; image_folder's set-up: "
        "from dataset construction to its first epoch (the cache build included):",
        "",
        "| model | torchvision s | image_folder s | speed-up | warm cache s | speed-up | stream s "
        "| speed-up | image_folder set-up s | cache build s | cache MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    speeds = [
        "Train images/s of the epochs (/ mem: over cifar10_sample's, in memory):",
        "",
        "| model | torchvision | cifar10_sample | image_folder | / mem | warm cache | / mem "
        "| stream |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    checks = []
    for model, s in rows.items():
        seconds.append(
            f"| {model} | {s['torchvision s']:.1f} | {s['image_folder s']:.1f} "
            f"| {s['image_folder x']:.2f} | {s['warm_cache s']:.1f} | {s['warm_cache x']:.2f} "
            f"| {s['stream s']:.1f} | {s['stream x']:.2f} | {s['setup s']:.1f} "
            f"| {s['build s']:.2f} | {s['MB']:.1f} |"
        )
        speeds.append(
            f"| {model} | {s['torchvision img/s']:,.0f} | {s['cifar10_sample img/s']:,.0f} "
            f"| {s['image_folder img/s']:,.0f} | {s['image_folder /mem']:.2f} "
            f"| {s['warm_cache img/s']:,.0f} | {s['warm_cache /mem']:.2f} "
            f"| {s['stream img/s']:,.0f} |"
        )
        target = SPEEDUP_TARGET.get(model)
        for label, value, wanted in (
            ("image_folder (empty cache) speed-up over torchvision", s["image_folder x"], target),
            ("image_folder epochs / in-memory, img/s", s["image_folder /mem"], EPOCHS_TARGET),
            (f"stream ({workers} workers) speed-up over torchvision", s["stream x"], STREAM_TARGET),
        ):
            if wanted is not None:
                verdict = "met" if value >= wanted else "NOT met"
                checks.append(f"- {model}: {label} {value:.2f} (target ≥ {wanted}): {verdict}")
    return [*seconds, "", *speeds, "", *checks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="DataLoader workers of the torchvision loop and of dataset.loader=stream",
    )
    parser.add_argument(
        "--plain-malloc-torchvision",
        action="store_true",
        help="leave glibc's malloc as it is in the torchvision loop (train.py keeps freed memory)",
    )
    parser.add_argument(
        "--torchvision-imported-first",
        action="store_true",
        help="import torchvision before the torchvision loop's window opens (train.py's window "
        "still holds its import): the stricter reading, against train.py",
    )
    parser.add_argument("--record", action="store_true", help="append the tables to RESULTS.md")
    parser.add_argument("--torchvision-loop", metavar="DIR", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()

    if arguments.torchvision_loop is not None:  # the subprocess of one torchvision run
        if not arguments.plain_malloc_torchvision:
            from experiments.devices.memory import keep_freed_memory

            keep_freed_memory()
        (model,) = arguments.models
        result = torchvision_loop(
            arguments.torchvision_loop,
            model,
            arguments.epochs,
            arguments.workers,
            arguments.torchvision_imported_first,
        )
        print(json.dumps(result))
        return

    malloc = "train.py only" if arguments.plain_malloc_torchvision else "on in every variant"
    imports = "train.py's only" if arguments.torchvision_imported_first else "in both"
    header = (
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {machine()}, own data: a PNG folder "
        f"of the 4,000 + 1,000 shipped CIFAR-10 images, {arguments.epochs} epoch(s), "
        f"batch {BATCH}, CPU fp32, {arguments.workers} DataLoader workers (torchvision loop, "
        f"stream), keep_freed_memory {malloc}, torchvision's import timed {imports}, "
        f"median of {arguments.rounds} round(s)"
    )
    print(header, flush=True)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="own-data-bench-") as scratch_name:
        scratch = Path(scratch_name)
        folder, warm_cache = scratch / "images", scratch / "warm-cache"
        began = time.perf_counter()
        write_folder(folder)
        print(f"  wrote {folder} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        # Builds the warm cache, and reads every PNG once (the page cache) and compiles
        # bytecode, before anything is timed.
        run_train(
            scratch,
            "lenet",
            1,
            ["dataset=image_folder", f"dataset.root={folder}", f"dataset.cache_dir={warm_cache}"],
            limit=True,
        )
        for model in arguments.models:
            rows[model] = summary(measure(model, folder, warm_cache, scratch, arguments))
    lines = tables(rows, arguments.workers)
    print("\n".join(lines))
    if arguments.record:
        append_to_results([f"### {header}", "", *lines])


if __name__ == "__main__":
    main()
