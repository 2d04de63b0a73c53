"""Speed settings change the numbers as claimed and no more; each epoch says where its time went."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import torch

from experiments.config.compile_checks import debugging_backend
from experiments.run.train import train
from helpers import QUICK, compose_config, eval_cli, metrics, results, train_cli


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plain")
    train(compose_config(*QUICK), folder)
    return folder


def losses(run_dir: Path) -> list[float]:
    return [row["train_loss"] for row in metrics(run_dir, "step")]


@pytest.mark.slow
def test_bf16_changes_the_numbers_a_little_and_no_more(tmp_path: Path, plain_run: Path) -> None:
    train(compose_config(*QUICK, "trainer.precision=bf16"), tmp_path)
    assert results(tmp_path)["precision"] == "bf16"
    ours, plain = losses(tmp_path), losses(plain_run)
    differences = [abs(a - b) for a, b in zip(ours, plain, strict=True)]
    # bfloat16 keeps 8 bits of mantissa: the losses move, but by hundredths at most here.
    assert all(0 < difference < 0.02 for difference in differences), differences


@pytest.mark.slow
def test_a_compiled_runs_last_smaller_step_is_timed_apart_from_its_speed(tmp_path: Path) -> None:
    # 4,000 training images in batches of 1,500: the last holds 1,000, a shape compiled anew.
    overrides = ("device=cpu", "model=mlp", "trainer.epochs=1", "trainer.batch_size=1500")
    train(
        compose_config(*overrides, "trainer.limit_eval_images=128", "trainer.compile=eager"),
        tmp_path,
    )
    (row,) = metrics(tmp_path, "epoch")
    warm_up = row["warm_up"]
    assert (warm_up["steps"], warm_up["images"], warm_up["last_step_images"]) == (1, 1500, 1000)
    between = row["train_seconds"] - warm_up["seconds"] - warm_up["last_step_seconds"]
    found = results(tmp_path)
    assert found["train_images_per_second"] == pytest.approx(1500 / between)
    # Not compiled, every step but the first is measured.
    train(compose_config(*overrides, "trainer.limit_eval_images=128"), tmp_path / "eager")
    (row,) = metrics(tmp_path / "eager", "epoch")
    assert "last_step_images" not in row["warm_up"]


@pytest.mark.slow
def test_compiling_changes_no_number(
    tmp_path: Path, plain_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="experiments"):
        train(compose_config(*QUICK, "trainer.compile=aot_eager"), tmp_path)
    assert losses(tmp_path) == losses(plain_run)
    # A debugging backend of torch's, said once: it speeds nothing up.
    said = [message for message in caplog.messages if "debugging" in message]
    assert said == [debugging_backend("trainer.compile", "aot_eager")]


@pytest.mark.slow
def test_an_evaluation_by_a_debugging_backend_says_it_speeds_nothing_up(
    tmp_path: Path, plain_run: Path
) -> None:
    done = eval_cli(tmp_path, f"ckpt={plain_run}", "compile=eager", "limit_images=64")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "debugging" in line]
    assert len(said) == 1 and said[0].endswith(debugging_backend("compile", "eager"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="device=auto picks the GPU there")
@pytest.mark.parametrize("command", ["train", "eval"])
def test_a_cuda_graph_backend_on_the_cpu_device_auto_chose_is_refused_before_the_data(
    tmp_path: Path, plain_run: Path, command: str
) -> None:
    if command == "train":
        done, key = train_cli(tmp_path, "trainer.compile=cudagraphs"), "trainer.compile"
    else:
        done, key = eval_cli(tmp_path, f"ckpt={plain_run}", "compile=cudagraphs"), "compile"
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: {key}=cudagraphs captures CUDA graphs, which need a GPU, and device=auto "
        f"resolved to cpu, which has none; on the CPU use {key}=inductor, or null (not compiled)"
    )
    assert "training " not in done.stderr and "evaluating " not in done.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="device=auto picks the GPU there")
def test_cuda_graphs_on_the_cpu_device_auto_chose_are_refused_before_the_data(
    tmp_path: Path,
) -> None:
    done = train_cli(tmp_path, "trainer.compile=inductor", "trainer.compile_mode=reduce-overhead")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: trainer.compile_mode=reduce-overhead captures CUDA graphs, which need a GPU, and "
        "device=auto resolved to cpu, which has none; on the CPU use "
        "trainer.compile_mode=max-autotune-no-cudagraphs, or default"
    )
    assert "training " not in done.stderr  # refused before the data and the model


def test_channels_last_is_on_by_default_on_the_cpu(plain_run: Path) -> None:
    result = results(plain_run)
    assert result["channels_last"] is True
    assert result["keep_freed_memory"] is (sys.platform == "linux")


def test_each_epoch_says_where_its_time_went(plain_run: Path) -> None:
    for row in metrics(plain_run, "epoch"):
        assert 0 < row["wait_seconds"] < row["train_seconds"]
        assert 0 <= row["copy_seconds"] <= row["wait_seconds"]
        assert 0 < row["compute_seconds"] < row["train_seconds"]
    result = results(plain_run)
    assert 0 < result["wait_share"] + result["compute_share"] <= 1.01
