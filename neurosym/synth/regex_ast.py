"""Regex ASTs for synthesis: nodes, printing, parsing back, size.

Nodes are frozen (hashable) dataclasses:

* :class:`Chars` — one character (``Chars("0")`` prints ``0``) or a character class
  (``Chars("01")`` prints ``[01]``, ``Chars(digits)`` prints ``[0-9]``);
* :class:`AnyChar` — ``.`` (any character but a newline, as in Python's ``re``);
* :class:`Eps` — the empty string, printed ``()``; :class:`Empty` — the empty
  language, printed ``[^\\s\\S]``; :class:`Hole` — an unfilled slot of a partial
  regex, printed ``□`` (never compiled);
* :class:`Cat` and :class:`Alt` — n-ary concatenation and alternation;
* :class:`Star`, :class:`Plus`, :class:`Opt` — ``r*``, ``r+``, ``r?``.

:func:`to_pattern` prints a Python ``re`` pattern (``re.fullmatch`` semantics, the
same language as :func:`neurosym.compile_regex`), :func:`parse` reads that subset back
(plus ``(?:...)``, ``\\d \\w \\s``, ``\\xHH`` and counted repeats ``{m}``, ``{m,}``,
``{m,n}``, expanded), :func:`size` counts nodes as in a binary tree (an n-ary
``Cat``/``Alt`` costs ``n - 1`` joins). The canonical form is in
:mod:`neurosym.synth.simplify`, the single-edit neighbourhood in
:mod:`neurosym.synth.edits` and the compiled-DFA cache in :mod:`neurosym.synth.dfa_cache`.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurosym.dsl import regex_syntax as rs
from neurosym.errors import NeurosymError


class Node:
    """Base class of regex AST nodes."""

    __slots__ = ()

    def __str__(self) -> str:
        return to_pattern(self)


@dataclass(frozen=True, slots=True)
class Chars(Node):
    """A set of characters: one character is a literal, more a class ``[...]``."""

    chars: frozenset

    def __init__(self, chars):
        object.__setattr__(self, "chars", frozenset(chars))
        if not self.chars:
            raise NeurosymError("a character class needs at least one character (use Empty for none)")


@dataclass(frozen=True, slots=True)
class AnyChar(Node):
    """``.``: any character except a newline."""


@dataclass(frozen=True, slots=True)
class Eps(Node):
    """The empty string."""


@dataclass(frozen=True, slots=True)
class Empty(Node):
    """The empty language."""


@dataclass(frozen=True, slots=True, eq=False)
class Hole(Node):
    """An unfilled slot of a partial regex. Every hole is distinct (compared by identity)."""


@dataclass(frozen=True, slots=True)
class Cat(Node):
    items: tuple


@dataclass(frozen=True, slots=True)
class Alt(Node):
    items: tuple


@dataclass(frozen=True, slots=True)
class Star(Node):
    child: Node


@dataclass(frozen=True, slots=True)
class Plus(Node):
    child: Node


@dataclass(frozen=True, slots=True)
class Opt(Node):
    child: Node


UNARY = (Star, Plus, Opt)
NARY = (Cat, Alt)
LEAVES = (Chars, AnyChar, Eps, Empty, Hole)
EPS = Eps()
EMPTY = Empty()
ANY = AnyChar()


def lit(text: str) -> Node:
    """A literal string: a single character, or a concatenation of characters."""
    if not text:
        return EPS
    if len(text) == 1:
        return Chars(text)
    return Cat(tuple(Chars(c) for c in text))


def cat(*items: Node) -> Node:
    return items[0] if len(items) == 1 else Cat(tuple(items))


def alt(*items: Node) -> Node:
    return items[0] if len(items) == 1 else Alt(tuple(items))


# ---------------------------------------------------------------------- printing
_SPECIAL = set(".^$*+?{}[]\\|()")
_CLASS_SPECIAL = set("]\\^-[")
_NAMED_ESC = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f", "\v": "\\v"}


def _esc(c: str, in_class: bool) -> str:
    if c in _NAMED_ESC:
        return _NAMED_ESC[c]
    if not c.isprintable() or (c.isspace() and c != " "):
        return f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
    if c in (_CLASS_SPECIAL if in_class else _SPECIAL):
        return "\\" + c
    return c


def class_body(chars: frozenset) -> str:
    """The inside of ``[...]`` for a set of characters, runs of 3+ as ranges."""
    cs = sorted(chars)
    out, i = [], 0
    while i < len(cs):
        j = i
        while j + 1 < len(cs) and ord(cs[j + 1]) == ord(cs[j]) + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{_esc(cs[i], True)}-{_esc(cs[j], True)}")
        else:
            out.extend(_esc(c, True) for c in cs[i : j + 1])
        i = j + 1
    return "".join(out)


def to_pattern(r: Node) -> str:
    """A Python ``re`` pattern for ``r`` (holes print as ``□`` and do not compile)."""
    return _pat(r, 0)


# precedence: 0 = alternation context, 1 = concatenation item, 2 = operand of a postfix
def _pat(r: Node, prec: int) -> str:
    t = type(r)
    if t is Chars:
        if len(r.chars) == 1:
            return _esc(next(iter(r.chars)), False)
        return f"[{class_body(r.chars)}]"
    if t is AnyChar:
        return "."
    if t is Eps:
        return "()"
    if t is Empty:
        return "[^\\s\\S]"
    if t is Hole:
        return "□"
    if t is Alt:
        s = "|".join(_pat(x, 0) for x in r.items)
        return f"({s})" if prec > 0 else s
    if t is Cat:
        s = "".join(_pat_run(x, k, more) for x, k, more in runs(r.items))
        return f"({s})" if prec > 1 else s
    op = "*" if t is Star else "+" if t is Plus else "?"
    return _pat(r.child, 2) + op if type(r.child) not in UNARY else f"({_pat(r.child, 0)}){op}"


MIN_RUN = 3  # print x x x as x{3} (and x x x+ as x{3,}); shorter runs stay as they are


def runs(items: tuple | list, min_run: int = MIN_RUN) -> list[tuple[Node, int, bool]]:
    """A sequence as ``(x, k, unbounded)`` groups: ``k`` copies of ``x`` (``x{k}``), or at
    least ``k`` (``x{k,}``) when the run ends in ``x+``; runs shorter than ``min_run``
    stay single items ``(x, 1, False)``."""
    out: list[tuple[Node, int, bool]] = []
    i = 0
    while i < len(items):
        x = items[i]
        j = i
        while j + 1 < len(items) and items[j + 1] == x:
            j += 1
        k = j - i + 1
        more = j + 1 < len(items) and type(items[j + 1]) is Plus and items[j + 1].child == x
        if type(x) not in UNARY and k + more >= min_run:
            out.append((x, k + more, more))
            i = j + 1 + more
        else:
            out.append((x, 1, False))
            i += 1
    return out


def _pat_run(x: Node, k: int, more: bool) -> str:
    if k == 1 and not more:
        return _pat(x, 1)
    return _pat(x, 2) + (f"{{{k},}}" if more else f"{{{k}}}")


# ---------------------------------------------------------------------- parsing
def parse(text: str) -> Node:
    """A pattern of the printed subset back to an AST, through the library's own regex
    parser (:func:`neurosym.dsl.regex_syntax.parse_pattern`, checked for
    regular-language features) rather than a second hand-written one."""
    return _from_syntax(rs.parse_pattern(text))


def _flat(kind: type, nodes) -> list[Node]:
    """Items of nested ``kind`` nodes spliced in, as the printer's precedence reads them."""
    out: list[Node] = []
    for x in nodes:
        out.extend(x.items if type(x) is kind else (x,))
    return out


