"""The decoded cache: a split of the user's images decoded once into a uint8 `images.npy` file,
memory-mapped by every later epoch and run; built aside, checked by size and CRC-32, locked."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from experiments.core.errors import ExperimentError
from experiments.core.files import RECORD, as_json, locked, read_data
from experiments.data.streaming import decode_all

log = logging.getLogger("experiments")

# Bump when the decoding or the entry's files change, so old entries are not taken for new ones.
FORMAT = 2
FILES = ("images.npy", "labels.npy")
CHUNK = 16 * 2**20  # bytes checksummed at a time
WAITING = (
    "waiting for another process to build the cache entry %s (it holds %s; giving up after %s)"
)


def fingerprint(dataset: Dataset, shape: tuple[int, int, int], source: str) -> str | None:
    """The key of a split's decoded images, from its `samples`' files and `source`; None (never
    cached) for a Dataset naming no files, which could not be told apart from a changed one."""
    samples = getattr(dataset, "samples", None)
    if not isinstance(samples, list):
        return None
    digest = hashlib.sha256(f"{FORMAT} {shape} {source}".encode())
    for sample in samples:
        try:
            path, label = sample
            status = os.stat(path)
        except (OSError, TypeError, ValueError):
            return None  # not a list of (file, label): nothing to key by
        file = f"{os.path.abspath(path)} {status.st_size} {status.st_mtime_ns} {label}"
        digest.update(f"\n{file}".encode())
    return digest.hexdigest()[:16]


def usable_folder(cache_dir: str) -> Path:
    """`cache_dir`, created if needed, after checking a file can be written there."""
    folder = Path(cache_dir).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".writable-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ExperimentError(
            f"dataset.cache_dir={cache_dir} is not a writable folder ({error.strerror}); name "
            "another folder, or set dataset.cache=false to keep nothing there"
        ) from None
    return folder


def decoded(
    dataset: Dataset, entry: Path, shape: tuple[int, int, int], workers: int, timeout: float
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """The split's images (memory-mapped) and labels from `entry`, built if need be, and how."""
    lock = entry.with_name(entry.name + ".lock")
    limit = f"dataset.cache_timeout={timeout:g} s"
    try:
        with locked(lock, timeout, lambda: log.info(WAITING, entry, lock, limit)):
            problem = _problem(entry)
            built = problem is not None
            if built:
                if entry.exists():
                    log.warning("cache %s is %s: decoding again", entry, problem)
                    shutil.rmtree(entry)
                _build(dataset, entry, shape, workers)
            meta = read_data(entry / "meta.json", RECORD, as_json)
    except TimeoutError:
        raise ExperimentError(
            f"cache entry {entry} is still being built by another process after {limit} (it "
            f"holds {lock}); if that process is stopped or hung, end it, or give it longer with "
            "dataset.cache_timeout=SECONDS"
        ) from None
    images = torch.from_numpy(np.load(entry / "images.npy", mmap_mode="c"))
    labels = torch.from_numpy(np.load(entry / "labels.npy"))
    megabytes = round(meta["images_bytes"] / 1e6, 1)
    record = {"path": str(entry.resolve()), "built": built, "megabytes": megabytes}
    if built:
        record["build_seconds"] = round(meta["seconds"], 2)
    return images, labels, record


def _build(dataset: Dataset, entry: Path, shape: tuple[int, int, int], workers: int) -> None:
    for stale in entry.parent.glob(f"{entry.name}.tmp-*"):  # a build killed before its rename
        shutil.rmtree(stale, ignore_errors=True)
    temporary = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
    temporary.mkdir()
    try:
        _write(dataset, temporary, shape, workers)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    os.rename(temporary, entry)
    meta = read_data(entry / "meta.json", RECORD, as_json)
    count, megabytes, seconds = f"{meta['count']:,}", meta["images_bytes"] / 1e6, meta["seconds"]
    log.info("decoded %s images into %s (%.1f MB) in %.1f s", count, entry, megabytes, seconds)


def _write(dataset: Dataset, temporary: Path, shape: tuple[int, int, int], workers: int) -> None:
    began = time.perf_counter()
    count = len(dataset)  # type: ignore[arg-type]
    images_file = np.lib.format.open_memmap(
        temporary / "images.npy", mode="w+", dtype=np.uint8, shape=(count, *shape)
    )
    _, labels = decode_all(dataset, shape, workers, into=images_file)
    images_file.flush()
    del images_file
    np.save(temporary / "labels.npy", labels)
    meta = {
        "format": FORMAT,
        "count": count,
        "shape": list(shape),
        "images_bytes": (temporary / "images.npy").stat().st_size,
        "labels_bytes": (temporary / "labels.npy").stat().st_size,
        "crc32": {name: _crc32(temporary / name) for name in FILES},
        "seconds": time.perf_counter() - began,
    }
    (temporary / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    for name in (*FILES, "meta.json"):
        with open(temporary / name, "rb") as file:
            os.fsync(file.fileno())


def _problem(entry: Path) -> str | None:
    """Why the entry cannot be used (missing, a file of the wrong size or content), or None."""
    try:
        meta = read_data(entry / "meta.json", RECORD, as_json)
        sizes = [(entry / name).stat().st_size for name in FILES]
        sizes_written, checksums = [meta["images_bytes"], meta["labels_bytes"]], meta["crc32"]
    except (OSError, KeyError, TypeError, ExperimentError):
        return "missing" if not entry.exists() else "incomplete"
    if sizes != sizes_written:
        return "torn (a file is not the size it was written with)"
    for name in FILES:
        if _crc32(entry / name) != checksums.get(name):
            return f"corrupt ({name} is not what was written: its CRC-32 differs)"
    return None


def _crc32(path: Path) -> int:
    checksum = 0
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK):
            checksum = zlib.crc32(chunk, checksum)
    return checksum
