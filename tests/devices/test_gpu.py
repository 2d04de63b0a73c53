"""CUDA runs, written for real and skipped on machines without a CUDA GPU (marker `gpu`).

Each test here can fail on a GPU machine if the bug it names comes back; the CPU tests of the
same paths (placement, preloading) only show that the code runs.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from experiments.config.choices import Precision
from experiments.data import loading
from experiments.data.augment import Augment
from experiments.data.batches import Batches
from experiments.data.types import ImageData, Split
from experiments.devices import memory, precision, process_settings
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring.peak_cache import PeakCache
from experiments.devices.placement import ToDevice
from experiments.devices.plan import DevicePlan
from experiments.devices.process_group import TORCHRUN, ProcessGroup
from experiments.devices.runtime import Runtime
from experiments.devices.wrapping import unwrap
from experiments.records import checkpoints
from experiments.run import setup
from experiments.run.evaluate import evaluate_checkpoint
from experiments.run.train import train
from experiments.training.models import LeNet, build_for
from helpers import (
    PROCESS_1_FAILURE,
    QUICK,
    ROOT,
    compose_config,
    eval_cli,
    failing_torchrun,
    metrics,
    on,
    results,
    torchrun_cli,
    train_cli,
)

pytestmark = pytest.mark.gpu

ON_GPU = [override for override in QUICK if not override.startswith("device=")]
# Long enough to compare epochs, and exactly repeatable on a GPU.
EXACT = (
    "trainer.deterministic=true",
    "trainer.epochs=2",
    "trainer.limit_train_batches=20",
    "trainer.limit_eval_images=256",
    "trainer.log_interval=5",
)
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
two_gpus = pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")


def numbers(run_dir: Path) -> list[tuple[float, float, float]]:
    return [
        (row["train_loss"], row["test_loss"], row["test_accuracy"])
        for row in metrics(run_dir, "epoch")
    ]


def uuid(index: int) -> str:
    # The test process numbers GPUs in PCI bus order, as every run does (conftest.py).
    return str(torch.cuda.get_device_properties(index).uuid)


def test_auto_chooses_cuda_and_records_the_gpu(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *ON_GPU, "device=auto")
    assert done.returncode == 0, done.stderr
    device = results(done.run_dir)["device"]
    assert (device["type"], device["index"], device["uuid"]) == ("cuda", 0, uuid(0))


@pytest.mark.parametrize("placement", ["to_device", "cuda_call"])
def test_the_last_gpu_trains_with_either_placement(tmp_path: Path, placement: str) -> None:
    last = GPUS - 1
    done = train_cli(tmp_path, *ON_GPU, f"device=cuda:{last}", f"placement={placement}")
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["status"], result["device"]["uuid"]) == ("completed", uuid(last))
    # Its MFU over that GPU's peak, measured on that GPU (TF32 for a model of convolutions).
    assert result["peak_devices"] == 1 and 0 < result["mfu"] <= 1
    assert result["device_peak_precision"] == (
        "tf32" if torch.cuda.get_device_capability(last) >= (8, 0) else "fp32"
    )


def numbers_with_each(tmp_path: Path, key: str, values: list[str]) -> list[list[tuple]]:
    """The epochs' numbers of one exact run on cuda:0 per value of `key`."""
    found = []
    for value in values:
        done = train_cli(tmp_path / value, *EXACT, "device=cuda:0", f"{key}={value}")
        assert done.returncode == 0, done.stderr
        found.append(numbers(done.run_dir))
    return found


def test_both_placements_give_the_same_numbers_on_a_gpu(tmp_path: Path) -> None:
    to_device, cuda_call = numbers_with_each(tmp_path, "placement", ["to_device", "cuda_call"])
    assert to_device == cuda_call


def test_segmentation_trains_deterministically_on_a_gpu(tmp_path: Path) -> None:
    # Per-pixel cross-entropy's usual CUDA kernel (nll_loss2d) has no deterministic version.
    shapes = ("task=segmentation", "dataset=shapes", "model=unet", "model.base_channels=8")
    first, again = (
        train_cli(tmp_path / name, *EXACT, *shapes, "device=cuda:0") for name in ("a", "b")
    )
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr
    assert metrics(first.run_dir, "epoch") and [
        (row["train_loss"], row["test_loss"], row["test_miou"])
        for row in metrics(first.run_dir, "epoch")
    ] == [
        (row["train_loss"], row["test_loss"], row["test_miou"])
        for row in metrics(again.run_dir, "epoch")
    ]


