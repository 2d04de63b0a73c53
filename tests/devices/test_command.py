"""The `devices` command: the machine listed and requests resolved, also as `python -m`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.devices.command import main as devices_main
from experiments.devices.measuring.energy import POWERCAP
from experiments.devices.measuring.peak_cache import CACHE_DIR_VARIABLE
from helpers import CPU_FP32_PRODUCTS, cpu_peak_entry


@pytest.mark.slow
def test_devices_lists_the_machine_and_resolves_requests(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path))  # no peak measured yet

    def devices(*overrides: str) -> tuple[int, list[str], str]:
        code = devices_main(list(overrides))
        printed = capsys.readouterr()
        return code, printed.out.splitlines(), printed.err.strip()

    code, lines, _ = devices()
    assert code == 0
    assert lines[0].startswith(f"torch {torch.__version__}")
    assert (
        lines[1].startswith("cpu: ") and f"torch uses {torch.get_num_threads()} threads" in lines[1]
    )
    assert devices("device=cpu")[1][-1] == "device=cpu: cpu"
    if torch.cuda.is_available():
        return
    assert lines[2].startswith("cuda: none (")
    assert lines[3].startswith("energy on cpu: ")
    if not POWERCAP.exists():  # most VMs, this project's CI among them
        assert lines[3] == (
            "energy on cpu: none (no RAPL counter readable here (/sys/class/powercap: absent))"
        )
    assert lines[4] == (
        f"peaks measured here ({tmp_path / 'peaks.json'}; a run measures the one it needs once):"
    )
    assert lines[5] == "  cpu: none yet (--measure-peaks measures them)"
    assert lines[6].startswith("device=auto picks cpu: this machine has no CUDA GPU")
    # Each precision a run may compute in, for a model of products and one of convolutions.
    code, lines, _ = devices("--measure-peaks")
    peaks = [line for line in lines if line.startswith("  cpu: ")]
    assert code == 0 and len(peaks) == 4
    threads = torch.get_num_threads()
    said = f"{threads} thread{'s' * (threads > 1)}"
    assert f" FLOP/s in fp32 (products; torch {torch.__version__}, {said}, 20" in peaks[0]
    code, _, error = devices("device=cuda:1")
    assert code == 1 and error.startswith("Error: device=cuda:1 needs a CUDA GPU")
    assert devices("device=ddp")[1][-2:] == [
        "device=ddp, process 0 of 2: cpu (ddp, gloo)",
        "device=ddp, process 1 of 2: cpu (ddp, gloo)",
    ]


@pytest.mark.slow
def test_devices_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "experiments.devices", "device=gpu"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip().startswith("Error: device=gpu is not an option of 'device'")
    assert "device=auto picks" in done.stdout


def test_devices_help_says_how_to_use_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert devices_main(["--help"]) == 0
    printed = capsys.readouterr()
    assert printed.out.splitlines()[0] == (
        "usage: python -m experiments.devices [--measure-peaks] [device overrides]"
    )
    assert "Error" not in printed.out + printed.err


@pytest.mark.parametrize("threads", ["2", [2], True])
def test_devices_lists_no_entry_of_the_cache_that_is_not_a_peak(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    threads: object,
) -> None:
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path))
    # This machine's CPU's peak, its threads not a number.
    spoiled = {**cpu_peak_entry(), "threads": threads}
    (tmp_path / "peaks.json").write_text(json.dumps({CPU_FP32_PRODUCTS: spoiled}))
    assert devices_main([]) == 0
    printed = capsys.readouterr()
    assert "  cpu: none yet (--measure-peaks measures them)" in printed.out.splitlines()
    assert "Error" not in printed.out + printed.err
