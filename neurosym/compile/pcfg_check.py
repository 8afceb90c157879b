"""PCFG checks: probabilities that sum to one, undefined, unreachable and non-generating
nonterminals, and consistency (the spectral radius of the expected-children matrix).

:func:`check_pcfg` reports :class:`Finding` s (errors raise with ``strict``); the CNF
conversion (:mod:`neurosym.compile.cnf`) relies on a grammar that passes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Hashable, Iterable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackNoConvergence, eigs, spsolve

from neurosym.dsl.pcfg import NT, Grammar, Production, as_grammar
from neurosym.errors import CompileError, SourceError, Span

RADIUS_LIMIT = 1.0 - 1e-9
H = TypeVar("H", bound=Hashable)
DENSE_COMPONENT = 2_000  # recursive components up to this size get a dense eigenvalue solve


class Finding(NamedTuple):
    """One result of :func:`check_pcfg`: ``severity`` is ``"error"``, ``"warning"`` or ``"info"``."""

    severity: str
    span: Span
    message: str

    def __str__(self) -> str:
        return f"{self.span}: {self.severity}: {self.message}"


@dataclass
class Analysis:
    """Numbers behind the checks, over the positive-probability rules.

    ``useful`` lists the reachable, generating nonterminals; ``expected_children``
    (U, U) sparse (CSR) is ``M[A, B]`` = expected number of ``B`` in one expansion of ``A`` over them;
    ``radius`` its spectral radius; ``expected_length`` the start symbol's expected
    sentence length (``None`` when ``radius >= 1``)."""

    reachable: list[str]
    generating: list[str]
    useful: list[str]
    expected_children: sp.csr_matrix
    radius: float
    expected_length: float | None


def worklist_fixpoint(lhs: Sequence[H], needs: Sequence[Iterable[H]]) -> set[H]:
    """The least set closed under "``lhs[r]`` joins once every symbol of ``needs[r]`` has":
    linear in the rules' total size (a counter per rule, not a pass per round)."""
    missing: list[int] = []
    users: dict[H, list[int]] = {}
    todo: list[H] = []
    for r, deps in enumerate(needs):
        deps = set(deps)
        missing.append(len(deps))
        for d in deps:
            users.setdefault(d, []).append(r)
        if not deps:
            todo.append(lhs[r])
    out: set[H] = set()
    while todo:
        x = todo.pop()
        if x in out:
            continue
        out.add(x)
        for r in users.get(x, ()):
            missing[r] -= 1
            if missing[r] == 0:
                todo.append(lhs[r])
    return out


def generating(prods: list[Production]) -> set[str]:
    """The nonterminals that derive some terminal string through ``prods`` (a fixpoint)."""
    return worklist_fixpoint([p.lhs for p in prods], [[s.name for s in p.rhs if isinstance(s, NT)] for p in prods])


def analyze(grammar: Grammar) -> Analysis:
    """Reachability, generating symbols, the expected-children matrix and its radius."""
    prods = [p for p in grammar.productions if p.prob > 0]
    gen = generating(prods)
    by_lhs: dict[str, list] = {}
    for p in prods:
        by_lhs.setdefault(p.lhs, []).append(p)
    reach, todo = {grammar.start}, [grammar.start]
    while todo:
        for p in by_lhs.get(todo.pop(), []):
            for s in p.rhs:
                if isinstance(s, NT) and s.name not in reach:
                    reach.add(s.name)
                    todo.append(s.name)
    order = grammar.nonterminals
    useful = [a for a in order if a in reach and a in gen]
    idx = {a: i for i, a in enumerate(useful)}
    U = len(useful)
    entries: dict[tuple[int, int], float] = {}
    t = np.zeros(U)
    for p in prods:
        if p.lhs in idx and all(not isinstance(s, NT) or s.name in gen for s in p.rhs):
            i = idx[p.lhs]
            for s in p.rhs:
                if isinstance(s, NT):
                    entries[(i, idx[s.name])] = entries.get((i, idx[s.name]), 0.0) + p.prob
                else:
                    t[i] += p.prob
    ij = np.array(list(entries), dtype=np.int64).reshape(-1, 2)
    M = sp.csr_matrix((np.fromiter(entries.values(), dtype=np.float64, count=len(entries)), (ij[:, 0], ij[:, 1])), shape=(U, U))
    radius = max((r for _, r in _components(M)), default=0.0)
    length = None
    if radius < RADIUS_LIMIT and grammar.start in idx:
        length = float(spsolve(sp.identity(U, format="csc") - M.tocsc(), t)[idx[grammar.start]]) if U > 1 else float(t[0] / (1 - M[0, 0]))
    return Analysis([a for a in order if a in reach], [a for a in order if a in gen], useful, M, radius, length)


def _components(M: sp.csr_matrix) -> list[tuple[np.ndarray, float]]:
    """Each recursive strongly connected component of M (indices) and its spectral radius;
    the radius of M is the largest of them, so only the components' blocks are dense."""
    n, labels = connected_components(M, directed=True, connection="strong")
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n + 1))
    diag = M.diagonal()
    out = []
    for c in range(n):
        ix = order[bounds[c] : bounds[c + 1]]
        if len(ix) == 1:
            if diag[ix[0]] > 0:
                out.append((ix, float(diag[ix[0]])))
            continue
        block = M[ix][:, ix]
        if len(ix) <= DENSE_COMPONENT:
            r = float(np.max(np.abs(np.linalg.eigvals(block.toarray()))))
        else:  # the Perron root of a big non-negative block: the eigenvalue of largest modulus
            try:
                r = float(np.abs(eigs(block.astype(np.float64), k=1, which="LM", return_eigenvectors=False, maxiter=10_000)[0]))
            except ArpackNoConvergence:
                raise CompileError(f"the consistency check did not converge on {len(ix):,} mutually recursive nonterminals; split the recursion") from None
        out.append((ix, r))
    return out


