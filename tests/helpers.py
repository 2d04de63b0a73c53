"""Helpers for the tests: compose the real config, run the real command line, read a run folder."""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch import nn
from torch.optim import Optimizer

from experiments.config.store import CONFIG_PACKAGE, new_tag, register_configs
from experiments.core.errors import ExperimentError
from experiments.core.interrupts import TAKEN
from experiments.data import loading
from experiments.data.types import ImageData, Split
from experiments.devices.backends.registry import backend_for
from experiments.devices.placement import ToDevice
from experiments.devices.plan import DevicePlan
from experiments.devices.runtime import Runtime
from experiments.training.models import build_for

ROOT = Path(__file__).resolve().parents[1]
# Switches that would turn one-line errors into tracebacks: a test sets them itself, or not at all.
TRACEBACK_SWITCHES = ("HYDRA_FULL_ERROR", "EXPERIMENTS_TRACEBACKS")

register_configs(datetime.now(), new_tag())

# The shipped CIFAR-10 sample's classes, in label order.
CIFAR10_CLASSES = list(OmegaConf.load(ROOT / "conf" / "dataset" / "cifar10_sample.yaml").classes)


def compose_config(*overrides: str, config_name: str = "train", hydra: bool = False) -> DictConfig:
    """The config `python train.py <overrides>` would run, composed by Hydra's compose API (with
    Hydra's own node, `hydra`, when asked): composed once per test process, a copy each call."""
    return copy.deepcopy(_composed(overrides, config_name, hydra))


@cache  # a composition takes a quarter of a second; a copy, a hundredth
def _composed(overrides: tuple[str, ...], config_name: str, hydra: bool) -> DictConfig:
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        return compose(config_name, overrides=list(overrides), return_hydra_config=hydra)


def on(where: str = "cpu", **options: Any) -> Runtime:
    """The `Runtime` a one-process job on `where` (cpu, cuda:0) gets with `.to(device)` placement;
    `options` set its process group, precision or memory format."""
    device = torch.device(where)
    return Runtime(DevicePlan(device.type, device.index), ToDevice(device), **options)


@dataclass
class Finished:
    """A finished `python train.py` process: its exit code, output, and the folders it made."""

    returncode: int
    stdout: str
    stderr: str
    cwd: Path

    @property
    def run_dirs(self) -> list[Path]:
        """Every folder with a .hydra snapshot under outputs/, oldest first."""
        return sorted(
            (path.parent for path in (self.cwd / "outputs").rglob(".hydra")),
            key=lambda path: path.stat().st_mtime,
        )

    @property
    def run_dir(self) -> Path:
        (only,) = self.run_dirs
        return only

    @property
    def last_line(self) -> str:
        return self.stderr.strip().splitlines()[-1]


def train_cli(
    cwd: Path, *overrides: str, env: dict[str, str] | None = None, own_process: bool = False
) -> Finished:
    """Run `python train.py <overrides>` as a user would, in `cwd` (so outputs/ lands there),
    with the environment variables `env` set: in this process (`in_process`), or in a process of
    its own where the process is the point (`own_process`: a launcher's workers that inherit the
    environment, a lock held by this process)."""
    if not own_process:
        from experiments.cli import main

        return in_process(cwd, main, ROOT / "train.py", overrides, env)
    return _run(cwd, [sys.executable, str(ROOT / "train.py"), *overrides], env)


def trained_run(cwd: Path, *overrides: str) -> Path:
    """The folder of a run of `python train.py <overrides>` in `cwd` that completed (a test's
    fixture to read, resume or tamper with)."""
    done = train_cli(cwd, *overrides)
    assert done.returncode == 0, done.stderr
    return done.run_dir


def completed_sweep(cwd: Path, *overrides: str) -> Path:
    """The folder of a sweep, `python train.py -m <overrides>` in `cwd`, whose jobs all
    completed."""
    done = train_cli(cwd, "-m", *overrides)
    assert done.returncode == 0, done.stderr
    (multirun_yaml,) = (cwd / "outputs").rglob("multirun.yaml")
    return multirun_yaml.parent