def test_preloading_on_the_gpu_gives_the_batches_a_host_copy_gives() -> None:
    gpu = ToDevice(torch.device("cuda", 0))
    sample = loading.load(compose_config().dataset)
    preloaded = loading.preload(sample, gpu)
    assert preloaded.train.images.device.type == "cuda"

    def cut(data: ImageData) -> list[tuple[torch.Tensor, torch.Tensor]]:
        shuffle = torch.Generator().manual_seed(0)
        options = {
            "mean": [0.5],
            "std": [0.5],
            "runtime": on("cuda:0"),
            "shuffle": shuffle,
            "limit": 5,
        }
        return list(Batches(data.train, batch_size=64, **options))

    for (images, labels), (theirs, their_labels) in zip(cut(sample), cut(preloaded), strict=True):
        assert images.device.type == "cuda" and theirs.device.type == "cuda"
        assert torch.equal(images, theirs) and torch.equal(labels, their_labels)


def test_preloading_on_the_gpu_trains_to_the_same_numbers(tmp_path: Path) -> None:
    host, device = numbers_with_each(tmp_path, "dataset.preload", ["host", "device"])
    assert host == device


class PinnedOrNot(ToDevice):
    """`.to(device)` placement that notes, of each host tensor it copies, whether it is pinned:
    a copy from ordinary memory waits for the GPU, and the sync debug mode does not see it."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self.pinned: list[bool] = []

    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device.type == "cpu":
            self.pinned.append(tensor.is_pinned())
        return super().tensor(tensor)


@pytest.mark.parametrize("policy", [None, "randaugment", "trivialaugment", "autoaugment"])
def test_batches_never_make_the_host_wait_for_the_gpu(policy: str | None) -> None:
    # With a policy, every other option too: erasing, and mixup or CutMix.
    mixing = {"erasing": 0.5, "mixup_alpha": 0.2, "cutmix_alpha": 1.0, "num_classes": 10}
    options = {"policy": policy, **mixing} if policy else {}
    images = torch.randint(0, 256, (512, 3, 32, 32), dtype=torch.uint8)
    split = Split(images, torch.randint(0, 10, (512,)))
    shuffle = torch.Generator().manual_seed(0)
    placement = PinnedOrNot(torch.device("cuda", 0))
    batches = Batches(
        split,
        batch_size=64,
        mean=[0.5],
        std=[0.5],
        runtime=Runtime(DevicePlan("cuda", 0), placement),
        shuffle=shuffle,
        augment=Augment(4, True, shuffle, **options),
    )
    list(batches)  # warm up: CUDA's first calls may synchronize once
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in batches:  # a synchronizing call in cutting, copying or augmenting raises here
            pass
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert placement.pinned == [True] * 2 * 2 * len(batches)  # images and labels, both passes


@pytest.mark.parametrize("rank", [0, 1])
def test_a_process_share_of_augmented_batches_is_copied_from_pinned_memory_only(rank: int) -> None:
    # Under DDP a process takes columns of each batch's crop offsets: a strided tensor.
    images = torch.randint(0, 256, (256, 3, 32, 32), dtype=torch.uint8)
    split = Split(images, torch.randint(0, 10, (256,)))
    shuffle = torch.Generator().manual_seed(0)
    group = ProcessGroup(rank, 2, rank, 2, launcher=TORCHRUN)
    runtime = Runtime(DevicePlan("cuda", 0), ToDevice(torch.device("cuda", 0)), group)
    batches = Batches(
        split,
        batch_size=64,
        mean=[0.5],
        std=[0.5],
        runtime=runtime,
        shuffle=shuffle,
        augment=Augment(4, True, shuffle),
    )
    list(batches)  # warm up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        list(batches)
        torch.cuda.synchronize()
    copies = [event.name for event in profile.events() if "Memcpy HtoD" in event.name]
    assert copies and not [name for name in copies if "Pageable" in name], copies


def test_an_index_beyond_the_gpus_present_is_refused(tmp_path: Path) -> None:
    if GPUS >= 16:
        pytest.skip("this machine has every cuda:N option the config offers")
    done = train_cli(tmp_path, *ON_GPU, f"device=cuda:{GPUS}")
    assert done.returncode == 1
    assert f"Error: device=cuda:{GPUS} is out of range: this machine has {GPUS} CUDA GPU" in (
        done.last_line
    )
    assert results(done.run_dir)["status"] == "failed"


def test_emulated_bf16_is_said_on_gpus_without_bfloat16_units() -> None:
    for index in range(GPUS):
        note = precision.emulated_bf16(Precision.bf16, DevicePlan("cuda", index))
        native = torch.cuda.get_device_capability(index) >= (8, 0)  # Ampere and later
        assert (note is None) is native, (index, note)
        assert precision.emulated_bf16(Precision.fp32, DevicePlan("cuda", index)) is None


@two_gpus
def test_data_parallel_checkpoint_loads_into_a_single_device_model(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *ON_GPU, "device=dp", "device.ids=[0,1]")
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert result["device"]["ids"] == [0, 1]
    assert result["peak_devices"] == 2 and 0 < result["mfu"] <= 1  # over both GPUs' peaks
    checkpoint = torch.load(
        done.run_dir / "checkpoints" / "last.pt", weights_only=True, map_location="cpu"
    )
    config = OmegaConf.create(checkpoint["config"])
    model = build_for(config.model, (3, 32, 32), 10, "cifar10_sample")
    model.load_state_dict(checkpoint["model"])  # strict: no "module." prefixes


@two_gpus
def test_data_parallel_replicas_compute_in_bf16_when_asked() -> None:
    plan = DevicePlan("cuda", 0, (0, 1))
    runtime = Runtime(plan, ToDevice(plan.device), autocast_dtype=torch.bfloat16)
    model = setup.place_model(LeNet(3, 32, 10), runtime)
    seen: list[tuple[torch.device, torch.dtype]] = []
    unwrap(model).features[0].register_forward_hook(
        lambda module, inputs, output: seen.append((output.device, output.dtype))
    )
    with torch.autocast("cuda", dtype=torch.bfloat16):  # as the training loop enters it
        model(torch.randn(8, 3, 32, 32, device=plan.device))
    assert {device.index for device, _ in seen} == {0, 1}  # every replica ran
    assert {dtype for _, dtype in seen} == {torch.bfloat16}


@two_gpus
def test_visible_gpus_are_the_ones_the_run_uses(tmp_path: Path) -> None:
    last = GPUS - 1
    # In a process of its own: CUDA sees only the GPUs it started with (this one's: all of them).
    done = train_cli(
        tmp_path, *ON_GPU, "device=cuda:0", f"device.visible=[{last}]", own_process=True
    )
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["device"]["uuid"] == uuid(last)  # names can't tell twins apart


@two_gpus
def test_visible_gpus_count_among_a_schedulers_share(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        *ON_GPU,
        "device=cuda:0",
        "device.visible=[1]",
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
        own_process=True,  # (as above)
    )
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["device"]["uuid"] == uuid(1)


@two_gpus
def test_a_run_on_cuda_1_leaves_gpu_0_without_a_context(tmp_path: Path) -> None:
    pytest.importorskip("pynvml")
    command = [sys.executable, str(ROOT / "train.py"), "device=cuda:1", "trainer.epochs=100"]
    process = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "outputs").rglob("metrics.jsonl")):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.5)
        on_gpu_1 = torch.cuda.list_gpu_processes(1)
        if f"process {process.pid:>10d}" not in on_gpu_1:
            pytest.skip("NVML reports other process ids here (a container's pid namespace)")
        assert f"process {process.pid:>10d}" not in torch.cuda.list_gpu_processes(0)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


@two_gpus
def test_parallel_jobs_never_share_a_gpu(tmp_path: Path) -> None:
    # More parallel jobs than GPUs: the third waits for a GPU to come free.
    jobs = min(GPUS, 4) + 1
    done = train_cli(
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        f"hydra.launcher.n_jobs={jobs}",
        f"trainer.seed={','.join(map(str, range(jobs)))}",
        *ON_GPU,
        "device=cuda",
    )
    assert done.returncode == 0, done.stderr
    runs = [results(run) for run in done.run_dirs]
    assert len({run["device"]["index"] for run in runs}) == min(GPUS, 4)

    def span(run: dict) -> tuple[datetime, datetime]:
        return datetime.fromisoformat(run["started_at"]), datetime.fromisoformat(run["finished_at"])

    for first in runs:
        for second in runs:
            if first is not second and first["device"]["index"] == second["device"]["index"]:
                (a_start, a_end), (b_start, b_end) = span(first), span(second)
                assert a_end <= b_start or b_end <= a_start  # one after the other


@two_gpus
def test_ddp_puts_each_process_on_its_own_gpu_with_nccl(tmp_path: Path) -> None:
    done = torchrun_cli(tmp_path, 2, *ON_GPU, "device=ddp")
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["world_size"], result["device"]["backend"]) == (2, "nccl")
    assert result["device"]["uuid"] == uuid(0)  # process 0's GPU; process 1 has GPU 1
    assert result["peak_devices"] == 2 and 0 < result["mfu"] <= 1  # every process's GPU


def test_ddp_processes_shown_the_same_gpu_are_refused_in_one_line(tmp_path: Path) -> None:
    # Each process sees one GPU, so each takes it (as under SLURM's --gpus-per-task=1), but here
    # it is the same one: NCCL would fail on it, or hang.
    done = torchrun_cli(tmp_path, 2, *ON_GPU, "device=ddp", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert done.returncode != 0
    assert "Error: device=ddp: processes 0 and 1 would both compute on one GPU" in done.stderr


@two_gpus
def test_an_nccl_peer_that_fails_ends_the_run_promptly_and_says_why(tmp_path: Path) -> None:
    done, seconds = failing_torchrun(tmp_path, *ON_GPU, "trainer.limit_train_batches=6")
    assert seconds < 180
    assert done.returncode != 0
    result = results(done.run_dir)
    assert (result["device"]["backend"], result["reason"]) == ("nccl", PROCESS_1_FAILURE)


@two_gpus
def test_resume_on_fewer_visible_gpus_and_another_index(tmp_path: Path) -> None:
    """Saved on cuda:1 of two; resumed where only that GPU is visible, as cuda:0."""
    reference = train_cli(tmp_path / "reference", *EXACT, "device=cuda:1")
    assert reference.returncode == 0, reference.stderr
    first = train_cli(tmp_path / "resumed", *EXACT, "device=cuda:1", "trainer.epochs=1")
    assert first.returncode == 0, first.stderr
    done = train_cli(
        tmp_path / "resumed",
        f"resume={first.run_dir}",
        "device=cuda:0",
        "trainer.epochs=2",
        env={"CUDA_VISIBLE_DEVICES": "1"},
        own_process=True,  # (as above)
    )
    assert done.returncode == 0, done.stderr
    assert results(first.run_dir)["device"]["uuid"] == uuid(1)
    assert numbers(first.run_dir) == numbers(reference.run_dir)


def test_fp16_killed_and_resumed_ends_as_the_uninterrupted_run(tmp_path: Path) -> None:
    # A large learning rate overflows fp16 early on, so the loss scale has moved from 2**16 by
    # the end of epoch 1: a resume that started it afresh would skip other steps.
    run = (*EXACT, "device=cuda:0", "trainer.precision=fp16", "optimizer.lr=1.0")
    reference = train_cli(tmp_path / "reference", *run)
    assert reference.returncode == 0, reference.stderr
    command = [sys.executable, str(ROOT / "train.py"), *run]
    (tmp_path / "killed").mkdir()
    process = subprocess.Popen(command, cwd=tmp_path / "killed", stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not _epoch_two_started(tmp_path / "killed"):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    (run_dir,) = (path.parent for path in (tmp_path / "killed" / "outputs").rglob("results.json"))
    checkpoint = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert checkpoint["scaler"]["scale"] < 2.0**16  # the scenario this test is about
    done = train_cli(tmp_path / "killed", f"resume={run_dir}")
    assert done.returncode == 0, done.stderr
    assert numbers(run_dir) == numbers(reference.run_dir)


def _epoch_two_started(cwd: Path) -> bool:
    for path in cwd.glob("outputs/*/*/metrics.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
        if any(row["epoch"] == 2 for row in rows):
            return True
    return False


def test_a_checkpoint_saved_on_a_gpu_evaluates_on_the_cpu(tmp_path: Path) -> None:
    last = GPUS - 1
    trained = train_cli(tmp_path / "train", *ON_GPU, f"device=cuda:{last}")
    assert trained.returncode == 0, trained.stderr
    done = eval_cli(
        tmp_path / "eval",
        f"ckpt={trained.run_dir}",
        "device=cpu",
        "limit_images=128",
        "batch_size=64",
    )
    assert done.returncode == 0, done.stderr
    evaluation = results(done.run_dir)
    assert evaluation["device"]["type"] == "cpu"
    assert evaluation["test_accuracy"] == pytest.approx(
        results(trained.run_dir)["final_test_accuracy"], abs=0.02
    )


def test_eval_loads_the_checkpoint_on_the_host_not_beside_the_model_on_the_gpu(
    tmp_path: Path,
) -> None:
    # Loaded onto the GPU, the checkpoint's weights would sit there beside the model's own.
    wide = ("model=mlp", "model.hidden_sizes=[4096]")  # 50 MB of weights
    with process_settings.restored():
        train(compose_config(*wide, *QUICK, "trainer.epochs=1"), tmp_path / "run")
        state = checkpoints.load(tmp_path / "run" / checkpoints.LAST)
        weights = sum(t.numel() * t.element_size() for t in state["model"].values())
        cfg = compose_config(
            f"ckpt={tmp_path / 'run'}",
            "device=cuda",
            "batch_size=1",
            "limit_images=1",
            config_name="eval",
        )
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        evaluate_checkpoint(cfg, tmp_path / "eval")
        assert torch.cuda.max_memory_allocated() - before < 1.5 * weights


def test_channels_last_batches_of_a_split_preloaded_on_the_gpu_keep_one_copy_of_it() -> None:
    config = compose_config(
        "dataset=synthetic",
        "dataset.train_size=4096",
        "dataset.test_size=4",
        "dataset.preload=device",
    ).dataset
    runtime = on("cuda:0", channels_last=True)
    before = torch.cuda.memory_allocated()
    data = setup.load_data(config, runtime)
    assert isinstance(data.train, Split)
    batches = Batches(data.train, batch_size=64, mean=[0.5], std=[0.5], runtime=runtime)
    assert torch.cuda.memory_allocated() - before < 1.5 * data.train.images.nbytes
    assert next(iter(batches))[0].is_contiguous(memory_format=torch.channels_last)


@two_gpus
def test_peak_memory_counts_every_gpu_of_data_parallel() -> None:
    plan = DevicePlan("cuda", 0, ids=(0, 1))
    memory.reset_peak_memory(plan)
    on_the_second = torch.zeros(2**28, device="cuda:1")  # 1 GiB, more than the first GPU holds
    peak_memory = memory.peak_memory_mb(plan)["peak_cuda_memory_mb"]
    assert peak_memory is not None and peak_memory >= on_the_second.nbytes / memory.MIB


def test_cuda_graphs_train_and_evaluate_each_step_afresh(tmp_path: Path) -> None:
    # reduce-overhead replays CUDA graphs, whose outputs the next replay overwrites: every step
    # (and every evaluation batch) begins a new one, or the losses would read another's.
    done = train_cli(
        tmp_path,
        *ON_GPU,
        "device=cuda:0",
        "trainer.compile=inductor",
        "trainer.compile_mode=reduce-overhead",
    )
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["compile_mode"], result["status"]) == ("reduce-overhead", "completed")
    assert result["compile_seconds"] > 0  # kept out of train images/s
    assert all(math.isfinite(row["train_loss"]) for row in metrics(done.run_dir, "step"))


def test_a_gpus_measured_peaks_are_below_the_most_any_gpu_can_do(tmp_path: Path) -> None:
    # The ceiling that refuses a cached peak no GPU can reach must pass every real measurement:
    # each is kept, and read back unmeasured.
    cache = PeakCache(tmp_path / "peaks.json", judge_load=False)
    gpu = torch.device("cuda:0")
    cuda = backend_for("cuda")
    for autocast_dtype, convolutions_lead in cuda.peak_kinds():
        found = cache.peak(gpu, autocast_dtype, convolutions_lead)
        most = cuda.most_flops(found.peak.precision, torch.get_num_threads())
        assert found.measured and 1e12 < found.peak.flops_per_second < most
        assert not cache.peak(gpu, autocast_dtype, convolutions_lead).measured
