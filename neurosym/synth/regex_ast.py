"""Regex ASTs for synthesis: printing, parsing back, size, canonical form, edits.

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
``Cat``/``Alt`` costs ``n - 1`` joins), :func:`simplify` rewrites to a canonical form
so equivalent candidates are not searched twice, and :func:`edits` gives the
single-edit neighbourhood used by local search.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

from neurosym.errors import NeurosymError
from neurosym.compile.regex import Limits, pattern_dfa  # same DFA as compile_regex(p).char_dfa


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
_CLASS_ESC = {
    "d": frozenset("0123456789"),
    "w": frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"),
    "s": frozenset(" \t\n\r\f\v"),
}
_CHAR_ESC = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def fail(self, msg: str):
        raise NeurosymError(f"cannot parse regex {self.s!r} at offset {self.i}: {msg}")

    def peek(self) -> str | None:
        return self.s[self.i] if self.i < len(self.s) else None

    def parse(self) -> Node:
        r = self.alt()
        if self.i != len(self.s):
            self.fail("unexpected " + repr(self.s[self.i]))
        return r

    def alt(self) -> Node:
        items = [self.cat()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.cat())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def cat(self) -> Node:
        items = []
        while self.peek() is not None and self.peek() not in "|)":
            self.repeated = False
            item = self.postfix()
            if self.repeated and type(item) is Cat:  # x{3} is x x x in the sequence, not a group
                items.extend(item.items)
            else:
                items.append(item)
        if not items:
            return EPS
        return items[0] if len(items) == 1 else Cat(tuple(items))

    def postfix(self) -> Node:
        r = self.atom()
        while True:
            c = self.peek()
            if c == "*":
                r = Star(r)
            elif c == "+":
                r = Plus(r)
            elif c == "?":
                r = Opt(r)
            elif c == "{":
                m = re.compile(r"\{(\d*)(,?)(\d*)\}").match(self.s, self.i)
                if not m or (not m.group(1) and not m.group(2)):
                    self.fail("bad counted repeat")
                lo = int(m.group(1) or 0)
                hi = lo if not m.group(2) else (int(m.group(3)) if m.group(3) else None)
                self.i = m.end()
                r = repeat(r, lo, hi)
                self.repeated = True
                continue
            else:
                return r
            self.repeated = False
            self.i += 1
            if self.peek() in ("?", "+"):
                self.fail("lazy and possessive quantifiers are not supported")

    def atom(self) -> Node:
        c = self.peek()
        if c is None:
            self.fail("unexpected end")
        if c == "(":
            self.i += 1
            if self.s.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                self.fail("only plain and (?:...) groups are supported")
            r = self.alt()
            if self.peek() != ")":
                self.fail("missing )")
            self.i += 1
            return r
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return ANY
        if c == "\\":
            return self.escape(in_class=False)
        if c in "*+?{":
            self.fail("nothing to repeat")
        if c in "^$":
            self.fail("anchors are not supported")
        self.i += 1
        return Chars(c)

    def escape(self, in_class: bool):
        self.i += 1
        c = self.peek()
        if c is None:
            self.fail("dangling backslash")
        self.i += 1
        if c in _CLASS_ESC:
            return Chars(_CLASS_ESC[c])
        if c in _CHAR_ESC:
            return Chars(_CHAR_ESC[c])
        if c in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[c]
            h = self.s[self.i : self.i + n]
            if len(h) != n or not all(x in "0123456789abcdefABCDEF" for x in h):
                self.fail("bad hex escape")
            self.i += n
            return Chars(chr(int(h, 16)))
        if c.isalnum():
            self.fail(f"unsupported escape \\{c}")
        return Chars(c)

    def char_class(self) -> Node:
        self.i += 1
        if self.s.startswith("^\\s\\S]", self.i):
            self.i += 6
            return EMPTY
        if self.peek() == "^":
            self.fail("negated classes are not supported")
        chars: set[str] = set()
        first = True
        while True:
            c = self.peek()
            if c is None:
                self.fail("missing ]")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo = self.class_item()
            if isinstance(lo, frozenset):
                chars |= lo
                continue
            if self.peek() == "-" and self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                hi = self.class_item()
                if isinstance(hi, frozenset) or ord(hi) < ord(lo):
                    self.fail("bad range")
                chars |= {chr(k) for k in range(ord(lo), ord(hi) + 1)}
            else:
                chars.add(lo)
        return Chars(chars)

    def class_item(self):
        c = self.peek()
        if c == "\\":
            r = self.escape(in_class=True)
            return r.chars if len(r.chars) > 1 else next(iter(r.chars))
        self.i += 1
        return c


def parse(text: str) -> Node:
    """Parse a pattern of the printed subset (see the module docstring)."""
    return _Parser(text).parse()


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


# ---------------------------------------------------------------------- canonical form
def _sort_key(r: Node) -> tuple:
    return (size(r), to_pattern(r))


def _strip(r: Node) -> Node:
    """Drop an outer ``*``/``+``/``?``: inside a star they change nothing."""
    while type(r) in UNARY:
        r = r.child
    return r


def simplify(r: Node) -> Node:
    """A canonical form of ``r`` (never larger, same language).

    Flattens nested concatenations and alternations, sorts and dedupes alternatives,
    merges single-character alternatives into one class, drops ``()`` from sequences,
    rewrites ``ε|r`` to ``r?``, ``(r*)*``, ``(r+)*``, ``(r?)*``, ``(r*)+``, ``(r?)+``
    and ``(r+)?`` to ``r*``, ``(r?)?`` to ``r?``, ``r??``-like options of nullable
    ``r`` to ``r``, ``(a*|b)*`` to ``(a|b)*``, ``(a*b*)*`` to ``(a|b)*``, ``r*r*`` to
    ``r*``, ``rr*``/``r*r`` to ``r+`` and ``.*[a-z]*`` to ``.*``. Holes are opaque.
    """
    return _simplify(r)


@lru_cache(maxsize=65536)
def _simplify(r: Node) -> Node:
    t = type(r)
    if t in LEAVES:
        return r
    if t is Cat:
        items: list[Node] = []
        for x in r.items:
            x = _simplify(x)
            if type(x) is Cat:
                items.extend(x.items)
            elif type(x) is Eps:
                continue
            elif type(x) is Empty:
                return EMPTY
            else:
                items.append(x)
        items = _merge_runs(items)
        if not items:
            return EPS
        return items[0] if len(items) == 1 else Cat(tuple(items))
    if t is Alt:
        flat: list[Node] = []
        for x in r.items:
            x = _simplify(x)
            flat.extend(x.items if type(x) is Alt else [x])
        return _simplify_alt(flat)
    c = _simplify(r.child)
    tc = type(c)
    if tc is Empty:
        return EMPTY if t is Plus else EPS
    if tc is Eps:
        return EPS
    if t is Star:
        return _star(c)
    if t is Plus:
        if tc is Plus:
            return c
        if tc in (Star, Opt) or nullable(c):
            return _star(c)
        return Plus(c)
    # Opt
    if tc is Plus:
        return _star(c.child)
    if nullable(c):
        return c
    return Opt(c)


def _star(c: Node) -> Node:
    """``Star`` of a simplified node: inside a star, ``*``/``+``/``?`` on alternatives and
    sequences of nullable items are redundant: ``(a*|b)* = (a|b)*``, ``(a*b*)* = (a|b)*``."""
    flat: list[Node] = []

    def add(x: Node) -> None:
        x = _strip(x)
        tx = type(x)
        if tx is Alt or (tx is Cat and all(nullable(y) for y in x.items)):
            for y in x.items:
                add(y)
        elif tx is not Eps:
            flat.append(x)

    add(c)
    if not flat:
        return EPS
    c = _strip(flat[0] if len(flat) == 1 else _simplify_alt(flat))
    if type(c) in (Eps, Empty):
        return EPS
    return Star(c)


def _simplify_alt(flat: list[Node]) -> Node:
    has_eps = False
    chars: set[str] = set()
    any_char = False
    rest: list[Node] = []
    seen: set = set()
    for x in flat:
        tx = type(x)
        if tx is Empty:
            continue
        if tx is Eps:
            has_eps = True
        elif tx is Chars:
            chars |= x.chars
        elif tx is AnyChar:
            any_char = True
        elif tx is Hole or x not in seen:
            seen.add(x)
            rest.append(x)
    if any_char:
        chars = {c for c in chars if c == "\n"}
        rest.append(ANY)
    if chars:
        rest.append(Chars(chars))
    # r | r* -> r*, r | r+ -> r+, r | r? -> r?, r+ | r* -> r*
    wrapped = {type(x): set() for x in rest}
    for x in rest:
        if type(x) in UNARY:
            wrapped[type(x)].add(x.child)
    covered = wrapped.get(Star, set()) | wrapped.get(Plus, set()) | wrapped.get(Opt, set())
    rest = [x for x in rest if not (x in covered and type(x) is not Hole)]
    if Star in wrapped:
        rest = [x for x in rest if not (type(x) in (Plus, Opt) and x.child in wrapped[Star])]
    if not rest:
        return EPS if has_eps else EMPTY
    rest.sort(key=_sort_key)
    body = rest[0] if len(rest) == 1 else Alt(tuple(rest))
    if has_eps and not nullable(body):
        if type(body) is Plus:
            return _star(body.child)
        return Opt(body)
    return body


def _merge_runs(items: list[Node]) -> list[Node]:
    """``r* r*`` -> ``r*``, ``r r*``/``r* r`` -> ``r+``, ``r+ r*``/``r* r+`` -> ``r+``,
    ``r? r*``/``r* r?`` -> ``r*`` on neighbouring items."""
    out: list[Node] = []
    for x in items:
        if out:
            y = out[-1]
            merged = _merge_pair(y, x)
            if merged is not None:
                out[-1] = merged
                # a merge may enable another with the item before
                while len(out) >= 2:
                    m2 = _merge_pair(out[-2], out[-1])
                    if m2 is None:
                        break
                    out[-2:] = [m2]
                continue
        out.append(x)
    return out


def _within_any(r: Node) -> bool:
    """Whether a star of ``r`` is inside ``.*`` (single characters other than newline)."""
    return type(r) is AnyChar or (type(r) is Chars and "\n" not in r.chars)


def _merge_pair(y: Node, x: Node) -> Node | None:
    ty, tx = type(y), type(x)
    if Hole in (ty, tx):
        return None
    if ty is Star and tx is Star and y.child == ANY and _within_any(x.child):
        return y  # .*[a-z]* -> .*
    if tx is Star and ty is Star and x.child == ANY and _within_any(y.child):
        return x
    if ty is Star and tx is Star and y.child == x.child:
        return y
    if ty is Star and x == y.child or tx is Star and y == x.child:
        return Plus(x if ty is Star else y)
    if ty is Star and tx in (Plus, Opt) and x.child == y.child:
        return Plus(x.child) if tx is Plus else y
    if tx is Star and ty in (Plus, Opt) and y.child == x.child:
        return Plus(y.child) if ty is Plus else x
    return None


# ---------------------------------------------------------------------- neighbourhood
def subtrees(r: Node, path: tuple = ()):
    """Yield ``(path, node)`` for every node, root first; a path is a tuple of child indices."""
    yield path, r
    t = type(r)
    if t in NARY:
        for i, x in enumerate(r.items):
            yield from subtrees(x, path + (i,))
    elif t in UNARY:
        yield from subtrees(r.child, path + (0,))


def replace(r: Node, path: tuple, new: Node) -> Node:
    """``r`` with the node at ``path`` replaced by ``new``."""
    if not path:
        return new
    t = type(r)
    i, rest = path[0], path[1:]
    if t in NARY:
        items = list(r.items)
        items[i] = replace(items[i], rest, new)
        return t(tuple(items))
    return t(replace(r.child, rest, new))


def edits(r: Node, leaves: list[Node], with_holes: bool = False) -> list[Node]:
    """The single-edit neighbourhood of ``r``, simplified and deduplicated (``r`` excluded).

    At every node: replace it by a leaf (or a hole), wrap it in ``*``, ``+`` or ``?``,
    unwrap it (a postfix by its operand, a sequence or alternation by one of its items),
    concatenate a leaf before or after it, alternate it with a leaf, and delete one
    item of a sequence or alternation.
    """
    out: dict[Node, None] = {}
    base = simplify(r)

    def add(x: Node) -> None:
        x = simplify(x)
        if x != base:
            out.setdefault(x, None)

    for path, node in subtrees(r):
        t = type(node)
        for leaf in leaves:
            if leaf != node:
                add(replace(r, path, leaf))
        if with_holes and t is not Hole:
            add(replace(r, path, Hole()))
        for w in UNARY:
            if t is not w:
                add(replace(r, path, w(node)))
        if t in UNARY:
            add(replace(r, path, node.child))
        if t in NARY:
            for i, x in enumerate(node.items):
                add(replace(r, path, x))
                if len(node.items) > 2:
                    add(replace(r, path, t(node.items[:i] + node.items[i + 1 :])))
        for leaf in leaves:
            add(replace(r, path, Cat((node, leaf))))
            add(replace(r, path, Cat((leaf, node))))
            add(replace(r, path, Alt((node, leaf))))
    return list(out)


# ---------------------------------------------------------------------- compiled DFAs
class DFACache:
    """An LRU cache of compiled character DFAs, keyed by canonical pattern text.

    Compilation is capped (``max_states``, ``time_limit`` seconds): a search must not
    stall on one candidate whose DFA blows up; such a candidate raises
    :class:`~neurosym.errors.CompileError`."""

    def __init__(self, maxsize: int = 4096, max_states: int = 1000, time_limit: float = 2.0):
        self.maxsize = maxsize
        self.max_states = max_states
        self.time_limit = time_limit
        self._d: OrderedDict[str, object] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __call__(self, r: Node | str):
        """The minimal :class:`~neurosym.compile.dfa.CharDFA` of a node or pattern."""
        pattern = to_pattern(simplify(r)) if isinstance(r, Node) else r
        d = self._d.get(pattern)
        if d is not None:
            self.hits += 1
            self._d.move_to_end(pattern)
            return d
        self.misses += 1

        d = pattern_dfa(pattern, limits=Limits(self.max_states, self.time_limit))
        self._d[pattern] = d
        if len(self._d) > self.maxsize:
            self._d.popitem(last=False)
        return d


compiled_dfa = DFACache()

__all__ = [
    "ANY",
    "Alt",
    "AnyChar",
    "Cat",
    "Chars",
    "DFACache",
    "EMPTY",
    "EPS",
    "Empty",
    "Eps",
    "Hole",
    "Node",
    "Opt",
    "Plus",
    "Star",
    "alt",
    "cat",
    "class_body",
    "compiled_dfa",
    "edits",
    "fill",
    "holes",
    "lit",
    "nullable",
    "parse",
    "repeat",
    "replace",
    "runs",
    "simplify",
    "size",
    "subtrees",
    "to_pattern",
]