def eval_cli(cwd: Path, *overrides: str, own_process: bool = False) -> Finished:
    """Run `python eval.py <overrides>` in `cwd`, in this process unless `own_process`."""
    if not own_process:
        from experiments.cli import evaluate_main

        return in_process(cwd, evaluate_main, ROOT / "eval.py", overrides)
    return _run(cwd, [sys.executable, str(ROOT / "eval.py"), *overrides], None)


def in_process(
    cwd: Path,
    entry: Callable[[], None],
    script: Path,
    arguments: Sequence[str],
    env: dict[str, str] | None = None,
) -> Finished:
    """The command line `script <arguments>` run by its entry function in this process, as its
    own process would run it (Hydra's command line, its run folder and logging, one-line errors
    and exit codes), without paying torch's and Hydra's imports again; `env` is set as a shell
    would set it (PYTHONPATH's folders on the import path). What the command changes in the
    process (the working folder, argv, the import path, environment variables, signal handlers,
    logging, Hydra's global state, modules of the user's own) is put back after."""
    cwd.mkdir(parents=True, exist_ok=True)
    saved_argv, saved_path, saved_cwd = sys.argv[:], sys.path[:], os.getcwd()
    saved_environ = dict(os.environ)
    saved_handlers = {taken: signal.getsignal(taken) for taken in TAKEN}
    saved_modules = set(sys.modules)
    raise_exceptions, saved_logging = logging.raiseExceptions, _logging_state()
    out, err = io.StringIO(), io.StringIO()
    for switch in TRACEBACK_SWITCHES:
        os.environ.pop(switch, None)
    os.environ.update(env or {})
    sys.path[:0] = [path for path in (env or {}).get("PYTHONPATH", "").split(os.pathsep) if path]
    os.chdir(cwd)
    sys.argv = [str(script), *arguments]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            entry()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except Exception:  # raised to the top (HYDRA_FULL_ERROR=1): the interpreter would print it
        err.write(traceback.format_exc())
        code = 1
    finally:
        os.chdir(saved_cwd)
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.environ.clear()
        os.environ.update(saved_environ)
        for taken, handler in saved_handlers.items():
            signal.signal(taken, handler)
        logging.raiseExceptions = raise_exceptions
        _restore_logging(saved_logging)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # no longer "in a Hydra job" for code run after
        for module in set(sys.modules) - saved_modules:
            if str(getattr(sys.modules[module], "__file__", "") or "").startswith(str(cwd)):
                del sys.modules[module]  # the user's own class: another test's is another
    return Finished(code, out.getvalue(), err.getvalue(), cwd)


LoggerState = tuple[list[logging.Handler], int, bool, bool]


def _logging_state() -> dict[logging.Logger, LoggerState]:
    """Every logger's handlers, level, and whether it propagates and is disabled."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return {
        logger: (logger.handlers[:], logger.level, logger.propagate, logger.disabled)
        for logger in loggers
        if isinstance(logger, logging.Logger)
    }


def _restore_logging(saved: dict[logging.Logger, LoggerState]) -> None:
    """Logging as `saved` had it (pytest's capture among it), the handlers a run's logging
    configuration added (its console, train.log) closed."""
    kept = {handler for handlers, *_ in saved.values() for handler in handlers}
    for logger in _logging_state():
        for handler in logger.handlers:
            if handler not in kept:
                handler.close()
        handlers, level, propagate, disabled = saved.get(logger, ([], logging.NOTSET, True, False))
        logger.handlers[:] = handlers
        logger.setLevel(level)  # (clears the levels cached for the loggers below)
        logger.propagate, logger.disabled = propagate, disabled


def torchrun_cli(
    cwd: Path, processes: int, *overrides: str, env: dict[str, str] | None = None
) -> Finished:
    """Run `torchrun --standalone --nproc-per-node=<processes> train.py <overrides>` in `cwd`."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command = [*torchrun, f"--nproc-per-node={processes}", str(ROOT / "train.py"), *overrides]
    return _run(cwd, command, env)


def srun_cli(cwd: Path, cluster: dict[str, str], *overrides: str, each_task: str = "") -> Finished:
    """`srun` of `python train.py <overrides>` as a task on each node of the test cluster (whose
    environment is `cluster`); `each_task`, an override more as each task's shell expands it
    ("trainer.seed=$SLURM_PROCID")."""
    train = [sys.executable, str(ROOT / "train.py"), *overrides]
    if each_task:
        train = ["bash", "-c", f'exec "$@" {each_task}', "task", *train]
    command = ["srun", "--nodes=2", "--ntasks=2", *train]
    return _run(cwd, command, {**env_with_tests_on_path(), **cluster})


def _run(cwd: Path, command: list[str], env: dict[str, str] | None) -> Finished:
    environment = {k: v for k, v in os.environ.items() if k not in TRACEBACK_SWITCHES}
    environment.update(env or {})
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600
    )
    return Finished(done.returncode, done.stdout, done.stderr, cwd)


