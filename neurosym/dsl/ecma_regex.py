"""ECMAScript regexes (JSON Schema's ``pattern``) read as the project's regex syntax, and
a regex over a string's characters turned into one over its JSON spelling.

JSON Schema's ``pattern`` is an ECMA-262 regex that *searches* the decoded string (it is
anchored only by its own ``^`` and ``$``). :func:`ecma_syntax` reads it into the plain
syntax tree of :mod:`neurosym.dsl.regex_syntax`, with ECMAScript's meaning of the
escapes (``\\d`` and ``\\w`` are ASCII, ``.`` stops at the four line terminators,
``\\s`` is ECMAScript's white space) and the unanchored ends widened to "any text".
What has no regular reading (lookaround, backreferences, ``\\b``, anchors inside a
group) or no reading here (``\\p{..}``, ``\\u{..}``) raises :class:`PatternUnsupported`
with the reason.

:func:`json_spelling` writes a syntax tree over characters as a Python-syntax regex over
the characters of the *JSON string literal* that spells them, quotes excluded: each
character is written as ``json.dumps(..., ensure_ascii=False)`` writes it (itself, or
``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\r``, ``\\b``, ``\\f`` and ``\\u00XX`` for the
other controls). So a document's strings are read in that one canonical spelling: every
string value is reachable, and none outside the pattern is.
"""

from __future__ import annotations

from neurosym.dsl.regex_syntax import (
    Alternation, AnyChar, CharClass, Concatenation, EmptyString, Repetition, Syntax, parse_pattern,
)
from neurosym.errors import NeurosymError, SourceError

ECMA_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
LINE_TERMINATORS = "\n\r\u2028\u2029"
DIGITS = "0123456789"
WORD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
MAX_CHAR = 0x10FFFF


class PatternUnsupported(NeurosymError):
    """An ECMAScript pattern with no regular reading here; the message says why."""


def escape_char(c: str) -> str:
    """One character as Python regex source, safe inside and outside a class."""
    o = ord(c)
    if o < 0x20 or o == 0x7F:
        return f"\\x{o:02x}"
    if c.isalnum() or o > 0x7F:
        return c
    return "\\" + c


def _class_item(lo: int, hi: int) -> str:
    return escape_char(chr(lo)) if lo == hi else escape_char(chr(lo)) + "-" + escape_char(chr(hi))


