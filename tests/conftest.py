"""One thread per test worker, GPUs numbered and cuBLAS's workspace fixed as every run does, no
tracker that reaches the network unless a test says so, the tests marked `gpu` skipped when there
is no CUDA GPU, this machine's CPU peaks measured once per worker, and `old_run`, a run folder an
earlier version left."""

from __future__ import annotations

import atexit
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

# The suite runs a worker per core (pytest -n 2 on 2 cores), and every run in it, in process or
# as a subprocess, would start a thread per core: oversubscribed, torch's OpenMP threads spin on
# each other (the suite took 3:41, against 3:01 with one thread each). Before torch is imported.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# The suite sends nothing anywhere: MLflow's usage data is off (MLflow 3 sends it by default and
# keeps an id in ~/.config/mlflow/telemetry.json), W&B runs offline and reports no errors of its
# own. Set before MLflow is imported (it decides then), for the subprocesses too; a test of an
# online W&B run sets WANDB_MODE itself.
os.environ.update(
    MLFLOW_DISABLE_TELEMETRY="true",
    DO_NOT_TRACK="true",
    WANDB_ERROR_REPORTING="false",
    WANDB_MODE="offline",
)

# The devices' measured peaks (`measuring.peak_cache`) are kept for the suite, not in the user's
# cache: the suite measures this machine's once per worker, in the threads it computes on.
if "EXPERIMENTS_CACHE_DIR" not in os.environ:
    os.environ["EXPERIMENTS_CACHE_DIR"] = tempfile.mkdtemp(prefix="experiments-cache-")
    atexit.register(shutil.rmtree, os.environ["EXPERIMENTS_CACHE_DIR"], ignore_errors=True)

import pytest
import torch

import slurm_cluster as slurm_cluster_here
from experiments.devices import process_settings
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring import peak
from experiments.devices.measuring.peak_cache import PeakCache

# Before anything asks CUDA, as a process that runs jobs does: the tests compare GPUs by index
# with what runs recorded, and runs number them in PCI bus order; and cuBLAS reads its workspace
# once, at the first product, which a test may compute before a deterministic run in its process.
process_settings.number_gpus_by_bus()
process_settings.fix_cublas_workspace()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def this_machines_peaks() -> None:
    """This worker's fp32 CPU peaks measured once and kept, as `python -m experiments.devices
    --measure-peaks` keeps them: a run measures only where the cache has none, and keeps only a
    measurement on a quiet host, which a worker beside another never is, so without these every
    run of the suite would measure them again (a second or two each). The best of three is
    kept: one measured while the other worker computes may be below what a run then trains at
    (so that run reports no MFU and measures again)."""
    cache, cpu = PeakCache(judge_load=False), torch.device("cpu")
    for convolutions_lead in (False, True):  # fp32's: bf16 runs are few
        found = [cache.peak(cpu, None, convolutions_lead, fresh=True) for _ in range(3)]
        best = max(found, key=lambda each: each.peak.flops_per_second)
        operations = peak.measurement(cpu, None, convolutions_lead).operations
        cache.keep(best.key, backend_for("cpu").identity(cpu), best.peak, operations)


# "required" (.ci/run sets it): a SLURM cluster that cannot start here fails its tests, not skips.
SLURM_TESTS = "EXPERIMENTS_SLURM_TESTS"


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real two-node SLURM cluster (tests/slurm_cluster.py) for this worker's tests: the
    environment its commands need (SLURM_CONF); stopped after them."""
    why = slurm_cluster_here.why_not()
    if why is not None:
        if os.environ.get(SLURM_TESTS) == "required":
            pytest.fail(f"no SLURM cluster could start: {why}")
        pytest.skip(f"no SLURM cluster here: {why}")
    folder = tmp_path_factory.mktemp("slurm")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    conf = slurm_cluster_here.up(folder, first_job_id=1 + 1000 * int(worker or 0))
    try:
        yield {"SLURM_CONF": str(conf)}
    finally:
        slurm_cluster_here.down(folder)


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A fresh copy (resume writes into it) of a run folder as an earlier version left it
    (main at 32c61cd, before the packages were layered), in a folder of runs (tmp_path)."""
    with tarfile.open(Path(__file__).parent / "fixtures" / "flat_layout_run.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "flat_layout_run"
