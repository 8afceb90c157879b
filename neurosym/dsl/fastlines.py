"""A fast path around lark for the plain lines that make up most of a big file.

lark's LALR parser costs tens of microseconds per token, which dominates loading a file
of hundreds of thousands of entries, arcs or rules. Each format recognises its plainest
line shapes with one regular expression (a ``%class`` line of bare words, an FSG arc of
bare words, a one-line PCFG rule) and builds, for such a line, exactly the lark tree the
grammar would have given. Those lines are blanked in the text handed to lark (so every
line keeps its number, and lark's errors their positions); the builders then see the
merged items in file order, so every semantic check runs unchanged. A line the fast
path does not recognise is simply left to lark.
"""

from __future__ import annotations

from collections.abc import Callable

from lark import Token, Tree

LineParser = Callable[[str, int], "Tree | None"]


def split_fast(text: str, parse_line: LineParser, eligible: Callable[[list[str]], list[bool]] | None = None) -> tuple[str, list[tuple[int, Tree]]]:
    """``(text for lark, [(line, tree)])``: every line that ``parse_line(line, number)``
    turns into a tree (and that ``eligible(lines)[index]`` allows: one linear pass over
    the file) is blanked in the text. Lines are split on ``\\n`` only, as lark's grammars do."""
    lines = text.split("\n")
    allowed = eligible(lines) if eligible is not None else None
    fast: list[tuple[int, Tree]] = []
    for i, line in enumerate(lines):
        if not line or (allowed is not None and not allowed[i]):
            continue
        tree = parse_line(line, i + 1)
        if tree is not None:
            fast.append((i + 1, tree))
            lines[i] = ""
    if not fast:
        return text, fast
    return "\n".join(lines), fast


def merge(items: list, fast: list[tuple[int, Tree]]) -> list:
    """lark's items and the fast path's trees, in file order (lark's by their first line)."""
    if not fast:
        return items
    keyed = [(_line(t), 0, k, t) for k, t in enumerate(items)] + [(line, 1, k, t) for k, (line, t) in enumerate(fast)]
    keyed.sort(key=lambda x: x[:3])
    return [t for *_, t in keyed]


def _line(item) -> int:
    if isinstance(item, Token):
        return item.line or 0
    meta = item.meta
    return getattr(meta, "line", 0) or 0


def token(kind: str, value: str, line: int, col: int) -> Token:
    """A lark token of ``kind`` at 1-based ``line`` and ``col`` (its end on the same line)."""
    return Token(kind, value, None, line, col, line, col + len(value), None)
