"""environment.json and git.diff: what a job ran on and with (written once it has set its GPUs)."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import distributions, version
from itertools import takewhile
from pathlib import Path
from typing import Any

import torch

from experiments.core.files import write_text_atomically
from experiments.devices.backends.cpu import cpu_name

SOURCE = Path(__file__).resolve().parent
# What SLURM's variables say of the job a run ran in, as environment.json's `cluster` names it.
SLURM = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_index": "SLURM_ARRAY_TASK_ID",
    "partition": "SLURM_JOB_PARTITION",
    "nodes": "SLURM_JOB_NODELIST",
    "node_count": "SLURM_JOB_NUM_NODES",
    "tasks": "SLURM_NTASKS",
    "node": "SLURMD_NODENAME",
}


def write(run_dir: Path) -> None:
    """environment.json, and git.diff when the source has uncommitted changes."""
    files = {"environment.json": json.dumps(environment(), indent=2), "git.diff": git_diff()}
    for name, text in files.items():
        if text:
            write_text_atomically(run_dir / name, text + "\n")


def environment() -> dict[str, Any]:
    return {
        "command": [sys.executable, *sys.argv],
        "working_directory": os.getcwd(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": {
            "name": cpu_name(),
            "logical_cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "cpu_set": _cpu_set(),
        },
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        "rocm_build": torch.version.hip,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "gpus": _gpus(),
        "gpu_driver": _gpu_driver(),
        "packages": installed_packages(),
        "git": git_state(),
        "cluster": cluster(os.environ),
        "interconnect": interconnect(),
    }


def cluster(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The SLURM job the run is a part of, from its variables; None outside one."""
    if "SLURM_JOB_ID" not in environ:
        return None
    return {field: environ[name] for field, name in SLURM.items() if name in environ}


def interconnect() -> dict[str, str | None]:
    """What joins the GPUs: the NCCL torch ships (null without one), and `nvidia-smi topo -m`'s
    matrix of how each pair is linked (NVLink, PCIe, across CPU sockets; null without GPUs)."""
    return {"nccl": _nccl_version(), "gpu_topology": _run(["nvidia-smi", "topo", "-m"])}


def _nccl_version() -> str | None:
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        return None
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except (RuntimeError, AttributeError):  # a build whose NCCL library cannot be loaded
        return None


def _cpu_set() -> list[int] | None:
    """The cores this job may run on (in a parallel sweep, its own share); None: not known."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def installed_packages() -> dict[str, str]:
    """Every installed distribution's version, from its METADATA's headers: parsing is slower."""
    found = []
    for distribution in distributions():
        text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO") or ""
        fields: dict[str, str] = {}
        for line in takewhile(bool, text.splitlines()):  # the headers, up to the first blank line
            key, _, value = line.partition(": ")
            fields.setdefault(key, value.strip())
        if fields.get("Name") and fields.get("Version"):
            found.append((fields["Name"], fields["Version"]))
    return dict(sorted(found))


def versions() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        # From the installed distributions: importing torchvision would be slow.
        **{name: version(name) for name in ("torchvision", "hydra-core", "omegaconf")},
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "git": git_state(),
    }


def _gpus() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    gpus = map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
    return [
        {
            "index": index,
            "name": gpu.name,
            "memory_gib": round(gpu.total_memory / 2**30, 1),
            "compute_capability": f"{gpu.major}.{gpu.minor}",
            "uuid": str(gpu.uuid),
        }
        for index, gpu in enumerate(gpus)
    ]


def _gpu_driver() -> str | None:
    answer = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return answer.splitlines()[0] if answer else None


def _git(*args: str) -> str | None:
    """git's answer about the source's checkout, without writing its index (as status would)."""
    return _run(["git", "--no-optional-locks", "-C", str(SOURCE), *args])


def _run(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """The source tree's commit, whether tracked files changed since, and the untracked files."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    changed = _git("status", "--porcelain", "--untracked-files=no")
    untracked = _git("ls-files", "--others", "--exclude-standard")
    return {
        "commit": commit,
        "dirty": None if changed is None else bool(changed),
        "untracked": untracked.splitlines() if untracked else [],
    }


def git_diff() -> str | None:
    """The source tree's uncommitted changes to tracked files, as a patch (None if clean)."""
    # (git diff, the porcelain, writes a refreshed index whatever it is told.)
    return _git("diff-index", "--patch", "HEAD", "--") or None
