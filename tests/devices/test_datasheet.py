"""The datasheets' dense peaks, found by the name torch gives a GPU, and MFU against them: a figure
per precision the GPU has units for, a near name never taken for another model, none for a CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from experiments.devices.backends import cuda
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring import datasheet, peak
from experiments.devices.measuring.datasheet import DATASHEETS, DatasheetPeak

DEVICES_MD = Path(__file__).parents[2] / "docs" / "devices.md"
BEGIN = "<!-- Written from devices/measuring/datasheet.py by tests/devices/test_datasheet.py. -->"
END = "<!-- End of the datasheets' table. -->"


@pytest.mark.parametrize(
    ("device_name", "precision", "model", "tflops"),
    [
        ("NVIDIA A100-SXM4-80GB", "bf16", "A100 SXM4", 312),
        ("NVIDIA A100-SXM4-40GB", "tf32", "A100 SXM4", 156),
        ("NVIDIA A100 80GB PCIe", "fp32", "A100 PCIe", 19.5),
        # The H100's and H200's datasheets quote tensor figures with sparsity: 1,979 halved.
        ("NVIDIA H100 80GB HBM3", "bf16", "H100 SXM", 989.5),
        ("NVIDIA H100 PCIe", "fp16", "H100 PCIe", 756.5),
        ("NVIDIA H200", "tf32", "H200 SXM", 494.5),
        ("NVIDIA L4", "bf16", "L4", 121),
        ("NVIDIA L40S", "bf16", "L40S", 362.05),
        ("NVIDIA A10", "tf32", "A10", 62.5),
        ("Tesla T4", "fp16", "T4", 65),
        ("Tesla V100-SXM2-32GB", "fp32", "V100 SXM2", 15.7),
        ("NVIDIA GeForce RTX 4090", "bf16", "GeForce RTX 4090", 165.2),
        ("NVIDIA GeForce RTX 3090", "fp16", "GeForce RTX 3090", 71),
        ("  nvidia   l4 ", "fp32", "L4", 30.3),  # case and spacing aside
    ],
)
def test_a_gpu_is_found_by_the_name_torch_gives_it(
    device_name: str, precision: str, model: str, tflops: float
) -> None:
    found = datasheet.datasheet_peak(device_name, precision)
    assert found == DatasheetPeak(pytest.approx(tflops * 1e12), "datasheet", model)


@pytest.mark.parametrize(
    ("device_name", "precision"),
    [
        ("NVIDIA A10G", "bf16"),  # AWS's variant, with other tensor figures: not an A10
        ("NVIDIA L40", "bf16"),  # not an L40S
        ("NVIDIA B200", "bf16"),  # not listed
        ("Tesla V100-SXM2-16GB", "bf16"),  # no bf16 units: emulated
        ("Tesla T4", "tf32"),  # no TF32 units
        ("AMD EPYC 7B13", "fp32"),  # a CPU
    ],
)
def test_a_gpu_not_listed_or_a_precision_it_lacks_has_no_datasheet_peak(
    device_name: str, precision: str
) -> None:
    assert datasheet.datasheet_peak(device_name, precision) is None


def test_each_datasheet_names_its_source_and_each_name_finds_one_model() -> None:
    names = [name for sheet in DATASHEETS for name in sheet.names]
    assert len(names) == len(datasheet.BY_NAME)  # no name in two models
    for sheet in DATASHEETS:
        assert "NVIDIA" in sheet.source and {"fp32", "fp16"} <= set(sheet.dense)
        # Tensor units outrun the plain fp32 units; no GPU reaches the cache's bound.
        assert all(
            sheet.dense["fp32"] <= flops < cuda.GPU_MOST_FLOPS for flops in sheet.dense.values()
        )


def test_a_cpu_has_no_datasheet_peak() -> None:
    assert backend_for("cpu").datasheet_peak(torch.device("cpu"), "fp32") is None


def test_mfu_against_a_datasheet_is_the_training_flops_over_its_peak_times_the_devices() -> None:
    h100 = datasheet.datasheet_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert h100 is not None
    # 4 GPUs at 989.5 T each; 2 G FLOPs per image at 790,000 images/s: 39.9% of 3.958 P.
    found = peak.datasheet_utilization(2_000_000_000, 790_000.0, h100, "bf16", devices=4)
    assert found == peak.Utilization(pytest.approx(2e9 * 790_000 / (4 * 989.5e12)))
    assert found.mfu == pytest.approx(0.399, abs=5e-4)


def test_a_run_that_beats_a_given_peak_has_no_mfu_against_it_and_says_why() -> None:
    found = peak.datasheet_utilization(3_000_000, 1000.0, datasheet.given_peak(1e9), "fp32", 1)
    assert found == peak.Utilization(
        None,
        "no MFU against the peak given as device.peak_flops: training ran at 3.00x its 1.00G "
        "FLOP/s, so that figure is not this device's",
    )


def markdown() -> str:
    """docs/devices.md's table: a row per model, its dense TFLOP/s per precision, its source."""
    precisions = ("fp32", "tf32", "bf16", "fp16")
    rows = [
        f"| {sheet.model} | {', '.join(f'`{name}`' for name in sheet.names)} | "
        + " | ".join(f"{sheet.dense[p] / 1e12:g}" if p in sheet.dense else "" for p in precisions)
        + f" | {sheet.source} |"
        for sheet in DATASHEETS
    ]
    header = "| GPU | torch's name | fp32 | tf32 | bf16 | fp16 | from |"
    return "\n".join([BEGIN, "", header, "|---|---|---|---|---|---|---|", *rows, "", END])


def test_devices_md_lists_every_datasheet() -> None:
    text = DEVICES_MD.read_text()
    before, _, rest = text.partition(BEGIN)
    _, found, after = rest.partition(END)
    assert found, f"docs/devices.md has no {BEGIN}"
    new = before + markdown() + after
    regenerate = os.environ.get("REGENERATE") == "1"
    if regenerate and text != new:
        DEVICES_MD.write_text(new)
    assert text == new or regenerate, "REGENERATE=1 writes docs/devices.md's table anew"
