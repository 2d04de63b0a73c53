"""Files written whole or not at all, files a write that failed names, and locks between
processes.

Whole files a run writes go through `write_atomically`, appended logs through `open_to_append`;
neither writes through a link (one in the file's place is replaced). Locks are POSIX file locks,
which the system releases when their process dies. A failed write is one line naming the file
(`writing`).

Every file read that the tool did not ship goes through `read_data` (or, for a reader that
streams, `opened`): only a regular file, no larger than its kind's `Bound`, so a named pipe or
/dev/zero is refused by name before it is read; what its parser finds wrong is one
`UnreadableFile` naming the file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml

from experiments.core.errors import ExperimentError
from experiments.core.text import display_path


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Say a failure to write `path` in the block as one line naming it and why."""
    try:
        yield
    except Exception as error:
        # torch.save reports its file object's OSError as a RuntimeError with the OSError before.
        cause = error if isinstance(error, OSError) else error.__context__
        if isinstance(error, ExperimentError) or not isinstance(cause, OSError):
            raise  # said already (a write within), or no failure to write
        gone = path.parent
        while not gone.parent.exists():  # the highest gone: the run folder, for a checkpoint
            gone = gone.parent
        why = (
            f"{display_path(gone)} is gone (deleted while the run went on)"
            if not gone.exists()
            else cause.strerror or str(cause)
        )
        raise ExperimentError(f"could not write {display_path(path)}: {why}") from error


# The temporary file of `write_atomically`.
LEFTOVER = re.compile(r"\..+\.\d+\.tmp")
# How often a process waiting for a lock tries it again.
LOCK_POLL_SECONDS = 0.1


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write to a temporary file beside `path`, sync it, then rename it over `path`: a crash
    leaves the old file or the new one, never a torn one. `path`'s folder must exist (a run
    folder deleted mid-run is not made again). A failed write removes its temporary file (on a
    full disk it would hold the space); a killed one leaves it to `remove_leftovers`. Links in
    the way are replaced, never written through."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with writing(path):
        try:
            with open(_own_file(temporary, os.O_WRONLY | os.O_TRUNC), "wb") as file:
                write(file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def remove_leftovers(*folders: Path) -> list[Path]:
    """Remove the temporary files that writers killed mid-write (`.last.pt.<pid>.tmp`) left in
    `folders`, and return them. Only while no other process writes there."""
    left = [
        path
        for folder in folders
        for path in folder.glob(".*.tmp")
        if LEFTOVER.fullmatch(path.name) and path.is_file()
    ]
    for path in left:
        path.unlink(missing_ok=True)
    return left


def write_text_atomically(path: Path, text: str) -> None:
    write_atomically(path, lambda file: file.write(text.encode()))


def open_to_append(path: Path, encoding: str | None = "utf-8") -> IO[str]:
    """`path` opened to append text to, never through a link: a link in its place is removed
    first and the file begins anew; what the link pointed to is left alone."""
    return open(_own_file(path, os.O_WRONLY | os.O_APPEND), "a", encoding=encoding)


def _own_file(path: Path, flags: int) -> int:
    """A descriptor of `path` itself, made if missing, with `flags`: a link in its place is
    removed first, and one put back meanwhile is refused (O_NOFOLLOW), never followed."""
    if path.is_symlink():
        path.unlink()
    return os.open(path, flags | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)


KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class Bound:
    """A kind of file the tool reads: the most bytes of one it reads (`most`), and what to say of
    one it refuses (`what_is_valid`)."""

    kind: str
    most: int
    what_is_valid: str


PUT_BACK = (
    "the tool wrote it in a run folder: put it back from a copy, or move it out of the folder"
)
# results.json, a .hydra/ YAML file, a sweep's multirun.yaml, a cache entry's meta.json: kilobytes.
RECORD = Bound("a run's record", 64 * MIB, PUT_BACK)
# metrics.jsonl and metrics.csv: a row per logged step, some hundred bytes each.
LOG = Bound("a run's log", 1 * GIB, PUT_BACK)
# dataset=csv: its rows are held in memory as Python numbers first, several times the file's size.
TABLE = Bound(
    "a dataset=csv file",
    1 * GIB,
    "dataset.path= takes a CSV file, read whole (a larger table is read best by a dataset of "
    "one's own: docs/own-data.md)",
)
# Pillow decodes at most twice Image.MAX_IMAGE_PIXELS (179 million) pixels: 716 MB uncompressed.
IMAGE = Bound("an image", 1 * GIB, "class folders hold only image files")
CHECKPOINT = Bound("a checkpoint", 64 * GIB, "give a .pt file or a run folder")


def refuse_special_file(
    path: str | os.PathLike[str], what_is_valid: str, bound: Bound | None = None
) -> None:
    """Refuse `path` by name unless it is a regular file (or a link to one) no larger than
    `bound`: a named pipe or a terminal waits for ever for a writer, /dev/zero never ends. What
    cannot be looked at (a dangling link) is left to the reading, which names it."""
    try:
        status = os.stat(path)
    except OSError:
        return
    _refuse_unfit(path, status, what_is_valid, bound)


@contextlib.contextmanager
def opened(
    path: str | os.PathLike[str], bound: Bound, what_is_valid: str | None = None
) -> Iterator[IO[bytes]]:
    """`path` opened to read, once known to be a regular file no larger than `bound` (refused in
    one line otherwise); reading past `bound.most` (a file that grows) is refused too. Seekable,
    for torch.load and Pillow. OSError where it cannot be opened."""
    what_is_valid = what_is_valid or bound.what_is_valid
    refuse_special_file(path, what_is_valid, bound)  # before opening: opening a device acts on it
    # A pipe put in its place since is not waited on, a terminal never made the process's own.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(path, flags)
    try:
        _refuse_unfit(path, os.fstat(descriptor), what_is_valid, bound)
        raw = _BoundedReader(descriptor, path, bound, what_is_valid)
    except BaseException:
        os.close(descriptor)
        raise
    with io.BufferedReader(raw, buffer_size=64 * KIB) as file:
        yield file


class _BoundedReader(io.RawIOBase):
    """An open file read no further than `bound.most` bytes into it."""

    def __init__(
        self, descriptor: int, path: str | os.PathLike[str], bound: Bound, what_is_valid: str
    ) -> None:
        super().__init__()
        self._descriptor = descriptor
        self._path = path
        self._bound = bound
        self._what_is_valid = what_is_valid

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._descriptor

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self._descriptor, offset, whence)

    def tell(self) -> int:
        return self.seek(0, os.SEEK_CUR)

    def readinto(self, buffer: Any) -> int:
        left = self._bound.most + 1 - self.tell()  # one byte more tells a file larger than most
        if left <= 0:
            raise ExperimentError(_too_large(self._path, None, self._bound, self._what_is_valid))
        return os.readv(self._descriptor, [memoryview(buffer).cast("B")[:left]])

    def close(self) -> None:
        if not self.closed:
            os.close(self._descriptor)
        super().close()


