"""The peaks this machine's devices were measured at (`devices.peak`), kept per user so that runs
pay for a device's measurement once per machine, not once per run:

    $EXPERIMENTS_CACHE_DIR/peaks.json
    (else $XDG_CACHE_HOME/experiments/peaks.json, else ~/.cache/experiments/peaks.json)

An entry per device (its name and UUID: a GPU's own, the machine's for the CPU, with the threads
torch computes on, which the CPU's peak grows with), precision and torch version. The file is
data: an entry that is not a well-formed peak is not used, and is measured again. A peak that a
run beat is wrong (the device was busy while it was measured): the run forgets it, and the next
measures it again (`python -m experiments.devices --measure-peaks` measures them all now). A
CPU's peak measured while other work took its cores (`devices.host_load`) is used by its run and
not kept.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from experiments.core.files import MIB, Bound, read_text, write_text_atomically
from experiments.devices import host_load, peak
from experiments.devices.description import cpu_name

log = logging.getLogger("experiments")

CACHE_DIR_VARIABLE = "EXPERIMENTS_CACHE_DIR"
FILE_NAME = "peaks.json"
CACHE = Bound(
    "the cache of measured peaks",
    MIB,
    "it holds this machine's measured peaks: delete it, and runs measure them again",
)


def cache_path() -> Path:
    """Where this user's peaks are kept (see the module's description)."""
    if folder := os.environ.get(CACHE_DIR_VARIABLE):
        return Path(folder) / FILE_NAME
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "experiments" / FILE_NAME


@dataclass(frozen=True)
class DeviceIdentity:
    """What a peak belongs to: the device's name and UUID, and for the CPU the threads torch
    computes on."""

    name: str
    uuid: str
    threads: int | None

    @classmethod
    def of(cls, device: torch.device) -> DeviceIdentity:
        if device.type == "cuda":
            properties = torch.cuda.get_device_properties(device)
            return cls(properties.name, str(properties.uuid), None)
        return cls(cpu_name(), _machine_id(), torch.get_num_threads())

    def key(self, precision: str) -> str:
        threads = f", {self.threads} threads" if self.threads is not None else ""
        return f"{self.name} [{self.uuid}]{threads}: {precision}, torch {torch.__version__}"


@dataclass(frozen=True)
class CachedPeak:
    """A peak as the cache keeps it: the measurement and what it was measured on, and when."""

    flops_per_second: float
    precision: str
    operations: str  # what was timed (`peak.Measurement.operations`)
    device: str
    uuid: str
    threads: int | None
    torch: str
    measured_at: str  # ISO 8601

    @classmethod
    def read(cls, entry: Any) -> CachedPeak | None:
        """An entry of the file as a peak; None where it is not a well-formed one."""
        try:
            cached = cls(**entry)
        except TypeError:
            return None
        flops = cached.flops_per_second
        numeric = isinstance(flops, float | int) and not isinstance(flops, bool)
        if not (numeric and math.isfinite(flops) and flops > 0):
            return None
        texts = (
            cached.precision,
            cached.operations,
            cached.device,
            cached.uuid,
            cached.torch,
            cached.measured_at,
        )
        return cached if all(isinstance(text, str) for text in texts) else None


@dataclass(frozen=True)
class FoundPeak:
    """The peak a run divides by, where it came from (`measured` now, else the cache), and what
    the cache keeps it by."""

    peak: peak.Peak
    measured: bool
    key: str


class PeakCache:
    """The cache file at `path` (`cache_path()` by default), read afresh at each use: runs side
    by side may add to it. (`judge_load=False`: every measurement kept, as a test that shares
    its machine with others needs.)"""

    def __init__(self, path: Path | None = None, *, judge_load: bool = True) -> None:
        self.path = path or cache_path()
        # Whether a CPU peak measured while other work took its cores is left out of the cache.
        self.judge_load = judge_load

    def entries(self) -> dict[str, CachedPeak]:
        """The well-formed entries, by key; none where the file is missing or not a cache."""
        try:
            held = json.loads(read_text(self.path, CACHE))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            log.warning("%s is not a cache of peaks (%s): measuring again", self.path, error)
            return {}
        if not isinstance(held, dict):
            return {}
        read = {key: CachedPeak.read(entry) for key, entry in held.items()}
        return {key: entry for key, entry in read.items() if entry is not None}

    def peak(
        self,
        device: torch.device,
        autocast_dtype: torch.dtype | None,
        convolutions_lead: bool,
        *,
        fresh: bool = False,
    ) -> FoundPeak:
        """The peak of `device` in the precision a run computes in (`peak.measurement`): the
        cached one, else (or when `fresh`) measured now and kept."""
        how = peak.measurement(device, autocast_dtype, convolutions_lead)
        identity = DeviceIdentity.of(device)
        key = identity.key(f"{how.precision} {how.operations}")
        cached = None if fresh else self.entries().get(key)
        if cached is not None:
            return FoundPeak(peak.Peak(cached.flops_per_second, cached.precision), False, key)
        cores, root = host_load.cores(), host_load.run_root()
        before = host_load.snapshot(root, cores)
        measured = peak.Peak(peak.flops_per_second(device, how), how.precision)
        after = host_load.snapshot(root, cores)
        load = None
        if self.judge_load and device.type == "cpu" and before is not None and after is not None:
            load = host_load.between(before, after, len(cores), torch.get_num_threads())
        if load is not None and load.busy:
            log.info(
                "the CPU's peak was measured while other work took %.0f%% of its cores: this run "
                "divides by it, the cache does not keep it",
                100 * load.other_cpu_share,
            )
        else:
            self._keep(key, identity, measured, how.operations)
        return FoundPeak(measured, True, key)

    def forget(self, key: str) -> None:
        """Drop a peak shown wrong, so that the next run measures it again."""
        entries = self.entries()
        if entries.pop(key, None) is not None:
            self._write(entries)

    def _keep(
        self, key: str, identity: DeviceIdentity, measured: peak.Peak, operations: str
    ) -> None:
        entries = self.entries()
        entries[key] = CachedPeak(
            measured.flops_per_second,
            measured.precision,
            operations,
            identity.name,
            identity.uuid,
            identity.threads,
            torch.__version__,
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        self._write(entries)

    def _write(self, entries: dict[str, CachedPeak]) -> None:
        text = json.dumps({key: asdict(entry) for key, entry in entries.items()}, indent=1)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomically(self.path, text + "\n")
        except OSError as error:  # the run goes on with its measurement; the next measures again
            log.warning("the measured peak is not kept: %s (set %s)", error, CACHE_DIR_VARIABLE)


def peak_kinds(device_type: str) -> list[tuple[torch.dtype | None, bool]]:
    """Every peak a run on a device of `device_type` may divide by: each precision it may autocast
    to (None: fp32), for a model led by matrix products and by convolutions (on a GPU, these
    differ in fp32 alone: TF32)."""
    if device_type == "cuda":
        return [(None, False), (None, True), (torch.bfloat16, False), (torch.float16, False)]
    return [(dtype, lead) for dtype in (None, torch.bfloat16) for lead in (False, True)]


def _machine_id() -> str:
    """This machine's id (systemd's, where there is one), else its host name."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            if machine_id := Path(path).read_text().strip():
                return machine_id
        except OSError:
            continue
    return socket.gethostname()
