"""Character NFAs with epsilon moves, built from regex ASTs, literals and word lists.

Arcs are labelled by *character sets*: ``CharSet(chars, negated)`` is ``chars`` or,
when negated, every character not in ``chars``. This keeps Unicode ranges and
negated classes small; the alphabet is partitioned into classes only at
determinisation (:mod:`neurosym.compile.dfa`).

Fragments are built once and copied on reuse, so a referenced bank pattern or a
bounded repeat ``x{2,5}`` costs states proportional to its uses. Word lists become
minimal trie DFAs (``words_dfa``), never as alternations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from neurosym.dsl import regex_syntax as rs
from neurosym.errors import CompileError

Label = tuple[frozenset[str], bool]  # (chars, negated)


def fold_case(chars: frozenset[str]) -> frozenset[str]:
    """Add the other case of every ASCII letter (Python's ``re.ASCII | re.IGNORECASE``)."""
    extra = {c.swapcase() for c in chars if c.isascii() and c.isalpha()}
    return chars | extra


TIME_CHECK_EVERY = 4096  # NFA states between two looks at the clock


@dataclass
class NFA:
    """A Thompson-style NFA: ``eps[s]`` epsilon successors, ``arcs[s]`` (label, dst) pairs.

    ``max_states`` caps the states and ``deadline`` (a ``time.monotonic()`` value) the
    wall clock; ``on_limit(reason)`` builds the error either raises (it names the pattern
    and what was growing)."""

    eps: list[list[int]] = field(default_factory=list)
    arcs: list[list[tuple[Label, int]]] = field(default_factory=list)
    max_states: int | None = None
    deadline: float | None = None
    on_limit: Callable[[str], CompileError] | None = None

    def new(self) -> int:
        n = len(self.eps)
        if self.max_states is not None and n >= self.max_states:
            raise self.limit(f"needs more than {self.max_states:,} NFA states (the NFA cap)")
        if self.deadline is not None and n % TIME_CHECK_EVERY == 0 and time.monotonic() > self.deadline:
            raise self.limit(f"ran over the time limit while building its NFA ({n:,} states so far)")
        self.eps.append([])
        self.arcs.append([])
        return n

    def limit(self, reason: str) -> CompileError:
        return self.on_limit(reason) if self.on_limit is not None else CompileError(f"the pattern {reason}")

    def __len__(self) -> int:
        return len(self.eps)


@dataclass(frozen=True)
class Frag:
    """An NFA fragment with one entry and one exit state."""

    start: int
    end: int


class Builder:
    """Builds fragments into one shared :class:`NFA`.

    Args:
        max_states: a cap on NFA states, so huge bounded repeats fail early.
        deadline: a ``time.monotonic()`` value past which building stops.
        what: the pattern, for errors (``path:line:col: NAME`` or ``/pattern/``).

    A cap or deadline hit is a :class:`CompileError` naming ``what``, the cap, and the
    constructs being built at that moment (innermost first), e.g. a repeat and its copies.
    """

    def __init__(self, max_states: int | None = None, deadline: float | None = None, what: str = "the pattern"):
        self.nfa = NFA(max_states=max_states, deadline=deadline, on_limit=self.error)
        self.what = what
        self.growing: list[str] = []  # constructs in progress, outermost first

    def error(self, reason: str) -> CompileError:
        where = ""
        if self.growing:
            inner = self.growing[-1]
            outer = f", inside {self.growing[0]}" if len(self.growing) > 1 else ""
            where = f", while building {inner}{outer}"
        hint = "simplify the pattern, or raise max_states (--max-states; the NFA cap is 20 x max_states)"
        if "time limit" in reason:
            hint = "simplify the pattern, or raise time_limit (--time-limit)"
        return CompileError(f"{self.what}: the pattern {reason}{where}; {hint}")

    def building(self, description: str) -> "_Growing":
        """A context in which the NFA grows for ``description`` (named if a limit is hit)."""
        return _Growing(self.growing, description)

    # -------------------------------------------------------------- primitives
    def empty(self) -> Frag:
        s = self.nfa.new()
        return Frag(s, s)

    def charset(self, chars: Iterable[str], negated: bool = False, ignore_case: bool = False) -> Frag:
        cs = frozenset(chars)
        if ignore_case:
            cs = fold_case(cs)
        s, e = self.nfa.new(), self.nfa.new()
        if cs or negated:  # an empty positive set matches nothing: leave no arc
            self.nfa.arcs[s].append(((cs, negated), e))
        return Frag(s, e)

    def literal(self, text: str, ignore_case: bool = False) -> Frag:
        return self.seq([self.charset(c, ignore_case=ignore_case) for c in text])

    def seq(self, frags: list[Frag]) -> Frag:
        if not frags:
            return self.empty()
        for a, b in zip(frags, frags[1:]):
            self.nfa.eps[a.end].append(b.start)
        return Frag(frags[0].start, frags[-1].end)

    def alt(self, frags: list[Frag]) -> Frag:
        if len(frags) == 1:
            return frags[0]
        s, e = self.nfa.new(), self.nfa.new()
        for f in frags:
            self.nfa.eps[s].append(f.start)
            self.nfa.eps[f.end].append(e)
        return Frag(s, e)

    def star(self, f: Frag) -> Frag:
        s, e = self.nfa.new(), self.nfa.new()
        self.nfa.eps[s] += [f.start, e]
        self.nfa.eps[f.end] += [f.start, e]
        return Frag(s, e)

    def optional(self, f: Frag) -> Frag:
        s, e = self.nfa.new(), self.nfa.new()
        self.nfa.eps[s] += [f.start, e]
        self.nfa.eps[f.end].append(e)
        return Frag(s, e)

    def copy(self, f: Frag) -> Frag:
        """A fresh copy of fragment ``f`` (all states reachable from its start)."""
        order, seen = [f.start], {f.start}
        for s in order:
            for t in [*self.nfa.eps[s], *(d for _, d in self.nfa.arcs[s])]:
                if t not in seen:
                    seen.add(t)
                    order.append(t)
        new = {s: self.nfa.new() for s in order}
        for s in order:
            self.nfa.eps[new[s]] = [new[t] for t in self.nfa.eps[s]]
            self.nfa.arcs[new[s]] = [(lab, new[t]) for lab, t in self.nfa.arcs[s]]
        return Frag(new[f.start], new[f.end])

    def repeat(self, f: Frag, lo: int, hi: int | None) -> Frag:
        """``f{lo,hi}`` (``hi=None``: unbounded). Uses ``f`` itself as the first copy."""
        if hi is not None and hi < lo:
            raise CompileError(f"repeat bounds {{{lo},{hi}}} are reversed")
        if hi == 0:
            return self.empty()
        count = max(lo, 1 if hi is None else hi)
        bounds = f"{{{lo},{'' if hi is None else hi}}}" if hi != lo else f"{{{lo}}}"
        with self.building(f"the repeat {bounds} ({count:,} copies of its operand)"):
            copies = [f] + [self.copy(f) for _ in range(count - 1)]
            return self._repeat(copies, lo, hi)

    def _repeat(self, copies: list[Frag], lo: int, hi: int | None) -> Frag:
        f = copies[0]
        if hi is None:
            if lo == 0:
                return self.star(f)
            last = copies[lo - 1]
            self.nfa.eps[last.end].append(last.start)  # the last mandatory copy loops: f{lo,}
            return self.seq(copies[:lo])
        mandatory = copies[:lo]
        optional = [self.optional(c) for c in copies[lo:hi]]
        return self.seq(mandatory + optional)

    def dfa(self, dfa) -> Frag:
        """Splice a :class:`~neurosym.compile.dfa.CharDFA` (e.g. a word-list trie) in as a fragment."""
        with self.building(f"a word list ({dfa.num_states:,} trie states)"):
            return self._dfa(dfa)

    def _dfa(self, dfa) -> Frag:
        part = dfa.partition
        named = frozenset(c for k, chars in enumerate(part.members) if k for c in chars)
        labels: list[Label] = [(named, True)] + [(frozenset(chars), False) for chars in part.members[1:]]
        labels[0] = (named - frozenset(part.members[0]), True)
        states = [self.nfa.new() for _ in range(dfa.num_states)]
        end = self.nfa.new()
        for q, row in enumerate(dfa.trans.tolist()):
            for k, t in enumerate(row):
                if t >= 0:
                    self.nfa.arcs[states[q]].append((labels[k], states[t]))
            if dfa.final[q]:
                self.nfa.eps[states[q]].append(end)
        return Frag(states[0], end)

    # -------------------------------------------------------------- regex syntax trees
    def regex(self, node: rs.Syntax, ignore_case: bool = False, dotall: bool = False) -> Frag:
        """A fragment for a pattern's syntax tree (:func:`neurosym.dsl.regex_syntax.parse_pattern`)."""
        if isinstance(node, rs.Alternation):
            ic, da = ignore_case, dotall
            for flags, on in ((node.flags_on, True), (node.flags_off, False)):
                if "i" in flags:
                    ic = on
                if "s" in flags:
                    da = on
            if len(node.options) == 1:
                return self.regex(node.options[0], ic, da)
            with self.building(f"an alternation of {len(node.options):,} options"):
                return self.alt([self.regex(o, ic, da) for o in node.options])
        if isinstance(node, rs.Concatenation):
            return self.seq([self.regex(p, ignore_case, dotall) for p in node.parts])
        if isinstance(node, rs.Repetition):
            return self.repeat(self.regex(node.base, ignore_case, dotall), node.min, node.max)
        if isinstance(node, rs.CharClass):
            return self.charset(node.chars, node.negated, ignore_case)
        if isinstance(node, rs.AnyChar):
            return self.charset(() if dotall else "\n", negated=True)
        if isinstance(node, rs.EmptyString):
            return self.empty()
        raise CompileError(f"unsupported regex construct {type(node).__name__} (only regular languages are supported)")


class _Growing:
    """Pushes a description on a builder's ``growing`` stack for the duration of a block."""

    def __init__(self, stack: list[str], description: str):
        self.stack, self.description = stack, description

    def __enter__(self) -> None:
        self.stack.append(self.description)

    def __exit__(self, *exc) -> None:
        self.stack.pop()