# What a file that is not a regular one is, by the test of its mode.
SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def _refuse_unfit(
    path: str | os.PathLike[str],
    status: os.stat_result,
    what_is_valid: str,
    bound: Bound | None,
) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = next(
            (kind for test, kind in SPECIAL_FILES if test(status.st_mode)), "of another kind"
        )
        raise ExperimentError(f"{path} is not a regular file ({kind}); {what_is_valid}")
    if bound is not None and status.st_size > bound.most:
        raise ExperimentError(_too_large(path, status.st_size, bound, what_is_valid))


def _too_large(
    path: str | os.PathLike[str], size: int | None, bound: Bound, what_is_valid: str
) -> str:
    """What to say of a file larger than `bound` (`size` None: found so as it was read)."""
    most = size_text(bound.most)
    said = f"is {size_text(size)}" if size is not None else f"grew past {most} as it was read"
    return f"{path} {said}: more than {most}, the most {bound.kind} may be; {what_is_valid}"


def size_text(size: int) -> str:
    """ "64 MiB", "1.5 GiB", "300 bytes"."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


class UnreadableFile(ExperimentError):
    """A file from elsewhere that is not what its reader takes (not text, not JSON, a row cut
    short mid-file), in one line naming it; `why` follows its name, for a reader that names the
    file in its own words. A file refused unread (a named pipe, one too large) is a plain
    ExperimentError: a reader that passes over a damaged file never passes over that."""

    def __init__(self, name: str, why: str, what_is_valid: str | None = None) -> None:
        super().__init__(f"{name} {why}; {what_is_valid}" if what_is_valid else f"{name} {why}")
        self.why = why


class Unparsed(ValueError):
    """What a parser (`as_json`, ...) says of bytes not of its format, in words that follow the
    file's name, and what would be valid (None: the file's `Bound`'s)."""

    def __init__(self, why: str, what_is_valid: str | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.what_is_valid = what_is_valid


T = TypeVar("T")


def as_text(file: IO[bytes]) -> str:
    try:
        return file.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Unparsed("is not text (not UTF-8)") from None


def read_data(
    path: str | os.PathLike[str],
    bound: Bound,
    parse: Callable[[IO[bytes]], T] = as_text,
    *,
    name: str | None = None,
    what_is_valid: str | None = None,
) -> T:
    """The file at `path`, a file the tool did not ship, parsed by `parse` (`as_text`,
    `as_json`, `as_json_lines`, `as_yaml`, or a reader's own, such as torch.load's) from a
    regular file within `bound` (`opened`). What `parse` finds wrong (`Unparsed`), and a file
    that cannot be opened (its `__cause__` the OSError), is UnreadableFile, naming the file
    as `name` (its path by default)."""
    said = name or display_path(Path(path))
    try:
        with opened(path, bound, what_is_valid) as file:
            return parse(file)
    except Unparsed as wrong:
        raise UnreadableFile(said, wrong.why, wrong.what_is_valid) from None
    except OSError as error:
        raise UnreadableFile(said, f"cannot be read ({error.strerror or error})") from error


def as_json(file: IO[bytes]) -> Any:
    try:
        return json.loads(as_text(file))
    except json.JSONDecodeError as error:
        raise Unparsed(
            f"is not JSON ({error.msg}: line {error.lineno} column {error.colno})"
        ) from None
    except RecursionError:
        raise Unparsed("is nested too deep to read") from None


def as_json_lines(file: IO[bytes]) -> list[Any]:
    """The rows of a file a process appends JSON lines to. A last line cut short is left out: it
    is the row a killed process was writing (a complete row ends with a newline)."""
    raw = file.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:  # a binary file, or another file copied over it
        number = raw[: error.start].count(b"\n") + 1
        raise Unparsed(
            f"line {number} is not text (byte {raw[error.start]:#04x} is not UTF-8)",
            "each line holds one JSON row",
        ) from None
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines) and not text.endswith("\n"):
                break
            raise Unparsed(
                f"line {number} is not a JSON row ({error.msg})",
                "each line holds one, and only the last may be cut short (by a killed run)",
            ) from None
    return rows


