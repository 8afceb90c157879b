"""Languages restricted to the infixes of the examples, as boolean vectors.

Whether a string ``w`` is in ``L(r1 r2)``, ``L(r1|r2)`` or ``L(r*)`` depends only on
which *infixes* of ``w`` are in ``L(r1)`` and ``L(r2)``. So, over the set ``I`` of all
infixes of the examples (``ε`` included), every regex has a characteristic vector
``v[w] = w in L(r)`` computed bottom-up from its children's vectors:

* union: ``a | b``; concatenation: ``c[w] = OR over splits w = uv of a[u] & b[v]``
  (a gather and a segmented OR over precomputed split tables);
* star: ``(a | ε)`` squared (by concatenation) until it stops changing.

Two regexes with the same vector are interchangeable inside any larger regex as far
as the examples can tell (observational equivalence), which the enumerator uses to
search every such class once. An example is accepted iff its own entry is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from neurosym.errors import NeurosymError
from neurosym.synth import regex_ast as ra


MAX_SPLITS = 20_000_000  # split-table entries (two int64 arrays: 320 MB at the cap)


def split_bound(strings: Iterable[str]) -> int:
    """An upper bound on the split-table entries of the strings' infixes: a string of
    length L has at most L - k + 1 infixes of length k, each with k + 1 splits (cubic in L)."""
    return sum((L - k + 1) * (k + 1) for L in {len(s) for s in strings} for k in range(1, L + 1))


class InfixSpace:
    """The infixes of a set of strings and vector operations over them."""

    def __init__(self, strings: Iterable[str], max_splits: int = MAX_SPLITS):
        strings = list(dict.fromkeys(strings))
        bound = sum(split_bound([s]) for s in strings)
        if bound > max_splits:
            longest = max(len(s) for s in strings)
            raise NeurosymError(
                f"the examples are too long for the infix search: {len(strings)} strings of up to {longest:,} characters "
                f"give up to {bound:,} infix splits (cubic in an example's length), over the cap of {max_splits:,}; "
                "shorten the examples (a few hundred characters at most)"
            )
        infixes = {""}
        for s in strings:
            for i in range(len(s)):
                for j in range(i + 1, len(s) + 1):
                    infixes.add(s[i:j])
        self.infixes = sorted(infixes, key=lambda w: (len(w), w))
        self.index = {w: i for i, w in enumerate(self.infixes)}
        n = self.n = len(self.infixes)
        pu, pv, starts = [], [], []
        for w in self.infixes:
            starts.append(len(pu))
            for k in range(len(w) + 1):
                pu.append(self.index[w[:k]])
                pv.append(self.index[w[k:]])
        self.pu = np.array(pu, dtype=np.int64)
        self.pv = np.array(pv, dtype=np.int64)
        self.starts = np.array(starts, dtype=np.int64)
        self.lengths = np.array([len(w) for w in self.infixes])
        self.max_len = int(self.lengths.max())
        self.ones = np.ones(n, dtype=bool)
        self.zeros = np.zeros(n, dtype=bool)
        self.eps = np.zeros(n, dtype=bool)
        self.eps[0] = True
        self.single = [(i, w) for i, w in enumerate(self.infixes) if len(w) == 1]
        self._memo: dict[ra.Node, np.ndarray] = {}

    # ------------------------------------------------------------------ primitives
    def chars(self, chars: Iterable[str] | None) -> np.ndarray:
        """Vector of a character class (``None``: ``.``, any character but newline)."""
        v = self.zeros.copy()
        cs = None if chars is None else frozenset(chars)
        for i, w in self.single:
            v[i] = (w != "\n") if cs is None else (w in cs)
        return v

    def union(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a | b

    def concat(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_or.reduceat(a[self.pu] & b[self.pv], self.starts)

    def star(self, a: np.ndarray) -> np.ndarray:
        s = a | self.eps
        while True:
            s2 = self.concat(s, s)
            if np.array_equal(s2, s):
                return s
            s = s2

    def plus(self, a: np.ndarray) -> np.ndarray:
        return self.concat(a, self.star(a))

    def opt(self, a: np.ndarray) -> np.ndarray:
        return a | self.eps

    # ------------------------------------------------------------------ ASTs
    def vector(self, r: ra.Node, hole: np.ndarray | None = None) -> np.ndarray:
        """The vector of an AST; holes take ``hole`` (default: the empty language)."""
        t = type(r)
        if t is ra.Hole:
            return self.zeros if hole is None else hole
        if hole is None:
            v = self._memo.get(r)
            if v is not None:
                return v
        if t is ra.Chars:
            v = self.chars(r.chars)
        elif t is ra.AnyChar:
            v = self.chars(None)
        elif t is ra.Eps:
            v = self.eps
        elif t is ra.Empty:
            v = self.zeros
        elif t is ra.Alt:
            v = self.zeros
            for x in r.items:
                v = v | self.vector(x, hole)
        elif t is ra.Cat:
            v = self.eps
            for x in r.items:
                v = self.concat(v, self.vector(x, hole))
        elif t is ra.Star:
            v = self.star(self.vector(r.child, hole))
        elif t is ra.Plus:
            v = self.plus(self.vector(r.child, hole))
        elif t is ra.Opt:
            v = self.opt(self.vector(r.child, hole))
        else:  # pragma: no cover
            raise TypeError(type(r).__name__)
        if hole is None and len(self._memo) < 200_000:
            self._memo[r] = v
        return v

    def ids(self, strings: Sequence[str]) -> np.ndarray:
        return np.array([self.index[s] for s in strings], dtype=np.int64)


__all__ = ["InfixSpace"]
