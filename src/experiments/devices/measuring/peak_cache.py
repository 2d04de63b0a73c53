"""The measured peaks of this machine's devices, kept per user so that runs measure each once."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict, get_type_hints

import torch

from experiments.core.errors import ExperimentError
from experiments.core.files import MIB, Bound, as_json, locked, read_data, write_text_atomically
from experiments.core.text import display_path, short_count
from experiments.core.typed import mismatch
from experiments.devices.backends.base import DeviceIdentity
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring import host_load, peak

log = logging.getLogger("experiments")

CACHE_DIR_VARIABLE = "EXPERIMENTS_CACHE_DIR"
FILE_NAME = "peaks.json"
CACHE = Bound(
    "the cache of measured peaks",
    MIB,
    "it holds this machine's measured peaks: delete it, and runs measure them again",
)
# How long a run waits for another's change (milliseconds) before keeping nothing: one may hang.
LOCK_SECONDS = 10.0


def cache_path() -> Path:
    """$EXPERIMENTS_CACHE_DIR/peaks.json, else $XDG_CACHE_HOME's or ~/.cache's experiments/."""
    if folder := os.environ.get(CACHE_DIR_VARIABLE):
        return Path(folder) / FILE_NAME
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "experiments" / FILE_NAME


@dataclass(frozen=True)
class CachedPeak:
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
        """An entry of the file; None unless each field is of its type, the peak finite above 0."""
        if mismatch(entry, CachedEntry, "entry") is not None:
            return None
        try:  # a whole number of 400 digits is JSON, and no float
            flops = float(entry["flops_per_second"])
        except OverflowError:
            return None
        if not (math.isfinite(flops) and flops > 0):
            return None
        fields = {field.name: entry[field.name] for field in dataclasses.fields(cls)}
        return cls(**{**fields, "flops_per_second": flops})


CachedEntry = TypedDict("CachedEntry", get_type_hints(CachedPeak))  # type: ignore[misc]


@dataclass(frozen=True)
class FoundPeak:
    """The peak a run divides by, whether `measured` now (else cached), and its cache key."""

    peak: peak.Peak
    measured: bool
    key: str


class PeakCache:
    """The cache file, read afresh at each use; `judge_load`: a busy host's CPU peak isn't kept."""

    def __init__(self, path: Path | None = None, *, judge_load: bool = True) -> None:
        self.path = path or cache_path()
        self.judge_load = judge_load

    def entries(self) -> dict[str, CachedPeak]:
        """The well-formed entries, by key; none, with a warning, where the file is no cache."""
        entries, problem = self._held()
        if problem is not None:
            log.warning("%s is not a cache of peaks (%s): measuring again", self.path, problem)
        return entries

    def _held(self) -> tuple[dict[str, CachedPeak], str | None]:
        """The well-formed entries, by key, and why the file is not a cache of peaks, if not."""
        try:
            held = read_data(self.path, CACHE, as_json)
        except ExperimentError as error:
            missing = isinstance(error.__cause__, FileNotFoundError)
            return {}, None if missing else str(error)
        if not isinstance(held, dict):
            return {}, "not a JSON object"
        read = {key: CachedPeak.read(entry) for key, entry in held.items()}
        return {key: entry for key, entry in read.items() if entry is not None}, None

    def peak(
        self,
        device: torch.device,
        autocast_dtype: torch.dtype | None,
        convolutions_lead: bool,
        *,
        fresh: bool = False,
    ) -> FoundPeak:
        """The peak of `device` for the run's precision: cached, else (or if `fresh`) measured."""
        how = peak.measurement(device, autocast_dtype, convolutions_lead)
        backend = backend_for(device.type)
        identity = backend.identity(device)
        key = identity.key(f"{how.precision} {how.operations}")
        cached = None if fresh else self._possible(key, device, how.precision)
        if cached is not None:
            return FoundPeak(peak.Peak(cached.flops_per_second, cached.precision), False, key)
        cores, root = host_load.cores(), host_load.run_root()
        before = host_load.snapshot(root, cores)
        measured = peak.Peak(peak.flops_per_second(device, how), how.precision)
        after = host_load.snapshot(root, cores)
        load = None
        if self.judge_load and backend.is_host and before is not None and after is not None:
            load = host_load.between(before, after, len(cores), torch.get_num_threads())
        if load is not None and load.busy:
            log.info(
                "the CPU's peak was measured while other work took %.0f%% of its cores: this run "
                "divides by it, the cache does not keep it",
                100 * load.other_cpu_share,
            )
            self._change(lambda entries: False)  # a file that is not a cache still written anew
        else:
            self.keep(key, identity, measured, how.operations)
        return FoundPeak(measured, True, key)

    def _possible(self, key: str, device: torch.device, precision: str) -> CachedPeak | None:
        """The peak cached by `key`, unless more than any such device can do (then forgotten)."""
        cached = self.entries().get(key)
        if cached is None:
            return None
        most = backend_for(device.type).most_flops(precision, torch.get_num_threads())
        if cached.flops_per_second <= most:
            return cached
        log.warning(
            "the cached %s peak of %s (%s FLOP/s, in %s) is more than any such device can do "
            "(%s FLOP/s): forgotten, and measured again",
            precision,
            device,
            f"{cached.flops_per_second:.3g}",
            display_path(self.path),
            short_count(most),
        )
        self.forget(key)
        return None

    def forget(self, key: str) -> None:
        """Drop a peak shown wrong, so that the next run measures it again."""
        self._change(lambda entries: entries.pop(key, None) is not None)

    def keep(
        self, key: str, identity: DeviceIdentity, measured: peak.Peak, operations: str
    ) -> None:
        entry = CachedPeak(
            measured.flops_per_second,
            measured.precision,
            operations,
            identity.name,
            identity.uuid,
            identity.threads,
            torch.__version__,
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

        def add(entries: dict[str, CachedPeak]) -> bool:
            entries[key] = entry
            return True

        self._change(add)

    def _change(self, change: Callable[[dict[str, CachedPeak]], bool]) -> None:
        """`change` the entries (it says whether it did) under the cache's lock, and write them."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = self.path.with_name(f".{self.path.name}.lock")
            with locked(lock, LOCK_SECONDS, waiting=lambda: None):
                entries, problem = self._held()
                if change(entries) or problem is not None:
                    self._write(entries)
        except (OSError, ExperimentError) as error:  # a lock held too long is a TimeoutError
            log.warning("the measured peak is not kept: %s (set %s)", error, CACHE_DIR_VARIABLE)

    def _write(self, entries: dict[str, CachedPeak]) -> None:
        text = json.dumps({key: asdict(entry) for key, entry in entries.items()}, indent=1)
        write_text_atomically(self.path, text + "\n")