# Few batches, so a run takes a second or two.
QUICK = (
    "device=cpu",
    "trainer.epochs=2",
    "trainer.limit_train_batches=3",
    "trainer.limit_eval_images=128",
    "trainer.log_interval=2",
)
# eval.py benchmark=true's least: 100 timed calls at batch 1, rounds of one batch each.
BRIEF_BENCHMARK = ("serving.warmup_calls=2", "serving.rounds=3", "serving.round_seconds=0.001")
# One epoch of LeNet on two batches: a run folder to read, refuse or tamper with.
SMALL = (
    "device=cpu",
    "model=lenet",
    "trainer.epochs=1",
    "trainer.limit_train_batches=2",
    "trainer.limit_eval_images=64",
)


def results(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "results.json").read_text())


def metrics(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == kind]


# What depends on the machine's speed rather than on the computation.
TIMING = {
    "time",
    "images_per_second",
    "train_seconds",
    "wait_seconds",
    "copy_seconds",
    "compute_seconds",
    "eval_seconds",
    "epoch_seconds",
    "mfu",  # the speed's share of the device's peak
    # Which process trained the epoch (its first warms up), and what else the host ran meanwhile.
    "warm_up",
    "host_other_cpu_share",
    "host_busy",
}


def numbers(run_dir: Path) -> list[dict[str, Any]]:
    """Every metrics.jsonl row, without the timings."""
    rows = metrics(run_dir, "step") + metrics(run_dir, "epoch")
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def steps_so_far(cwd: Path) -> list[dict[str, Any]]:
    """The step rows the runs under `cwd` have logged so far (a line still being written left
    out), for a test that kills a run part-way."""
    rows = []
    for path in (cwd / "outputs").rglob("metrics.jsonl"):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return [row for row in rows if row["kind"] == "step"]


def write_image_folder(
    root: Path, splits: dict[str, Any], classes: list[str], suffix: str = ".png", size: int = 0
) -> Path:
    """Write uint8 splits as an image folder at `root` (`experiments.data.image_folder.export`:
    files named by index, in the splits' order), resized to `size` x `size` if given; returns
    `root`."""
    from experiments.data.image_folder import export

    export(splits, classes, root, suffix, size or None)
    return root


# Data of one's own (tests/data/): two epochs of four steps of LeNet, each step logged: two seconds
# or so a run, and a second epoch to kill a run in.
TRAIN = (
    "model=lenet",
    "device=cpu",
    "trainer.epochs=2",
    "trainer.limit_train_batches=4",
    "trainer.limit_eval_images=128",
    "trainer.log_interval=1",
    "trainer.deterministic=true",
)


@dataclass
class Folders:
    """The image folders tests/data/conftest.py writes once (its `folders` fixture)."""

    png: Path  # the sample's first 300 train and 100 test images, as 32x32 PNG files
    jpeg: Path  # the same images as 48x48 JPEG files (resized back to 32x32 when loaded)
    whole: Path  # all 4,000 train and 1,000 test images of the sample, as 32x32 PNG files


def first_images(split: Split, count: int) -> Split:
    return Split(split.images[:count], split.labels[:count])


def load(*overrides: str) -> ImageData:
    """What `python train.py <overrides>` would train on, loaded in this process (without
    DataLoader worker processes unless the overrides ask for them)."""
    return loading.load(compose_config("dataset.workers=0", *overrides).dataset)


