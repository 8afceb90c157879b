"""A non-backtracking reference for ``re.fullmatch``: Python's own regex parser, a
Thompson NFA, and a simulation over sets of states.

Python's ``re`` backtracks, so on nested quantifiers it takes exponential time on
strings that almost match (``(a+)+b`` against ``"a" * 31 + "_"``; one test run hung for
23 minutes on ``(((()|()|0)(()|()|0))+)+``). Tests that check the library against ``re``
on strings hypothesis draws use :func:`fullmatch` instead: the same parse (``re._parser``,
a test-side oracle may use it), the same semantics for what the library supports
(literals, classes, ``\\d \\w \\s``, ``.``, alternation, groups, greedy and lazy
repeats, the ``i``, ``s`` and ASCII flags), and time linear in the string. Anything
else (anchors, lookaround, backreferences, atomic groups) raises ``NotImplementedError``.
``tests/test_regex_reference.py`` checks it against ``re`` where ``re`` is fast.
"""

from __future__ import annotations

import re
import re._constants as C
import re._parser as P
from collections.abc import Callable
from functools import lru_cache

ASCII_SPACE = frozenset(" \t\n\r\f\v")
Pred = Callable[[str], bool]


def _category(cat, ascii_only: bool) -> Pred:
    if cat in (C.CATEGORY_DIGIT, C.CATEGORY_NOT_DIGIT):
        base: Pred = (lambda c: "0" <= c <= "9") if ascii_only else (lambda c: c.isdecimal())
    elif cat in (C.CATEGORY_SPACE, C.CATEGORY_NOT_SPACE):
        base = (lambda c: c in ASCII_SPACE) if ascii_only else (lambda c: c.isspace())
    elif cat in (C.CATEGORY_WORD, C.CATEGORY_NOT_WORD):
        base = (lambda c: c.isascii() and (c.isalnum() or c == "_")) if ascii_only else (lambda c: c.isalnum() or c == "_")
    else:
        raise NotImplementedError(f"category {cat}")
    if cat in (C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_SPACE, C.CATEGORY_NOT_WORD):
        return lambda c: not base(c)
    return base


def _folded(pred: Pred, ignore_case: bool, ascii_only: bool) -> Pred:
    """``pred`` under case-insensitive matching: a character matches when it, its lower
    or its upper case does (only ASCII letters fold under re.ASCII)."""
    if not ignore_case:
        return pred

    def variants(c: str) -> set[str]:
        if ascii_only and not c.isascii():
            return {c}
        out = {c}
        for v in (c.lower(), c.upper()):
            if len(v) == 1 and (not ascii_only or v.isascii()):
                out.add(v)
        return out

    return lambda c: any(pred(v) for v in variants(c))


def _class(items, ignore_case: bool, ascii_only: bool) -> Pred:
    """A ``[...]`` class; case folding applies to its items before any negation."""
    negate = False
    preds: list[Pred] = []
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            preds.append(lambda c, ch=chr(av): c == ch)
        elif op is C.RANGE:
            preds.append(lambda c, lo=av[0], hi=av[1]: lo <= ord(c) <= hi)
        elif op is C.CATEGORY:
            preds.append(_category(av, ascii_only))
        else:
            raise NotImplementedError(f"class item {op}")
    positive = _folded(lambda c: any(p(c) for p in preds), ignore_case, ascii_only)
    return (lambda c: not positive(c)) if negate else positive


class _NFA:
    """States are ints; ``edges[s]`` is a list of ``(pred, target)`` (pred None: epsilon)."""

    def __init__(self) -> None:
        self.edges: list[list[tuple[Pred | None, int]]] = []

    def state(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def build(self, seq, start: int, flags: int) -> int:
        """Wire the parsed sequence ``seq`` from ``start``; return its end state."""
        cur = start
        for op, av in seq:
            cur = self.item(op, av, cur, flags)
        return cur

    def item(self, op, av, start: int, flags: int) -> int:
        ic, asc, dot = bool(flags & re.IGNORECASE), bool(flags & re.ASCII), bool(flags & re.DOTALL)
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY):
            if op is C.LITERAL:
                pred = _folded(lambda c, ch=chr(av): c == ch, ic, asc)
            elif op is C.NOT_LITERAL:
                inner = _folded(lambda c, ch=chr(av): c == ch, ic, asc)
                pred = lambda c: not inner(c)  # noqa: E731
            elif op is C.ANY:
                pred = (lambda c: True) if dot else (lambda c: c != "\n")
            elif op is C.IN:
                pred = _class(av, ic, asc)
            else:
                pred = _category(av, asc)
            end = self.state()
            self.edges[start].append((pred, end))
            return end
        if op is C.BRANCH:
            end = self.state()
            for alt in av[1]:
                s = self.state()
                self.edges[start].append((None, s))
                self.edges[self.build(alt, s, flags)].append((None, end))
            return end
        if op is C.SUBPATTERN:
            _group, add, delete, sub = av
            return self.build(sub, start, (flags | add) & ~delete)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if op is C.POSSESSIVE_REPEAT:
                raise NotImplementedError("possessive repeats")
            lo, hi, sub = av
            cur = start
            for _ in range(lo):
                cur = self.build(sub, cur, flags)
            if hi == C.MAXREPEAT:  # a loop of its own: cur -> loop -> body -> loop, loop -> out
                loop, body, out = self.state(), self.state(), self.state()
                self.edges[cur].append((None, loop))
                self.edges[loop] += [(None, body), (None, out)]
                self.edges[self.build(sub, body, flags)].append((None, loop))
                return out
            end = self.state()
            self.edges[cur].append((None, end))
            for _ in range(hi - lo):
                cur = self.build(sub, cur, flags)
                self.edges[cur].append((None, end))
            return end
        raise NotImplementedError(f"{op} is not supported by the reference (nor by neurosym)")

    def closure(self, states: set[int]) -> frozenset[int]:
        stack, seen = list(states), set(states)
        while stack:
            s = stack.pop()
            for pred, t in self.edges[s]:
                if pred is None and t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)


@lru_cache(maxsize=4096)
def _compile(pattern: str, flags: int) -> tuple[_NFA, int, int]:
    parsed = P.parse(pattern, flags)
    nfa = _NFA()
    start = nfa.state()
    end = nfa.build(parsed, start, parsed.state.flags)
    return nfa, start, end


def fullmatch(pattern: str, s: str, flags: int = 0) -> bool:
    """``re.fullmatch(pattern, s, flags) is not None``, in time linear in ``len(s)``."""
    nfa, start, end = _compile(pattern, int(flags))
    current = nfa.closure({start})
    for c in s:
        nxt = {t for q in current for pred, t in nfa.edges[q] if pred is not None and pred(c)}
        if not nxt:
            return False
        current = nfa.closure(nxt)
    return end in current
