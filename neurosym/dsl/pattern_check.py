"""Lexical validation of Python-syntax regex patterns: regular languages only.

`check_pattern` points at the exact column of a backreference, lookaround, anchor,
word boundary, conditional, Unicode property or unsupported inline flag. Column
convention: ``span`` is the position of the character *before* the pattern (the
opening ``/`` of a bank atom), so offset ``i`` in the pattern is column ``span.col + 1 + i``.
"""

from __future__ import annotations

import re
import warnings

from neurosym.errors import SourceError, Span

REGULAR_ONLY = "only regular languages are supported"
ALLOWED_INLINE_FLAGS = set("isa")


def check_pattern(pattern: str, span: Span | None = None, ignore_case: bool = False) -> None:
    """Raise `SourceError` at the first unsupported construct of ``pattern``.

    Besides non-regular constructs, this rejects the few regular ones that the regex
    parser underneath (interegular) would read with a different language than ``re``:
    possessive quantifiers and, under ``i``, a
    character class mixing ``\\W`` with letters of one case only.
    ``ignore_case`` says whether the ``i`` flag is set from outside the pattern."""
    span = span or Span(None, 1, 0)

    def fail(offset: int, message: str) -> SourceError:
        return SourceError(message, span.path, span.line, span.col + 1 + offset)

    try:
        with warnings.catch_warnings():  # re's FutureWarnings (e.g. "[a--b]": possible set difference) never reach the user raw
            warnings.simplefilter("error", FutureWarning)
            re.compile(pattern)
    except FutureWarning as warning:
        raise fail(0, f"ambiguous regex: {warning}; escape the character or reorder the class") from None
    except re.error as err:
        raise fail(err.pos or 0, f"invalid regex: {err.msg}") from None
    except (OverflowError, RecursionError) as err:
        raise fail(0, f"invalid regex: {err}") from None

    ignore_case = ignore_case or _sets_ignore_case(pattern)
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c in "*+?}" and i + 1 < n and pattern[i + 1] == "+" and _ends_quantifier(pattern, i):
            raise fail(i + 1, "possessive quantifiers (*+, ++, ?+, {m,n}+) are not supported; drop the second '+'")
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
            end = _skip_class(pattern, i)
            body = pattern[i + 1 : end - 1]
            if ignore_case and not _case_safe_class(body):
                raise fail(i, "under case-insensitive matching, a character class may not mix \\W "
                           "with letters of one case only; write the class out, e.g. [^\\Wa] as [0-9_b-zB-Z]")
            i = end
        elif c == "(" and pattern.startswith("(?#", i):
            i = pattern.index(")", i) + 1  # a comment; re.compile has checked it is closed
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


def _sets_ignore_case(pattern: str) -> bool:
    """Whether an inline flag group (global or scoped) of ``pattern`` turns on ``i``."""
    return any("i" in m.group(1) for m in re.finditer(r"\(\?([a-zA-Z]+)(?:-[a-zA-Z]*)?[:)]", pattern))


def _ends_quantifier(pattern: str, i: int) -> bool:
    """Whether ``pattern[i]`` (one of ``*+?}``) ends a quantifier rather than being a literal."""
    if i > 0 and pattern[i - 1] == "\\" and not (i > 1 and pattern[i - 2] == "\\"):
        return False
    if pattern[i] == "?" and i > 0 and pattern[i - 1] == "(":
        return False
    if pattern[i] == "}":
        return re.search(r"\{\d*(,\d*)?$", pattern[:i]) is not None
    return True


def _case_safe_class(body: str) -> bool:
    """False for a class body that interegular folds wrongly under ``i``: one with a
    ``\\W`` whose other items hold a letter but not its other case (``[^\\Wa]``). Classes like ``[^\\W\\d_]`` are safe."""
    body = body[1:] if body.startswith("^") else body
    items = re.findall(r"\\.(?:-(?:\\.|[^\\]))?|[^\\](?:-(?:\\.|[^\\]))?", body)
    if "\\W" not in items:  # \D and \S hold every letter already, so folding cannot change them
        return True
    rest = [item for item in items if item not in ("\\W", "\\D", "\\S")]
    if not rest:
        return True
    others = re.compile("[" + "".join(rest) + "]", re.ASCII)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return all(bool(others.fullmatch(c)) == bool(others.fullmatch(c.upper())) for c in letters)


def normalize_pattern(pattern: str) -> str:
    """The same pattern with Python syntax that interegular misreads spelled plainly.

    A ``]`` first in a character class (``[]a]``, ``[^]a]``) is literal in Python;
    it becomes ``\\]``. Comment groups ``(?#...)`` are dropped, and several leading
    global flag groups (``(?s)(?i)``) merge into one. The language is unchanged.
    """
    flags = ""
    while (m := re.match(r"\(\?([a-zA-Z]+)\)", pattern)) or pattern.startswith("(?#"):
        flags += m.group(1) if m else ""
        pattern = pattern[(m.end() if m else pattern.index(")") + 1) :]
    out, i, n = [f"(?{flags})"] if flags else [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "(" and pattern.startswith("(?#", i):
            i = pattern.index(")", i) + 1
        elif c == "\\":
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
