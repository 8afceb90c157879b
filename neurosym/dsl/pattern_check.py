"""Lexical validation of Python-syntax regex patterns: regular languages only.

`check_pattern` points at the exact column of a backreference, lookaround, anchor,
word boundary, conditional, Unicode property or unsupported inline flag. Column
convention: ``span`` is the position of the character *before* the pattern (the
opening ``/`` of a bank atom), so offset ``i`` in the pattern is column ``span.col + 1 + i``.
"""

from __future__ import annotations

import re

from neurosym.errors import SourceError, Span

REGULAR_ONLY = "only regular languages are supported"
ALLOWED_INLINE_FLAGS = set("isa")


def check_pattern(pattern: str, span: Span | None = None) -> None:
    """Raise `SourceError` at the first unsupported construct of ``pattern``."""
    span = span or Span(None, 1, 0)

    def fail(offset: int, message: str) -> SourceError:
        return SourceError(message, span.path, span.line, span.col + 1 + offset)

    try:
        re.compile(pattern)
    except re.error as err:
        raise fail(err.pos or 0, f"invalid regex: {err.msg}") from None
    except (OverflowError, RecursionError) as err:
        raise fail(0, f"invalid regex: {err}") from None

    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1] if i + 1 < n else ""
            if nxt.isdigit() and nxt != "0" and not _is_octal_escape(pattern, i):
                raise fail(i, f"backreferences (\\{nxt}) are not supported: {REGULAR_ONLY}")
            if nxt in "AZzbB":
                what = "word boundaries" if nxt in "bB" else "anchors"
                raise fail(i, f"{what} (\\{nxt}) are not supported: {REGULAR_ONLY}")
            if nxt in "pPN":
                raise fail(i, f"Unicode property and name escapes (\\{nxt}) are not supported")
            i += 2
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c in "^$":
            raise fail(i, f"anchors ({c}) are not supported: patterns always match the whole string")
        elif c == "(" and pattern.startswith("(?", i):
            _check_group(pattern, i, fail)
            i += 2
        else:
            i += 1


def _is_octal_escape(pattern: str, i: int) -> bool:
    """``\\ddd`` with three octal digits is a character, not a backreference."""
    digits = pattern[i + 1 : i + 4]
    return len(digits) == 3 and all(d in "01234567" for d in digits)


def _skip_class(pattern: str, i: int) -> int:
    """The index just past the character class starting at ``pattern[i] == '['``."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":  # a leading ']' is literal
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _check_group(pattern: str, i: int, fail) -> None:
    rest = pattern[i + 2 :]
    for prefix, what in (("=", "lookahead"), ("!", "negative lookahead"), ("<=", "lookbehind"), ("<!", "negative lookbehind")):
        if rest.startswith(prefix):
            raise fail(i, f"{what} (?{prefix}...) is not supported: {REGULAR_ONLY}")
    if rest.startswith("P="):
        raise fail(i, f"backreferences (?P=name) are not supported: {REGULAR_ONLY}")
    if rest.startswith("("):
        raise fail(i, f"conditional groups (?(...)...) are not supported: {REGULAR_ONLY}")
    m = re.match(r"([a-zA-Z]*)(?:-([a-zA-Z]*))?[:)]", rest)
    if m and (m.group(1) or m.group(2)):
        bad = sorted((set(m.group(1)) | set(m.group(2) or "")) - ALLOWED_INLINE_FLAGS)
        if bad:
            raise fail(i, f"inline flag(s) {''.join(bad)!r} are not supported; only i, s and a are (matching is ASCII)")


def normalize_pattern(pattern: str) -> str:
    """The same pattern with Python syntax that interegular misreads spelled plainly.

    A ``]`` first in a character class (``[]a]``, ``[^]a]``) is literal in Python;
    it becomes ``\\]``. The language is unchanged.
    """
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif c == "[":
            end = _skip_class(pattern, i)
            body = pattern[i + 1 : end - 1]
            neg = body.startswith("^")
            rest = body[1:] if neg else body
            if rest.startswith("]"):
                rest = "\\" + rest
            out.append("[" + ("^" if neg else "") + rest + "]")
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)