def consistent(grammar: Grammar, factor: float = 0.5, rounds: int = 60) -> Grammar:
    """``grammar`` itself when it is consistent, else the same rules with each recursive
    one's weight (a rule whose right-hand side reaches back to its left-hand side: a list
    going on, an expression nesting) multiplied by ``factor`` until it is, each
    nonterminal's probabilities renormalised: the default weights of a grammar read
    without any (a JSON Schema's, a ``.lark`` or ``.gbnf`` file's), where uniform choices
    would let probability leak to infinite trees."""
    a = analyze(grammar)
    if a.radius < RADIUS_LIMIT * 0.99:
        return grammar
    index = {n: i for i, n in enumerate(grammar.nonterminals)}
    rows, cols = [], []
    for p in grammar.productions:
        for s in p.rhs:
            if isinstance(s, NT) and s.name in index:
                rows.append(index[p.lhs])
                cols.append(index[s.name])
    n = len(index)
    graph = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, comp = connected_components(graph, directed=True, connection="strong")
    sizes = np.bincount(comp)
    loops = set(zip(rows, cols))

    def recursive(p: Production) -> bool:
        i = index[p.lhs]
        return any(isinstance(s, NT) and s.name in index and comp[index[s.name]] == comp[i]
                   and (sizes[comp[i]] > 1 or (i, i) in loops) for s in p.rhs)

    marks = [recursive(p) for p in grammar.productions]
    weights = [p.prob for p in grammar.productions]
    for _ in range(rounds):
        weights = [w * factor if m else w for w, m in zip(weights, marks)]
        totals: dict[str, float] = {}
        for p, w in zip(grammar.productions, weights):
            totals[p.lhs] = totals.get(p.lhs, 0.0) + w
        prods = [Production(p.lhs, p.rhs, w / totals[p.lhs], p.weight, p.span, p.lhs_span, p.weight_span)
                 for p, w in zip(grammar.productions, weights)]
        out = Grammar(grammar.path, grammar.start, grammar.start_span, prods, grammar.imports, True, grammar.weights, grammar.separator)
        if analyze(out).radius < RADIUS_LIMIT * 0.99:
            return out
    return out


def check_pcfg(grammar: Grammar | str | Path, strict: bool = True) -> list[Finding]:
    """Findings about a grammar (a parsed :class:`Grammar` or a path), sorted by position.

    Errors: non-generating nonterminals (no finite string) and inconsistency (the
    expected-children matrix has spectral radius >= 1, so mass leaks to infinite trees).
    Warnings: unreachable nonterminals, duplicate rules. Info: a grammar without weights
    (uniform). With ``strict``, the first error raises as a :class:`SourceError`
    (non-generating ones before inconsistency, which they usually cause).
    Parse-level problems (syntax, undefined names, sums, ranges) raise while parsing."""
    grammar = as_grammar(grammar)
    a = analyze(grammar)
    first: dict[str, Span] = {}
    for p in grammar.productions:
        first.setdefault(p.lhs, p.lhs_span)
    out: list[Finding] = []
    if grammar.weights == "uniform":
        out.append(Finding("info", grammar.productions[0].lhs_span, "no probabilities are given: each nonterminal's alternatives are equally likely"))
    seen: dict[tuple, object] = {}
    for p in grammar.productions:
        key = (p.lhs, tuple(("NT", s.name) if isinstance(s, NT) else s.terminal for s in p.rhs))
        if key in seen:
            out.append(Finding("warning", p.span, f"duplicate rule {p.lhs} -> {' '.join(map(str, p.rhs))} (also at line {seen[key].span.line}); their probabilities add up"))
        else:
            seen[key] = p
    for lhs in grammar.nonterminals:
        if lhs not in a.reachable:
            out.append(Finding("warning", first[lhs], f"{lhs} is unreachable from the start symbol {grammar.start}"))
    dead = [lhs for lhs in grammar.nonterminals if lhs not in a.generating]
    for lhs in dead:
        out.append(Finding("error", first[lhs], f"{lhs} derives no finite string: each of its rules uses a nonterminal that never stops expanding (non-generating: {', '.join(dead)})"))
    if a.radius >= RADIUS_LIMIT:
        members, sub = _worst_component(a)
        at = min((first[m] for m in members), key=lambda s: (s.line, s.col))
        out.append(Finding(
            "error", at,
            f"the grammar is inconsistent: the expected-children matrix has spectral radius {a.radius:.6g} >= 1 "
            f"(through {', '.join(members)}: {sub:.6g}), so probability leaks to infinite trees; lower the recursive rules' probabilities",
        ))
    out.sort(key=lambda f: (f.span.line, f.span.col))
    if strict:
        errors = [f for f in out if f.severity == "error"]
        if errors:
            dead_first = [f for f in errors if "derives no finite string" in f.message]
            err = (dead_first or errors)[0]
            raise SourceError.at(err.span, err.message)
    return out


def _worst_component(a: Analysis) -> tuple[list[str], float]:
    ix, r = max(_components(a.expected_children), key=lambda c: c[1])
    return [a.useful[i] for i in sorted(ix)], r


__all__ = ["Analysis", "Finding", "RADIUS_LIMIT", "analyze", "check_pcfg", "generating", "worklist_fixpoint"]