def _ranges(codes: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for c in sorted(set(codes)):
        if out and out[-1][1] + 1 == c:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def char_class(chars: str | frozenset[str] | set[str], negated: bool = False) -> str:
    """Python regex source for one character of ``chars`` (or, ``negated``, of none of them)."""
    items = "".join(_class_item(a, b) for a, b in _ranges([ord(c) for c in chars]))
    if negated:
        return f"[^{items}]" if items else "[\\s\\S]"
    return f"[{items}]" if items else "(?!)"  # (?!) never reached: callers drop empty classes first


# ---------------------------------------------------------------------- ECMAScript -> Python syntax
_CLASS_ESCAPES = {"d": DIGITS, "w": WORD, "s": ECMA_SPACE}
_CONTROL_ESCAPES = {"t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", "0": "\x00"}


def _read_escape(p: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape at ``p[i] == '\\'`` as Python source, and the index after it."""
    if i + 1 >= len(p):
        raise PatternUnsupported("the pattern ends in a lone backslash")
    c = p[i + 1]
    if c in _CLASS_ESCAPES:
        return (char_class(_CLASS_ESCAPES[c])[1:-1] if in_class else char_class(_CLASS_ESCAPES[c])), i + 2
    if c in "DWS":
        if in_class:
            raise PatternUnsupported(f"\\{c} inside a character class")
        return char_class(_CLASS_ESCAPES[c.lower()], negated=True), i + 2
    if c == "0" and not (i + 2 < len(p) and p[i + 2].isdigit()):
        return "\\x00", i + 2
    if c in _CONTROL_ESCAPES and c != "0":
        return escape_char(_CONTROL_ESCAPES[c]), i + 2
    if c == "b":
        if in_class:
            return "\\x08", i + 2
        raise PatternUnsupported("word boundaries (\\b) have no regular reading here")
    if c == "B":
        raise PatternUnsupported("word boundaries (\\B) have no regular reading here")
    if c.isdigit():
        raise PatternUnsupported(f"backreferences (\\{c}) are not regular")
    if c == "x":
        h = p[i + 2:i + 4]
        if len(h) == 2 and all(x in "0123456789abcdefABCDEF" for x in h):
            return escape_char(chr(int(h, 16))), i + 4
        return "x", i + 2
    if c == "u":
        if p[i + 2:i + 3] == "{":
            raise PatternUnsupported("\\u{...} escapes (the u flag) are not supported")
        h = p[i + 2:i + 6]
        if len(h) == 4 and all(x in "0123456789abcdefABCDEF" for x in h):
            code = int(h, 16)
            if 0xD800 <= code <= 0xDFFF:
                raise PatternUnsupported("surrogate escapes (\\uD800-\\uDFFF) are not supported")
            return escape_char(chr(code)), i + 6
        return "u", i + 2
    if c == "c":
        if i + 2 < len(p) and p[i + 2].isalpha() and p[i + 2].isascii():
            return escape_char(chr(ord(p[i + 2]) % 32)), i + 3
        return "\\\\c", i + 2
    if c in "pPk":
        raise PatternUnsupported(f"\\{c} escapes (Unicode properties, named backreferences) are not supported")
    return escape_char(c), i + 2  # an identity escape: \/ \. \- \$ ... and \e == e


def ecma_to_python(pattern: str) -> str:
    """The Python-syntax source of the text an ECMAScript pattern finds somewhere in a
    string, read as a whole-string match: its anchors (``^`` and ``$`` at the ends of the
    pattern or of its top-level alternatives) kept, an unanchored end reading any text."""
    out: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            text, i = _read_escape(pattern, i, in_class=False)
            out.append(text)
        elif c == "[":
            j = i + 1
            negated = j < n and pattern[j] == "^"
            j += negated
            items: list[str] = []
            while j < n and pattern[j] != "]":
                ch = pattern[j]
                if ch == "\\":
                    text, j = _read_escape(pattern, j, in_class=True)
                    items.append(text)
                else:
                    items.append(escape_char(ch) if ch in "[^\\&~|" or ord(ch) < 0x20 else ch)
                    j += 1
            if j >= n:
                raise PatternUnsupported("an unterminated character class")
            body = "".join(items)
            if not body:
                out.append("[\\s\\S]" if negated else "(?!x)x")
            else:
                out.append(("[^" if negated else "[") + body + "]")
            i = j + 1
        elif c == "(":
            if pattern.startswith("(?=", i) or pattern.startswith("(?!", i) or pattern.startswith("(?<=", i) or pattern.startswith("(?<!", i):
                raise PatternUnsupported("lookaround assertions ((?=, (?!, (?<=, (?<!) are not regular")
            if pattern.startswith("(?<", i):
                end = pattern.find(">", i)
                if end < 0:
                    raise PatternUnsupported("an unterminated group name")
                out.append("(?:")
                i = end + 1
            elif pattern.startswith("(?:", i):
                out.append("(?:")
                i += 3
            elif pattern.startswith("(?", i):
                raise PatternUnsupported(f"the group {pattern[i:i + 3]!r} is not ECMAScript")
            else:
                out.append("(")
                i += 1
            depth += 1
        elif c == ")":
            depth -= 1
            out.append(")")
            i += 1
        elif c == ".":
            out.append(char_class(LINE_TERMINATORS, negated=True))
            i += 1
        elif c in "^$":
            out.append("\x00A" if c == "^" else "\x00Z")  # placed markers, checked below
            i += 1
        elif c == "{" and not _is_quantifier(pattern, i):
            out.append("\\{")
            i += 1
        elif c == "}":
            out.append("}" if _closes_quantifier(pattern, i) else "\\}")
            i += 1
        else:
            out.append(c)
            i += 1
    return _anchors("".join(out))


def _is_quantifier(p: str, i: int) -> bool:
    j = p.find("}", i)
    if j < 0:
        return False
    body = p[i + 1:j]
    lo, _, hi = body.partition(",")
    return lo.isdigit() and (hi == "" or hi.isdigit())


def _closes_quantifier(p: str, i: int) -> bool:
    j = p.rfind("{", 0, i)
    return j >= 0 and _is_quantifier(p, j) and p.find("}", j) == i


def _top_level_split(src: str) -> list[str]:
    parts, depth, cur, i = [], 0, [], 0
    in_class = False
    while i < len(src):
        c = src[i]
        if c == "\\" and i + 1 < len(src):
            cur.append(src[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


ANY_TEXT = "[\\s\\S]*"


def _anchors(src: str) -> str:
    """Resolve the ``^``/``$`` markers: allowed at the ends of top-level alternatives (or of
    a whole pattern in one group); an unanchored end reads any text there."""
    if "\x00A" not in src and "\x00Z" not in src:
        return f"{ANY_TEXT}(?:{src}){ANY_TEXT}"
    options = _top_level_split(src)
    out = []
    for opt in options:
        start = opt.startswith("\x00A")
        body = opt[2:] if start else opt
        end = body.endswith("\x00Z") and not body.endswith("\\\x00Z")
        body = body[:-2] if end else body
        if "\x00A" in body or "\x00Z" in body:
            raise PatternUnsupported("an anchor (^ or $) inside a group or in the middle of the pattern")
        out.append(("" if start else ANY_TEXT) + f"(?:{body})" + ("" if end else ANY_TEXT))
    return "|".join(out)


def ecma_syntax(pattern: str) -> Syntax:
    """The characters a JSON Schema ``pattern`` accepts (it searches the string), as a syntax
    tree; :class:`PatternUnsupported` when it has no regular reading here."""
    src = ecma_to_python(pattern)
    try:
        return parse_pattern(src)
    except SourceError as err:
        raise PatternUnsupported(err.message) from None


# ---------------------------------------------------------------------- characters -> their JSON spelling
def _spelled(c: str) -> str:
    """How ``json.dumps(ensure_ascii=False)`` writes ``c`` inside a string literal."""
    if c in SHORT_ESCAPES:
        return SHORT_ESCAPES[c]
    if ord(c) < 0x20:
        return f"\\u{ord(c):04x}"
    return c


_FORCED = frozenset(SHORT_ESCAPES) | frozenset(chr(i) for i in range(0x20))


def _literal(text: str) -> str:
    """Regex source matching exactly ``text``."""
    return "".join(escape_char(c) for c in text)


def spelled_class(chars: frozenset[str], negated: bool) -> str | None:
    """Regex source over JSON-string characters for one decoded character of the class
    (None: the class is empty)."""
    if negated:
        raw = char_class(frozenset(chars) | _FORCED, negated=True)
        escaped = sorted(_FORCED - frozenset(chars))
    else:
        plain = frozenset(chars) - _FORCED
        raw = char_class(plain) if plain else None
        escaped = sorted(frozenset(chars) & _FORCED)
    options = ([raw] if raw else []) + [_literal(_spelled(c)) for c in escaped]
    if not options:
        return None
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


NOTHING = "(?!x)x"


def json_spelling(tree: Syntax, dotall: bool = False) -> str:
    """Python-syntax regex source over the characters of a JSON string literal's body (no
    quotes) for the decoded strings ``tree`` accepts, each spelled canonically."""
    if isinstance(tree, Alternation):
        if tree.flags_on or tree.flags_off:
            raise PatternUnsupported("inline flags are not ECMAScript")
        return "(?:" + "|".join(json_spelling(o, dotall) for o in tree.options) + ")"
    if isinstance(tree, Concatenation):
        return "".join(json_spelling(p, dotall) for p in tree.parts)
    if isinstance(tree, Repetition):
        hi = "" if tree.max is None else str(tree.max)
        return f"(?:{json_spelling(tree.base, dotall)}){{{tree.min},{hi}}}"
    if isinstance(tree, CharClass):
        return spelled_class(tree.chars, tree.negated) or NOTHING
    if isinstance(tree, AnyChar):
        return spelled_class(frozenset() if dotall else frozenset("\n"), True) or NOTHING
    if isinstance(tree, EmptyString):
        return ""
    raise PatternUnsupported(f"unexpected regex node {type(tree).__name__}")


__all__ = ["PatternUnsupported", "char_class", "escape_char", "ecma_syntax", "ecma_to_python", "json_spelling", "spelled_class"]
