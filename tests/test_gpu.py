"""CUDA runs, written for real and skipped on machines without a CUDA GPU (marker `gpu`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from experiments.models import build_for
from helpers import QUICK, eval_cli, metrics, results, torchrun_cli, train_cli

pytestmark = pytest.mark.gpu

ON_GPU = [override for override in QUICK if not override.startswith("device=")]


def test_auto_chooses_cuda_and_records_the_gpu(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *ON_GPU, "device=auto")
    assert done.returncode == 0, done.stderr
    device = results(done.run_dir)["device"]
    assert (device["type"], device["index"]) == ("cuda", 0)
    assert device["name"] == torch.cuda.get_device_name(0)


@pytest.mark.parametrize("placement", ["to_device", "cuda_call"])
def test_the_last_gpu_trains_with_either_placement(tmp_path: Path, placement: str) -> None:
    last = torch.cuda.device_count() - 1
    done = train_cli(tmp_path, *ON_GPU, f"device=cuda:{last}", f"placement={placement}")
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["status"], result["device"]["index"]) == ("completed", last)


def test_both_placements_give_the_same_numbers_on_a_gpu(tmp_path: Path) -> None:
    numbers = []
    for placement in ("to_device", "cuda_call"):
        done = train_cli(tmp_path / placement, *ON_GPU, "device=cuda:0", f"placement={placement}")
        assert done.returncode == 0, done.stderr
        numbers.append([row["test_loss"] for row in metrics(done.run_dir, "epoch")])
    # cuDNN may pick non-deterministic kernels, so "the same" is up to float rounding here.
    assert numbers[0] == pytest.approx(numbers[1], rel=1e-4)


def test_an_index_beyond_the_gpus_present_is_refused(tmp_path: Path) -> None:
    count = torch.cuda.device_count()
    if count >= 16:
        pytest.skip("this machine has every cuda:N option the config offers")
    done = train_cli(tmp_path, *ON_GPU, f"device=cuda:{count}")
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: device=cuda:{count} is out of range: this machine has "
        + (
            "1 CUDA GPU (cuda:0)"
            if count == 1
            else f"{count} CUDA GPUs (cuda:0 to cuda:{count - 1})"
        )
    )


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DataParallel needs two GPUs")
def test_data_parallel_checkpoint_loads_into_a_single_device_model(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *ON_GPU, "device=dp", "device.ids=[0,1]")
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["device"]["ids"] == [0, 1]
    checkpoint = torch.load(
        done.run_dir / "checkpoints" / "last.pt", weights_only=True, map_location="cpu"
    )
    config = OmegaConf.create(checkpoint["config"])
    model = build_for(config.model, (3, 32, 32), 10, "cifar10_sample")
    model.load_state_dict(checkpoint["model"])  # strict: no "module." prefixes


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs to hide one")
def test_visible_devices_renumber_the_gpus(tmp_path: Path) -> None:
    last = torch.cuda.device_count() - 1
    done = train_cli(tmp_path, *ON_GPU, "device=cuda:0", f"device.visible=[{last}]")
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["device"]["name"] == torch.cuda.get_device_name(last)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs to spread over")
def test_jobs_run_side_by_side_each_take_a_gpu_of_their_own(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "model=tudui,lenet",
        *ON_GPU,
        "device=cuda",
    )
    assert done.returncode == 0, done.stderr
    indexes = sorted(results(run)["device"]["index"] for run in done.run_dirs)
    assert indexes == [0, 1]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs for two processes")
def test_ddp_puts_each_process_on_its_own_gpu_with_nccl(tmp_path: Path) -> None:
    done = torchrun_cli(tmp_path, 2, *ON_GPU, "device=ddp")
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["world_size"], result["device"]["backend"]) == (2, "nccl")
    assert result["device"]["index"] == 0  # process 0's GPU; process 1 has GPU 1


def test_a_checkpoint_saved_on_a_gpu_evaluates_on_the_cpu(tmp_path: Path) -> None:
    last = torch.cuda.device_count() - 1
    trained = train_cli(tmp_path / "train", *ON_GPU, f"device=cuda:{last}")
    assert trained.returncode == 0, trained.stderr
    done = eval_cli(
        tmp_path / "eval",
        f"ckpt={trained.run_dir}",
        "device=cpu",
        "limit_batches=2",
        "batch_size=64",
    )
    assert done.returncode == 0, done.stderr
    evaluation = results(done.run_dir)
    assert evaluation["device"]["type"] == "cpu"
    assert evaluation["test_accuracy"] == pytest.approx(
        results(trained.run_dir)["final_test_accuracy"], abs=0.02
    )
