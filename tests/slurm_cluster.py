"""A real two-node SLURM cluster on this machine, for the tests and for trying the SLURM launcher
at home: one slurmctld and two slurmd (nodes n1 and n2) on 127.0.0.1, configured and kept in a
folder of its own (Debian's slurmctld, slurmd, slurm-client and munge packages; as root).

    python tests/slurm_cluster.py up /tmp/cluster     # prints the SLURM_CONF to export
    python tests/slurm_cluster.py down /tmp/cluster
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PROGRAMS = ("slurmctld", "slurmd", "srun", "sbatch", "sinfo", "munge", "munged")
NODES = ("n1", "n2")
# The packages that bring PROGRAMS (Debian's names).
PACKAGES = "slurmctld slurmd slurm-client munge"
CONF = """ClusterName=experiments
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort={controller_port}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.%n.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
FirstJobId={first_job_id}
{nodes}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""
NODE = (
    "NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} RealMemory=4000"
)
STARTING_SECONDS = 30


def why_not() -> str | None:
    """Why a cluster cannot start here, in one line; None where it can."""
    if not sys.platform.startswith("linux"):
        return "SLURM's daemons run on Linux"
    if os.geteuid() != 0:
        return "slurmd runs as root, and this is not root"
    missing = [program for program in PROGRAMS if shutil.which(program) is None]
    if missing:
        return f"{', '.join(missing)} not found (as root: apt-get install {PACKAGES})"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _munge_running() -> bool:
    return subprocess.run(["munge", "-n"], capture_output=True).returncode == 0


def _start_munge() -> None:
    if _munge_running():
        return
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"], check=False)
    for _ in range(20):
        if _munge_running():
            return
        time.sleep(0.25)
    raise RuntimeError("munged did not start (its log: /var/log/munge/munged.log)")


def _name_the_nodes(hosts: Path = Path("/etc/hosts")) -> None:
    """Make the nodes' names this machine's, as a cluster's DNS makes them its nodes' (srun's
    tasks meet on the first node of their step, by its name)."""
    try:
        for name in NODES:
            socket.gethostbyname(name)
    except socket.gaierror:
        with hosts.open("a") as table:
            table.write(f"127.0.0.1 {' '.join(NODES)}  # tests/slurm_cluster.py\n")


def up(folder: Path, first_job_id: int = 1) -> Path:
    """Start the cluster in `folder`; its slurm.conf, once both nodes are idle. Clusters up at
    once number their jobs apart (`first_job_id`), as one cluster does: an srun step's tasks
    meet on a port made of its job's id."""
    if (why := why_not()) is not None:
        raise RuntimeError(f"no SLURM cluster here: {why}")
    folder = folder.resolve()
    for part in ("state", *(f"spool/{name}" for name in NODES)):
        (folder / part).mkdir(parents=True, exist_ok=True)
    _start_munge()
    _name_the_nodes()
    host = socket.gethostname().split(".")[0]
    cpus = max(1, len(os.sched_getaffinity(0)))
    nodes = "\n".join(
        NODE.format(name=name, host=host, port=_free_port(), cpus=cpus) for name in NODES
    )
    conf = folder / "slurm.conf"
    conf.write_text(
        CONF.format(
            host=host,
            controller_port=_free_port(),
            folder=folder,
            nodes=nodes,
            names=",".join(NODES),
            first_job_id=first_job_id,
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    subprocess.run(["slurmctld"], env=env, check=True)
    for name in NODES:
        subprocess.run(["slurmd", "-N", name], env=env, check=True)
    until = time.monotonic() + STARTING_SECONDS
    while time.monotonic() < until:
        states = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True
        ).stdout.split()
        if states.count("idle") == len(NODES):
            return conf
        time.sleep(0.5)
    down(folder)
    raise RuntimeError(
        f"the cluster's nodes were not idle in {STARTING_SECONDS} s: see {folder}/*.log"
    )


def down(folder: Path) -> None:
    """Stop the daemons the cluster in `folder` started."""
    for pid_file in folder.glob("*.pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
        except (ValueError, IndexError, ProcessLookupError):
            continue
        for _ in range(40):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("up", "down"):
        sys.exit("usage: python tests/slurm_cluster.py up|down FOLDER")
    if sys.argv[1] == "up":
        print(up(Path(sys.argv[2])))
    else:
        down(Path(sys.argv[2]))
