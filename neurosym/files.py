"""Writing files safely: atomically, with the usual permissions, never over an input.

Every file neurosym writes (artifacts, checkpoints, run configs and metrics, plots,
drawings, regex banks) goes through :func:`atomic_write`: the bytes go to a temporary
file in the same folder (``.NAME.neurosym-PID-XXXX.tmp``), are flushed and fsync'ed, and
the temporary file is renamed over the target, so a reader sees the old file or the new
one, never a part. A temporary file left by a killed process (its PID no longer runs) is
removed by the next write of the same target. The new file gets the mode of the file it
replaces, or ``0o666`` minus the umask for a new file (``tempfile.mkstemp`` alone would
leave ``0o600``).

Outputs a user names are checked before any work is done (:func:`check_output`): not
empty, not a folder, in a folder that exists and can be written, with an extension the
command writes, and never over a file the user did not name as an output: an existing
file is replaced only when it is neurosym's own output of the same kind (or with
``force``), and never when it is an input or a file an input reads (:func:`recording_reads`
records those while the inputs are loaded; :func:`check_not_read` refuses them even with
``force``).

:func:`shipped_file` and :func:`resolve_data_path` find the files shipped with neurosym
(``grammars/...``, ``lexicons/...``, ``configs/...``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO


from neurosym.errors import NeurosymError


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_CLAIMED: dict[str, tuple | None] = {}  # an output checked by check_output -> its stamp then (None: absent)


def file_stamp(path: str | Path) -> tuple | None:
    """``(inode, size, mtime_ns)`` of ``path``: a file replaced or rewritten gets another
    stamp; None when there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _check_unchanged(path: Path) -> None:
    """A NeurosymError when another process wrote an output this one checked
    (:func:`check_output`) since it checked it: two commands racing on one output, the
    loser says so instead of silently replacing the winner's result."""
    key = os.path.abspath(path)
    if key in _CLAIMED and file_stamp(path) != _CLAIMED.pop(key):
        raise NeurosymError(f"{path}: another process wrote it while this one ran; this result was not written over it (run again to replace it)")


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None], make_parents: bool = True) -> Path:
    """Write ``path`` through ``write(fileobj)`` so that it is replaced whole or not at all,
    keeping the replaced file's mode (or the umask's for a new file). ``make_parents``
    creates missing folders (run folders, caches); user-named outputs are checked first
    with :func:`check_output` instead."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        _check_unchanged(path)
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


# ---------------------------------------------------------------------- temporary files
TEMP_TAG = "neurosym"
LEGACY_TEMP_AGE = 3600.0  # seconds: a temp file of the old naming (no PID) older than this is stale


def temp_prefix(path: Path) -> str:
    """The name every temporary file of ``path`` starts with: ``.NAME.neurosym-PID-``."""
    return f".{path.name}.{TEMP_TAG}-{os.getpid()}-"


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or a number we cannot test: leave its file alone
    return True


def remove_stale_temps(path: str | Path) -> list[Path]:
    """Remove the temporary files of ``path`` left by killed writers: ``.NAME.neurosym-PID-*.tmp``
    (and :func:`check_writable`'s ``.neurosym-PID-*.tmp``) whose PID no longer runs, and
    files of the old naming (``.NAME.XXXXXXXX.tmp``, written before the PID was part of
    the name) older than an hour. Returns what was removed."""
    path = Path(path)
    # the target's temp files, and the probe files of check_writable (same PID rule)
    ours = re.compile("(?:" + re.escape(f".{path.name}") + r")?\." + re.escape(TEMP_TAG) + r"-(\d+)-[A-Za-z0-9_]+\.tmp")
    legacy = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        m = ours.fullmatch(entry.name)
        try:
            stale = (m is not None and not _pid_running(int(m.group(1)))) or (
                m is None and legacy.fullmatch(entry.name) is not None and time.time() - entry.stat().st_mtime > LEGACY_TEMP_AGE
            )
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def atomic_write_bytes(path: str | Path, data: bytes, make_parents: bool = True) -> Path:
    """:func:`atomic_write` of a bytes object."""
    return atomic_write(path, lambda f: f.write(data), make_parents)


def emit_report(report: Mapping[str, Any], path: str | Path | None = None) -> None:
    """Print a JSON report and, with ``path``, write it there too (atomically): the tail of
    the ``python -m neurosym.X [--json OUT]`` entry points."""
    text = json.dumps(report, indent=2)
    if path is not None:
        atomic_write_bytes(path, (text + "\n").encode("utf-8"))
    print(text)


def digest(obj: Any) -> str:
    """sha256 over a nested structure of dicts, lists, tuples, tensors and plain values
    (keys sorted; a tensor counts its dtype, shape and bytes): a checksum of what a
    checkpoint or an artifact holds, independent of how the container was serialised."""
    h = hashlib.sha256()
    torch = sys.modules.get("torch")  # a tensor exists only where torch was imported: this module does not import it

    def walk(x: Any) -> None:
        if torch is not None and isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(x, dict):
            h.update(b"{")
            for k in sorted(x, key=str):
                h.update(repr(k).encode() + b":")
                walk(x[k])
            h.update(b"}")
        elif isinstance(x, (list, tuple)):
            h.update(b"[" if isinstance(x, list) else b"(")
            for v in x:
                walk(v)
            h.update(b"]")
        else:
            h.update(repr(x).encode() + b";")

    walk(obj)
    return h.hexdigest()


# ---------------------------------------------------------------------- outputs a user names
OWN_MARK = b"neurosym"  # carried by every file neurosym writes for a user (artifact header, image metadata, DOT comment)
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")
MARK_WINDOW = 1 << 16  # bytes read at each end of a file to find the mark


def image_metadata() -> dict[str, str]:
    """matplotlib ``savefig(metadata=...)`` that marks a .png/.svg/.pdf as neurosym's own."""
    return {"Creator": OWN_MARK.decode()}


def carries_mark(path: str | Path) -> bool:
    """Whether the file at ``path`` carries :data:`OWN_MARK` in its first or last 64 KiB
    (an artifact's header, an image's metadata, a drawing's comment): a file neurosym wrote."""
    try:
        with open(path, "rb") as f:
            head = f.read(MARK_WINDOW)
            size = os.fstat(f.fileno()).st_size
            if size > MARK_WINDOW:
                f.seek(max(MARK_WINDOW, size - MARK_WINDOW))
                head += f.read(MARK_WINDOW)
    except OSError:
        return False
    return OWN_MARK in head


def check_writable(folder: str | Path, what: str = "output") -> None:
    """A NeurosymError unless a file can be created in ``folder`` (tried with a temporary
    file of the same naming as :func:`atomic_write`'s, removed at once): a read-only folder
    is found before any work is done, also for root without the permission to override."""
    folder = Path(folder)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{TEMP_TAG}-{os.getpid()}-", suffix=".tmp", dir=folder)
    except PermissionError:
        raise NeurosymError(f"{folder}: cannot write the {what} here (permission denied)") from None
    except OSError as err:
        raise NeurosymError(f"{folder}: cannot write the {what} here ({err.strerror or err})") from None
    os.close(fd)
    with suppress(OSError):
        os.unlink(tmp)


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


def check_output(
    path: str | Path,
    inputs: Iterable[str | Path] = (),
    what: str = "output",
    suffixes: Iterable[str] = (),
    force: bool = False,
    ours: Callable[[Path], bool] | None = carries_mark,
) -> Path:
    """``path`` as a file the user asked to write, or a NeurosymError saying why not: an
    empty name, a folder, a missing or read-only parent folder, an extension not in
    ``suffixes`` (when given), one of the ``inputs`` (never, even with ``force``), or an
    existing file that ``ours`` does not recognise as neurosym's own output of this kind
    (unless ``force``; ``ours=None`` accepts any existing file)."""
    text = str(path)
    if not text.strip():
        raise NeurosymError(f"the {what} path is empty")
    path = Path(path)
    if path.is_dir():
        raise NeurosymError(f"{path}: is a folder; give a file name for the {what}")
    check_not_read(path, inputs, what)
    suffixes = tuple(suffixes)
    if suffixes and path.suffix.lower() not in suffixes:
        have = f"ends in {path.suffix!r}" if path.suffix else "has no extension"
        raise NeurosymError(f"{path}: the {what} is a {' or '.join(suffixes)} file, and this name {have}")
    if not path.parent.is_dir():
        why = "is a file, not a folder" if path.parent.exists() else "does not exist"
        raise NeurosymError(f"{path}: the folder {path.parent} {why}")
    if path.exists() and not force and ours is not None and not ours(path):
        raise NeurosymError(f"{path}: exists and is not a neurosym {what}; refusing to replace it (use --force to replace it)")
    check_writable(path.parent, what)
    _CLAIMED[os.path.abspath(path)] = file_stamp(path)  # the write checks that no one else wrote it in between
    return path


def check_not_read(path: str | Path, inputs: Iterable[str | Path], what: str = "output") -> None:
    """A NeurosymError when ``path`` is one of ``inputs`` (a file given or read while
    loading them): writing it would destroy a source. ``--force`` does not lift this."""
    path = Path(path)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise NeurosymError(f"{path}: refusing to write the {what} over the input {source}: "
                                f"it is read to make the {what} (--force does not change that)")


class _Reads(threading.local):
    stack: list[set[str]]

    def __init__(self) -> None:
        self.stack = []


_READS = _Reads()
_HOOKED = False
_SKIPPED = (".py", ".pyc", ".so", ".pyi")  # imports, not inputs


def _audit(event: str, args: tuple) -> None:
    if event != "open" or not _READS.stack:
        return
    target, mode = args[0], args[1] if len(args) > 1 else "r"
    if isinstance(target, int) or (isinstance(mode, str) and any(c in mode for c in "wax")):
        return
    name = os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else None
    if name and not name.endswith(_SKIPPED):
        for seen in _READS.stack:
            seen.add(name)


@contextmanager
def recording_reads() -> Iterator[set[str]]:
    """Within the block, every file this thread opens for reading is added to the yielded
    set (through an audit hook, so ``%words`` lists, ``%import``-ed grammars, lexicon
    includes and vocabularies count, whatever module reads them). Files read by native
    code that bypasses Python's ``open`` are not seen: give those as inputs too."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    seen: set[str] = set()
    _READS.stack.append(seen)
    try:
        yield seen
    finally:
        _READS.stack.remove(seen)


# ---------------------------------------------------------------------- one process per folder
LOCK_FILE = ".neurosym.lock"  # the file a run folder's lock is held on (it holds the holder's pid)


class FolderLock:
    """An exclusive OS lock (``flock``) on ``folder/.neurosym.lock``, held by one process at a
    time: :meth:`acquire` takes it or raises a NeurosymError naming the process that holds
    it; the OS drops it when the holder exits or is killed, so a dead run never blocks the
    next. Where the OS has no ``flock`` (Windows) nothing is locked."""

    def __init__(self, folder: str | Path, what: str = "folder"):
        self.folder, self.what = Path(folder), what
        self.fd: int | None = None

    def acquire(self) -> "FolderLock":
        try:
            import fcntl  # lazy: POSIX only
        except ImportError:
            return self
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "not yet recorded"
            os.close(fd)
            raise NeurosymError(f"{self.folder}: this {self.what} is in use by another neurosym process (pid {holder}); "
                                "wait for it to end, or use another folder") from None
        self.fd = fd
        return self

    def record(self) -> None:
        """Write this process's pid into the lock file, for a process refused to name: done
        once the holder knows it will write into the folder (a refused run writes nothing)."""
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n".encode("ascii"), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# ---------------------------------------------------------------------- reading inputs
def read_input(path: str | Path, limit_bytes: int | None = None) -> bytes:
    """The bytes of the input file ``path``, opened once: a regular file only, read whole.

    A device (``/dev/zero``, ``/dev/urandom``), a FIFO or a socket would never end, or
    never return: it is refused before anything is read, as an OSError (``EINVAL``) whose
    message says what it is, so every caller reports it where it reports an unreadable
    file (a grammar's import at its line and column). The file is opened without
    blocking, so a FIFO with no writer does not hang the open. ``limit_bytes``: a file
    larger than that (by its size, or by what it turns out to hold) raises
    :class:`InputTooLarge`."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", str(path))
        if not stat.S_ISREG(mode):
            what = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
                    "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
            raise OSError(errno.EINVAL, f"{what}, not a regular file (only regular files are read)", str(path))
        size = os.fstat(fd).st_size
        if limit_bytes is not None and size > limit_bytes:
            raise InputTooLarge(path, size, limit_bytes)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(-1 if limit_bytes is None else limit_bytes + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if limit_bytes is not None and len(data) > limit_bytes:
        raise InputTooLarge(path, len(data), limit_bytes)
    return data


class InputTooLarge(NeurosymError):
    """An input over its size limit (raised before it is read whole)."""

    def __init__(self, path: str | Path, size: int, limit: int):
        self.path, self.size, self.limit = path, size, limit
        super().__init__(f"{path}: the file is {size / 1e6:.1f} MB, over the {limit / 1e6:g} MB limit")


# ---------------------------------------------------------------------- shipped files
SHIPPED = {"grammars": "neurosym.grammars", "lexicons": "neurosym.lexicons", "configs": "neurosym.configs"}


def shipped_file(relative: str | Path) -> Path:
    """A file shipped with the package, named as in the repository (``grammars/clause.fsg``,
    ``lexicons/sentiment.lex``), read through :mod:`importlib.resources` so that a
    regular (non-editable) install finds it too."""
    parts = Path(relative).parts
    if len(parts) < 2 or parts[0] not in SHIPPED:
        raise NeurosymError(f"{relative}: not a shipped file; expected grammars/<file>, lexicons/<file> or configs/<file>")
    path = resources.files(SHIPPED[parts[0]]).joinpath(*parts[1:])
    if not path.is_file():
        raise NeurosymError(f"{relative}: no such shipped file")
    return Path(str(path))  # installed as plain files (the package is not zip-safe)


def shipped_files() -> list[str]:
    """Every file shipped with the package, named as commands take it (``grammars/clause.fsg``,
    ``lexicons/sentiment.lex``, ``configs/semantic_fusion.toml``), sorted; package
    plumbing (``__init__.py``, caches) left out."""
    out = []
    for folder, package in SHIPPED.items():
        for entry in resources.files(package).iterdir():
            if entry.is_file() and not entry.name.startswith(("__init__", ".")) and not entry.name.endswith(".pyc"):
                out.append(f"{folder}/{entry.name}")
    return sorted(out)


def resolve_data_path(path: str | Path) -> Path:
    """A data path of a config or a command: absolute, or relative to the working folder
    when it exists there, else a shipped file (``grammars/...``, ``lexicons/...``)."""
    path = Path(path)
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in SHIPPED:
        return path
    return shipped_file(path)


__all__ = [
    "FolderLock",
    "IMAGE_SUFFIXES",
    "InputTooLarge",
    "LOCK_FILE",
    "SHIPPED",
    "OWN_MARK",
    "atomic_write",
    "atomic_write_bytes",
    "carries_mark",
    "check_not_read",
    "check_output",
    "check_writable",
    "digest",
    "emit_report",
    "file_stamp",
    "fsync_dir",
    "image_metadata",
    "read_input",
    "recording_reads",
    "remove_stale_temps",
    "resolve_data_path",
    "shipped_file",
    "shipped_files",
    "temp_prefix",
]
