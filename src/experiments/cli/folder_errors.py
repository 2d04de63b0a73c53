"""Why Hydra could not make the run folder or write its copy of the config there, in one line."""

from __future__ import annotations

import errno
import os
import traceback
from pathlib import Path

from experiments.core.text import display_path


def run_folder_unmade(error: Exception, config_copy: Path | None) -> str | None:
    """The line for `error` if Hydra failed to make or fill the run folder, else None."""
    return (
        _not_a_folder(error) or _folder_unmade(error) or _config_copy_unwritten(error, config_copy)
    )


def _not_a_folder(error: Exception) -> str | None:
    if not isinstance(error, NotADirectoryError) or not error.filename:
        return None
    run_dir = Path(error.filename)
    file = next((parent for parent in run_dir.parents if parent.is_file()), run_dir)
    return (
        f"{file} is a file, not a folder, so the run folder {run_dir} cannot be made in it; move "
        "the file away, or name another folder with hydra.run.dir= (hydra.sweep.dir= for -m)"
    )


def _folder_unmade(error: Exception) -> str | None:
    """A name in its path too long, or a place that takes no folders (/proc, a read-only disk)."""
    frames = traceback.walk_tb(error.__traceback__)
    raised_by_mkdir = any(frame.f_code.co_name == "mkdir" for frame, _ in frames)
    if not isinstance(error, OSError) or not error.filename or not raised_by_mkdir:
        return None
    folder = Path(os.fsdecode(error.filename))
    if error.errno == errno.ENAMETOOLONG:
        why = _too_long(folder)
    else:
        # (/proc answers "No such file or directory", /sys "Operation not permitted")
        holder = next(parent for parent in folder.parents if parent.is_dir())
        why = f"{holder} takes no new folders ({error.strerror})"
    return (
        f"could not make the run folder {_shortened(folder)}: {why}; name another with "
        "hydra.run.dir= (hydra.sweep.dir= for -m)"
    )


# The longest name most file systems take, in bytes (eCryptfs: 143); a path has a limit of its own.
NAME_MAX = 255


def _too_long(folder: Path) -> str:
    longest = max(len(os.fsencode(part)) for part in folder.parts)
    if longest > NAME_MAX:
        return f"a name in it is {longest} bytes long, more than the {NAME_MAX} a name may have"
    whole = len(os.fsencode(str(folder)))
    return (
        f"its longest name is {longest} bytes long and its path {whole}, more than the file "
        "system there takes"
    )


def _shortened(folder: Path) -> str:
    shown = display_path(folder)
    parts = [f"{part[:24]}...{part[-8:]}" if len(part) > 40 else part for part in Path(shown).parts]
    return str(Path(*parts))


# Hydra's copy of the config, in the order it writes the files (hydra.core.utils.run_job).
CONFIG_COPY_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def _config_copy_unwritten(error: Exception, folder: Path | None) -> str | None:
    """A write in `folder` failed (a full disk); an OSError naming no file is of the last made."""
    if folder is None or not isinstance(error, OSError):
        return None
    made = [folder / name for name in CONFIG_COPY_FILES if (folder / name).exists()]
    failed = Path(os.fsdecode(error.filename)) if error.filename else made[-1] if made else None
    if failed is None or failed.parent != folder:
        return None
    path = Path(display_path(folder)) / failed.name
    remedy = {
        errno.ENOSPC: "free space there",
        errno.EDQUOT: "free space within your quota there",
        errno.EFBIG: "raise the limit on a file's size (ulimit -f)",
    }.get(error.errno, "make it writable")
    return (
        f"could not write {path}, Hydra's copy of the config: {error.strerror}; "
        f"{remedy}, or name another folder with hydra.run.dir= (hydra.sweep.dir= for -m)"
    )
