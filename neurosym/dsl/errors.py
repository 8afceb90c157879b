"""Turning lark's parse errors into `SourceError`s that read ``path:line:col: expected ..., got ...``.

Shared by every DSL parser: pass a dict of friendly names for the grammar's terminals.
"""

from __future__ import annotations

import os
from pathlib import Path

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from neurosym.errors import NeurosymError, SourceError, Span
from neurosym.files import InputTooLarge, read_input


def describe_terminal(parser: Lark, name: str, friendly: dict[str, str]) -> str:
    if name in friendly:
        return friendly[name]
    if name in ("$END", "_NL"):
        return "end of line" if name == "_NL" else "end of file"
    try:
        pattern = parser.get_terminal(name).pattern
    except KeyError:
        return name
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()


def lark_error(err: UnexpectedInput, parser: Lark, path: str | None, text: str, friendly: dict[str, str]) -> SourceError:
    """A SourceError at the error's position, listing what was expected and what was found."""
    expected = sorted({describe_terminal(parser, t, friendly) for t in (getattr(err, "expected", None) or err.allowed or ())})
    want = ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "") if expected else "something else"
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "$END":
            got = "end of file"
        elif tok.type == "_NL":
            got = "end of line"
        else:
            got = repr(str(tok))
        line, col = err.line, err.column
    elif isinstance(err, UnexpectedCharacters):
        got = repr(text[err.pos_in_stream]) if err.pos_in_stream < len(text) else "end of file"
        line, col = err.line, err.column
    elif isinstance(err, UnexpectedEOF):
        got = "end of file"
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    else:  # pragma: no cover - lark has no other UnexpectedInput kinds
        got, line, col = "invalid input", getattr(err, "line", 1), getattr(err, "column", 1)
    if line is None or line < 1:
        line, col = 1, 1
    return SourceError(f"expected {want}, got {got}", path, line, col)


def resolve_path(folder: Path, rel: str, at: Span) -> Path:
    """``folder / rel`` resolved, or a SourceError at ``at`` for a name the file system
    cannot hold (a NUL byte, a component over the length limit)."""
    if "\0" in rel:
        raise SourceError.at(at, f"the path {rel!r} contains a NUL byte")
    try:
        return (folder / rel).resolve()
    except (OSError, ValueError) as err:
        raise SourceError.at(at, f"cannot use the path {rel!r}: {getattr(err, 'strerror', None) or err}") from None


def read_error(err: Exception, shown: str) -> str:
    """A one-line reason why reading ``shown`` failed (for FileNotFoundError,
    IsADirectoryError, other OSErrors, UnicodeDecodeError)."""
    if isinstance(err, FileNotFoundError):
        return f"no such file {shown}"
    if isinstance(err, IsADirectoryError):
        return f"{shown} is a folder, not a file"
    if isinstance(err, UnicodeDecodeError):
        return f"{shown} is not UTF-8 ({err.reason})"
    return f"cannot read {shown}: {getattr(err, 'strerror', None) or err}"


MAX_SOURCE_MB_DEFAULT = 8.0


def source_limit_bytes() -> int:
    """The source-size limit in bytes: ``$NEUROSYM_MAX_SOURCE_MB`` megabytes (default 8)."""
    try:
        limit_mb = float(os.environ.get("NEUROSYM_MAX_SOURCE_MB", MAX_SOURCE_MB_DEFAULT))
    except ValueError:
        raise NeurosymError(f"$NEUROSYM_MAX_SOURCE_MB must be a number of megabytes, got {os.environ['NEUROSYM_MAX_SOURCE_MB']!r}") from None
    return int(limit_mb * 1e6)


def read_source_bytes(path: Path, display: str | None = None) -> bytes:
    """The bytes of a grammar, bank, lexicon or word-list file, read once
    (:func:`neurosym.files.read_input`: a regular file only, so a device or a FIFO is
    refused before it is read) and held to the source-size limit: parsing is linear in the
    size, but a 50 MB grammar would still take minutes."""
    limit = source_limit_bytes()
    try:
        return read_input(path, limit)
    except InputTooLarge as err:
        raise NeurosymError(
            f"{display or path}: the file is {err.size / 1e6:.1f} MB, over the {limit / 1e6:g} MB limit for source files "
            "(set $NEUROSYM_MAX_SOURCE_MB to raise it)"
        ) from None