def load_error(*overrides: str) -> str:
    with pytest.raises(ExperimentError) as error:
        load(*overrides)
    return str(error.value)


def small_folder(root: Path, layout: dict[str, list[str]], images: int = 2) -> Path:
    """A tiny image folder: `images` 8x8 PNG files in each class folder of each split."""
    for split, classes in layout.items():
        for index, name in enumerate(classes):
            (root / split / name).mkdir(parents=True)
            for number in range(images):
                colour = (40 * index, 20 * number, 100 + 10 * number)
                Image.new("RGB", (8, 8), colour).save(root / split / name / f"{number}.png")
    return root


CAT_DOG = {"train": ["cat", "dog"], "test": ["cat", "dog"]}


# Process 1 of a torchrun run raises at its third training step (tests/failing.py).
FAILS_IN_PROCESS_1 = ("model=custom", "model._target_=failing.FailsInProcess1")
PROCESS_1_FAILURE = "process 1: RuntimeError: deliberate failure in process 1"


def failing_torchrun(cwd: Path, *overrides: str) -> tuple[Finished, float]:
    """Two torchrun processes of which process 1 fails; the run, and how long it took."""
    began = time.monotonic()
    done = torchrun_cli(
        cwd,
        2,
        "device=ddp",
        *FAILS_IN_PROCESS_1,
        *overrides,
        env=env_with_tests_on_path(),
    )
    return done, time.monotonic() - began


def env_with_tests_on_path() -> dict[str, str]:
    """The environment a command needs to import tests/'s modules (`failing`'s models, for a
    model's target): PYTHONPATH with tests/ first, then the folders the environment had."""
    had = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), *filter(None, [had])])}


def csv_numbers(run_dir: Path) -> list[dict[str, str]]:
    """metrics.csv's rows (by the csv module), without the speed, which no two runs share."""
    with (run_dir / "metrics.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    return [
        {tag: value for tag, value in row.items() if not tag.startswith("perf/")} for row in rows
    ]


def killed_in_epoch_2(cwd: Path, *overrides: str) -> Path:
    """Start `python train.py <overrides>` in `cwd`, SIGKILL it once it has logged a step of epoch
    2, and return its run folder."""
    command = [sys.executable, str(ROOT / "train.py"), *overrides]
    started = subprocess.Popen(command, cwd=cwd, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any(row["epoch"] == 2 for row in steps_so_far(cwd)):
            assert time.monotonic() < deadline and started.poll() is None
            time.sleep(0.02)
    finally:
        started.send_signal(signal.SIGKILL)
        started.wait()
    (run_dir,) = (path.parent for path in (cwd / "outputs").rglob("results.json"))
    return run_dir


def assert_same_epochs_as_one_process(
    run_dir: Path, single: Path, *, epochs: int, train_images: int
) -> None:
    """The epochs of a run over several processes are those of one process with the same global
    batch: the same batches, so the same numbers up to the order of floating point additions."""
    ours_all, theirs_all = metrics(run_dir, "epoch"), metrics(single, "epoch")
    assert len(ours_all) == len(theirs_all) == epochs
    for ours, theirs in zip(ours_all, theirs_all, strict=True):
        assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-4)
        assert ours["test_loss"] == pytest.approx(theirs["test_loss"], rel=1e-4)
        assert ours["test_accuracy"] == pytest.approx(theirs["test_accuracy"], abs=0.005)
        assert ours["train_images"] == theirs["train_images"] == train_images


# Learning-rate schedules (tests/training/test_schedules.py and test_loop.py).
LR = 0.1


def lr_of(optimizer: Optimizer) -> float:
    return optimizer.param_groups[0]["lr"]


@cache
def model_by_name(
    option: str, arch: str, shape: tuple[int, int, int], classes: int, *more: str
) -> nn.Module:
    """`model=<option> model.arch=<arch>` (torchvision, timm) built as a run builds it, for
    synthetic images of `shape` (channels, size, size) and `classes`."""
    channels, size, _ = shape
    cfg = compose_config(
        f"model={option}",
        f"model.arch={arch}",
        "dataset=synthetic",
        f"dataset.channels={channels}",
        f"dataset.image_size={size}",
        f"dataset.num_classes={classes}",
        *more,
    )
    return build_for(cfg.model, shape, classes, "synthetic")


