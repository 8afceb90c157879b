"""A boolean incremental Earley recogniser over a compiled PCFG's terminals.

Where only the *support* of the next terminal matters (a grammar mask), the exact prefix
chart (:mod:`neurosym.layers.prefix`, one float64 column per terminal whose cost grows with
the prefix) does far more work than needed. :class:`EarleyRecognizer` answers the same
two questions, which terminals may come next and whether the prefix is a sentence, with
Earley item sets:

* the grammar is the :class:`~neurosym.compile.pcfg.RuleTensors` CNF the chart reads
  (binary rules ``A -> B C`` over nonterminals and preterminals, preterminals emitting
  terminals, one-terminal sentences under ``root_term``, the empty sentence under
  ``empty``), so the two agree on the language by construction; CNF has no nullable
  symbol but the start (the empty sentence, read once), and no unit rule but the start's;
* computed once: the productive symbols (a rule with a child of no finite derivation is
  dropped, as the chart drops rules whose partition function is 0), the left-corner
  closure of each nonterminal (the prediction closure, as a bit set), each symbol's FIRST
  set over the terminals (S, V) and the rules indexed by their first child;
* per terminal: one :class:`Column`, **interned**: a column keeps, for every symbol ``C``
  it waits for, the *effects* of a ``C`` completed from here (the items it starts, each
  ``A -> B . C'`` with its origin column, and whether a sentence ends), flattened through
  the items that would only complete in turn (Leo's deterministic reductions). Two
  prefixes whose columns hold the same effects have the same future, so they share one
  column object: a right-recursive list (JSON's members and elements, ``S -> 'a' S``)
  leaves the same column after every element, nesting gives one per depth, and whatever
  is cached per column (``advance``, the masks of :mod:`neurosym.decode.tokenized`) is
  found again along any text of the same shape.

Every item of a column lies on a derivation of the prefix from the start, and every
symbol is productive, so the next terminals are exactly the FIRST sets of the symbols
the items wait for: the support of the chart's next-terminal distribution.
"""

from __future__ import annotations

import numpy as np

from neurosym.compile.pcfg import RuleTensors

SENT = ("sentence",)  # the effect of completing a start symbol at the first column: the prefix is a sentence
INTERN_LIMIT = 200_000  # interned columns kept; past it the table starts afresh (equal columns may then be two objects: only caches miss)


class Column:
    """The Earley state after a prefix of terminals (a context of :class:`EarleyRecognizer`),
    interned: equal columns are one object, hashed by identity.

    ``waiting``: ``{symbol C: frozenset of effects}`` of a ``C`` completed from this column,
    an effect being :data:`SENT` or ``(C2, A2, origin)``: the item ``A2 -> A . C2``
    started at ``origin`` (a column) and now waiting for ``C2``; ``predicted``: the
    nonterminals predicted here, a bit set (an int); ``sentence``: the prefix is a
    sentence."""

    __slots__ = ("waiting", "predicted", "sentence", "dist", "effects")

    def __init__(self, waiting: dict[int, frozenset], predicted: int, sentence: bool):
        self.waiting, self.predicted, self.sentence = waiting, predicted, sentence
        self.dist: tuple[np.ndarray, float] | None = None
        self.effects: dict[int, frozenset] = {}  # symbol -> the effects of completing it from this column (memo)


