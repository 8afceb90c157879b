"""PCFG -> Chomsky normal form, keeping every string's probability exactly.

Steps (each exact, with probability bookkeeping):

1. *Terminal lifting*: a terminal inside a right-hand side of length >= 2 becomes a
   fresh symbol (named like ``'the'``) with the single rule ``'the' -> the [1]``.
2. *Binarisation*, right-branching: ``A -> X Y Z`` becomes ``A -> X A|<Y-Z>`` and
   ``A|<Y-Z> -> Y Z [1]``.
3. *Epsilon elimination*: ``e[A] = P(A =>* empty)`` is the least fixed point of the
   polynomial system ``e = f(e)`` (``closure.least_fixed_point``: Newton's method from 0,
   then fixed-point steps). Each nonterminal is then conditioned on deriving a non-empty string:
   ``A -> B C [p]`` gives ``A -> B C [p(1-e_B)(1-e_C)/(1-e_A)]``,
   ``A -> B [p(1-e_B)e_C/(1-e_A)]`` and ``A -> C [p e_B(1-e_C)/(1-e_A)]``.
4. *Unit elimination*: with ``U[A, B]`` the unit-rule probabilities,
   ``U* = (I - U)^-1`` sums every unit chain (cycles included); each nonterminal takes
   the non-unit rules of every ``B`` it reaches, scaled by ``U*[A, B]``.
5. *Nonterminal / preterminal split*, as pytorch-struct's ``SentCFG`` wants: a symbol
   that can cover one token gets a preterminal (its lexical rules, renormalised by
   ``lam[A] = P(A covers one token)``), one that can cover two or more a nonterminal
   (its binary rules renormalised by ``1 - lam[A]``); a binary rule's children are
   weighted by ``lam`` or ``1 - lam`` accordingly.

The start symbol's mass is kept whole: ``empty = e[S]``, ``root_term`` (length 1) and
``root`` (length >= 2) sum to 1 with it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from neurosym.compile.closure import least_fixed_point, sparse_star
from neurosym.compile.pcfg_check import check_pcfg, generating, worklist_fixpoint
from neurosym.dsl.pcfg import NT, Grammar, Production, Terminal, TerminalImport
from neurosym.compile.regex import DEFAULT_MAX_CNF_SYMBOLS
from neurosym.errors import CompileError, Span

DEFAULT_MAX_SYMBOLS = DEFAULT_MAX_CNF_SYMBOLS  # CNF symbols before elimination: the unit and epsilon steps hold (k, k) matrices
SHORT_NAME = 6  # fresh binarisation symbols spell out at most this many symbols of their rule


@dataclass
class CNFGrammar:
    """A PCFG in Chomsky normal form with separate nonterminals and preterminals.

    Attributes:
        start: the original start symbol.
        nonterminals: (N) names; index 0 is the start's when sentences of length >= 2 exist.
        preterminals: (T) names.
        terminals: (K) terminal symbols the preterminals emit.
        binary_index: (R, 3) int64 rules ``A -> B C``: ``A`` indexes nonterminals; ``B``
            and ``C`` index nonterminals (0..N-1) then preterminals (N..N+T-1).
        binary_prob: (R,) float64; each nonterminal's rules sum to 1.
        lexical: (T, K) float64 ``P(t -> k)``; rows sum to 1.
        root: (N,) float64 ``P(sentence has >= 2 tokens, its root is A)``.
        root_term: (T,) float64 ``P(sentence is one token, emitted by t)``.
        empty: ``P(empty sentence)``; ``root.sum() + root_term.sum() + empty == 1``.
    """

    start: str
    nonterminals: list[str]
    preterminals: list[str]
    terminals: list[Terminal]
    binary_index: np.ndarray
    binary_prob: np.ndarray
    lexical: np.ndarray
    root: np.ndarray
    root_term: np.ndarray
    empty: float
    terminal_spans: dict[Terminal, Span] = field(default_factory=dict)
    imports: dict[str, TerminalImport] = field(default_factory=dict)
    path: str | None = None

    @property
    def N(self) -> int:
        return len(self.nonterminals)

    @property
    def T(self) -> int:
        return len(self.preterminals)

    def child_name(self, code: int) -> str:
        """A child's name; preterminals are starred (``NP*``), since a symbol that covers
        one token and longer spans is both a nonterminal and a preterminal."""
        return self.nonterminals[code] if code < self.N else self.preterminals[code - self.N] + "*"

    def binary_dense(self) -> np.ndarray:
        """(N, N+T, N+T) float64 rule probabilities."""
        out = np.zeros((self.N, self.N + self.T, self.N + self.T))
        if len(self.binary_prob):
            a, b, c = self.binary_index.T
            np.add.at(out, (a, b, c), self.binary_prob)
        return out

    def rules(self) -> list[str]:
        """Every rule as text (``A -> B C [p]``, ``P -> 'w' [p]``), for display."""
        out = [f"<root> -> <empty> [{self.empty:.6g}]"] if self.empty > 0 else []
        out += [f"<root> -> {self.nonterminals[a]} [{p:.6g}]" for a, p in enumerate(self.root) if p > 0]
        out += [f"<root> -> {self.preterminals[t]}* [{p:.6g}]" for t, p in enumerate(self.root_term) if p > 0]
        for (a, b, c), p in zip(self.binary_index.tolist(), self.binary_prob.tolist()):
            out.append(f"{self.nonterminals[a]} -> {self.child_name(b)} {self.child_name(c)} [{p:.6g}]")
        for t, k in zip(*np.nonzero(self.lexical)):
            out.append(f"{self.preterminals[t]}* -> {self.terminals[k]} [{self.lexical[t, k]:.6g}]")
        return out


# ---------------------------------------------------------------------- conversion
class _Rules:
    """A grammar over integer symbols: nonterminals >= 0, terminal k is ``~k`` (< 0).

    ``max_symbols`` caps the symbols; the production being added (``current``) is named
    when the cap is reached, before any matrix over the symbols is allocated."""

    def __init__(self, max_symbols: int = DEFAULT_MAX_SYMBOLS, path: str | None = None) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.rules: list[tuple[int, tuple[int, ...], float]] = []
        self.terminals: list[Terminal] = []
        self.fresh: dict[tuple[int, int], int] = {}  # (lhs, suffix id) -> fresh symbol
        self.suffix_ids: dict[tuple[int, int], int] = {}  # (symbol, id of the rest or -1) -> suffix id
        self.max_symbols = max_symbols
        self.path = path
        self.current: Production | None = None

    def nt(self, name: str) -> tuple[int, bool]:
        if name in self.index:
            return self.index[name], False
        if len(self.names) >= self.max_symbols:
            raise self.too_many()
        self.index[name] = len(self.names)
        self.names.append(name)
        return self.index[name], True

    def too_many(self) -> CompileError:
        p = self.current
        where = f"{p.span}: the rule {p.lhs} -> ... ({len(p.rhs):,} symbols on its right-hand side)" if p else f"{self.path or '<string>'}:"
        return CompileError(
            f"{where} takes the grammar's Chomsky normal form past {self.max_symbols:,} symbols (nonterminals, "
            "lifted terminals and binarisation symbols), the cap (Limits.max_cnf_symbols); split long "
            "right-hand sides into named parts or raise the cap"
        )

    def suffixes(self, syms: list[int]) -> list[int]:
        """An id per suffix ``syms[i:]`` (i >= 1), equal for equal suffixes: O(1) per symbol."""
        out = [0] * len(syms)
        nxt = -1
        for i in range(len(syms) - 1, 0, -1):
            key = (syms[i], nxt)
            nxt = self.suffix_ids.setdefault(key, len(self.suffix_ids))
            out[i] = nxt
        return out


def to_cnf(grammar: Grammar, check: bool = True, max_symbols: int = DEFAULT_MAX_SYMBOLS) -> CNFGrammar:
    """Convert a parsed PCFG to CNF; every string keeps its probability.

    With ``check`` (default), the grammar must first pass
    :func:`neurosym.compile.pcfg_check.check_pcfg` (a SourceError otherwise): the exact
    epsilon and unit eliminations rely on it being consistent. More than ``max_symbols``
    symbols after binarisation is a :class:`CompileError` naming the rule that crossed
    the cap (checked while binarising, before any matrix over the symbols exists)."""
    if check:
        check_pcfg(grammar, strict=True)
    terminals = grammar.terminals
    tindex = {t: k for k, t in enumerate(terminals)}
    g = _useful(grammar, tindex, max_symbols)
    n = len(g.names)
    null = _null_probabilities(g, n)
    nonempty = _nonempty(g, n)
    ne = np.where(nonempty, _nonempty_probabilities(g, n, null), 0.0)
    if np.any(nonempty & (ne <= 0)):
        raise CompileError("the grammar leaks probability (a nonterminal derives the empty string with probability 1 yet has non-empty derivations); is it consistent?")
    K = len(terminals)
    lex: dict[tuple[int, int], float] = {}
    unit: dict[tuple[int, int], float] = {}
    binary: dict[tuple[int, int, int], float] = {}
    for a, rhs, p in g.rules:
        if not nonempty[a]:
            continue
        scale = p / ne[a]
        if len(rhs) == 1 and rhs[0] < 0:
            lex[(a, ~rhs[0])] = lex.get((a, ~rhs[0]), 0.0) + scale
        elif len(rhs) == 1:
            unit[(a, rhs[0])] = unit.get((a, rhs[0]), 0.0) + scale * ne[rhs[0]]
        elif len(rhs) == 2:
            b, c = rhs
            both = scale * ne[b] * ne[c]
            if both > 0:
                binary[(a, b, c)] = binary.get((a, b, c), 0.0) + both
            for x, w in ((b, scale * ne[b] * null[c]), (c, scale * null[b] * ne[c])):
                unit[(a, x)] = unit.get((a, x), 0.0) + w
    lex_m, bidx, bprob = _eliminate_units(unit, _sparse(lex, (n, K)), binary, n)
    start = g.index[grammar.start]
    return _split(grammar, g, terminals, lex_m, bidx, bprob, start, float(null[start]), float(ne[start]))


def _sparse(entries: dict[tuple[int, int], float], shape: tuple[int, int]) -> sp.csr_matrix:
    if not entries:
        return sp.csr_matrix(shape)
    ij = np.array(list(entries), dtype=np.int64)
    return sp.csr_matrix((np.fromiter(entries.values(), dtype=np.float64, count=len(entries)), (ij[:, 0], ij[:, 1])), shape=shape)


def _useful(grammar: Grammar, tindex: dict[Terminal, int], max_symbols: int = DEFAULT_MAX_SYMBOLS) -> _Rules:
    """Positive-probability rules of generating, reachable symbols; terminals lifted, binarised."""
    prods = [p for p in grammar.productions if p.prob > 0]
    gen = generating(prods)
    prods = [p for p in prods if p.lhs in gen and all(not isinstance(s, NT) or s.name in gen for s in p.rhs)]
    by_lhs: dict[str, list] = {}
    for p in prods:
        by_lhs.setdefault(p.lhs, []).append(p)
    g = _Rules(max_symbols, grammar.path)
    g.terminals = list(tindex)
    g.nt(grammar.start)
    todo = [grammar.start]
    while todo:
        lhs = todo.pop()
        a = g.index[lhs]
        for p in by_lhs.get(lhs, []):
            g.current = p
            syms: list[int] = []
            for s in p.rhs:
                if isinstance(s, NT):
                    i, new = g.nt(s.name)
                    if new:
                        todo.append(s.name)
                    syms.append(i)
                else:
                    syms.append(~tindex[s.terminal])
            _add_binarised(g, a, syms, p.prob)
    g.current = None
    return g


def _add_binarised(g: _Rules, a: int, syms: list[int], p: float) -> None:
    if len(syms) >= 2:
        lifted = []
        for s in syms:
            if s < 0:
                i, new = g.nt(str(_terminal_of(g, s)))
                if new:
                    g.rules.append((i, (s,), 1.0))
                s = i
            lifted.append(s)
        syms = lifted
    suffix = g.suffixes(syms) if len(syms) > 2 else []
    for i in range(len(syms) - 2):  # A -> X A|<Y-Z>, A|<Y-Z> -> Y Z [1]; equal suffixes share symbols
        key = (a, suffix[i + 1])
        fresh = g.fresh.get(key)
        if fresh is not None:
            g.rules.append((a, (syms[i], fresh), p))
            return
        fresh, _ = g.nt(_fresh_name(g, a, syms[i + 1 :] if len(syms) - i - 1 <= SHORT_NAME else syms[i + 1 : i + 1 + SHORT_NAME], len(syms) - i - 1))
        g.fresh[key] = fresh
        g.rules.append((a, (syms[i], fresh), p))
        a, p = fresh, 1.0
    g.rules.append((a, tuple(syms[-2:]) if len(syms) >= 2 else tuple(syms), p))


def _fresh_name(g: _Rules, a: int, shown: list[int], count: int) -> str:
    """``A|<Y-Z>`` (the rest of the rule), abbreviated ``A|<Y-Z-...+98>`` past SHORT_NAME symbols."""
    more = f"-...+{count - len(shown)}" if count > len(shown) else ""
    name = f"{g.names[a]}|<{'-'.join(g.names[s] for s in shown)}{more}>"
    while name in g.index:  # names may contain '-': keep fresh names unique
        name += "'"
    return name


def _terminal_of(g: _Rules, s: int) -> Terminal:
    return g.terminals[~s]


def _null_probabilities(g: _Rules, n: int) -> np.ndarray:
    """``e[A] = P(A =>* empty)``: the least fixed point of ``e = f(e)``
    (:func:`neurosym.compile.closure.least_fixed_point`) over the nullable symbols only."""
    candidates = [(a, rhs) for a, rhs, _ in g.rules if all(s >= 0 for s in rhs)]
    nullable_set = worklist_fixpoint([a for a, _ in candidates], [rhs for _, rhs in candidates])
    e = np.zeros(n)
    if not nullable_set:
        return e
    idx = np.array(sorted(nullable_set), dtype=np.int64)
    at = {int(s): i for i, s in enumerate(idx)}  # nullable symbol -> unknown
    k = len(idx)
    one = k  # the constant 1 stands in for the missing children of rules shorter than two
    rules = [(at[a], [at[s] for s in rhs] + [one] * (2 - len(rhs)), p) for a, rhs, p in g.rules if a in at and all(s in at for s in rhs)]
    lhs = np.array([a for a, _, _ in rules], dtype=np.int64)
    kids = np.array([c for _, c, _ in rules], dtype=np.int64).reshape(-1, 2)
    probs = np.array([p for _, _, p in rules])
    x = least_fixed_point(k, lhs, kids[:, 0], kids[:, 1], probs, np.ones(1))
    if x is None:
        raise CompileError("the probabilities of deriving the empty string do not converge; is the grammar consistent?")
    e[idx] = np.clip(x, 0.0, 1.0)
    return e


def _nonempty_probabilities(g: _Rules, n: int, null: np.ndarray) -> np.ndarray:
    """``ne[A] = P(A derives a non-empty string)``, ``1 - null[A]`` in exact arithmetic, but
    solved as its own linear system so that a symbol that is almost surely empty keeps its
    small non-empty mass to full relative precision (``1 - 0.99999999997`` loses 6 digits
    to cancellation): a rule ``A -> X Y`` is non-empty with ``ne[X] + null[X] ne[Y]`` (a
    terminal: ne 1, null 0), so ``ne = M ne + b`` and ``ne = (I - M)^-1 b`` through the one
    star (:func:`neurosym.compile.closure.sparse_star`), used where ``null[A] > 1/2`` (below
    that the subtraction loses at most one bit, and is exact where ``null`` is 0). Where
    that star does not exist (spectral radius 1) the subtraction is used."""
    weights: dict[tuple[int, int], float] = {}
    b = np.zeros(n)
    for a, rhs, p in g.rules:
        if not rhs:
            continue
        x = rhs[0]
        if x < 0:  # a terminal first: always non-empty
            b[a] += p
            continue
        weights[(a, x)] = weights.get((a, x), 0.0) + p
        if len(rhs) == 2:
            y = rhs[1]
            if y < 0:
                b[a] += p * null[x]
            elif null[x] > 0:
                weights[(a, y)] = weights.get((a, y), 0.0) + p * null[x]
    simple = 1.0 - null  # exact where null is 0, within one bit where null <= 1/2
    if not np.any(null > 0.5):
        return simple
    try:
        star = sparse_star(weights, n, "non-empty derivations form a cycle with probability 1")
    except CompileError:
        return simple
    return np.where(null > 0.5, np.clip(star @ b, 0.0, 1.0), simple)


def _nonempty(g: _Rules, n: int) -> np.ndarray:
    """Which nonterminals derive some non-empty string (all symbols here generate)."""
    lhs: list[int] = []
    needs: list[tuple[int, ...]] = []
    for a, rhs, _ in g.rules:
        if any(s < 0 for s in rhs):
            lhs.append(a)
            needs.append(())
        else:  # A -> B C is non-empty once B or C is: one pseudo-rule per child
            lhs += [a] * len(rhs)
            needs += [(s,) for s in rhs]
    out = np.zeros(n, dtype=bool)
    found = worklist_fixpoint(lhs, needs)
    out[list(found)] = True
    return out


def _eliminate_units(unit: dict[tuple[int, int], float], lex: sp.csr_matrix, binary: dict, n: int):
    """Fold unit chains into lexical and binary rules with ``U* = (I - U)^-1``.

    Only the k symbols that unit rules touch need the (k, k) inverse; every other row of
    ``U*`` is the identity, so lexical rules stay sparse and binary rules a list."""
    star = sparse_star(unit, n, "unit rules form a cycle with probability 1 (e.g. A -> B [1], B -> A [1]); the grammar is not consistent")
    lex = (star @ lex).tocsr()
    if not binary:
        return lex, np.zeros((0, 3), dtype=np.int64), np.zeros(0)
    keys = np.array(list(binary), dtype=np.int64)
    probs = np.array(list(binary.values()))
    by_child = star.T.tocsr()  # row B: the A with U*[A, B] != 0
    starts = by_child.indptr[keys[:, 0]]
    counts = by_child.indptr[keys[:, 0] + 1] - starts
    R = np.repeat(np.arange(len(keys)), counts)
    pos = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    A = by_child.indices[pos].astype(np.int64)
    allp = by_child.data[pos] * probs[R]
    flat = (A * n + keys[R, 1]) * n + keys[R, 2]
    uniq, inv = np.unique(flat, return_inverse=True)
    bprob = np.bincount(inv.reshape(-1), weights=allp, minlength=len(uniq))
    bidx = np.stack([uniq // (n * n), (uniq // n) % n, uniq % n], axis=1)
    return lex, bidx, bprob


def _split(grammar, g: _Rules, terminals, lex, bidx, bprob, start: int, empty: float, ne_start: float) -> CNFGrammar:
    n = len(g.names)
    lam = np.asarray(lex.sum(axis=1)).reshape(-1)
    beta = np.bincount(bidx[:, 0], weights=bprob, minlength=n) if len(bprob) else np.zeros(n)
    has_lex = np.asarray((lex > 0).sum(axis=1)).reshape(-1) > 0
    has_bin = np.zeros(n, dtype=bool)
    has_bin[bidx[:, 0]] = True
    total = lam + beta
    live = has_lex | has_bin
    if np.any(live & (np.abs(total - 1) > 1e-6)):
        bad = int(np.argmax(np.where(live, np.abs(total - 1), -1)))
        raise CompileError(f"after epsilon and unit elimination, the rules of {g.names[bad]} sum to {total[bad]:.10g}, not 1; the grammar leaks probability")
    # children of binary rules, and the reachable part from the start symbol
    kids: dict[int, list[tuple[int, int, float]]] = {}
    for (a, b, c), p in zip(bidx.tolist(), bprob.tolist()):
        kids.setdefault(a, []).append((b, c, p))
    nt_order: list[int] = []
    pt_order: list[int] = []
    seen_nt, seen_pt = set(), set()

    def visit(sym: int) -> None:
        stack = deque([sym])
        while stack:
            s = stack.popleft()
            if has_lex[s] and s not in seen_pt:
                seen_pt.add(s)
                pt_order.append(s)
            if has_bin[s] and s not in seen_nt:
                seen_nt.add(s)
                nt_order.append(s)
                for b, c, _ in kids[s]:
                    stack += [b, c]

    if ne_start > 0:
        visit(start)
    nt_id = {s: i for i, s in enumerate(nt_order)}
    N, T = len(nt_order), len(pt_order)
    pt_id = {s: N + i for i, s in enumerate(pt_order)}

    def codes(s: int) -> list[tuple[int, float]]:
        out = []
        if s in nt_id:
            out.append((nt_id[s], beta[s]))
        if s in pt_id:
            out.append((pt_id[s], lam[s]))
        return out

    rules: dict[tuple[int, int, int], float] = {}
    for a in nt_order:
        for b, c, p in kids[a]:
            for bc, wb in codes(b):
                for cc, wc in codes(c):
                    key = (nt_id[a], bc, cc)
                    rules[key] = rules.get(key, 0.0) + p * wb * wc / beta[a]
    rows = lex[np.array(pt_order, dtype=np.int64)] if T else sp.csr_matrix((0, lex.shape[1]))
    used_k = np.unique(rows.indices[rows.data != 0]).tolist()
    lexical = (rows[:, used_k].toarray() / lam[pt_order][:, None]).reshape(T, len(used_k))
    root = np.zeros(N)
    root_term = np.zeros(T)
    if start in nt_id:
        root[nt_id[start]] = ne_start * beta[start]
    if start in pt_id:
        root_term[pt_id[start] - N] = ne_start * lam[start]
    kept_terms = [terminals[k] for k in used_k]
    spans = grammar.terminal_spans()
    return CNFGrammar(
        start=grammar.start,
        nonterminals=[g.names[s] for s in nt_order],
        preterminals=[g.names[s] for s in pt_order],
        terminals=kept_terms,
        binary_index=np.array(list(rules), dtype=np.int64).reshape(-1, 3),
        binary_prob=np.array(list(rules.values()), dtype=np.float64),
        lexical=lexical,
        root=root,
        root_term=root_term,
        empty=empty,
        terminal_spans={t: spans[t] for t in kept_terms if t in spans},
        imports={t.value: grammar.imports[t.value] for t in kept_terms if t.kind == "regex"},
        path=grammar.path,
    )


__all__ = ["CNFGrammar", "to_cnf"]
