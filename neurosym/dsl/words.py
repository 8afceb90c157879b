"""Word lists: the one rule for reading them, wherever they are met.

A word list is a UTF-8 text file with one word (or phrase) a line. Each line is
stripped of surrounding white space; blank lines and lines starting with ``#`` (after
that strip) are skipped. Bad bytes are a :class:`~neurosym.errors.SourceError` at the
line and column of the first bad byte. A word list is read the same way by a bank's
``%words "file.txt"``, by ``neurosym.load("words.txt")`` and ``neurosym check``, by
``neurosym generate --grammar words.txt`` and by ``neurosym.hf`` (docs/words.md).
"""

from __future__ import annotations

from pathlib import Path

from neurosym.dsl.errors import read_source_bytes
from neurosym.errors import NeurosymError, SourceError

WORD_LIST_SUFFIX = ".txt"  # the file kind of a word list given on its own


def parse_word_list(text: str) -> tuple[str, ...]:
    """The words of a word list's text, in file order (duplicates kept)."""
    return tuple(w for w in (line.strip() for line in text.splitlines()) if w and not w.startswith("#"))


def decode_utf8(data: bytes, display: str) -> str:
    """``data`` as UTF-8 text; a SourceError at ``display:line:col`` of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        head = data[: err.start]
        line = head.count(b"\n") + 1
        col = len(head[head.rfind(b"\n") + 1 :].decode("utf-8", errors="replace")) + 1
        raise SourceError(f"the file is not UTF-8 ({err.reason}, byte 0x{data[err.start]:02x})", display, line, col) from None


def read_word_list(path: str | Path, display: str | None = None) -> tuple[str, ...]:
    """The words of the word list at ``path`` (``display`` names it in errors). An empty
    list (nothing but comments and blank lines) is an error."""
    path = Path(path)
    shown = display or str(path)
    try:
        data = read_source_bytes(path, shown)
    except FileNotFoundError:
        raise NeurosymError(f"{shown}: no such word list") from None
    except IsADirectoryError:
        raise NeurosymError(f"{shown}: a folder, not a word list") from None
    except OSError as err:
        raise NeurosymError(f"{shown}: cannot read the word list ({err.strerror or err})") from None
    words = parse_word_list(decode_utf8(data, shown))
    if not words:
        raise SourceError("the word list is empty (only blank lines and # comments)", shown, 1, 1)
    return words


__all__ = ["WORD_LIST_SUFFIX", "decode_utf8", "parse_word_list", "read_word_list"]
