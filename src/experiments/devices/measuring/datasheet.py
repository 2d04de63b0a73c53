"""NVIDIA's dense peak FLOP/s of the GPUs people train on, per precision, with the document each
is from: the peak that torchtitan's and MLPerf's MFU divide by, so a run's MFU can be set against
theirs. Found by the name torch gives a GPU (`torch.cuda.get_device_name()`), spelled exactly:
a near name is another model (an A10G is not an A10, an L40 not an L40S). CPUs have none: their
FLOP/s depend on the cores, clocks and vector units a run gets, which no datasheet fixes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

TERA = 1e12
# What results.json's `datasheet_peak_of` says of a peak given as device.peak_flops.
GIVEN_KEY = "device.peak_flops"


@dataclass(frozen=True)
class Datasheet:
    """A GPU model's dense peaks (FLOP/s) by precision (fp32, tf32, bf16, fp16), from `source`.
    A precision it lacks (a V100's bf16, emulated) has no peak."""

    model: str
    names: tuple[str, ...]  # as torch.cuda.get_device_name() gives them
    dense: Mapping[str, float]
    source: str


def _dense(fp32: float, tf32: float | None, bf16: float | None, fp16: float) -> dict[str, float]:
    """TFLOP/s by precision, in FLOP/s; None: the model has no such units."""
    figures = {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": fp16}
    return {precision: tflops * TERA for precision, tflops in figures.items() if tflops}


def _halved(with_sparsity: float) -> float:
    # Where a datasheet gives its tensor figures with sparsity alone (H100, H200, L4): dense.
    return with_sparsity / 2


A100 = "NVIDIA A100 Tensor Core GPU datasheet (dense; TF32, BF16, FP16 without sparsity)"
H100 = "NVIDIA H100 Tensor Core GPU datasheet (tensor figures with sparsity, halved)"
H200 = "NVIDIA H200 Tensor Core GPU datasheet (tensor figures with sparsity, halved)"
V100 = "NVIDIA Tesla V100 GPU datasheet (FP16: its tensor performance)"
GEFORCE = "architecture whitepaper, appendix (tensor figures with FP32 accumulate, as torch's)"

DATASHEETS = (
    Datasheet(
        "A100 SXM4",
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM-80GB"),
        _dense(19.5, 156, 312, 312),
        A100,
    ),
    Datasheet(
        "A100 PCIe",
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"),
        _dense(19.5, 156, 312, 312),
        A100,
    ),
    Datasheet(
        "H100 SXM",
        ("NVIDIA H100 80GB HBM3",),
        _dense(67, _halved(989), _halved(1979), _halved(1979)),
        H100,
    ),
    Datasheet(
        "H100 PCIe",
        ("NVIDIA H100 PCIe",),
        _dense(51, _halved(756), _halved(1513), _halved(1513)),
        H100,
    ),
    Datasheet(
        "H100 NVL",
        ("NVIDIA H100 NVL",),
        _dense(60, _halved(835), _halved(1671), _halved(1671)),
        H100,
    ),
    Datasheet(
        "H200 SXM",
        ("NVIDIA H200",),
        _dense(67, _halved(989), _halved(1979), _halved(1979)),
        H200,
    ),
    Datasheet(
        "H200 NVL",
        ("NVIDIA H200 NVL",),
        _dense(60, _halved(835), _halved(1671), _halved(1671)),
        H200,
    ),
    Datasheet(
        "L4",
        ("NVIDIA L4",),
        _dense(30.3, _halved(120), _halved(242), _halved(242)),
        "NVIDIA L4 Tensor Core GPU datasheet (tensor figures with sparsity, halved)",
    ),
    Datasheet(
        "L40S",
        ("NVIDIA L40S",),
        _dense(91.6, 183, 362.05, 362.05),
        "NVIDIA L40S GPU datasheet (dense; TF32, BF16, FP16 without sparsity)",
    ),
    Datasheet(
        "A10",
        ("NVIDIA A10",),
        _dense(31.2, 62.5, 125, 125),
        "NVIDIA A10 Tensor Core GPU datasheet (dense; TF32, BF16, FP16 without sparsity)",
    ),
    Datasheet(
        "T4",
        ("Tesla T4",),
        _dense(8.1, None, None, 65),
        "NVIDIA T4 Tensor Core GPU datasheet (FP16: its mixed precision FP16/FP32)",
    ),
    Datasheet(
        "V100 SXM2",
        ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"),
        _dense(15.7, None, None, 125),
        V100,
    ),
    Datasheet(
        "V100 PCIe",
        ("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"),
        _dense(14, None, None, 112),
        V100,
    ),
    Datasheet("V100S PCIe", ("Tesla V100S-PCIE-32GB",), _dense(16.4, None, None, 130), V100),
    Datasheet(
        "GeForce RTX 4090",
        ("NVIDIA GeForce RTX 4090",),
        _dense(82.6, 82.6, 165.2, 165.2),
        f"NVIDIA Ada GPU {GEFORCE}",
    ),
    Datasheet(
        "GeForce RTX 3090",
        ("NVIDIA GeForce RTX 3090",),
        _dense(35.6, 35.6, 71, 71),
        f"NVIDIA Ampere GA102 GPU {GEFORCE}",
    ),
)


def _spelled(name: str) -> str:
    return " ".join(name.casefold().split())


BY_NAME = {_spelled(name): sheet for sheet in DATASHEETS for name in sheet.names}


def datasheet_for(device_name: str) -> Datasheet | None:
    """The datasheet of the GPU torch names `device_name` (case and spacing aside), if listed."""
    return BY_NAME.get(_spelled(device_name))


@dataclass(frozen=True)
class DatasheetPeak:
    """One device's peak as its maker states it, or as a user gives it (device.peak_flops)."""

    flops_per_second: float
    source: Literal["datasheet", "given"]
    of: str  # the model ("H100 SXM"), or GIVEN_KEY

    def named(self, precision: str) -> str:
        """ "the H100 SXM datasheet's bf16 peak", "the peak given as device.peak_flops"."""
        if self.source == "given":
            return f"the peak given as {GIVEN_KEY}"
        return f"the {self.of} datasheet's {precision} peak"


def datasheet_peak(device_name: str, precision: str) -> DatasheetPeak | None:
    """The dense peak in `precision` of the GPU so named; None where unlisted or without one."""
    sheet = datasheet_for(device_name)
    if sheet is None or precision not in sheet.dense:
        return None
    return DatasheetPeak(sheet.dense[precision], "datasheet", sheet.model)


def given_peak(flops_per_second: float) -> DatasheetPeak:
    return DatasheetPeak(float(flops_per_second), "given", GIVEN_KEY)
