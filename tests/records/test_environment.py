"""environment.json's list of installed packages, read from the headers of their metadata; the
source's git state, read without writing to its checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib.metadata import distributions
from pathlib import Path

import pytest
import torch

from experiments.records import environment


def test_the_packages_are_what_importlib_parses_from_their_metadata() -> None:
    parsed = dict(sorted((d.metadata["Name"], d.version) for d in distributions()))
    assert environment.installed_packages() == parsed
    assert {"torch", "hydra-core", "omegaconf"} <= set(parsed)


def test_only_the_headers_name_a_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A description that quotes headers of its own (after the blank line) changes nothing."""
    info = tmp_path / "quoting-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: quoting\nVersion: 1.0\n\nName: other\nVersion: 9.9\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    packages = environment.installed_packages()
    assert packages["quoting"] == "1.0"
    assert "other" not in packages


def test_reading_the_git_state_leaves_the_checkouts_index_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run writes only in its own folder; git's status and diff would otherwise refresh the
    # index's record of a tracked file touched since, and write the index.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    tracked = checkout / "model.py"
    tracked.write_text("net = None\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=a", "-c", "user.email=a@a"]
    for command in (["init", "-q"], ["add", "model.py"], ["commit", "-qm", "a", "--no-gpg-sign"]):
        subprocess.run([*git, *command], check=True)
    index = checkout / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    later = tracked.stat().st_mtime_ns + 5 * 10**9
    os.utime(tracked, ns=(later, later))  # (the same content: git would refresh its record)
    monkeypatch.setattr(environment, "SOURCE", checkout)
    recorded = []
    for run, text in (("touched", "net = None\n"), ("changed", "net = 1\n")):
        tracked.write_text(text)
        os.utime(tracked, ns=(later, later))
        (tmp_path / run).mkdir()
        environment.write(tmp_path / run)
        state = json.loads((tmp_path / run / "environment.json").read_text())["git"]
        diff = tmp_path / run / "git.diff"
        recorded.append((state["dirty"], diff.read_text() if diff.exists() else None))
        assert (index.read_bytes(), index.stat().st_mtime_ns) == before, run
    assert recorded[0] == (False, None)
    dirty, patch = recorded[1]
    assert dirty and patch is not None and "-net = None\n+net = 1\n" in patch


def test_a_slurm_jobs_variables_are_its_cluster_record() -> None:
    """What a run in a SLURM job records of it (a real job's: tests/cluster/)."""
    job = {
        "SLURM_JOB_ID": "41",
        "SLURM_JOB_PARTITION": "debug",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NTASKS": "4",
        "SLURMD_NODENAME": "n2",
        "HOME": "/root",
    }
    assert environment.cluster(job) == {
        "job_id": "41",
        "partition": "debug",
        "nodes": "n[1-2]",
        "node_count": "2",
        "tasks": "4",
        "node": "n2",
    }
    assert environment.cluster({"SLURM_ARRAY_TASK_ID": "3", **job})["array_index"] == "3"
    assert environment.cluster({"HOME": "/root"}) is None  # no job: no cluster


def test_the_interconnect_is_recorded_where_it_can_be_read() -> None:
    joined = environment.interconnect()
    nccl = torch.distributed.is_nccl_available()
    assert (joined["nccl"] is not None) == nccl
    if nccl:
        assert joined["nccl"] == ".".join(map(str, torch.cuda.nccl.version()))
    if shutil.which("nvidia-smi") is None:
        assert joined["gpu_topology"] is None