# LibYAML's parser where PyYAML was built with it (its wheels are), Python's otherwise.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def as_yaml(file: IO[bytes], loader: type = _YAML_LOADER) -> Any:
    """A YAML file Hydra wrote (multirun.yaml, a run's .hydra/ files), as plain data. LibYAML,
    far quicker than OmegaConf's loader (docs/speed.md), for reading only: composing stays
    OmegaConf's (it reads `1e-3` as a number, YAML 1.1 a string)."""
    try:
        return yaml.load(as_text(file), Loader=loader)
    except (yaml.YAMLError, Unparsed) as error:
        raise Unparsed(
            not_yaml(error),
            "Hydra wrote it as a record of the run or sweep: put it back from a copy, or move it "
            "out of the folder",
        ) from None


def not_yaml(error: Exception) -> str:
    """What PyYAML's `error` (or `as_text`'s) says of a file, in words that follow its name."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    return f"is not YAML ({getattr(error, 'problem', None) or 'not text'}{where})"


@contextlib.contextmanager
def locked(path: Path, timeout: float, waiting: Callable[[], object]) -> Iterator[None]:
    """Hold an exclusive lock on `path` for the block. If another process holds it, call
    `waiting` once and wait for it, `timeout` seconds at most (then TimeoutError): a holder that
    is stopped or hung never releases it."""
    lock = try_lock(path)
    if lock is None:
        waiting()
        deadline = time.monotonic() + timeout
        while (lock := try_lock(path)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{path} is still locked after {timeout:g} s")
            time.sleep(LOCK_POLL_SECONDS)
    with lock:
        yield


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive lock on `path`, held until the returned file is closed; None at once if
    another process holds it."""
    import fcntl  # POSIX only, as above

    lock = open(_own_file(path, os.O_WRONLY), "w")  # noqa: SIM115 - the caller holds it open
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def try_process_lock(path: Path) -> int | None:
    """An exclusive lock on `path` held by this process alone, until the returned descriptor is
    closed or the process ends; None at once if another process holds it. `lockf`, not `flock`:
    forked children (DataLoader workers) do not inherit it, so none outlives the process. Where
    the file system has no locks (ENOLCK on some NFS) the descriptor comes back unlocked."""
    import fcntl  # POSIX only, as above

    lock = _own_file(path, os.O_RDWR)
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):  # held: EAGAIN, or EACCES on some systems
        os.close(lock)
        return None
    except OSError:
        pass
    return lock
