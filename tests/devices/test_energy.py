"""The energy meter: RAPL's counters read from a powercap tree written here (the test rewrites
them between readings, as the kernel would), the wrap arithmetic on given readings, each reason
a counter cannot be read, and, on a GPU, NVML's counter over real work."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from experiments.core.files import write_text_atomically
from experiments.devices.measuring import energy, energy_counters
from experiments.devices.measuring.energy import CounterEnergy, Energy, EnergyMeter

CPU = [torch.device("cpu")]
WRAP = 1_000_000  # microjoules: a counter that wraps at 1 J, to cross it in a test
NOBODY = 65534
NO_RAPL = "no RAPL counter readable here"


def powercap_tree(root: Path, **packages: int) -> Path:
    """A powercap tree as Linux writes it: a zone per package (`package_0=...`: its count) with
    a core subzone, and a psys zone (a laptop's whole SoC), which the meter must not add."""
    root.mkdir(exist_ok=True)
    zones = {f"intel-rapl:{index}": name.replace("_", "-") for index, name in enumerate(packages)}
    zones |= {"intel-rapl:0:0": "core", f"intel-rapl:{len(packages)}": "psys"}
    for zone, name in zones.items():
        (root / zone).mkdir()
        (root / zone / "name").write_text(f"{name}\n")
        (root / zone / "max_energy_range_uj").write_text(f"{WRAP}\n")
        (root / zone / "energy_uj").write_text(f"{packages.get(name.replace('-', '_'), 5)}\n")
    return root


def set_count(tree: Path, zone: str, microjoules: int) -> None:
    """A new count, replacing the file whole: the meter's thread never reads it half written
    (nor does it the kernel's)."""
    write_text_atomically(tree / zone / "energy_uj", f"{microjoules}\n")


def test_a_counter_s_rise_is_taken_modulo_its_range() -> None:
    assert energy.added_up([100, 400, 900], WRAP) == 800
    assert energy.added_up([WRAP - 300, 200], WRAP) == 500  # wrapped once between two readings
    # Sampled often, a span may cross the wrap several times and lose none of it.
    readings = [900_000, 990_000, 50_000, 400_000, 950_000, 20_000, 10_000]
    assert energy.added_up(readings, WRAP) == 90_000 + 60_000 + 350_000 + 550_000 + 70_000 + (
        WRAP - 10_000
    )
    # A counter only rises: a reading below the last, by less than a wrap, is a wrap.
    assert energy.added_up([500, 499], WRAP) == WRAP - 1
    assert energy.added_up([7, 7], WRAP) == 0


def test_rapl_s_package_counters_are_added_up_across_a_wrap(tmp_path: Path) -> None:
    tree = powercap_tree(tmp_path / "powercap", package_0=100_000, package_1=600_000)
    meter = EnergyMeter.for_devices(CPU, powercap=tree)
    assert meter.unavailable is None
    assert meter.text() == "RAPL: package-0, package-1"  # not core (a part of package-0), psys
    with meter.measuring(interval=0.005) as span:
        # Each reading is left long enough for the meter's thread to see it: read only at the
        # start and end, package-0 would seem to have used 0.8 J, not 1.8 J.
        for step, count in enumerate((700_000, 300_000, 900_000), start=1):
            set_count(tree, "intel-rapl:0", count)
            set_count(tree, "intel-rapl:1", 600_000 + 30_000 * step)
            time.sleep(0.3)
    used = span.energy
    assert span.unavailable is None and used is not None
    assert used.source == "rapl" and 0.9 <= used.seconds < 5
    assert [counter.name for counter in used.counters] == ["package-0", "package-1"]
    assert used.counters[0].joules == pytest.approx(1.8)
    assert used.counters[1].joules == pytest.approx(0.09)
    assert used.joules == pytest.approx(1.8 + 0.09)
    assert used.watts == pytest.approx(used.joules / used.seconds)
    assert used.counters[0].watts == pytest.approx(1.8 / used.seconds)
    assert used.per_image(97) == pytest.approx(used.joules / 97)
    assert "every process on it" in used.covers


def test_the_recorded_energy_is_the_contract_s_plain_data() -> None:
    counted = (CounterEnergy("package-0", 30.0, 15.0), CounterEnergy("package-1", 10.0, 5.0))
    used = Energy("rapl", 40.0, 2.0, counted, energy.COVERS["rapl"])
    assert used.energy_record() == {
        "source": "rapl",
        "joules": 40.0,
        "seconds": 2.0,
        "watts": 20.0,
        "counters": [
            {"name": "package-0", "joules": 30.0, "watts": 15.0},
            {"name": "package-1", "joules": 10.0, "watts": 5.0},
        ],
        "covers": energy.COVERS["rapl"],
    }


def test_a_span_too_short_for_the_counter_to_advance_has_no_energy(tmp_path: Path) -> None:
    meter = EnergyMeter.for_devices(CPU, powercap=powercap_tree(tmp_path / "rapl", package_0=1))
    with meter.measuring() as span:
        pass
    assert span.energy is None
    assert span.unavailable is not None
    assert span.unavailable.startswith("the energy counters did not advance in ")


def test_a_counter_lost_within_a_span_is_the_span_s_reason(tmp_path: Path) -> None:
    tree = powercap_tree(tmp_path / "rapl", package_0=1)
    with EnergyMeter.for_devices(CPU, powercap=tree).measuring() as span:
        (tree / "intel-rapl:0" / "energy_uj").unlink()
    assert span.energy is None
    assert span.unavailable == (
        f"package-0 could not be read: FileNotFoundError: [Errno 2] No such file or directory: "
        f"'{tree / 'intel-rapl:0' / 'energy_uj'}'"
    )


def test_no_powercap_tree_is_the_reason(tmp_path: Path) -> None:
    meter = EnergyMeter.for_devices(CPU, powercap=tmp_path / "powercap")
    assert meter.unavailable == f"{NO_RAPL} ({tmp_path / 'powercap'}: absent)"
    assert meter.text() == f"none ({meter.unavailable})"
    with meter.measuring() as span:
        pass
    assert span.energy is None and span.unavailable == meter.unavailable


def test_a_tree_without_a_package_zone_or_without_its_counter_says_so(tmp_path: Path) -> None:
    tree = powercap_tree(tmp_path / "powercap", package_0=1)
    (tree / "intel-rapl:0" / "energy_uj").unlink()
    meter = EnergyMeter.for_devices(CPU, powercap=tree)
    assert meter.unavailable == f"{NO_RAPL} ({tree / 'intel-rapl:0' / 'energy_uj'}: absent)"
    (tree / "intel-rapl:0" / "name").write_text("dram\n")
    meter = EnergyMeter.for_devices(CPU, powercap=tree)
    assert meter.unavailable == f"{NO_RAPL} ({tree}: no package zone intel-rapl:N)"


@contextmanager
def unprivileged() -> Iterator[None]:
    """Reading files as a user without root's privilege (as root: as nobody, for a moment)."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)


def test_a_counter_only_root_may_read_is_named() -> None:
    """Linux since 5.10 lets only root read energy_uj (a side channel on what the CPU runs)."""
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)  # nobody may look inside, as in /sys
        tree = powercap_tree(Path(folder) / "powercap", package_0=1)
        (tree / "intel-rapl:0" / "energy_uj").chmod(0o000)
        with unprivileged():
            meter = EnergyMeter.for_devices(CPU, powercap=tree)
    assert meter.unavailable == (
        f"{NO_RAPL} ({tree / 'intel-rapl:0' / 'energy_uj'}: readable by root only)"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="NVML is there on a CUDA machine")
def test_without_nvml_s_library_its_own_error_is_the_reason() -> None:
    pytest.importorskip("pynvml")
    meter = EnergyMeter.for_devices([torch.device("cuda", 0)])
    assert meter.source == "nvml"
    assert meter.unavailable == "NVML: NVML Shared Library Not Found"


def test_without_nvidia_ml_py_the_reason_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as if never installed: import fails
    meter = EnergyMeter.for_devices([torch.device("cuda", 0)])
    assert meter.unavailable == (
        "nvidia-ml-py is not installed (pip install 'experiments[energy]')"
    )


@pytest.mark.gpu
def test_nvml_measures_real_work_on_the_gpu() -> None:
    meter = EnergyMeter.for_devices([torch.device("cuda", 0)])
    assert meter.unavailable is None, meter.unavailable
    name = torch.cuda.get_device_properties(0).name
    assert meter.text() == f"NVML: cuda:0 ({name})"
    matrix = torch.randn(4096, 4096, device="cuda")
    with meter.measuring(interval=0.2) as span:
        started = time.perf_counter()
        while time.perf_counter() - started < 2:
            for _ in range(20):
                matrix = torch.tanh(matrix @ matrix)
            torch.cuda.synchronize()
    used = span.energy
    assert used is not None, span.unavailable
    assert used.source == "nvml" and used.counters[0].name == f"cuda:0 ({name})"
    assert used.joules > 0
    assert 20 < used.watts < 1500  # a busy GPU: above idle, below any board's limit
    assert "other processes' work" in used.covers


def test_a_gpu_is_looked_up_in_nvml_whole_or_as_a_mig_instance() -> None:
    # torch gives a bare UUID, a MIG instance's too; NVML names a whole GPU GPU-... and an
    # instance MIG-... (whose energy NVML does not meter: the run says so).
    bare = "5d9cfa1e-3b22-0c71-6b39-40d6c2b0a4f1"
    assert energy_counters.nvml_uuids(bare) == [f"GPU-{bare}", f"MIG-{bare}"]
    assert energy_counters.nvml_uuids(f"MIG-{bare}") == [f"MIG-{bare}"]