class EarleyRecognizer:
    """The support of a PCFG's next terminal, read left to right (a ``TerminalModel``).

    ``start()`` -> the empty prefix's column; ``distribution(column)`` -> ``(support (V,)
    float64 of 0/1, 1.0 if the prefix is a sentence else 0.0)``; ``advance(column, word)``
    -> the column one terminal on (cached per interned column); ``retain`` keeps the caches
    bounded. ``V`` is the grammar's terminal vocabulary."""

    def __init__(self, rules: RuleTensors):
        N, T = rules.N, rules.T
        S = N + T
        binary = _finite(rules.binary)  # (N, S, S)
        emit = _finite(rules.emit)  # (T, V)
        self.N, self.T, self.V = N, T, emit.shape[1]
        a, b, c = np.nonzero(binary)
        productive = np.zeros(S, dtype=bool)
        productive[N:] = emit.any(1)
        while True:  # least fixed point: a nonterminal with a rule whose children are both productive
            ok = productive[b] & productive[c]
            grown = productive.copy()
            grown[a[ok]] = True
            if (grown == productive).all():
                break
            productive = grown
        live = productive[a] & productive[b] & productive[c]
        a, b, c = a[live], b[live], c[live]
        # left corners: corner[A, X] = X is the first child of a rule of A; closure over nonterminals
        corner = np.zeros((N, S), dtype=bool)
        corner[a, b] = True
        reach = np.eye(N, dtype=bool)
        while True:
            nxt = reach | (reach.astype(np.int64) @ corner[:, :N].astype(np.int64) > 0)
            if (nxt == reach).all():
                break
            reach = nxt
        self.closure = [_bits(np.nonzero(reach[A])[0]) for A in range(N)]  # prediction closure per nonterminal
        first = np.zeros((S, self.V), dtype=bool)
        first[N:] = emit & productive[N:, None]
        pre_corners = (reach.astype(np.int64) @ corner[:, N:].astype(np.int64)) > 0  # (N, T) preterminal left corners
        first[:N] = (pre_corners.astype(np.int64) @ first[N:].astype(np.int64)) > 0
        first[:N] &= productive[:N, None]
        self.first = first
        self.by_first: list[list[tuple[int, int]]] = [[] for _ in range(S)]  # X -> [(A, C)] for A -> X C
        for A, B, C in sorted(set(zip(a.tolist(), b.tolist(), c.tolist()))):
            self.by_first[B].append((A, C))
        self.emitters = [(N + np.nonzero(emit[:, v] & productive[N:])[0]).tolist() for v in range(self.V)]
        root = _finite(rules.root) & productive[:N]
        root_term = _finite(rules.root_term) & productive[N:]
        start_symbols = np.nonzero(root)[0].tolist() + (N + np.nonzero(root_term)[0]).tolist()
        self.interned: dict[tuple, Column] = {}
        self.children: dict[tuple[Column, int], Column] = {}
        self.root = self._column({X: frozenset([SENT]) for X in start_symbols}, bool(_finite(rules.empty)))

    def _predict(self, symbols) -> int:
        """The nonterminals predicted where ``symbols`` are awaited (a bit set)."""
        bits = 0
        for X in symbols:
            if X < self.N:
                bits |= self.closure[X]
        return bits

    def _column(self, waiting: dict[int, frozenset], sentence: bool) -> Column:
        """The interned column of these effects."""
        key = (sentence, frozenset(waiting.items()))
        got = self.interned.get(key)
        if got is None:
            if len(self.interned) >= INTERN_LIMIT:
                self.interned.clear()
                self.children.clear()
            got = self.interned[key] = Column(waiting, self._predict(waiting), sentence)
        return got

    def _effects(self, col: Column, X: int) -> frozenset:
        """The effects of a constituent ``X`` completed from ``col``: the items ``A -> X . C``
        of the nonterminals ``A`` predicted at ``col``, started there; and the effects of
        the items waiting for ``X`` at ``col`` (already flattened)."""
        got = col.effects.get(X)
        if got is None:
            predicted = col.predicted
            local = [(C, A, col) for A, C in self.by_first[X] if predicted >> A & 1]
            waiting = col.waiting.get(X)
            got = col.effects[X] = (waiting | frozenset(local)) if waiting else frozenset(local)
        return got

    # ------------------------------------------------------------------ TerminalModel
    def start(self) -> Column:
        return self.root

    def distribution(self, context: Column) -> tuple[np.ndarray, float]:
        """``(support (V,) float64, 1.0 or 0.0)``: 1 for each terminal that may come next,
        and for the end iff the prefix is a sentence."""
        if context.dist is None:
            keys = list(context.waiting)
            support = self.first[keys].any(0) if keys else np.zeros(self.V, dtype=bool)
            context.dist = (support.astype(np.float64), 1.0 if context.sentence else 0.0)
        return context.dist

    def advance(self, context: Column, word: int) -> Column:
        """The column after one more terminal ``word`` (the effects of its preterminals,
        expanded one level into the new column's; cached per ``(column, word)``)."""
        key = (context, int(word))
        got = self.children.get(key)
        if got is None:
            got = self.children[key] = self._scan(context, int(word))
        return got

    def retain(self, contexts: set) -> None:
        """Columns are interned and their caches valid for good; only the size is bounded
        (:data:`INTERN_LIMIT`), so nothing is dropped per step."""

    # ------------------------------------------------------------------ the step
    def _scan(self, col: Column, word: int) -> Column:
        if not 0 <= word < self.V:
            return self._column({}, False)
        effects: set = set()
        for X in self.emitters[word]:
            effects |= self._effects(col, X)
        sentence = SENT in effects
        waiting: dict[int, set] = {}
        for effect in effects:
            if effect is SENT:
                continue
            C, A, origin = effect
            waiting.setdefault(C, set()).update(self._effects(origin, A))
        return self._column({C: frozenset(e) for C, e in waiting.items()}, sentence)


def _finite(x) -> np.ndarray:
    """A tensor's finite entries (present rules) as a NumPy bool array."""
    return np.isfinite(x.detach().to("cpu").double().numpy())


def _bits(indices) -> int:
    out = 0
    for i in np.asarray(indices).tolist():
        out |= 1 << i
    return out


__all__ = ["Column", "EarleyRecognizer", "SENT"]
