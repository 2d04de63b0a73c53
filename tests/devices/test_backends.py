"""The backend of each kind of device: found by `torch.device.type`, an unknown kind refused in
one line, a kind that leaves a fact out unmakeable; what the CPU's decides, by its inputs; the
kinds' names read without torch; and, on a GPU, CUDA's marks timing work without the host waiting.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from experiments.config.choices import DeviceName
from experiments.config.schemas import DeviceConfig
from experiments.core.errors import ExperimentError
from experiments.devices import memory
from experiments.devices.backends.base import Backend
from experiments.devices.backends.registry import BACKENDS, backend_for
from experiments.devices.description import device_record
from experiments.devices.measuring.energy import COVERS, EnergyMeter
from experiments.devices.plan import DevicePlan
from experiments.devices.timing import DeviceTimer

CPU = torch.device("cpu")


def test_each_kind_is_found_by_the_name_torch_gives_its_devices() -> None:
    assert sorted(BACKENDS) == ["cpu", "cuda"]
    for name, backend in BACKENDS.items():
        assert torch.device(name).type == backend.name == name
        assert backend_for(name) is backend


def test_a_kind_without_a_backend_is_refused_in_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ExperimentError) as refused:
        backend_for("mps")
    assert str(refused.value) == "experiments has no backend for 'mps' devices; it knows cpu, cuda"


def test_a_kind_that_leaves_out_a_fact_or_a_method_cannot_be_made() -> None:
    class Unfinished(Backend):
        name = "meta"

    with pytest.raises(TypeError, match="abstract"):
        Unfinished()  # type: ignore[abstract]


def test_the_kinds_names_and_the_report_are_read_without_torch() -> None:
    code = (
        "import sys; import experiments.devices.backends.names, experiments.report.summary; "
        "print('torch' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (found.returncode, found.stdout.strip()) == (0, "False"), found.stderr


def test_the_cpus_work_is_timed_by_the_hosts_clock() -> None:
    timer = DeviceTimer(CPU)
    start = timer.start()
    time.sleep(0.02)
    timer.stop(start)
    assert 0.02 <= timer.take() < 1.0
    assert timer.take() == 0.0  # each span is taken once


def test_the_cpus_energy_is_read_by_process_0_of_each_machine(tmp_path: Path) -> None:
    other = EnergyMeter.for_process([CPU], local_rank=1, powercap=tmp_path)
    assert (other.source, other.counters, other.unavailable) == (
        "rapl",
        (),
        "read by process 0 of this machine",
    )
    first = EnergyMeter.for_process([CPU], local_rank=0, powercap=tmp_path / "absent")
    assert first.unavailable is not None and first.unavailable.startswith(
        "no RAPL counter readable here"
    )


def test_a_meter_reads_devices_of_one_kind_and_says_what_each_source_covers() -> None:
    with pytest.raises(ValueError, match="one kind"):
        EnergyMeter.for_devices([CPU, torch.device("cuda", 0)])
    assert sorted(COVERS) == ["nvml", "rapl"]
    assert COVERS["nvml"] == "each whole GPU: other processes' work on it is counted too"


def test_what_each_kind_decides_by_default() -> None:
    # Channels-last by default on the CPU only; fp16, fused steps and cuDNN on CUDA only.
    assert memory.channels_last(None, CPU) and not memory.channels_last(None, torch.device("cuda"))
    assert memory.channels_last(False, CPU) is False
    cpu, cuda = backend_for("cpu"), backend_for("cuda")
    assert (cpu.trains_fp16, cpu.fuses_optimizer_by_default, cpu.uses_cudnn) == (False,) * 3
    assert (cuda.trains_fp16, cuda.fuses_optimizer_by_default, cuda.uses_cudnn) == (True,) * 3
    assert not cpu.tf32_in_use(CPU, convolutions_lead=True)


def test_the_cpus_record_names_it_and_its_threads_not_the_machines_id() -> None:
    record = device_record(DeviceConfig(DeviceName.cpu), DevicePlan("cpu"))
    assert set(record) == {"requested", "used", "type", "index", "name", "threads"}
    assert record["threads"] == torch.get_num_threads()


@pytest.mark.gpu
def test_a_gpus_marks_time_its_work_without_the_host_waiting() -> None:
    gpu = torch.device("cuda", 0)
    a = torch.randn(2048, 2048, device=gpu)
    timer = DeviceTimer(gpu)
    torch.cuda.synchronize(gpu)
    torch.cuda.set_sync_debug_mode("error")  # a wait for the GPU would raise
    try:
        start = timer.start()
        for _ in range(8):
            a = a @ a / 2048
        timer.stop(start)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert 0 < timer.take() < 10
