"""Atomic writes that never follow a link, locks, and bounded reads; each failure in one line."""

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

StrPath = str | os.PathLike[str]


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
        why = cause.strerror or str(cause)
        if not gone.exists():
            why = f"{display_path(gone)} is gone (deleted while the run went on)"
        raise ExperimentError(f"could not write {display_path(path)}: {why}") from error


# The temporary file of `write_atomically`.
LEFTOVER = re.compile(r"\..+\.\d+\.tmp")
LOCK_POLL_SECONDS = 0.1


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write a synced temporary file and rename it over `path`: a crash leaves old or new."""
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
    """Remove and return the temporary files killed writers left in `folders`."""
    left = [
        path
        for folder in folders
        for path in folder.glob(".*.tmp")
        if LEFTOVER.fullmatch(path.name) and path.is_file()
    ]
    for path in left:
        path.unlink(missing_ok=True)
    return left


def found_below(folder: Path, name: str) -> list[Path]:
    """The paths named `name` at or below `folder`, through links to folders too (a folder of
    links to runs), each real folder searched once."""
    found, searched = [], set()
    for top, folders, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in searched:
            folders.clear()
            continue
        searched.add(real)
        found += [Path(top, each) for each in (*folders, *files) if each == name]
    return found


def write_text_atomically(path: Path, text: str) -> None:
    write_atomically(path, lambda file: file.write(text.encode()))


def open_to_append(path: Path, encoding: str | None = "utf-8") -> IO[str]:
    """`path` opened to append to; a link in its place is removed first (its target left alone)."""
    return open(_own_file(path, os.O_WRONLY | os.O_APPEND), "a", encoding=encoding)


def _own_file(path: Path, flags: int) -> int:
    """A descriptor of `path` itself: a link in its place is removed, one put back refused."""
    if path.is_symlink():
        path.unlink()
    return os.open(path, flags | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)


KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class Bound:
    """A kind of file the tool reads: the most bytes it reads of one, and what to say if refused."""

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


def refuse_special_file(path: StrPath, what_is_valid: str, bound: Bound | None = None) -> None:
    """Refuse `path` unless a regular file within `bound`: a pipe waits for ever."""
    try:
        status = os.stat(path)
    except OSError:
        return
    _refuse_unfit(path, status, what_is_valid, bound)


@contextlib.contextmanager
def opened(path: StrPath, bound: Bound, what_is_valid: str | None = None) -> Iterator[IO[bytes]]:
    """`path` opened to read once known to be a regular file within `bound`, and kept to it."""
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
    def __init__(self, descriptor: int, path: StrPath, bound: Bound, what_is_valid: str) -> None:
        super().__init__()
        self._descriptor = descriptor
        self._most = bound.most
        self._grew_past = _too_large(path, None, bound, what_is_valid)  # said if it grows so

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
        left = self._most + 1 - self.tell()  # one byte more tells a file larger than most
        if left <= 0:
            raise ExperimentError(self._grew_past)
        return os.readv(self._descriptor, [memoryview(buffer).cast("B")[:left]])

    def close(self) -> None:
        if not self.closed:
            os.close(self._descriptor)
        super().close()


SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def _refuse_unfit(
    path: StrPath, status: os.stat_result, what_is_valid: str, bound: Bound | None
) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = next(
            (kind for test, kind in SPECIAL_FILES if test(status.st_mode)), "of another kind"
        )
        raise ExperimentError(f"{path} is not a regular file ({kind}); {what_is_valid}")
    if bound is not None and status.st_size > bound.most:
        raise ExperimentError(_too_large(path, status.st_size, bound, what_is_valid))


def _too_large(path: StrPath, size: int | None, bound: Bound, what_is_valid: str) -> str:
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
    """A file from elsewhere its reader cannot take (not JSON), named in one line before `why`."""

    def __init__(self, name: str, why: str, what_is_valid: str | None = None) -> None:
        super().__init__(f"{name} {why}; {what_is_valid}" if what_is_valid else f"{name} {why}")
        self.why = why


class Unparsed(ValueError):
    """A parser's words for bytes not of its format, and what is valid (None: the `Bound`'s)."""

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
    path: StrPath,
    bound: Bound,
    parse: Callable[[IO[bytes]], T] = as_text,
    *,
    name: str | None = None,
    what_is_valid: str | None = None,
) -> T:
    """The file at `path` (`opened`) parsed by `parse`; UnreadableFile where it cannot be."""
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
    """The rows of a JSON-lines file, but for a last line cut short (a killed writer's)."""
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
    """A YAML file Hydra wrote, read by LibYAML (far quicker than OmegaConf, which composes)."""
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
    """Hold a lock on `path` for the block; if held, call `waiting` and wait `timeout` s at most."""
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
    """An exclusive lock on `path` until the file returned is closed; None if another holds it."""
    import fcntl  # POSIX only

    lock = open(_own_file(path, os.O_WRONLY), "w")  # noqa: SIM115 - the caller holds it open
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def try_process_lock(path: Path) -> int | None:
    """As `try_lock`, by `lockf`, which forked children (DataLoader workers) do not inherit."""
    import fcntl  # POSIX only

    lock = _own_file(path, os.O_RDWR)
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):  # held: EAGAIN, or EACCES on some systems
        os.close(lock)
        return None
    except OSError:
        pass
    return lock
