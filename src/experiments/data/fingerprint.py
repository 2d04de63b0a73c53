"""What a run's data is, in names, counts and digests, kept in every checkpoint so that a resumed
run can tell it trains on the same data. A stat per file, no image read."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from experiments.config.build import plain
from experiments.config.schemas import DatasetConfig
from experiments.data.types import ImageData, Split

# Source arguments that say where the files are, not which.
LOCATION = ("root", "download")
# The settings a difference in a split may come from.
SETTINGS = ("root", "val_fraction", "val_seed")
SPLIT_NAMES = {"val": "validation split", "train": "train split", "test": "test split"}


def files_digest(samples: Any) -> str | None:
    """A digest of a split's `samples` (path, label): paths below their folder, sizes and labels."""
    if not isinstance(samples, list) or not samples:
        return None
    try:
        paths = [os.fspath(path) for path, _ in samples]
        common = os.path.commonpath(paths)
        digest = hashlib.sha256()
        for path, (_, label) in zip(paths, samples, strict=True):
            size = os.stat(path).st_size
            digest.update(f"{os.path.relpath(path, common)} {size} {label}\n".encode())
    except (OSError, TypeError, ValueError):
        return None  # not a list of (file, label): nothing to tell files apart by
    return digest.hexdigest()[:16]


def values_digest(split: Split) -> str:
    digest = hashlib.sha256()
    for values in (split.images, split.labels):
        digest.update(values.detach().cpu().contiguous().numpy())
    return digest.hexdigest()[:16]


def data_fingerprint(data: ImageData, config: DatasetConfig) -> dict[str, Any]:
    source = {key: value for key, value in plain(config.source).items() if key not in LOCATION}
    splits = {"val": data.val, "train": data.train, "test": data.test}
    return {
        "dataset": config.name,
        "source": source,
        "settings": {key: config.get(key) for key in SETTINGS},
        "classes": list(data.classes),
        "images": {name: len(split) if split is not None else 0 for name, split in splits.items()},
        "files": dict(data.files),
        "rows": {
            name: values_digest(split)
            for name, split in splits.items()
            if data.targets == "values" and isinstance(split, Split)
        },
        "held_out": (data.record.get("validation") or {}).get("rows"),
    }


def difference(then: dict[str, Any], now: dict[str, Any]) -> str | None:
    """The first way the data fingerprinted `now` differs from `then`, in words (None: the same)."""
    if then["dataset"] != now["dataset"]:
        return f"dataset={then['dataset']} then, {now['dataset']} now"
    if then["source"] != now["source"]:
        return f"dataset.source: {_changes(then['source'], now['source'])}"
    if then["classes"] != now["classes"]:
        return _classes(then["classes"], now["classes"])
    why = _settings(then["settings"], now["settings"])
    for split, name in SPLIT_NAMES.items():
        before, after = then["images"][split], now["images"][split]
        if before != after:
            return f"{name}: {before} images then, {after} now ({why})"
    for split, name in SPLIT_NAMES.items():
        if then["files"].get(split) != now["files"].get(split):
            count = now["images"][split]
            return f"{name}: its {count} images are other files, or files changed since ({why})"
    for split, name in SPLIT_NAMES.items():
        if "rows" in then and then["rows"].get(split) != now["rows"].get(split):
            count = now["images"][split]
            return f"{name}: its {count} rows hold other values than then ({why})"
    if then["held_out"] != now["held_out"]:
        return f"validation split: other images held out of train ({why})"
    return None


def _settings(then: dict[str, Any], now: dict[str, Any]) -> str:
    changed = [key for key in SETTINGS if then.get(key) != now.get(key)]
    if not changed:
        return "with the same settings: the data changed at its source"
    return "; ".join(f"dataset.{key}={then.get(key)} then, {now.get(key)} now" for key in changed)


def _changes(then: dict[str, Any], now: dict[str, Any]) -> str:
    keys = [key for key in {**then, **now} if then.get(key) != now.get(key)]
    return "; ".join(f"{key}={then.get(key)} then, {now.get(key)} now" for key in keys)


def _classes(then: list[str], now: list[str]) -> str:
    only_then = [name for name in then if name not in now]
    only_now = [name for name in now if name not in then]
    if not (only_then or only_now):
        return "classes: the same, in another order"
    parts = [f"only then: {', '.join(only_then)}"] if only_then else []
    parts += [f"only now: {', '.join(only_now)}"] if only_now else []
    return f"classes: {'; '.join(parts)}"
