"""The one escape decoder behind quoted words in every format (.regex, .fsg, .pcfg)."""

from __future__ import annotations

from lark import Token

from neurosym.errors import SourceError, Span

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
HEX = set("0123456789abcdefABCDEF")


def decode_quoted(quoted: str, at: Span, what: str = "a literal", strict: bool = True) -> str:
    """The text of ``quoted`` (with its quotes), decoding ``\\n \\t \\r \\\\ \\" \\' \\0 \\uXXXX``.

    ``strict``: any other escape is a SourceError at its column (``at`` is the position of
    the opening quote); otherwise it is kept as written (NLTK reads quotes verbatim)."""
    raw = quoted[1:-1]
    if "\\" not in raw:  # nothing to decode (most words): skip the character loop
        return raw
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        if c != "\\" or i + 1 >= len(raw):
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt in ESCAPES:
            out.append(ESCAPES[nxt])
            i += 2
        elif nxt == "u" and len(raw) >= i + 6 and set(raw[i + 2 : i + 6]) <= HEX:
            out.append(chr(int(raw[i + 2 : i + 6], 16)))
            i += 6
        elif strict:
            raise SourceError(f"unknown escape \\{nxt} in {what}; expected one of \\n \\t \\r \\\\ \\\" \\' \\0 \\uXXXX", at.path, at.line, at.col + 1 + i)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def unquote(tok: Token | str, at: Span, what: str = "a literal", strict: bool = True) -> str:
    """The text of a quoted token (see :func:`decode_quoted`)."""
    return decode_quoted(str(tok), at, what, strict)
