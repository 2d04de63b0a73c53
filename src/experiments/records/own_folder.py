"""A run writes only inside its own folder, never over another run. Without torch (asked early)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from experiments.core.errors import ExperimentError
from experiments.core.text import display_path

# What a run leaves in its folder, the first found named: .hydra/ is there from its start.
RUN_RECORDS = ("results.json", "checkpoints", ".hydra", "metrics.jsonl")
# A sweep's folder: the sweep's config, which its report callback writes first, and job folders.
SWEEP_RECORD = "multirun.yaml"


def earlier_records(folder: Path, *, sweep: bool = False) -> Path | None:
    """The first file (or link) of an earlier run, or `sweep`, that `folder` holds; None if none."""
    if not folder.is_dir():
        return None
    found = [folder / name for name in RUN_RECORDS]
    if sweep:
        jobs = sorted(entry for entry in folder.iterdir() if entry.is_dir())
        in_jobs = [job / name for job in jobs for name in RUN_RECORDS]
        found = [folder / SWEEP_RECORD, *found, *in_jobs]
    return next((path for path in found if os.path.lexists(path)), None)


def refuse_writing_over(given: str, folder: Path, remedy: str, *, sweep: bool = False) -> None:
    found = earlier_records(folder, sweep=sweep)
    if found is None:
        return
    what = "a sweep" if found.name == SWEEP_RECORD else "a run"
    raise ExperimentError(
        f"{given} holds {what} already (its {found.relative_to(folder)}); {remedy}"
    )


def refuse_linked_folders(run_dir: Path, folders: Sequence[Path], resume: str | None) -> None:
    """Refuse to write in `run_dir` while one of the `folders` it writes in is a link elsewhere."""
    for folder in folders:
        path = run_dir / folder
        if path.is_symlink():
            asked, elsewhere = (
                (f"resume={resume}: ", f"replay={resume} in a new folder")
                if resume
                else ("", "name a new run folder")
            )
            raise ExperimentError(
                f"{asked}{Path(display_path(run_dir)) / folder} is a link to {os.readlink(path)}, "
                "and a run writes only inside its own folder; put the folder itself in the "
                f"link's place (or remove the link), or {elsewhere}"
            )