def scheduler_config(name: str) -> DictConfig:
    """`scheduler=<name>` as the train config composes it (once per option: composing is slow)."""
    return compose_config(f"scheduler={name}").scheduler


def half_cosine(start: float, end: float, done: int, of: int) -> float:
    return end + (start - end) * (1 + math.cos(math.pi * done / of)) / 2


def read_events(folder: Path) -> EventAccumulator:
    """The events of one run folder, everything kept (TensorBoard's own reader)."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def plugin_data(events: EventAccumulator, tag: str) -> HParamsPluginData:
    """One of the HParams summaries (experiment, session start or end) as TensorBoard reads it."""
    return HParamsPluginData.FromString(events.PluginTagToContent(metadata.PLUGIN_NAME)[tag])


def welch_by_scipy(
    first: list[float], second: list[float], confidence: float = 0.95
) -> tuple[float, float]:
    """The interval of the difference of the means by scipy's own Welch test (the report's
    reference, tests/report/)."""
    from scipy import stats

    interval = stats.ttest_ind(first, second, equal_var=False).confidence_interval(confidence)
    return interval.low, interval.high


def paired_by_scipy(
    first: list[float], second: list[float], confidence: float = 0.95
) -> tuple[float, float]:
    """The interval of the mean difference of pairs (first[i], second[i]) by scipy's own paired
    t-test (the report's reference, tests/report/)."""
    from scipy import stats

    interval = stats.ttest_rel(first, second).confidence_interval(confidence)
    return interval.low, interval.high


def uninstalled(monkeypatch: pytest.MonkeyPatch, package: str, tracker_module: str) -> None:
    """`import <package>` fails for the rest of the test as if it were not installed, and the
    shipped tracker module that imports it (`records.<tracker_module>`) is imported afresh."""
    import experiments.records as records_package

    for name in [name for name in sys.modules if name.split(".")[0] == package]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, package, None)  # import <package>: ModuleNotFoundError
    # Hydra finds a target through its package's attribute, where a module once imported stays.
    monkeypatch.delitem(sys.modules, f"experiments.records.{tracker_module}", raising=False)
    monkeypatch.delattr(records_package, tracker_module, raising=False)


class StillReading(BaseException):
    """Raised where the loading waits on a named pipe: no `except OSError` on the way takes it."""


@contextlib.contextmanager
def failing_if_still_reading(seconds: int = 10) -> Iterator[None]:
    """A read of a named pipe waits for a writer for ever: fail the test instead."""

    def stuck(signum: int, frame: FrameType | None) -> None:
        raise StillReading(f"still loading after {seconds} s: a named pipe was read")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# What the cache keeps the CPU's fp32 peak of products by, in this process.
CPU_FP32_PRODUCTS = backend_for("cpu").identity(torch.device("cpu")).key("fp32 products")


def cpu_peak_entry(**changed: Any) -> dict[str, Any]:
    """A well-formed entry of the cache of peaks (`measuring.peak_cache`) for this machine's CPU's
    fp32 peak of products, with `changed` fields: one a run reads back unmeasured as it stands."""
    identity = backend_for("cpu").identity(torch.device("cpu"))
    well_formed = {
        "flops_per_second": 1e9,
        "precision": "fp32",
        "operations": "products",
        "device": identity.name,
        "uuid": identity.uuid,
        "threads": identity.threads,
        "torch": torch.__version__,
        "measured_at": "2026-12-01T00:00:00+00:00",
    }
    return {**well_formed, **changed}


def assert_field_refused(told: str, key: str, typed: str) -> None:
    """`told` is a field's own rule refusing `key`'s value, named as typed, in one line; what the
    rule says is the golden file's to hold (tests/config/golden/refusals.txt)."""
    assert told.startswith(f"{key}={typed} ") and " must be " in told and "\n" not in told, told