def _from_syntax(n: rs.Syntax) -> Node:
    """A parsed pattern's syntax tree (as compile/nfa.py walks it) -> ours; flags and
    negated classes, which the printer never writes, are errors."""
    if isinstance(n, rs.Alternation):
        if n.flags_on or n.flags_off:
            raise NeurosymError("inline flags are not supported in synthesis patterns")
        return alt(*_flat(Alt, (_from_syntax(o) for o in n.options)))
    if isinstance(n, rs.Concatenation):
        items = [x for x in _flat(Cat, (_from_syntax(x) for x in n.parts)) if x != EPS]
        return cat(*items) if items else EPS
    if isinstance(n, rs.Repetition):
        return repeat(_from_syntax(n.base), n.min, n.max)
    if isinstance(n, rs.AnyChar):
        return ANY
    if isinstance(n, rs.CharClass):
        if n.negated:
            raise NeurosymError("negated classes are not supported in synthesis patterns")
        return Chars(n.chars) if n.chars else EMPTY
    if isinstance(n, rs.EmptyString):
        return EPS
    raise NeurosymError(f"unsupported regex construct {type(n).__name__} in a synthesis pattern")


def repeat(r: Node, lo: int, hi: int | None) -> Node:
    """``r{lo,hi}`` (``hi=None``: unbounded) as concatenations and options."""
    if hi is not None and hi < lo:
        raise NeurosymError(f"bad repeat {{{lo},{hi}}}")
    if hi is None:  # canonical: r r ... r+ (as simplify writes r r ... r r*)
        items = [r] * (lo - 1) + [Plus(r)] if lo else [Star(r)]
    else:
        items = [r] * lo
        tail: Node | None = None
        for _ in range(hi - lo):
            tail = Opt(r if tail is None else Cat((r, tail)))
        if tail is not None:
            items.append(tail)
    if not items:
        return EPS
    return items[0] if len(items) == 1 else Cat(tuple(items))


# ---------------------------------------------------------------------- measures
def size(r: Node) -> int:
    """Nodes of the binary tree: a leaf 1, a postfix 1 + its operand, an n-ary
    ``Cat``/``Alt`` n - 1 joins plus its items."""
    t = type(r)
    if t in NARY:
        return len(r.items) - 1 + sum(size(x) for x in r.items)
    if t in UNARY:
        return 1 + size(r.child)
    return 1


def holes(r: Node) -> int:
    t = type(r)
    if t is Hole:
        return 1
    if t in NARY:
        return sum(holes(x) for x in r.items)
    if t in UNARY:
        return holes(r.child)
    return 0


def nullable(r: Node) -> bool:
    """Whether ``r`` accepts the empty string (a hole counts as not nullable)."""
    t = type(r)
    if t in (Eps, Star, Opt):
        return True
    if t is Plus:
        return nullable(r.child)
    if t is Cat:
        return all(nullable(x) for x in r.items)
    if t is Alt:
        return any(nullable(x) for x in r.items)
    return False


def fill(r: Node, by: Node) -> Node:
    """Replace every hole by ``by`` (e.g. ``Star(ANY)`` or ``EMPTY`` for AlphaRegex's
    over- and under-approximations)."""
    t = type(r)
    if t is Hole:
        return by
    if t in NARY:
        return t(tuple(fill(x, by) for x in r.items))
    if t in UNARY:
        return t(fill(r.child, by))
    return r


__all__ = [
    "ANY", "Alt", "AnyChar", "Cat", "Chars", "EMPTY", "EPS", "Empty", "Eps", "Hole", "Node", "Opt", "Plus", "Star",
    "alt", "cat", "class_body", "fill", "holes", "lit", "nullable", "parse", "repeat", "runs", "size", "to_pattern",
]
