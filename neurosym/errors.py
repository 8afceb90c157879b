"""One exception hierarchy for everything neurosym reports to a user.

Every error a user can cause is a :class:`NeurosymError`; the CLI prints ``str(err)``
and exits with status 2. Errors tied to a place in a file are :class:`SourceError`
and render as ``path:line:col: message`` (lines and columns count from 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class NeurosymError(Exception):
    """Base class of every error neurosym raises on bad input."""


@dataclass(frozen=True)
class Span:
    """A position in a source file: 1-based line and column.

    ``path`` is ``None`` for text that did not come from a file (e.g. a pattern
    given on the command line), which renders as ``<string>``.
    """

    path: str | None
    line: int
    col: int

    def shifted(self, chars: int) -> "Span":
        """The span ``chars`` characters further along the same line."""
        return Span(self.path, self.line, self.col + chars)

    def __str__(self) -> str:
        return f"{self.path or '<string>'}:{self.line}:{self.col}"


class SourceError(NeurosymError):
    """Bad input at a known place in a source file."""

    def __init__(self, message: str, path: str | Path | None = None, line: int = 1, col: int = 1):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.col = col
        super().__init__(f"{self.path or '<string>'}:{line}:{col}: {message}")

    @classmethod
    def at(cls, span: Span, message: str) -> "SourceError":
        return cls(message, span.path, span.line, span.col)

    @property
    def span(self) -> Span:
        return Span(self.path, self.line, self.col)

    @classmethod
    def not_utf8(cls, err: UnicodeDecodeError, path: str | Path | None, line_offset: int = 0) -> "SourceError":
        """The error of text that is not UTF-8, at the line and column of the first bad
        byte (``err.object[err.start]``; the column counts the characters before it on its
        line). ``line_offset`` is added when ``err.object`` is a part of the file."""
        line, col = utf8_position(err.object, err.start)
        bad = bytes(err.object[err.start : err.start + 1]).hex()
        return cls(f"the file is not UTF-8 ({err.reason}: byte 0x{bad})", path, line + line_offset, col)


def utf8_position(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of byte ``offset`` of ``data``: lines end at ``\n``,
    columns count characters (a malformed byte before ``offset`` counts as one)."""
    start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset) + 1
    return line, len(bytes(data[start:offset]).decode("utf-8", "replace")) + 1


class CompileError(NeurosymError):
    """Valid input whose compilation cannot be carried out (state cap, time cap, ...)."""


class ConfigError(NeurosymError, ValueError):
    """A bad configuration value or key; the message names the key. Also a ``ValueError``
    (as lark's ``ConfigurationError``), so ``except ValueError`` still catches it."""


class TaskError(NeurosymError, TypeError):
    """A training task (``neurosym.lm.train.TrainingTask``) that breaks its protocol: a missing
    method, a model that is not an ``nn.Module``, a loss of the wrong shape. Also a
    ``TypeError``."""


class TrainingInterrupted(NeurosymError):
    """Training stopped by the user (Ctrl-C); the message says where the last checkpoint
    is and how to continue."""
