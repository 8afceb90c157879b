"""Writing files safely: atomically, with the usual permissions, never over an input.

Every file neurosym writes (artifacts, checkpoints, run configs and metrics, plots,
drawings, regex banks) goes through :func:`atomic_write`: the bytes go to a temporary
file in the same folder (``.NAME.*.tmp``), are flushed and fsync'ed, and the temporary
file is renamed over the target, so a reader sees the old file or the new one, never a
part. The new file gets the mode of the file it replaces, or ``0o666`` minus the umask
for a new file (``tempfile.mkstemp`` alone would leave ``0o600``).

:func:`check_output` validates a path a user asked to write before any work is done.
:func:`shipped_file` and :func:`resolve_data_path` find the files shipped with neurosym
(``grammars/...``, ``lexicons/...``).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from importlib import resources
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any, BinaryIO

import torch

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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes, make_parents: bool = True) -> Path:
    """:func:`atomic_write` of a bytes object."""
    return atomic_write(path, lambda f: f.write(data), make_parents)


def digest(obj: Any) -> str:
    """sha256 over a nested structure of dicts, lists, tuples, tensors and plain values
    (keys sorted; a tensor counts its dtype, shape and bytes): a checksum of what a
    checkpoint or an artifact holds, independent of how the container was serialised."""
    h = hashlib.sha256()

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
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


def check_output(path: str | Path, inputs: Iterable[str | Path] = (), what: str = "output") -> Path:
    """``path`` as a file the user asked to write, or a NeurosymError saying why not: an
    empty name, a folder, a missing parent folder, or one of the ``inputs`` (writing it
    would destroy the source)."""
    text = str(path)
    if not text.strip():
        raise NeurosymError(f"the {what} path is empty")
    path = Path(path)
    if path.is_dir():
        raise NeurosymError(f"{path}: is a folder; give a file name for the {what}")
    if not path.parent.is_dir():
        raise NeurosymError(f"{path}: the folder {path.parent} does not exist")
    for source in inputs:
        source = Path(source)
        same = path.exists() and source.exists() and os.path.samefile(path, source)
        if same or path.resolve() == source.resolve():
            raise NeurosymError(f"{path}: refusing to write the {what} over the input {source}")
    return path


# ---------------------------------------------------------------------- shipped files
SHIPPED = {"grammars": "neurosym.grammars", "lexicons": "neurosym.lexicons"}


def shipped_file(relative: str | Path) -> Path:
    """A file shipped with the package, named as in the repository (``grammars/clause.fsg``,
    ``lexicons/sentiment.lex``), read through :mod:`importlib.resources` so that a
    regular (non-editable) install finds it too."""
    parts = Path(relative).parts
    if len(parts) < 2 or parts[0] not in SHIPPED:
        raise NeurosymError(f"{relative}: not a shipped file; expected grammars/<file> or lexicons/<file>")
    path = resources.files(SHIPPED[parts[0]]).joinpath(*parts[1:])
    if not path.is_file():
        raise NeurosymError(f"{relative}: no such shipped file")
    return Path(str(path))  # installed as plain files (the package is not zip-safe)


def resolve_data_path(path: str | Path) -> Path:
    """A data path of a config or a command: absolute, or relative to the working folder
    when it exists there, else a shipped file (``grammars/...``, ``lexicons/...``)."""
    path = Path(path)
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in SHIPPED:
        return path
    return shipped_file(path)


__all__ = ["SHIPPED", "atomic_write", "atomic_write_bytes", "check_output", "digest", "fsync_dir", "resolve_data_path", "shipped_file"]
